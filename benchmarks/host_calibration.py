"""Calibrates the replay's host model: how much longer the GPU server's host takes per step.

    python benchmarks/host_calibration.py [--work DIR]

For every configuration measured on a GPU machine (benchmarks/step_truth.py's
data: the host's time to issue each step, until ``step(i)`` returned, fresh
processes), the same command is emulated here and replayed with the
estimators of that GPU, the host cost of each CUDA call measured on that
server (benchmarks/data/server_call_cost/<GPU>.json, from
benchmarks/server_call_cost.cu), and every slowdown of
:data:`maya.predictor.host.SLOWDOWNS`; the replayed host time per steady step
(:func:`maya.predictor.host.step_host_times_ns`) includes the host's waits for
the device inside the step, as the measurement does.  The machine's factor
minimises the median |log(replayed / measured)| over its configurations
(:func:`maya.predictor.host.fit_slowdown`); each configuration's residual is
taken with the factor fitted on the other example models (leave one model
out), which is the error to expect for a model the calibration never saw.
``sensitivity`` says how much a configuration's host time follows the factor
(1: all host work; 0: all waiting for the device).  Writes
predictor/host_calibration.json (what ``maya predict`` uses) and
benchmarks/results/host_calibration.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.gpu_fidelity_campaign import cpu_model  # noqa: E402
from benchmarks.step_truth import DATA, EMULATED_STEPS, STEADY_FROM, emulate, measured  # noqa: E402
from maya.predict import Job, prepare  # noqa: E402
from maya.predictor.host import CALIBRATION, SLOWDOWNS, HostModel, fit_slowdown, server_call_ns, step_host_times_ns  # noqa: E402
from maya.predictor.trace import Kind  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "host_calibration.json"
CALL_COSTS = ROOT / "benchmarks" / "data" / "server_call_cost"  # <GPU>.json, benchmarks/server_call_cost.cu


def call_costs(gpu: str) -> dict[str, float]:
    """The server's measured host ns per call kind (none measured: {})."""
    path = CALL_COSTS / f"{gpu}.json"
    return json.loads(path.read_text())["ns_per_call"] if path.is_file() else {}


def replayed_host_s(job: Job, steps: int, calls: dict[str, float]) -> np.ndarray:
    """Median replayed host time per steady step, seconds, at each of SLOWDOWNS."""
    out, call_ns = [], server_call_ns(calls)
    for f in SLOWDOWNS:
        result = job.replay(HostModel(float(f), call_ns, 0.0))[0]
        out.append(median(step_host_times_ns(job.traces[0], result, steps)[STEADY_FROM:]) / 1e9)
    return np.array(out)


def emulated_host_s(job: Job, steps: int) -> float:
    """The emulated run's own host time per steady step (the trace's clock), for comparison."""
    t = job.traces[0]
    syncs = t.of_kind(Kind.DEVICE_SYNC)[-(steps + 1):]
    rec = t.records
    times = [float(rec["t_ns"][b]) - float(rec["t_ns"][a] + rec["dur_ns"][a])
             for a, b in zip(syncs[:-1], syncs[1:], strict=True)]
    return median(times[STEADY_FROM:]) / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=None, help="emulations kept here (reused when present)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-host-calibration-"))
    machines, report = {}, {}
    for gpu in sorted(p.name for p in DATA.iterdir() if p.is_dir()):
        rows, curves, calls = [], [], call_costs(gpu)
        for m in measured(gpu):
            if m.processes != 1 or not m.host_s:
                continue
            job = prepare(emulate(m.argv, gpu, 1, work / gpu / m.name), gpu)
            curves.append(replayed_host_s(job, EMULATED_STEPS, calls))
            rows.append({"name": m.name, "family": m.family, "measured_host_s": median(m.host_s),
                         "host_runs": len(m.host_s), "emulated_host_s": emulated_host_s(job, EMULATED_STEPS)})
        host = np.vstack(curves)
        meas = [r["measured_host_s"] for r in rows]
        slowdown = fit_slowdown(host, meas)
        for c, r in enumerate(rows):
            others = [o for o, q in enumerate(rows) if q["family"] != r["family"]]
            f = fit_slowdown(host[others], [meas[o] for o in others])
            j = int(np.searchsorted(SLOWDOWNS, f))
            lo, hi = max(j - 1, 0), min(j + 1, len(SLOWDOWNS) - 1)
            r["slowdown_without_model"] = f
            r["replayed_host_s"] = float(host[c, j])
            r["error"] = float(host[c, j]) / r["measured_host_s"] - 1
            r["sensitivity"] = float(np.log(host[c, hi] / host[c, lo]) / np.log(SLOWDOWNS[hi] / SLOWDOWNS[lo]))
            print(f"{gpu:15} {r['name']:18} server host {r['measured_host_s'] * 1e3:6.2f} ms  emulated "
                  f"{r['emulated_host_s'] * 1e3:5.2f} ms  replayed x{f:.2f} {r['replayed_host_s'] * 1e3:6.2f} ms "
                  f"(sensitivity {r['sensitivity']:.2f})  leave-one-model-out error {100 * r['error']:+6.1f}%",
                  flush=True)
        errors = [abs(r["error"]) for r in rows]
        summary = {"slowdown": slowdown, "configs": len(rows), "median_abs_error": median(errors),
                   "max_abs_error": max(errors)}
        print(f"{gpu}: slowdown {slowdown:.2f} over {len(rows)} configurations; host time error, leave one model "
              f"out: median {100 * summary['median_abs_error']:.1f}%, max {100 * summary['max_abs_error']:.1f}%")
        machines[gpu] = {"slowdown": round(slowdown, 3), "configs": len(rows), "call_ns": calls}
        report[gpu] = {"summary": summary, "call_ns": calls, "configs": rows}
    emulating = {"cpu": cpu_model(), "cpus": len(os.sched_getaffinity(0))}
    CALIBRATION.write_text(json.dumps({
        "about": "Host model per catalog machine: the host ns of each kind of CUDA call measured on the GPU "
                 "server (call_ns, benchmarks/server_call_cost.cu), and the factor on the host delays emulated "
                 "on the CPU below that then makes the replay's host time per step closest to the server's "
                 "(slowdown, benchmarks/host_calibration.py).",
        "emulating_cpu": emulating, "date": time.strftime("%Y-%m-%d"), "machines": machines}, indent=1) + "\n")
    RESULTS.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "command": "python benchmarks/host_calibration.py",
                                   "emulating_cpu": emulating, "machines": report}, indent=1) + "\n")
    print(f"saved {CALIBRATION} and {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
