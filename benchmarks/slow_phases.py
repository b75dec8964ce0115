"""Whether setting aside emulations run in a slow phase of the emulating CPU makes answers agree.

The emulating machines' virtual CPUs run Python up to 1.7 times slower for
seconds at a time (``maya/_hook/_maya_pace.py``), and an emulation whose
steps fall in such a phase predicts a host-bound step 20-40% long.  Each
question is emulated ``--emulations`` times in a row (held-out workloads, as
``benchmarks.held_out.accuracy`` emulates them, on an H100), and the same
emulations are answered twice with :func:`maya.predict.predict_asked` at
its default settings: as it is (an emulation whose process read the Python
yardstick slow at its exit is set aside and the next one taken), and with
the yardstick's readings ignored (the policy before them).  Both answers of
a question come from the same emulations, taken in the same order, so the
difference is the policy's alone.  Prints each workload's answers, their
spread ((max - min) / median) under both, and the emulations each used;
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
from maya.predict import predict_asked, predict_folder

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "slow_phases.json"
DEFAULT = "switch_moe,mixtral_moe,ddp_gpt2_tied"


def answer(folders: list[Path], gpus: int, *, phases: bool) -> tuple[float, int]:
    """The question's answer from ``folders`` taken in order, and how many of them it used."""
    used = [folders[0]]

    def further(k: int) -> Path:
        used.append(folders[k])
        return folders[k]

    if phases:
        p = predict_asked(folders[0], EMULATED_GPU, further, gpus_per_node=gpus)
    else:
        with mock.patch.object(predicting, "quickest_pace", lambda _: None):
            p = predict_asked(folders[0], EMULATED_GPU, further, gpus_per_node=gpus)
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
            each = [predict_folder(f, EMULATED_GPU, gpus_per_node=w.gpus) for f in folders]
            new, new_used = answer(folders, w.gpus, phases=True)
            old, old_used = answer(folders, w.gpus, phases=False)
            questions.append({"emulations_s": [p.step_time_s for p in each],
                              "steady_pace_ns": [list(p.steady_pace_ns) for p in each],
                              "answer_s": new, "emulations_used": new_used,
                              "answer_without_phases_s": old, "emulations_used_without_phases": old_used})
            print(f"{name} q{q}: emulations " + ", ".join(f"{p.step_time_s * 1e3:.1f}" for p in each)
                  + f" ms; answer {new * 1e3:.2f} ({new_used} used), without phases {old * 1e3:.2f} ({old_used})",
                  flush=True)
        row = {"workload": name, "gpus": w.gpus, "questions": questions,
               "spread": spread([q["answer_s"] for q in questions]),
               "spread_without_phases": spread([q["answer_without_phases_s"] for q in questions]),
               "emulations": sum(q["emulations_used"] for q in questions),
               "emulations_without_phases": sum(q["emulations_used_without_phases"] for q in questions)}
        rows.append(row)
        print(f"{name}: spread {100 * row['spread']:.1f}% ({row['emulations']} emulations), without phases "
              f"{100 * row['spread_without_phases']:.1f}% ({row['emulations_without_phases']})", flush=True)
    out = {"date": time.strftime("%Y-%m-%d"), "command": f"python -m benchmarks.slow_phases --work {args.work} "
           f"--workloads {args.workloads} --questions {args.questions} --emulations {args.emulations}",
           "emulated_gpu": EMULATED_GPU, "cpu": platform.processor() or platform.machine(),
           "slow_phase": predicting.SLOW_PHASE, "spare": predicting.SPARE, "workloads": rows}
    args.save.parent.mkdir(parents=True, exist_ok=True)
    args.save.write_text(json.dumps(out, indent=1) + "\n")
    print(f"saved {args.save}")


if __name__ == "__main__":
    main()
