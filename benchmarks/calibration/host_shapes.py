"""Does the server's host cost of an emulated delay depend on the delay's length?  A study of host-model shapes.

    python -m benchmarks.calibration.host_shapes [--work DIR]

The host model charges every emulated host delay ``slowdown`` times its
length (:mod:`maya.predictor.replay.host`).  A held-out DDP decoder's record
(``benchmarks/held_out/host_gaps.py``) suggested that long host-only
stretches cost the server only 1.2-1.6 times their emulated length, about
the servers' CPU speed against this VM's for emulated jobs (1.70 and 1.63,
``benchmarks/results/host_yardsticks.json``), while short delays cost 4-6
times.  This fits, on the calibration configurations only, shapes that say
so, and reports each one's leave-one-model-out error of the replayed host
time per step, as ``benchmarks/calibration/host.py`` does for the model in
use:

- ``current``: ``slowdown * d``;
- ``kneeK``: ``slowdown * min(d, K) + ratio * max(d - K, 0)`` for K of 20,
  50, 100 and 200 us;
- ``affine``: ``ratio * d + b``, a fixed server cost ``b`` per delay;

each with the call costs' factor fitted too, and ``ratio`` the servers'
measured CPU ratio (rescaled, like the slowdown, by the emulation's probe).
One emulation per configuration (kept in ``--work``).  The shapes are
applied by wrapping the replay's host-cost step, so that nothing in the
predictor changes for a study.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.calibration.host import call_costs, launch_times
from benchmarks.step_truth import EMULATED_STEPS, STEADY_FROM, emulate, measured
from maya import cpu_probe
from maya.predict import Job, prepare
from maya.predictor.replay import simulator
from maya.predictor.replay.host import calibrated_host, step_host_times_ns

# Servers' CPU speed against this VM's for the emulated jobs (benchmarks/results/host_yardsticks.json, job_ratio).
CPU_RATIO = {"H100-SXM-80GB": 1.70, "H200-SXM-141GB": 1.63}
SLOWDOWNS = np.round(np.arange(1.0, 6.0 + 1e-9, 0.1), 2)
CALL_SCALES = np.round(np.arange(0.5, 4.0 + 1e-9, 0.25), 2)
Shape = Callable[[npt.NDArray[np.float64], float], npt.NDArray[np.float64]]  # (delays, probe factor) -> charged

_shape: Shape | None = None
_host_costs = simulator._Job._host_costs


def _shaped_host_costs(self: Any, recs: Any, slowdown: float, call_ns: Any, default_call_ns: float,
                       gap_scale: Any) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The replay's host costs with the delays charged by ``_shape`` (``slowdown``: the probe's factor)."""
    pre, post = _host_costs(self, recs, 1.0, call_ns, default_call_ns, gap_scale)
    return (pre * slowdown if _shape is None else _shape(pre, slowdown)), post


def shapes(gpu: str) -> dict[str, list[tuple[tuple[float, float], Shape]]]:
    """Each shape's grid: ((its parameter, call scale), how it charges delays)."""
    r = CPU_RATIO[gpu]

    def current(s: float) -> Shape:
        return lambda d, c: c * s * d

    def knee(s: float, k: float) -> Shape:
        return lambda d, c: c * (s * np.minimum(d, k) + r * np.maximum(d - k, 0.0))

    def affine(b: float) -> Shape:
        return lambda d, c: c * r * d + np.where(d > 0, b, 0.0)

    grid: dict[str, list[tuple[tuple[float, float], Shape]]] = {
        "current": [((s, m), current(s)) for s in SLOWDOWNS for m in CALL_SCALES]}
    for k_us in (20, 50, 100, 200):
        grid[f"knee{k_us}"] = [((s, m), knee(s, k_us * 1e3)) for s in SLOWDOWNS for m in CALL_SCALES]
    grid["affine"] = [((b, m), affine(b)) for b in np.arange(0.0, 30e3 + 1, 500.0) for m in CALL_SCALES]
    return grid


def host_time_s(job: Job, host: Any, shape: Shape) -> float:
    global _shape
    _shape = shape
    try:
        result = job.replay(replace(host, slowdown=1.0))[0]
    finally:
        _shape = None
    return median(step_host_times_ns(job.traces[0], result, EMULATED_STEPS)[STEADY_FROM:]) / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=None, help="emulations kept here (reused when present)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-host-shapes-"))
    simulator._Job._host_costs = _shaped_host_costs  # type: ignore[method-assign]
    reference = cpu_probe.reference_ns()
    for gpu in CPU_RATIO:
        configs = [m for m in measured(gpu) if m.processes == 1 and m.host_s]
        jobs = [prepare(emulate(m.argv, gpu, 1, work / gpu / m.name), gpu) for m in configs]
        meas = np.array([median(m.host_s) for m in configs])
        family = [m.family for m in configs]
        base = calibrated_host({"call_ns": call_costs(gpu), "launch": launch_times(gpu)}, reference)
        for name, grid in shapes(gpu).items():
            host = np.array([[host_time_s(job, replace(base, call_scale=float(m)), shape)
                              for (_, m), shape in grid] for job in jobs])
            err = np.abs(np.log(host / meas[:, None]))
            best = grid[int(np.argmin(np.median(err, axis=0)))][0]
            lomo = []
            for c in range(len(jobs)):
                others = [o for o in range(len(jobs)) if family[o] != family[c]]
                k = int(np.argmin(np.median(err[others], axis=0)))
                lomo.append(abs(host[c, k] / meas[c] - 1))
            print(f"{gpu:15} {name:8} fitted ({best[0]:g}, calls x{best[1]:g}): host time error, leave one model "
                  f"out: median {100 * median(lomo):.1f}%, 90th percentile {100 * np.quantile(lomo, 0.9):.1f}%, "
                  f"max {100 * max(lomo):.1f}%", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
