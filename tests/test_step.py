"""The steady step of a replay: every step, the last one too, lasts as long as its own work."""

from pathlib import Path

import pytest
from loops import loop_trace

from maya.predictor.replay.iterations import trace_steps
from maya.predictor.replay.simulator import simulate
from maya.predictor.replay.step import median_step_s, step_time
from maya.predictor.trace import read_trace


def test_the_last_step_ends_with_its_work_not_with_what_follows_the_loop(tmp_path: Path) -> None:
    def steps(exit_gap_ns: int) -> tuple[float, ...]:
        trace = read_trace(loop_trace(tmp_path / f"{exit_gap_ns}.mayatrace", 6, after_loop_ns=exit_gap_ns))
        (result,) = simulate([trace], [{}], lambda *_: 0.0, call_ns={}, default_call_ns=0.0)
        return step_time(trace, result, *trace_steps(trace)).steps

    # A step lasts from its first launch to the next step's: 65 us of host delays (calls cost nothing
    # here); the last one, to its closing synchronisation, without the next step's first 10 us.
    assert steps(0) == pytest.approx((65e-6,) * 5 + (55e-6,))
    assert steps(1_000_000_000) == pytest.approx(steps(0))  # a second of other work after the loop


def test_a_replay_compared_by_its_step_alone_reads_the_step_times_median(tmp_path: Path) -> None:
    trace = read_trace(loop_trace(tmp_path / "loop.mayatrace", 7, after_loop_ns=0))
    (result,) = simulate([trace], [{}], lambda *_: 1000.0, call_ns={}, default_call_ns=0.0)
    found = trace_steps(trace)
    assert median_step_s(result, *found) == step_time(trace, result, *found).step_s > 0
