"""Synthetic training loops' traces, for tests of the replay and the step it finds.

    from loops import loop_trace, moe_like_trace
"""

from __future__ import annotations

from pathlib import Path

from maya.predictor.trace import Flag, Kind, TraceWriter


def loop_trace(path: Path, steps: int = 5, *, slower_ns: int = 0, mid_sync: bool = False,
               after_loop_ns: int | None = None, pace: float = 1.0) -> Path:
    """A synchronisation, then per step three kernel launches (each 0.5 us of host call) 10, 20 and
    30 us (plus ``slower_ns`` times the step's index) apart, and a device synchronisation 5 us later.
    ``mid_sync``: a stream synchronisation right after the first kernel; ``after_loop_ns``: other host
    work after the loop (a report, the exit), then one last call; ``pace``: every delay of the steps
    times this (a process that runs slower)."""
    w = TraceWriter(rank=0, world_size=1)
    t = 0
    w.record(Kind.DEVICE_SYNC, t_ns=t)
    for k in (1, 2, 3):
        sid = w.string(f"kernel_{k}")
        w.record(Kind.FUNC, t_ns=t, a=[k, sid, sid])
    for s in range(steps):
        for k, gap in ((1, 10_000), (2, 20_000), (3, 30_000)):
            t += round((gap + slower_ns * s) * pace)
            w.record(Kind.KERNEL, t_ns=t, dur_ns=500, a=[k, 1, 1, 0, 0], flags=Flag.ASYNC)
            t += 500
            if mid_sync and k == 1:
                w.record(Kind.STREAM_SYNC, t_ns=t)
        t += round(5000 * pace)
        w.record(Kind.DEVICE_SYNC, t_ns=t)
    if after_loop_ns is not None:
        w.record(Kind.EVENT_DESTROY, t_ns=t + after_loop_ns)
    w.write(path)
    return path


def moe_like_trace(path: Path, steps: int = 8, *, a_type: int = 14) -> Path:
    """A warm-up GEMM, then per step: a kernel, a GEMM of the warm-up's shape (20 us in the call), a
    GEMM whose row count changes every step (150 us: a shape the process has not run), a device
    synchronisation.  ``a_type``: the GEMMs' input cudaDataType (14: bf16)."""
    w = TraceWriter(rank=0, world_size=1)
    api = w.string("cublasLtMatmul")
    sid = w.string("kernel")
    w.record(Kind.FUNC, t_ns=0, a=[1, sid, sid])
    t = 0
    w.record(Kind.BLAS, t_ns=t, dur_ns=150_000, a32=api, a=[4096 | 768 << 32, 3072 | 1 << 32, 0, a_type, 0])  # warm-up
    t += 200_000
    w.record(Kind.DEVICE_SYNC, t_ns=t)
    for s in range(steps):
        t += 10_000
        w.record(Kind.KERNEL, t_ns=t, dur_ns=500, a=[1, 1, 1, 0, 0], flags=Flag.ASYNC)
        for m, dur in ((4096, 20_000), (500 + s, 150_000)):
            t += 5_000
            w.record(Kind.BLAS, t_ns=t, dur_ns=dur, a32=api, a=[m | 768 << 32, 3072 | 1 << 32, 0, a_type, 0],
                     flags=Flag.ASYNC)
            t += dur
        t += 5_000
        w.record(Kind.DEVICE_SYNC, t_ns=t)
    w.write(path)
    return path
