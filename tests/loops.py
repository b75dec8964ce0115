"""A synthetic training loop's trace, for tests of the replay and the step it finds.

    from loops import loop_trace
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
