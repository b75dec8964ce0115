"""Calibrates the replay's host model: how much longer the GPU server's host takes per step.

    python -m benchmarks.calibration.host [--work DIR]

For every configuration measured on a GPU machine (benchmarks/step_truth.py's
data: the host's time to issue each step, until ``step(i)`` returned, fresh
processes), the same command is emulated here and replayed with the
estimators of that GPU and the host cost of each CUDA call measured on that
kind of server (benchmarks/data/server_call_cost/<GPU>.json, the median over
its machines, from benchmarks/campaigns/server_call_cost.sh), at every slowdown of
:data:`maya.predictor.replay.host.SLOWDOWNS` on the emulated delays and every scale
of :data:`maya.predictor.replay.host.CALL_SCALES` on the call costs.  The replayed
host time per steady step (:func:`maya.predictor.replay.host.step_host_times_ns`)
includes the host's waits for the device inside the step, as the
measurement does.  The machine's factors minimise the median
|log(replayed / measured)| over its configurations
(:func:`maya.predictor.replay.host.fit_host`); each configuration's residual is
taken with the factors fitted on the other example models (leave one model
out), which is the error to expect for a model the calibration never saw.
``sensitivity`` says how much a configuration's host time follows the
slowdown (1: all emulated host work; 0: calls or waiting for the device).
Each configuration is emulated five times and the run of median host time
kept (:func:`typical_emulation`).  The factors refer to this machine's CPU
as the median of the emulations' ``maya.cpu_probe`` read it (each
emulation's delays rescaled by that over its own probe), and the reference
is saved with them so that ``maya predict`` elsewhere rescales the same
way.  Writes
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
from dataclasses import replace
from pathlib import Path
from statistics import median

import numpy as np

from benchmarks.calibration import rank_wait
from benchmarks.calibration.new_shape import measurements, new_shape_ns
from benchmarks.calibration.rnn_host import rnn_call_ns
from benchmarks.campaigns.gpu_fidelity_campaign import cpu_model
from benchmarks.merge_lease import CALL_COSTS
from benchmarks.step_truth import DATA, EMULATED_STEPS, STEADY_FROM, emulate, emulated_host_s, measured
from maya.predict import Job, prepare
from maya.predictor.replay.host import (
    CALIBRATION,
    CALL_SCALES,
    SLOWDOWNS,
    calibrated_host,
    fit_host,
    step_host_times_ns,
)

ROOT = Path(__file__).resolve().parents[2]

RESULTS = ROOT / "benchmarks" / "results" / "host_calibration.json"
LAUNCH_GAPS = ROOT / "benchmarks" / "data" / "launch_gap"


def call_costs(gpu: str) -> dict[str, float]:
    """The server's measured host ns per call kind (none measured: {})."""
    path = CALL_COSTS / f"{gpu}.json"
    return json.loads(path.read_text())["ns_per_call"] if path.is_file() else {}


def launch_times(gpu: str) -> dict[str, float]:
    """The server's measured launch latency and gap, ns (benchmarks/campaigns/launch_gap.py; none measured: {}):
    the median over the kinds of operation it timed."""
    path = LAUNCH_GAPS / f"{gpu}.json"
    if not path.is_file():
        return {}
    ops = json.loads(path.read_text())["ops"]
    return {"latency_ns": round(median(o["profiled_latency_ns"] for o in ops), 1),
            "gap_ns": round(median(o["gap_ns"] for o in ops), 1)}


def replayed_host_s(job: Job, steps: int, calls: dict[str, float], launch: dict[str, float],
                    reference_probe_ns: float | None) -> np.ndarray:
    """Median replayed host time per steady step, seconds, at each slowdown (SLOWDOWNS, rows) and
    call scale (CALL_SCALES, columns), for delays emulated on a CPU whose probe reads
    ``reference_probe_ns``."""
    out = np.zeros((len(SLOWDOWNS), len(CALL_SCALES)))
    base = calibrated_host({"call_ns": calls, "launch": launch}, reference_probe_ns)
    for i, f in enumerate(SLOWDOWNS):
        for j, m in enumerate(CALL_SCALES):
            result = job.replay(replace(base, slowdown=float(f), call_scale=float(m)))[0]
            out[i, j] = median(step_host_times_ns(job.traces[0], result, steps)[STEADY_FROM:]) / 1e9
    return out


def typical_emulation(argv: list[str], gpu: str, folder: Path, n: int) -> Job:
    """Of ``n`` emulations of the configuration, the one whose steady host time is the median.

    Why: one emulation's host delays can run 50% long when the emulating VM is disturbed for
    its few seconds (quickest-step steadying cannot remove a disturbance that lasts them all),
    and a factor fitted on such a run is off for every model.  The factors are fitted on the
    typical run; step_accuracy.py then predicts from single fresh emulations, as users do."""
    runs = [prepare(emulate(argv, gpu, 1, folder / f"e{k}"), gpu) for k in range(n)]
    runs.sort(key=lambda job: emulated_host_s(job.traces[0], EMULATED_STEPS))
    return runs[(n - 1) // 2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=None, help="emulations kept here (reused when present)")
    ap.add_argument("--emulations", type=int, default=5, help="emulations per configuration (default %(default)s)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-host-calibration-"))
    waits = rank_wait.measure()
    gpus = sorted(p.name for p in DATA.iterdir() if p.is_dir())
    jobs = {gpu: [(m, typical_emulation(m.argv, gpu, work / gpu / m.name, a.emulations)) for m in measured(gpu)
                  if m.processes == 1 and m.host_s] for gpu in gpus}
    # The factors refer to this machine's CPU as the median of its probes read it; each emulation's
    # delays are rescaled by that over its own probe (the machine's speed drifts between runs).
    probes = [job.host_probe_ns for pairs in jobs.values() for _, job in pairs if job.host_probe_ns]
    reference = median(probes) if probes else None
    previous = json.loads(CALIBRATION.read_text()).get("machines", {}) if CALIBRATION.is_file() else {}
    machines, report = {}, {}
    for gpu in gpus:
        rows, curves, calls, launch = [], [], call_costs(gpu), launch_times(gpu)
        for m, job in jobs[gpu]:
            curves.append(replayed_host_s(job, EMULATED_STEPS, calls, launch, reference))
            rows.append({"name": m.name, "family": m.family, "measured_host_s": median(m.host_s),
                         "host_runs": len(m.host_s), "emulated_host_s": emulated_host_s(job.traces[0], EMULATED_STEPS),
                         "host_probe_ns": job.host_probe_ns})
        host = np.stack(curves)
        meas = [r["measured_host_s"] for r in rows]
        slowdown, call_scale = fit_host(host, meas)
        for c, r in enumerate(rows):
            others = [o for o, q in enumerate(rows) if q["family"] != r["family"]]
            f, m = fit_host(host[others], [meas[o] for o in others])
            i, j = int(np.searchsorted(SLOWDOWNS, f)), int(np.searchsorted(CALL_SCALES, m))
            lo, hi = max(i - 1, 0), min(i + 1, len(SLOWDOWNS) - 1)
            r.update(slowdown_without_model=f, call_scale_without_model=m, replayed_host_s=float(host[c, i, j]),
                     error=float(host[c, i, j]) / r["measured_host_s"] - 1,
                     sensitivity=float(np.log(host[c, hi, j] / host[c, lo, j]) / np.log(SLOWDOWNS[hi] / SLOWDOWNS[lo])))
            print(f"{gpu:15} {r['name']:18} server host {r['measured_host_s'] * 1e3:6.2f} ms  emulated "
                  f"{r['emulated_host_s'] * 1e3:5.2f} ms  replayed x{f:.2f}, calls x{m:.1f} "
                  f"{r['replayed_host_s'] * 1e3:6.2f} ms (sensitivity {r['sensitivity']:.2f})  "
                  f"leave-one-model-out error {100 * r['error']:+6.1f}%", flush=True)
        errors = [abs(r["error"]) for r in rows]
        summary = {"slowdown": slowdown, "call_scale": call_scale, "configs": len(rows),
                   "median_abs_error": median(errors), "max_abs_error": max(errors)}
        print(f"{gpu}: slowdown {slowdown:.2f}, call scale {call_scale:.1f} over {len(rows)} configurations; host "
              f"time error, leave one model out: median {100 * summary['median_abs_error']:.1f}%, "
              f"max {100 * summary['max_abs_error']:.1f}%")
        machines[gpu] = {"slowdown": round(slowdown, 3), "call_scale": round(call_scale, 3), "configs": len(rows),
                         "call_ns": calls, "launch": launch}
        node_calls = call_costs(f"{gpu}-node")  # machines of several GPUs: priced apart, not fitted on
        if node_calls:
            machines[gpu]["node_call_ns"] = node_calls
        if gpu in waits:  # and their ranks' wait for the slowest (benchmarks.calibration.rank_wait)
            machines[gpu]["rank_jitter"] = round(waits[gpu]["rank_jitter"], 4)
        # measured, not fitted: a GEMM shape new to the process (benchmarks.calibration.new_shape)
        machines[gpu]["new_gemm_shape_ns"] = new_shape_ns(measurements(gpu))
        # measured, not fitted through the replay: a cuDNN RNN call's host (benchmarks.calibration.rnn_host)
        if rnn_call_ns(gpu):
            machines[gpu]["rnn_call_ns"] = rnn_call_ns(gpu)
        if "node_slowdown" in previous.get(gpu, {}):  # fitted on top of these factors: refit it after them
            machines[gpu]["node_slowdown"] = previous[gpu]["node_slowdown"]
            print(f"{gpu}: node_slowdown kept from the previous calibration; refit it on the new factors: "
                  "python -m benchmarks.calibration.node_host --write")
        report[gpu] = {"summary": summary, "call_ns": calls, "launch": launch, "configs": rows}
    emulating = {"cpu": cpu_model(), "cpus": len(os.sched_getaffinity(0)), "host_probe_ns": reference}
    CALIBRATION.write_text(json.dumps({
        "about": "Host model per catalog machine: the host ns of each kind of CUDA call measured on GPU servers "
                 "(call_ns, benchmarks/campaigns/server_call_cost.sh, the median over machines), and the factors on those "
                 "costs (call_scale; node_call_ns: the same calls on machines of several such GPUs, for jobs "
                 "of several ranks; node_slowdown: the factor on their delays there, benchmarks/calibration/node_host.py; "
                 "rank_jitter: how a rank's host time spreads about the ranks' mean there, "
                 "benchmarks/calibration/rank_wait.py) and on the host delays emulated on the CPU below (slowdown; that CPU's "
                 "maya.cpu_probe read host_probe_ns, and delays emulated elsewhere are rescaled by it) that make "
                 "the replay's host time per step closest to the server's (benchmarks/calibration/host.py); "
                 "and the server's launch latency and gap between queued operations (launch, "
                 "benchmarks/campaigns/launch_gap.py); and what a GEMM of a shape new to the process costs its host "
                 "over a seen one, by its inputs' precision (new_gemm_shape_ns, benchmarks/calibration/new_shape.py); "
                 "and a cuDNN RNN call's host time, by record name: per call, per layer and direction, per time step "
                 "(rnn_call_ns, benchmarks/calibration/rnn_host.py).",
        "emulating_cpu": emulating, "date": time.strftime("%Y-%m-%d"), "machines": machines}, indent=1) + "\n")
    RESULTS.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "command": "python -m benchmarks.calibration.host",
                                   "emulating_cpu": emulating, "machines": report}, indent=1) + "\n")
    print(f"saved {CALIBRATION} and {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
