"""benchmarks.held_out.new_shapes: a steady step's GEMMs of shapes new to the process, and their cost."""

from __future__ import annotations

from pathlib import Path

import pytest
from loops import moe_like_trace

from benchmarks.held_out.new_shapes import new_shape_calls
from maya.predictor.replay.host import host_model
from maya.predictor.trace import Kind, TraceWriter
from maya.predictor.trace.reader import read_trace


def test_a_shape_new_every_step_is_counted_in_every_steady_step(tmp_path: Path) -> None:
    found = new_shape_calls(read_trace(moe_like_trace(tmp_path / "t.mayatrace")))
    assert found is not None
    assert found["calls_per_step"] == 2
    assert found["new_per_step"] == 1
    assert found["new_call_us"] == pytest.approx(150)
    assert found["seen_call_us"] == pytest.approx(20)
    assert found["new_extra_ms_per_step"] == pytest.approx(0.13)
    # what the replay charges the one new bf16 shape a step on an H100
    assert found["charged_ms_per_step"] == pytest.approx(host_model("H100-SXM-80GB").new_gemm_shape_ns["16-bit"] / 1e6)


def test_a_trace_without_steady_steps_has_no_answer(tmp_path: Path) -> None:
    w = TraceWriter(rank=0, world_size=1)
    w.record(Kind.DEVICE_SYNC, t_ns=0)
    w.write(tmp_path / "t.mayatrace")
    assert new_shape_calls(read_trace(tmp_path / "t.mayatrace")) is None
