"""Speed of ``maya predict``: its wall time on the GPT-2 example, and the replay's records per second.

    .venv/bin/python benchmarks/predict_speed.py [--repeat R] [--ranks N]

1. ``maya predict --gpu H100-SXM-80GB --json -- python examples/gpt.py``
   (GPT-2 124M, batch 8, sequence 1024, the example's default steps) in a
   fresh process: once cold (empty estimator and numba caches, as after an
   install: the estimators are fitted and the replay compiled), then R times
   warm; the target is under 60 s.
2. The fit of the committed H100 tables alone (``estimators.load`` into an
   empty cache, in this process): the target is under 120 s.
3. The replay alone (``maya predict``'s :meth:`maya.predict.Job.replay`, with
   the estimated durations and the calibrated host) over that run's trace and over an emulated DDP run of
   N ranks (``examples/ddp.py``), R times each: the median records per second,
   counting the records replayed (all but strings, names and continuation
   slots); the target is 1 million.

Prints the figures and saves them to ``benchmarks/results/predict_speed.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from maya.predict import prepare
from maya.predictor import estimate as estimators
from maya.predictor.replay.host import host_model
from maya.predictor.replay.simulator import replay_order

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "predict_speed.json"
GPU = "H100-SXM-80GB"


def predict_wall(out: Path, env: dict[str, str]) -> float:
    """Seconds of one ``maya predict`` of the GPT-2 example, in a fresh process."""
    cmd = [sys.executable, "-m", "maya", "predict", "--gpu", GPU, "--json", "--out", str(out), "--",
           sys.executable, "examples/gpt.py"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"maya predict failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return wall


def emulate_ddp(out: Path, ranks: int) -> Path:
    script = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
              "examples/ddp.py", "--steps", "6"]
    cmd = [sys.executable, "-m", "maya", "emulate", "--gpu", GPU, "--gpus-per-node", str(ranks), "--out", str(out),
           "--", *script]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise SystemExit(f"emulating {ranks} DDP ranks failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return out


def replay_rate(folder: Path, repeat: int) -> dict[str, float]:
    """Median records replayed per second over ``repeat`` replays of the traces in ``folder``."""
    job, host = prepare(folder, GPU), host_model(GPU)
    traces = job.traces
    job.replay(host)  # load the compiled replay
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        job.replay(host)
        times.append(time.perf_counter() - t0)
    replayed = sum(len(replay_order(t)) for t in traces)
    med = statistics.median(times)
    return {"ranks": len(traces), "records": sum(len(t.records) for t in traces), "replayed": replayed,
            "median_s": med, "records_per_s": replayed / med}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=8, help="ranks of the emulated DDP run replayed")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cold_env = {**os.environ, "MAYA_CACHE_DIR": str(work / "maya-cache"), "NUMBA_CACHE_DIR": str(work / "numba")}
        cold = predict_wall(work / "gpt", cold_env)
        print(f"maya predict GPT-2 (b8 s1024), cold caches: {cold:.1f} s")
        warm = [predict_wall(work / "gpt", cold_env) for _ in range(args.repeat)]
        print(f"maya predict GPT-2, warm: median {statistics.median(warm):.1f} s of {args.repeat} "
              f"({', '.join(f'{w:.1f}' for w in warm)})")
        fit = estimators.load(GPU, cache=work / "fit").fit_seconds
        print(f"fitting the committed {GPU} tables: {fit:.1f} s")
        rates = {"gpt": replay_rate(work / "gpt", max(args.repeat, 5)),
                 f"ddp-{args.ranks}": replay_rate(emulate_ddp(work / "ddp", args.ranks), max(args.repeat, 5))}
    for name, r in rates.items():
        print(f"replay {name}: {r['replayed']} records of {r['ranks']} rank(s) in {r['median_s'] * 1e3:.2f} ms: "
              f"{r['records_per_s'] / 1e6:.2f} M records/s")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "command": " ".join(["benchmarks/predict_speed.py", *(argv if argv is not None else sys.argv[1:])]),
        "predict_cold_s": cold, "predict_warm_s": warm, "predict_warm_median_s": statistics.median(warm),
        "fit_s": fit, "replay": rates}, indent=1) + "\n")
    print(f"saved {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
