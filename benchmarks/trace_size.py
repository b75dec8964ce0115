"""How large an emulation trace is, and how fast it reads back.

    .venv/bin/python benchmarks/trace_size.py [--steps 100]

Emulates examples/gpt.py (GPT-2 124M, batch 8, sequence 1024, bf16) for
--steps training steps on a virtual H100, then reports the trace's bytes,
records and bytes per step, and the reader's median load time over five
reads.  Appends the figures (date, machine, command) to
benchmarks/results/trace_size.jsonl.
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

from maya.predictor.trace import read_trace

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        cmd = [sys.executable, "-m", "maya.cli", "emulate", "--gpu", "H100-SXM-80GB", "--out", str(out), "--",
               sys.executable, str(ROOT / "examples" / "gpt.py"), "--steps", str(args.steps)]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
        wall = time.perf_counter() - t0
        path = out / "rank0.mayatrace"
        size = path.stat().st_size
        loads = []
        for _ in range(5):
            t = time.perf_counter()
            trace = read_trace(path)
            loads.append(time.perf_counter() - t)
        records = len(trace)
        kernels = trace.kind_counts().get("KERNEL", 0)
    result = {
        "benchmark": "trace_size",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs",
        "command": f"python benchmarks/trace_size.py --steps {args.steps}",
        "workload": "examples/gpt.py defaults (GPT-2 124M, batch 8, seq 1024, bf16, fused AdamW)",
        "steps": args.steps,
        "trace_bytes": size,
        "head_records": records,
        "kernel_launches": kernels,
        "bytes_per_step": size / args.steps,
        "emulation_wall_s": round(wall, 1),
        "load_seconds_median": round(statistics.median(loads), 4),
    }
    print(json.dumps(result, indent=2))
    results = ROOT / "benchmarks" / "results"
    results.mkdir(parents=True, exist_ok=True)
    with open(results / "trace_size.jsonl", "a") as f:
        f.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
