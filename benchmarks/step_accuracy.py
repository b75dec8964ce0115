"""Predicted step time against the step time measured on real GPUs.

    python benchmarks/step_accuracy.py [--only NAME,...] [--work DIR]

Ground truth: benchmarks/data/gpu_fidelity/ (the examples, fresh processes,
on an H100 at default and held-out sizes, and on 2 x H200 with DDP), whose
steady step is the median over the unprofiled runs of each run's median of
steps 2 and later (step 0 warms up; step 1 still rebuilds DDP buckets or
autotunes).  Each configuration is emulated here with the same arguments,
then predicted with `maya predict`'s code (estimators of the measured GPU,
the replay, the collective model).  The oracle column replays the trace
recorded on the H100 by the profiling campaign
(benchmarks/data/profile_campaign/H100-SXM-80GB/examples.tar.xz; `--steps
3`, a different process than the ground truth's) with its measured device
times and host delays: the replay's own error.  Saves
benchmarks/results/step_accuracy.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.archives import extract_all  # noqa: E402
from maya.predict import PredictError, predict_folder  # noqa: E402

TRUTH = ROOT / "benchmarks" / "data" / "gpu_fidelity"
CASES = {  # name -> (ground-truth file, GPU, processes, campaign job with a recorded trace)
    "gpt": ("H100-SXM-80GB/gpt.json", "H100-SXM-80GB", 1, "example-gpt"),
    "bert": ("H100-SXM-80GB/bert.json", "H100-SXM-80GB", 1, "example-bert"),
    "cnn": ("H100-SXM-80GB/cnn.json", "H100-SXM-80GB", 1, "example-cnn"),
    "recommender": ("H100-SXM-80GB/recommender.json", "H100-SXM-80GB", 1, "example-recommender"),
    "gpt-d128": ("H100-SXM-80GB-held-out/gpt-d128.json", "H100-SXM-80GB", 1, "held-out-gpt-d128"),
    "bert-large": ("H100-SXM-80GB-held-out/bert-large.json", "H100-SXM-80GB", 1, "held-out-bert-large"),
    "cnn-wide": ("H100-SXM-80GB-held-out/cnn-wide.json", "H100-SXM-80GB", 1, "held-out-cnn-wide"),
    "recommender-wide": ("H100-SXM-80GB-held-out/recommender-wide.json", "H100-SXM-80GB", 1,
                         "held-out-recommender-wide"),
    "ddp-2xH200": ("H200-SXM-141GB/ddp.json", "H200-SXM-141GB", 2, None),
}
STEADY_FROM = 2


def pct(x: float | None) -> str:
    return "   -   " if x is None else f"{100 * x:+6.1f}%"


def measured(path: Path) -> tuple[float, float, int]:
    """(median steady step s, run-to-run spread (max - min) / median, runs) over the unprofiled runs."""
    d = json.loads(path.read_text())
    per_run = []
    for run in d["runs"]:
        if run.get("profiled") or not run.get("results"):
            continue
        steps = [s for res in run["results"] for s in res["step_times_s"][STEADY_FROM:]]
        per_run.append(median(steps))
    m = median(per_run)
    return m, (max(per_run) - min(per_run)) / m, len(per_run)


def emulate(argv: list[str], gpu: str, nproc: int, out: Path) -> None:
    script = [sys.executable, *argv] if nproc == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *argv]
    cmd = [sys.executable, "-m", "maya", "emulate", "--gpu", gpu, "--gpus-per-node", str(max(nproc, 1)),
           "--out", str(out), "--", *script]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"emulating {argv} failed ({p.returncode}):\n{p.stderr[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="case names, comma-separated")
    ap.add_argument("--work", type=Path, default=None)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-step-accuracy-"))
    recorded = work / "recorded"
    if not recorded.is_dir():
        extract_all(ROOT / "benchmarks/data/profile_campaign/H100-SXM-80GB", recorded, ("example", "held-out"))
    wanted = set(filter(None, a.only.split(",")))
    rows: list[dict[str, Any]] = []
    for name, (truth, gpu, nproc, job) in CASES.items():
        if wanted and name not in wanted:
            continue
        meas, spread, runs = measured(TRUTH / truth)
        argv = json.loads((TRUTH / truth).read_text())["argv"]
        out = work / "emulated" / name
        if not (out / "summary.json").is_file():
            emulate(argv, gpu, nproc, out)
        t0 = time.perf_counter()
        row: dict[str, Any] = {"case": name, "gpu": gpu, "processes": nproc, "argv": argv,
                               "measured_s": meas, "spread": spread, "runs": runs}
        try:
            p = predict_folder(out, gpu, gpus_per_node=max(nproc, 1))
            row.update(predicted_s=p.step_time_s, error=p.step_time_s / meas - 1, breakdown=p.breakdown,
                       predict_wall_s=time.perf_counter() - t0)
        except PredictError as e:
            row.update(predicted_s=None, error=None, note=str(e))
        if job and (recorded / job).is_dir():
            try:
                o = predict_folder(recorded / job, gpu, oracle=True)
                row.update(oracle_s=o.step_time_s, oracle_error=o.step_time_s / meas - 1)
            except PredictError as e:
                row.update(oracle_s=None, oracle_error=None, oracle_note=str(e))
        rows.append(row)
        print(f"{name:18} {gpu:15} measured {meas * 1e3:8.2f} ms (spread {100 * spread:4.1f}%, {runs} runs)  "
              f"predicted {(row.get('predicted_s') or 0) * 1e3:8.2f} ms {pct(row.get('error'))}  "
              f"oracle {pct(row.get('oracle_error'))}", flush=True)
    errors = [abs(r["error"]) for r in rows if r.get("error") is not None]
    oracle = [abs(r["oracle_error"]) for r in rows if r.get("oracle_error") is not None]
    summary = {"median_abs_error": median(errors) if errors else None, "max_abs_error": max(errors, default=None),
               "oracle_median_abs_error": median(oracle) if oracle else None}
    print(json.dumps(summary))
    path = ROOT / "benchmarks" / "results" / "step_accuracy.json"
    path.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "command": "python benchmarks/step_accuracy.py",
                                "summary": summary, "cases": rows}, indent=1) + "\n")
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
