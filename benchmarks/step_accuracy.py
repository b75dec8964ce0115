"""Predicted step time against the step time measured on real GPUs.

    python -m benchmarks.step_accuracy [--only NAME,... [--merge]] [--work DIR] [--family-speed JSON]

Ground truth (benchmarks/step_truth.py): the examples at their default,
held-out and three more sizes on H100s, the median over fresh processes
on eight machines (14 to 22 runs) of each run's median steady step, with the
run-to-run spread and how closely the runs fix their median (its 90%
bootstrap interval: the server's host speed drifts, so a host-bound size's
median is known to +-10% at best); and
the 2-rank DDP example at six sizes on 2 x H200 (``ddp*``, 8 to 27 fresh runs
each over up to nine machines) and at three on 2 x H100 (the default size and two with
AdamW's foreach form and gradient clipping, 18 to 20 runs each over four machines).  The targets are judged on those; the same
single-GPU examples and
sizes measured on H200s (10 to 16 runs each, over seven campaigns) are predicted too, and
summed up apart (``H200-SXM-141GB``), to show the method on a second GPU.
Each configuration is emulated here ``--repeat`` times (default 5: one emulation's host
delays are off by a factor of its own, benchmarks/emulation_noise.py) with the same
arguments (for 8 steps) and predicted as ``maya predict --repeat`` does (the
emulation of median step time; the first emulation's own error is reported
beside it): the estimators of the
measured GPU, the collective model, and the host model with the slowdown
fitted on the other example models (leave one model out,
benchmarks/results/host_calibration.json), and for a DDP size the node
factor fitted on the GPU's other DDP sizes (leave one configuration out,
benchmarks/calibration/node_host.py), so no case is predicted with a
factor that saw it.  The oracle column is the replay's own error: the
trace of the same configuration recorded on the H100 (``maya record``, the
profiling campaign's ``oracle-*`` jobs) replayed with its measured device
times, recorded host delays and call durations, against the step time that
recorded run printed itself for the same steps (recording slows its host,
so it is compared with itself, not with the unrecorded runs).  The busy
columns split each error in two: the device's busy time per step as the
estimators predict it against the recorded run's (its kernels as CUPTI timed
them, in its steps that ran as many operations as the emulated one), and the rest of the step, idle, predicted against measured minus
recorded busy (the host's share and the gaps between kernels).  Saves
benchmarks/results/step_accuracy.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks.archives import extract_all
from benchmarks.calibration.node_host import node_factors_without_each
from benchmarks.step_truth import Measured, emulate, measured
from maya.predict import PredictError, predict_folder, predict_median, prepare
from maya.predictor.replay.host import HostModel, host_model
from maya.predictor.trace import Kind

ROOT = Path(__file__).resolve().parent.parent

GPU = "H100-SXM-80GB"
SECOND_GPU = "H200-SXM-141GB"
CALIBRATION = ROOT / "benchmarks" / "results" / "host_calibration.json"
RECORDED = ROOT / "benchmarks" / "data" / "profile_campaign" / GPU


def pct(x: float | None) -> str:
    return "   -   " if x is None else f"{100 * x:+6.1f}%"


def busy_s(breakdown: dict[str, float]) -> float:
    """The device's busy time per step (kernels, library calls, copies)."""
    return breakdown["compute_s"] + breakdown["data_movement_s"]


def busy_by_step(folder: Path, gpu: str, oracle: bool) -> list[tuple[int, float]]:
    """(device operations, device busy seconds) of each step of rank 0's trace, the steps cut at
    its device synchronisations (the examples end every step with one); estimated, or measured
    (``oracle``, a recorded trace)."""
    job = prepare(folder, gpu, oracle=oracle)
    syncs, durations = job.traces[0].of_kind(Kind.DEVICE_SYNC), job.durations[0]
    out = []
    for a, b in zip(syncs[:-1].tolist(), syncs[1:].tolist(), strict=True):
        ns = [v for i, v in durations.items() if a < i < b]
        out.append((len(ns), sum(ns) / 1e9))
    return out


def recorded_busy_s(recorded: Path, emulated: Path, gpu: str) -> float | None:
    """The recorded run's busy time per step, over its steps that ran as many device operations as
    the emulated run's last step (None: none did).  Why: a recorded fp16 run skips the optimizer
    in the steps whose gradients overflowed (BERT's GradScaler: 880 operations, not 928), which an
    emulated run, whose gradients read as zeros, never does."""
    ops = busy_by_step(emulated, gpu, oracle=False)[-1][0]
    same = [busy for n, busy in busy_by_step(recorded, gpu, oracle=True) if n == ops]
    return median(same) if same else None


def model_family(case: Measured) -> str:
    """The example model the case trains: examples/ddp.py trains gpt.py's."""
    return {"ddp": "gpt"}.get(case.family, case.family)


def host_for(case: Measured, calibration: dict[str, Any]) -> HostModel:
    """The case's machine's host, with the factors fitted without the case's example model."""
    family = model_family(case)
    rows = [r for r in calibration.get(case.gpu, {}).get("configs", []) if r["family"] == family]
    host = host_model(case.gpu, ranks=case.processes)
    if not rows:
        return host
    r = rows[0]
    return replace(host, slowdown=r["slowdown_without_model"], call_scale=r["call_scale_without_model"],
                   source="leave one model out")


def recorded_step_s(job: Path, steps: int) -> float:
    """The recorded run's own time for the steps the replay measured: the median of its last
    ``steps`` printed step times (the steady steps found in a trace run to its end).  Its
    earlier steps can differ in kind: BERT's GradScaler skips the optimizer for a few."""
    lines = [ln for ln in (job / "stdout.txt").read_text().splitlines() if ln.startswith("{")]
    return median(json.loads(lines[-1])["step_times_s"][-steps:])


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [abs(r["error"]) for r in rows if r.get("error") is not None]
    oracle = [abs(r["oracle_error"]) for r in rows if r.get("oracle_error") is not None]
    busy = [abs(r["busy_error"]) for r in rows if r.get("busy_error") is not None]
    single = [abs(r["single_error"]) for r in rows if r.get("single_error") is not None]
    return {"cases": len(rows), "median_abs_error": median(errors) if errors else None,
            "max_abs_error": max(errors, default=None), "within_8pct": sum(e <= 0.08 for e in errors),
            "single_emulation": {"median_abs_error": median(single) if single else None,
                                 "max_abs_error": max(single, default=None),
                                 "within_8pct": sum(e <= 0.08 for e in single)},
            "median_spread": median(r["spread"] for r in rows) if rows else None,
            "within_measured_interval": sum(bool(r.get("within_interval")) for r in rows),
            "oracle_median_abs_error": median(oracle) if oracle else None,
            "busy_median_abs_error": median(busy) if busy else None, "busy_max_abs_error": max(busy, default=None)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="case names, comma-separated")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=5, help="emulations per case (default %(default)s)")
    ap.add_argument("--family-speed", type=Path, default=None, metavar="JSON",
                    help="benchmarks/results/emulating_machine.json: predict as if the CPU probe had read this "
                         "machine's speed on the case's model family, as measured there (an analysis of how much "
                         "of an error the emulating machine makes; saved apart, as step_accuracy-family-speed.json)")
    ap.add_argument("--merge", action="store_true",
                    help="with --only: put these cases' rows into the saved results (the others kept as they were)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-step-accuracy-"))
    recorded = work / "recorded"
    if not recorded.is_dir():
        extract_all(RECORDED, recorded, ("oracle",))
    calibration = json.loads(CALIBRATION.read_text())["machines"]
    wanted = set(filter(None, a.only.split(",")))
    speed = json.loads(a.family_speed.read_text()) if a.family_speed else None
    rows: list[dict[str, Any]] = []
    cases = [*measured(GPU), *measured(SECOND_GPU)]
    # A case of several ranks is judged with the node factor fitted on the GPU's other such cases.
    asked = {c.gpu for c in cases if c.processes > 1 and (not wanted or c.name in wanted)}
    ranked = [c for c in cases if c.processes > 1 and c.gpu in asked]
    node = node_factors_without_each(ranked, work / "emulated", a.repeat, lambda c: host_for(c, calibration))
    for case in cases:
        if wanted and case.name not in wanted:
            continue
        meas = median(case.step_s)
        folders = [emulate(case.argv, case.gpu, case.processes, work / "emulated" / case.gpu / case.name / f"run{k}")
                   for k in range(a.repeat)]
        out = folders[0]
        host = host_for(case, calibration)
        if case.processes > 1:
            host = replace(host, node_slowdown=node[f"{case.gpu}/{case.name}"])
        if speed:
            ratio = speed["summary"]["probe_ratio_median"] / speed["summary"]["job_ratio_by_family"][model_family(case)]
            host = replace(host, slowdown=host.slowdown * ratio)
        t0 = time.perf_counter()
        row: dict[str, Any] = {"case": case.name, "gpu": case.gpu, "processes": case.processes, "argv": case.argv,
                               "measured_s": meas, "spread": case.spread, "runs": len(case.step_s),
                               "measured_interval": case.median_interval(), "host_slowdown": host.slowdown,
                               "node_slowdown": host.node_slowdown}
        try:
            p = predict_median(folders, case.gpu, gpus_per_node=case.processes, host=host)
            error = p.step_time_s / meas - 1
            lo, hi = row["measured_interval"]
            row.update(predicted_s=p.step_time_s, error=error, within_interval=lo <= error <= hi,
                       emulations_s=list(p.emulations_s), single_error=p.emulations_s[0] / meas - 1,
                       breakdown=p.breakdown, predict_wall_s=time.perf_counter() - t0)
        except PredictError as e:
            row.update(predicted_s=None, error=None, note=str(e))
        job = recorded / f"oracle-{case.name}"
        if case.gpu == GPU and job.is_dir():
            try:
                o = predict_folder(job, case.gpu, oracle=True)
                rec = recorded_step_s(job, len(o.steps_s))
                row.update(oracle_s=o.step_time_s, recorded_s=rec, oracle_error=o.step_time_s / rec - 1)
                recorded_busy = recorded_busy_s(job, out, case.gpu)
                if recorded_busy is not None:
                    row.update(recorded_busy_s=recorded_busy, measured_idle_s=meas - recorded_busy)
                    if row.get("predicted_s") is not None:
                        busy = busy_s(row["breakdown"])
                        row.update(busy_error=busy / recorded_busy - 1, predicted_idle_s=row["predicted_s"] - busy)
            except PredictError as e:
                row.update(oracle_s=None, oracle_error=None, oracle_note=str(e))
        rows.append(row)
        lo, hi = row["measured_interval"]
        print(f"{case.name:18} {case.gpu:15} measured {meas * 1e3:7.2f} ms (spread {100 * case.spread:4.1f}%, "
              f"{len(case.step_s)} runs, median within {pct(lo)} {pct(hi)})  "
              f"predicted {(row.get('predicted_s') or 0) * 1e3:7.2f} ms "
              f"{pct(row.get('error'))} (first emulation {pct(row.get('single_error'))})  oracle {pct(row.get('oracle_error'))}  busy {pct(row.get('busy_error'))}"
              + (f"  idle {1e3 * row['predicted_idle_s']:5.2f} ms predicted, {1e3 * row['measured_idle_s']:5.2f} measured"
                 if "predicted_idle_s" in row else ""), flush=True)
    path = ROOT / "benchmarks" / "results" / ("step_accuracy-family-speed.json" if speed else "step_accuracy.json")
    command = " ".join(["python -m benchmarks.step_accuracy", *sys.argv[1:]])
    saved: dict[str, Any] = {}
    if wanted and a.merge and not speed:
        saved = json.loads(path.read_text())
        known = {(c.name, c.gpu) for c in cases} - {(r["case"], r["gpu"]) for r in rows}
        kept = [r for r in saved["cases"] if (r["case"], r["gpu"]) in known]
        rows = [*kept, *rows]
        command = f"{saved['command']}; then {command} ({time.strftime('%Y-%m-%d')})"
    second = [r for r in rows if r["gpu"] == SECOND_GPU and r["processes"] == 1]
    summary = {**summarize([r for r in rows if r not in second]), SECOND_GPU: summarize(second)}
    print(json.dumps(summary))
    if wanted and not a.merge and not speed:  # a subset: the saved results stay those of the whole benchmark
        return 0
    path.write_text(json.dumps({"date": saved.get("date", time.strftime("%Y-%m-%d")), "command": command,
                                "summary": summary, "cases": rows}, indent=1) + "\n")
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
