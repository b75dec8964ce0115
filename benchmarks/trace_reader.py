"""Load time of the trace reader on a synthetic trace of one million records.

    .venv/bin/python benchmarks/trace_reader.py [--records N] [--repeat R]

Writes a trace like an emulated run's (kernel launches with three extra words
in a continuation slot, BLAS calls, allocations, a few thousand kernel-name
strings), reads it back R times, prints the median time and appends the result
(date, machine, command) to benchmarks/results/trace_reader.jsonl.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from maya.predictor.trace import SLOT_DTYPE, Kind, TraceWriter, read_trace


def build(path: Path, n: int, n_strings: int = 2000) -> int:
    """Write a trace with n head records; returns the slot count."""
    w = TraceWriter(rank=0, world_size=1, gpu_name="H100-SXM-80GB", num_devices=1)
    for i in range(n_strings):
        w.string(f"void at::native::vectorized_elementwise_kernel<4, at::native::Fn{i}>(int, Fn{i})")
    n -= n_strings
    # Every kernel record carries one continuation slot (block dims etc.).
    kernels = n // 2
    others = n - kernels
    rng = np.random.default_rng(0)
    heads = np.zeros(n, SLOT_DTYPE)
    heads["kind"][:kernels] = Kind.KERNEL
    heads["kind"][kernels:] = rng.choice([Kind.BLAS, Kind.MALLOC, Kind.FREE, Kind.MEMCPY], others)
    heads["t_ns"] = np.arange(n, dtype=np.uint64) * 1000
    heads["dur_ns"] = 200
    heads["a"][:, 0] = rng.integers(1, n_strings + 1, n)
    rng.shuffle(heads)
    is_kernel = heads["kind"] == Kind.KERNEL
    slots = np.zeros(n + int(is_kernel.sum()), SLOT_DTYPE)
    pos = np.arange(n) + np.concatenate(([0], np.cumsum(is_kernel)[:-1]))
    slots[pos] = heads
    cont = pos[is_kernel] + 1
    slots["kind"][cont] = Kind.CONT
    slots["t_ns"][cont] = 128  # first continuation word
    w.extend(slots)
    w.write(path)
    return len(slots) + n_strings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-save", action="store_true", help="do not append to benchmarks/results")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rank0.mayatrace"
        slots = build(path, args.records)
        size = path.stat().st_size
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            t = read_trace(path)
            times.append(time.perf_counter() - t0)
        assert len(t) == args.records, (len(t), args.records)
        _ = t.ext(int(t.of_kind(Kind.KERNEL)[0]))
    result = {
        "benchmark": "trace_reader",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, {platform.processor() or platform.platform()}",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "records": args.records,
        "slots": slots,
        "file_bytes": size,
        "load_seconds_median": round(statistics.median(times), 4),
        "load_seconds_best": round(min(times), 4),
        "load_seconds_all": [round(x, 4) for x in times],
    }
    print(f"read_trace: {args.records} records ({size / 2**20:.0f} MiB) in {statistics.median(times) * 1000:.0f} ms (median of {args.repeat})")
    if not args.no_save:
        out = Path(__file__).parent / "results" / "trace_reader.jsonl"
        out.parent.mkdir(exist_ok=True)
        with out.open("a") as f:
            f.write(json.dumps(result) + "\n")
        print(f"saved to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
