"""The host of a machine of several GPUs against the single-GPU servers': the node factor.

    python -m benchmarks.calibration.node_host [--gpu NAME,...] [--work DIR] [--repeat N] [--write]

The host model's factors are fitted on single-GPU servers (``benchmarks.calibration.host``); a job
of several ranks runs on a machine of several GPUs, whose CPU runs the same Python at its own pace
(the 2 x H100 servers' 32-CPU Xeons took 2.39 times the emulating VM's host time for the
calibration's jobs, the single-GPU H100 servers' 1.70: ``docs/emulating-machine.md``).  For every
calibration configuration of several ranks (``benchmarks/data/step_times/<GPU>/``, measured on
several such machines, pooled), the command is emulated ``--repeat`` times (reused from ``--work``
when there), and predicted as ``maya predict --repeat N`` does (the median over the emulations)
with the GPU's calibrated host for that many ranks and every factor of
:data:`maya.predictor.replay.host.NODE_SLOWDOWNS` on its delays.  The GPU's factor minimises the
median |log(predicted / measured)| over its configurations
(:func:`maya.predictor.replay.host.fit_node_slowdown`); each configuration's residual is taken with
the factor fitted on the others (leave one configuration out).  ``--write`` puts the factors into
``predictor/host_calibration.json`` (``node_slowdown``).  ``--gpu``: fit only these GPUs (a new
machine's truth for one kind), keeping the others' factors and saved rows.  Saves
``benchmarks/results/node_host.json``.
The held-out suite is never read.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.calibration import set_host_values
from benchmarks.step_truth import DATA, Measured, emulate, measured
from maya.predict import prepare
from maya.predictor.replay.host import NODE_SLOWDOWNS, HostModel, fit_node_slowdown, host_model
from maya.predictor.replay.iterations import trace_steps
from maya.predictor.replay.step import median_step_s

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "node_host.json"


def emulations(case: Measured, work: Path, repeat: int) -> list[Path]:
    """The case's ``repeat`` emulations under ``work`` (made where missing)."""
    return [emulate(case.argv, case.gpu, case.processes, work / case.gpu / case.name / f"run{k}") for k in range(repeat)]


def step_curve(folders: Sequence[Path], gpu: str, ranks: int, host: HostModel) -> npt.NDArray[np.float64]:
    """The predicted step time (the median over the emulations) with each factor of ``NODE_SLOWDOWNS``."""
    steps = np.zeros((len(folders), len(NODE_SLOWDOWNS)))
    for e, folder in enumerate(folders):
        job = prepare(folder, gpu, gpus_per_node=ranks)
        found, records = trace_steps(job.traces[0])
        for i, factor in enumerate(NODE_SLOWDOWNS):
            result = job.replay(replace(host, node_slowdown=float(factor)))[0]
            steps[e, i] = median_step_s(result, found, records)
    return np.asarray(np.median(steps, axis=0), np.float64)


def curves_of(cases: Sequence[Measured], work: Path, repeat: int,
              host: Callable[[Measured], HostModel]) -> npt.NDArray[np.float64]:
    """Per configuration (of one GPU), its step curve (:func:`step_curve`) from its emulations under ``work``,
    each predicted on the host ``host`` gives it."""
    return np.stack([step_curve(emulations(c, work, repeat), c.gpu, c.processes, host(c)) for c in cases])


def fit_each(curves: npt.NDArray[np.float64], meas: Sequence[float]) -> tuple[float, list[float]]:
    """The factor fitted on every configuration, and each configuration's factor fitted on the others
    (1 where it is the only one)."""
    alone = [fit_node_slowdown(np.delete(curves, c, axis=0), [m for o, m in enumerate(meas) if o != c])
             if len(meas) > 1 else 1.0 for c in range(len(meas))]
    return fit_node_slowdown(curves, meas), alone


def node_factors_without_each(cases: Sequence[Measured], work: Path, repeat: int,
                              host: Callable[[Measured], HostModel]) -> dict[str, float]:
    """Per configuration of several ranks (by ``GPU/name``), the node factor fitted on the other such
    configurations of its GPU, each predicted on the host ``host`` gives it: what a calibration case
    is judged with, so that no case sees its own step."""
    out: dict[str, float] = {}
    for gpu in sorted({c.gpu for c in cases}):
        mine = [c for c in cases if c.gpu == gpu]
        _, alone = fit_each(curves_of(mine, work, repeat, host), [median(c.step_s) for c in mine])
        out.update({f"{gpu}/{c.name}": f for c, f in zip(mine, alone, strict=True)})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=None, help="emulations kept here (reused when present)")
    ap.add_argument("--repeat", type=int, default=5, help="emulations per configuration (default %(default)s)")
    ap.add_argument("--write", action="store_true", help="put each GPU's node_slowdown into predictor/host_calibration.json")
    ap.add_argument("--gpu", default="", help="comma-separated GPUs to fit (default: every GPU measured)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-node-host-"))
    measured_gpus = sorted(p.name for p in DATA.iterdir() if p.is_dir())
    gpus = a.gpu.split(",") if a.gpu else measured_gpus
    if unknown := sorted(set(gpus) - set(measured_gpus)):
        ap.error(f"--gpu: no step times measured for {', '.join(unknown)} (measured: {', '.join(measured_gpus)})")
    kept = json.loads(RESULTS.read_text())["machines"] if a.gpu and RESULTS.is_file() else {}
    report: dict[str, Any] = {g: r for g, r in kept.items() if g not in gpus}
    for gpu in gpus:
        cases = [c for c in measured(gpu) if c.processes > 1]
        if not cases:
            continue
        curves = curves_of(cases, work, a.repeat, lambda c: host_model(c.gpu, ranks=c.processes))
        meas = [median(c.step_s) for c in cases]
        factor, alone = fit_each(curves, meas)
        at = int(np.searchsorted(NODE_SLOWDOWNS, factor))
        one = int(np.searchsorted(NODE_SLOWDOWNS, 1.0))
        rows: list[dict[str, Any]] = []
        for c, m, curve, f in zip(cases, meas, curves, alone, strict=True):
            i = int(np.searchsorted(NODE_SLOWDOWNS, f))
            rows.append({"name": c.name, "ranks": c.processes, "measured_s": m, "runs": len(c.step_s),
                         "predicted_s_without": float(curve[one]), "error_without": float(curve[one] / m - 1),
                         "node_slowdown_without_case": f, "predicted_s": float(curve[i]),
                         "error": float(curve[i] / m - 1), "predicted_s_fitted": float(curve[at])})
            print(f"{gpu:15} {c.name:14} measured {m * 1e3:6.2f} ms ({len(c.step_s)} runs)  predicted "
                  f"{curve[one] * 1e3:6.2f} ms without a node factor ({100 * (curve[one] / m - 1):+5.1f}%), "
                  f"{curve[i] * 1e3:6.2f} ms with x{f:.3f} fitted on the others ({100 * (curve[i] / m - 1):+5.1f}%)",
                  flush=True)
        errors = [abs(r["error"]) for r in rows]
        report[gpu] = {"node_slowdown": factor, "configs": len(rows), "rows": rows,
                       "median_abs_error_without_case": median(errors), "max_abs_error_without_case": max(errors),
                       "median_abs_error_without_factor": median(abs(r["error_without"]) for r in rows)}
        print(f"{gpu}: node_slowdown {factor:.3f} over {len(rows)} configurations; leave one configuration out: "
              f"median {100 * median(errors):.1f}%, max {100 * max(errors):.1f}% (without a factor: median "
              f"{100 * report[gpu]['median_abs_error_without_factor']:.1f}%)")
    RESULTS.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "command": "python -m benchmarks.calibration.node_host",
                                   "repeat": a.repeat, "machines": report}, indent=1) + "\n")
    print(f"saved {RESULTS}")
    if a.write:
        set_host_values("node_slowdown", {gpu: round(report[gpu]["node_slowdown"], 3) for gpu in gpus if gpu in report})
    return 0


if __name__ == "__main__":
    sys.exit(main())
