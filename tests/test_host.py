"""The host model (maya.predictor.host): host delays per steady step, the fitted slowdown, and the
calibrated model that ``maya predict`` applies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from maya.predictor.host import CALIBRATION, HostModel, fit_slowdown, host_model, step_host_delays_ns
from maya.predictor.simulator import CALL_NS
from maya.predictor.trace import Flag, Kind, TraceWriter, read_trace


def loop_trace(path: Path, steps: int = 5) -> Path:
    """A training loop: three kernels and a device synchronisation per step; step s's three host
    gaps are 10, 20 and 30 us plus s us each, and each call lasts 0.5 us."""
    w = TraceWriter(rank=0, world_size=1)
    t = 0
    for k in (1, 2, 3):
        sid = w.string(f"kernel_{k}")
        w.record(Kind.FUNC, t_ns=t, a=[k, sid, sid])
    for s in range(steps):
        for k, gap in ((1, 10_000), (2, 20_000), (3, 30_000)):
            t += gap + 1000 * s
            w.record(Kind.KERNEL, t_ns=t, dur_ns=500, a=[k, 1, 1, 0, 0], flags=Flag.ASYNC)
            t += 500
        t += 5000
        w.record(Kind.DEVICE_SYNC, t_ns=t)
    w.write(path)
    return path


def test_host_delays_per_steady_step(tmp_path: Path) -> None:
    delays = step_host_delays_ns(read_trace(loop_trace(tmp_path / "r.mayatrace")))
    # Steps 1-4 are steady (step 0 warms up); a step's delays: its three gaps (60 + 3 s us) and the
    # 5 us before its synchronisation.  The last step has no next step to end it.
    assert delays == [68_000.0, 71_000.0, 74_000.0]


def test_fit_slowdown_is_the_median_ratio() -> None:
    assert fit_slowdown([4.0, 8.0, 100.0], [1.0, 2.0, 1.0]) == 4.0
    with pytest.raises(ValueError):
        fit_slowdown([], [])


def test_calibrated_and_nominal_host(tmp_path: Path) -> None:
    calib = json.loads(CALIBRATION.read_text())
    for gpu, m in calib["machines"].items():  # the committed calibration is what predict uses
        h = host_model(gpu)
        assert h.slowdown == m["slowdown"] > 1.0 and not h.call_ns and h.default_call_ns == 0.0
    nominal = host_model("no-such-gpu")
    assert nominal == HostModel() and nominal.slowdown == 1.0 and nominal.call_ns == dict(CALL_NS)
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"machines": {"X": {"slowdown": 2.5, "configs": 3}}}))
    assert host_model("X", path).slowdown == 2.5
