"""benchmarks.held_out.new_shapes: a steady step's GEMMs of shapes new to the process, and their cost."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.held_out.new_shapes import new_shape_calls
from maya.predictor.trace import Flag, Kind, TraceWriter
from maya.predictor.trace.reader import read_trace


def _moe_like(path: Path, steps: int = 8) -> Path:
    """A warm-up GEMM, then per step: a kernel, a GEMM of the warm-up's shape (20 us in the call), a
    GEMM whose row count changes every step (150 us: a shape the process has not run), a device
    synchronisation."""
    w = TraceWriter(rank=0, world_size=1)
    api = w.string("cublasLtMatmul")
    sid = w.string("kernel")
    w.record(Kind.FUNC, t_ns=0, a=[1, sid, sid])
    t = 0
    w.record(Kind.BLAS, t_ns=t, dur_ns=150_000, a32=api, a=[4096 | 768 << 32, 3072 | 1 << 32, 0, 0, 0])  # warm-up
    t += 200_000
    w.record(Kind.DEVICE_SYNC, t_ns=t)
    for s in range(steps):
        t += 10_000
        w.record(Kind.KERNEL, t_ns=t, dur_ns=500, a=[1, 1, 1, 0, 0], flags=Flag.ASYNC)
        for m, dur in ((4096, 20_000), (500 + s, 150_000)):
            t += 5_000
            w.record(Kind.BLAS, t_ns=t, dur_ns=dur, a32=api, a=[m | 768 << 32, 3072 | 1 << 32, 0, 0, 0],
                     flags=Flag.ASYNC)
            t += dur
        t += 5_000
        w.record(Kind.DEVICE_SYNC, t_ns=t)
    w.write(path)
    return path


def test_a_shape_new_every_step_is_counted_in_every_steady_step(tmp_path: Path) -> None:
    found = new_shape_calls(read_trace(_moe_like(tmp_path / "t.mayatrace")))
    assert found is not None
    assert found["calls_per_step"] == 2
    assert found["new_per_step"] == 1
    assert found["new_call_us"] == pytest.approx(150)
    assert found["seen_call_us"] == pytest.approx(20)
    assert found["new_extra_ms_per_step"] == pytest.approx(0.13)


def test_a_trace_without_steady_steps_has_no_answer(tmp_path: Path) -> None:
    w = TraceWriter(rank=0, world_size=1)
    w.record(Kind.DEVICE_SYNC, t_ns=0)
    w.write(tmp_path / "t.mayatrace")
    assert new_shape_calls(read_trace(tmp_path / "t.mayatrace")) is None
