"""Calibrates the replay's host model: how much longer the GPU server's host takes per step.

    python benchmarks/host_calibration.py [--work DIR]

For every configuration measured on a GPU machine (benchmarks/step_truth.py's
data: the host's time to issue each step, fresh processes), the same command
is emulated here and its host delay per steady step is summed
(:func:`maya.predictor.host.step_host_delays_ns`).  The machine's factor is
the median ratio of the two; each configuration's residual is taken with the
factor fitted on the other example models (leave one model out), which is
the error to expect for a model the calibration never saw.  Writes
predictor/host_calibration.json (what ``maya predict`` uses) and
benchmarks/results/host_calibration.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.step_truth import DATA, emulate, measured  # noqa: E402
from maya.predictor.host import CALIBRATION, fit_slowdown, step_host_delays_ns  # noqa: E402
from maya.predictor.trace import read_trace  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "host_calibration.json"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").is_file() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=None, help="emulations kept here (reused when present)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-host-calibration-"))
    machines, report = {}, {}
    for gpu in sorted(p.name for p in DATA.iterdir() if p.is_dir()):
        rows = []
        for m in measured(gpu):
            if m.processes != 1 or not m.host_s:
                continue
            out = emulate(m.argv, gpu, 1, work / gpu / m.name)
            emulated = median(step_host_delays_ns(read_trace(out / "rank0.mayatrace"))) / 1e9
            rows.append({"name": m.name, "family": m.family, "measured_host_s": median(m.host_s),
                         "host_runs": len(m.host_s), "emulated_host_delay_s": emulated})
        slowdown = fit_slowdown([r["measured_host_s"] for r in rows], [r["emulated_host_delay_s"] for r in rows])
        for r in rows:
            others = [o for o in rows if o["family"] != r["family"]]
            f = fit_slowdown([o["measured_host_s"] for o in others], [o["emulated_host_delay_s"] for o in others])
            r["slowdown_without_model"] = f
            r["error"] = f * r["emulated_host_delay_s"] / r["measured_host_s"] - 1
            print(f"{gpu:15} {r['name']:18} server host {r['measured_host_s'] * 1e3:6.2f} ms  emulated delays "
                  f"{r['emulated_host_delay_s'] * 1e3:5.2f} ms  ratio {r['measured_host_s'] / r['emulated_host_delay_s']:4.2f}"
                  f"  leave-one-model-out error {100 * r['error']:+6.1f}%", flush=True)
        errors = [abs(r["error"]) for r in rows]
        summary = {"slowdown": slowdown, "configs": len(rows), "median_abs_error": median(errors),
                   "max_abs_error": max(errors)}
        print(f"{gpu}: slowdown {slowdown:.2f} over {len(rows)} configurations; host time error, leave one model "
              f"out: median {100 * summary['median_abs_error']:.1f}%, max {100 * summary['max_abs_error']:.1f}%")
        machines[gpu] = {"slowdown": round(slowdown, 3), "configs": len(rows)}
        report[gpu] = {"summary": summary, "configs": rows}
    emulating = {"cpu": cpu_model(), "cpus": len(os.sched_getaffinity(0))}
    CALIBRATION.write_text(json.dumps({
        "about": "Host slowdown per catalog machine: the GPU server's host time per step over the host delays "
                 "emulated on the CPU below (benchmarks/host_calibration.py).",
        "emulating_cpu": emulating, "date": time.strftime("%Y-%m-%d"), "machines": machines}, indent=1) + "\n")
    RESULTS.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "command": "python benchmarks/host_calibration.py",
                                   "emulating_cpu": emulating, "machines": report}, indent=1) + "\n")
    print(f"saved {CALIBRATION} and {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
