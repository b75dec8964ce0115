"""Prediction error when other work shares the emulating machine, against the same on an idle one.

    python -m benchmarks.busy_machine [--configs cnn-w32,...] [--rounds 1] [--work DIR]

In a cluster, emulation pods share nodes with other work.  For measured H100
configurations (``benchmarks/step_truth.py``: step times measured on real
GPUs), this emulates each one on an idle machine, with a CPU-bound process on
a CPU of its own ("beside": another CPU than the first, which rank 0 takes on an
idle machine), with one on the first CPU ("shared": ``maya emulate`` gives
rank 0 a quieter one, :func:`maya.other_work.quietest_cpus`), and with one on
every CPU ("everywhere": rank 0 shares its CPU whichever it takes),
interleaved, ``--rounds`` times; asks each question as
``maya predict`` does at its default settings (the GPU's calibrated host
model; a step that follows its host a tenth or more emulated again, under the
same condition, and a third time unless the two agree within 1%: the median),
and prints per condition the median absolute error of the answers and of
their first emulations alone, their rise over idle in points (the target: at
most one), what ``maya emulate`` measured of the other work
(``other_work_cpu_share``, :mod:`maya.other_work`) and whether it said so.
The configurations are the examples' sizes whose host time is a large share
of the step, where the host clock matters most.  Saves
benchmarks/results/busy_machine.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import median

from benchmarks.step_truth import emulate, named
from maya.other_work import NOTABLE_SHARE
from maya.predict import predict_asked, predict_folder
from maya.usual_pace import UsualPace

ROOT = Path(__file__).resolve().parent.parent
GPU = "H100-SXM-80GB"
RESULTS = ROOT / "benchmarks" / "results" / "busy_machine.json"
CONFIGS = "cnn-w32,cnn-i128,bert-s128,bert-b8,gpt-s512,recommender-d64"
CONDITIONS = ("idle", "beside", "shared", "everywhere")
SPIN = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True:\n    pass\n"


def hog_cpus(condition: str) -> list[int]:
    """The CPUs a condition's CPU-bound processes run on, one each."""
    cpus = sorted(os.sched_getaffinity(0))
    if condition != "idle" and len(cpus) < 2:
        raise SystemExit(f"'{condition}' needs a second CPU")
    return {"idle": [], "beside": cpus[-1:], "shared": cpus[:1], "everywhere": cpus}[condition]


@contextmanager
def cpu_bound_processes(cpus: list[int]) -> Iterator[None]:
    """A process that spins on each of ``cpus`` while the block runs."""
    spinning = [subprocess.Popen([sys.executable, "-c", SPIN, str(cpu)]) for cpu in cpus]
    try:
        if spinning:
            time.sleep(0.5)  # running before the emulation starts, as another pod's work would be
        yield
    finally:
        for p in spinning:
            p.kill()
            p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=CONFIGS, help="measured configurations (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=1, help="questions per configuration and condition")
    ap.add_argument("--work", type=Path, default=None, help="emulations kept here (reused when present)")
    a = ap.parse_args()
    names = a.configs.split(",")
    known = named(GPU, names)
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-busy-machine-"))
    usual = UsualPace(work / "usual_pace.json")  # this machine's readings, as maya predict keeps them
    rows = []
    for k in range(a.rounds):
        for name in names:
            truth = median(known[name].step_s)
            for condition in CONDITIONS:
                folder = work / condition / name / f"run{k}"

                def further(j: int, folder: Path = folder, argv: list[str] = known[name].argv) -> Path:
                    return emulate(argv, GPU, 1, folder.with_name(f"{folder.name}{chr(ord('a') + j)}"))

                with cpu_bound_processes(hog_cpus(condition)):
                    emulate(known[name].argv, GPU, 1, folder)
                    first = predict_folder(folder, GPU)
                    p = predict_asked(folder, GPU, further, known=first, usual=usual)
                summary = json.loads((folder / "summary.json").read_text())
                taken = summary.get("other_work_cpu_share")
                rows.append({"config": name, "condition": condition, "run": k, "measured_s": truth,
                             "predicted_s": p.step_time_s, "error": p.step_time_s / truth - 1,
                             "emulations_s": list(p.emulations_s or (p.step_time_s,)),
                             "first_error": first.step_time_s / truth - 1, "other_work_cpu_share": taken,
                             "warned": taken is not None and taken >= NOTABLE_SHARE})
                print(f"{name:16s} {condition:7s} run {k}  predicted {p.step_time_s * 1e3:7.2f} ms "
                      f"({len(rows[-1]['emulations_s'])} emulations)  measured {truth * 1e3:7.2f} ms  error "
                      f"{rows[-1]['error']:+6.1%} (first emulation {rows[-1]['first_error']:+6.1%})  other work "
                      f"{taken if taken is not None else float('nan'):5.0%}", flush=True)
    summary_rows = {}
    for condition in CONDITIONS:
        mine = [r for r in rows if r["condition"] == condition]
        errors = [abs(r["error"]) for r in mine]
        shares = [r["other_work_cpu_share"] for r in mine if r["other_work_cpu_share"] is not None]
        summary_rows[condition] = {
            "cases": len(errors), "median_abs_error": median(errors), "max_abs_error": max(errors),
            "first_emulation_median_abs_error": median(abs(r["first_error"]) for r in mine),
            "emulations": sum(len(r["emulations_s"]) for r in mine),
            "median_other_work_cpu_share": median(shares) if shares else None,
            "warned": sum(r["warned"] for r in mine)}
    idle = summary_rows["idle"]
    for condition, s in summary_rows.items():
        s["rise_points"] = 100 * (s["median_abs_error"] - idle["median_abs_error"])
        s["first_emulation_rise_points"] = 100 * (s["first_emulation_median_abs_error"]
                                                  - idle["first_emulation_median_abs_error"])
        print(f"{condition:7s} median error {s['median_abs_error']:6.1%} (max {s['max_abs_error']:6.1%}), "
              f"{s['rise_points']:+5.1f} points over idle, {s['emulations']} emulations (first emulations alone "
              f"{s['first_emulation_median_abs_error']:6.1%}, {s['first_emulation_rise_points']:+5.1f} points); "
              f"other work took a median {s['median_other_work_cpu_share'] or 0:.0%} of the CPUs; maya emulate "
              f"warned in {s['warned']} of {s['cases']}")
    RESULTS.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv), "gpu": GPU,
                                   "cpus": len(os.sched_getaffinity(0)), "summary": summary_rows, "runs": rows},
                                  indent=1) + "\n")
    print(f"saved {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
