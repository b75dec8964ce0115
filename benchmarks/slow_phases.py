"""Whether setting aside emulations run in a slow phase of the emulating CPU, and one probe reading, make answers agree.

The emulating machines' virtual CPUs run Python up to twice as slow in
phases (``maya/_hook/_maya_pace.py``), and an emulation whose steady steps
fall in one predicts a host-bound step 20-50% long; a probe timed in one
reads slow and shrinks its emulation's delays by as much.  Each
question is emulated ``--emulations`` times in a row (held-out workloads, as
``benchmarks.held_out.accuracy`` emulates them, on an H100), and the same
emulations are answered with :func:`maya.predict.predict_asked` at its
default settings, three ways: as it is (an emulation whose steady steps
read the Python yardstick slow is set aside and the next one taken, and the
emulations are replayed with the quickest of their probe readings), with the
yardstick's readings ignored, and with those ignored and each emulation
replayed with its own probe reading (the policy before both).  The answers
of a question come from the same emulations, taken in the same order, so
their differences are the policy's alone.  Prints each workload's answers,
their spread ((max - min) / median) each way, and the emulations each used;
saves ``benchmarks/results/slow_phases.json``.

    python -m benchmarks.slow_phases --work DIR [--workloads a,b] [--questions 5] [--emulations 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from statistics import median
from typing import Any
from unittest import mock

from benchmarks.held_out.accuracy import EMULATED_GPU, STEPS, emulate
from benchmarks.held_out.suite import WORKLOADS
from maya import predict as predicting
from maya.predict import Prediction, predict_asked, predict_folder

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "slow_phases.json"
DEFAULT = "switch_moe,mixtral_moe,ddp_gpt2_tied"


ARMS = ("as_is", "without_phases", "before")  # predict_asked; the yardstick ignored; and each run's own probe too


def answer(runs: dict[Path, Prediction], gpus: int, arm: str, replays: dict[tuple[Path, float], Prediction]
           ) -> tuple[float, int]:
    """The question's answer from the emulations predicted in ``runs``, taken in order, and how many it used:
    by :func:`maya.predict.predict_asked` as it is, with the yardstick's readings ignored ("without_phases"),
    or with those ignored and each emulation replayed with its own probe reading ("before")."""
    folders = list(runs)
    used = [folders[0]]

    def further(k: int) -> Path:
        used.append(folders[k])
        return folders[k]

    def predicted(folder: Path, gpu: str, probe_ns: float | None = None, **_: Any) -> Prediction:
        if probe_ns is None or arm == "before" or probe_ns == runs[folder].host_probe_ns:
            return runs[folder]
        if (folder, probe_ns) not in replays:
            replays[folder, probe_ns] = predict_folder(folder, gpu, gpus_per_node=gpus, probe_ns=probe_ns)
        return replays[folder, probe_ns]

    with mock.patch.object(predicting, "predict_folder", predicted):
        if arm == "as_is":
            p = predict_asked(folders[0], EMULATED_GPU, further, known=runs[folders[0]])
        else:
            with mock.patch.object(predicting, "quickest_pace", lambda _: None):
                p = predict_asked(folders[0], EMULATED_GPU, further, known=runs[folders[0]])
    return p.step_time_s, len(used)


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / median(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="folder for the emulations (kept: a rerun reads them)")
    ap.add_argument("--workloads", default=DEFAULT)
    ap.add_argument("--questions", type=int, default=5)
    ap.add_argument("--emulations", type=int, default=5, help="emulations made per question, in a row")
    ap.add_argument("--timeout", type=float, default=1200.0)
    ap.add_argument("--save", type=Path, default=RESULTS)
    args = ap.parse_args()
    by_name = {w.name: w for w in WORKLOADS}
    rows: list[dict[str, Any]] = []
    for name in args.workloads.split(","):
        w = by_name[name]
        questions = []
        for q in range(args.questions):
            folders = [args.work / name / f"q{q}e{e}" for e in range(args.emulations)]
            for f in folders:
                if emulate(w, STEPS, f, args.timeout)["exit_code"] != 0:
                    raise SystemExit(f"{name}: the emulation in {f} failed (its emulation.json says why)")
            runs = {f: predict_folder(f, EMULATED_GPU, gpus_per_node=w.gpus) for f in folders}
            each = list(runs.values())
            replays: dict[tuple[Path, float], Prediction] = {}
            q_row: dict[str, Any] = {"emulations_s": [p.step_time_s for p in each],
                                     "steady_pace_ns": [list(p.steady_pace_ns) for p in each],
                                     "host_probe_ns": [p.host_probe_ns for p in each]}
            for arm in ARMS:
                q_row[arm] = dict(zip(("answer_s", "emulations_used"), answer(runs, w.gpus, arm, replays),
                                      strict=True))
            questions.append(q_row)
            print(f"{name} q{q}: emulations " + ", ".join(f"{p.step_time_s * 1e3:.1f}" for p in each) + " ms; "
                  + "; ".join(f"{arm} {q_row[arm]['answer_s'] * 1e3:.2f} ({q_row[arm]['emulations_used']})"
                              for arm in ARMS), flush=True)
        row: dict[str, Any] = {"workload": name, "gpus": w.gpus, "questions": questions}
        for arm in ARMS:
            row[arm] = {"spread": spread([q[arm]["answer_s"] for q in questions]),
                        "emulations": sum(q[arm]["emulations_used"] for q in questions)}
        rows.append(row)
        print(f"{name}: spread of the answers " + "; ".join(
            f"{arm} {100 * row[arm]['spread']:.1f}% ({row[arm]['emulations']} emulations)" for arm in ARMS), flush=True)
    out = {"date": time.strftime("%Y-%m-%d"), "command": f"python -m benchmarks.slow_phases --work {args.work} "
           f"--workloads {args.workloads} --questions {args.questions} --emulations {args.emulations}",
           "emulated_gpu": EMULATED_GPU, "cpu": platform.processor() or platform.machine(),
           "slow_phase": predicting.SLOW_PHASE, "spare": predicting.SPARE, "workloads": rows}
    args.save.parent.mkdir(parents=True, exist_ok=True)
    args.save.write_text(json.dumps(out, indent=1) + "\n")
    print(f"saved {args.save}")


if __name__ == "__main__":
    main()
