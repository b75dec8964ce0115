"""The steady step of a replay: every step, the last one too, lasts as long as its own work."""

from pathlib import Path

import pytest

from maya.predictor.replay.iterations import trace_steps
from maya.predictor.replay.simulator import simulate
from maya.predictor.replay.step import step_time
from maya.predictor.trace import Flag, Kind, TraceWriter, read_trace


def loop_then_exit(path: Path, steps: int = 6, exit_gap_ns: int = 0) -> Path:
    """Per step three 0.5 us kernel launches 10, 20 and 30 us apart, then a device sync 5 us later; after
    the loop, ``exit_gap_ns`` of other host work (a report, the program's exit) before a last call."""
    w = TraceWriter(rank=0, world_size=1)
    t = 0
    w.record(Kind.DEVICE_SYNC, t_ns=t)
    for k in (1, 2, 3):
        sid = w.string(f"kernel_{k}")
        w.record(Kind.FUNC, t_ns=t, a=[k, sid, sid])
    for _ in range(steps):
        for k, gap in ((1, 10_000), (2, 20_000), (3, 30_000)):
            t += gap
            w.record(Kind.KERNEL, t_ns=t, dur_ns=500, a=[k, 1, 1, 0, 0], flags=Flag.ASYNC)
            t += 500
        t += 5000
        w.record(Kind.DEVICE_SYNC, t_ns=t)
    w.record(Kind.EVENT_DESTROY, t_ns=t + exit_gap_ns)
    w.write(path)
    return path


def test_the_last_step_ends_with_its_work_not_with_what_follows_the_loop(tmp_path: Path) -> None:
    def steps(exit_gap_ns: int) -> tuple[float, ...]:
        trace = read_trace(loop_then_exit(tmp_path / f"{exit_gap_ns}.mayatrace", exit_gap_ns=exit_gap_ns))
        (result,) = simulate([trace], [{}], lambda *_: 0.0, call_ns={}, default_call_ns=0.0)
        return step_time(trace, result, *trace_steps(trace)).steps

    # A step lasts from its first launch to the next step's: 65 us of host delays (calls cost nothing
    # here); the last one, to its closing synchronisation, without the next step's first 10 us.
    assert steps(0) == pytest.approx((65e-6,) * 5 + (55e-6,))
    assert steps(1_000_000_000) == pytest.approx(steps(0))  # a second of other work after the loop
