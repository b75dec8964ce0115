"""The device's own time between operations: how long after one kernel ends does the next begin?

    python benchmarks/campaigns/launch_gap.py OUT_DIR        (on the GPU machine)

The replay (maya.predictor.replay.simulator) puts a stream's operations back to back
when the host has queued them in time; on a real GPU each queued operation
still starts a little after the one before it ends (the front end fetching
and scheduling it), and an operation issued to an idle device starts a
little after its launch call returns.  A training step of 800 kernels that
keeps the device busy loses those gaps on every one of them.

Measured here with the device kept busy by a spin kernel while the host
queues N copies of an operation, then the N run back to back: the time per
operation between two events (no profiler), less the kernel's own duration
as CUPTI times it (torch.profiler, a second pass), is the gap.  The
profiler's own gaps (kernel start minus the previous end, and start minus
the launch call's return on an idle device) are saved beside them, for
comparing with the traces ``maya record`` takes, which run under CUPTI.
Also saved: the host's time per launch with n launches queued behind the spin
(past the launch queue's depth the host waits for the device).  Writes
OUT_DIR/launch_gap.json, committed as benchmarks/data/launch_gap/<GPU>.json,
where benchmarks/calibration/host.py takes the machine's launch latency and
gap from (the medians over the operations).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median

import torch
import torch.nn.functional as F

sys.path.insert(0, os.getcwd())
from benchmarks.campaigns.chrome_trace import profiler_events  # noqa: E402  (run from the repository root)

QUEUED = 200  # operations per batch: fewer than the launch queue holds (500 torch.mm of two kernels filled it)
BATCHES = 5
SPIN_CYCLES = 100_000_000  # ~50 ms of spinning: longer than the host needs to queue a batch
DEPTHS = (256, 512, 768, 1024, 1536, 2048, 4096)  # batch sizes tried for the launch queue's depth


def workloads() -> dict[str, Callable[[], object]]:
    """Operations of the kinds a training step is made of, small enough that gaps matter."""
    dev = torch.device("cuda")
    small, big = torch.randn(1024, device=dev), torch.randn(1 << 20, device=dev)
    a, b = torch.randn(256, 256, device=dev), torch.randn(256, 256, device=dev)
    out = torch.empty(256, 256, device=dev)
    x, w = torch.randn(64, 768, device=dev), torch.ones(768, device=dev)
    return {"add_1k": lambda: small.add_(1.0), "add_1m": lambda: big.mul_(1.0),
            "mm_256": lambda: torch.mm(a, b, out=out), "layer_norm": lambda: F.layer_norm(x, (768,), w, w),
            "softmax": lambda: torch.softmax(x, dim=-1)}


def queued_ns(op: Callable[[], object], n: int = QUEUED, check: bool = True) -> tuple[float, float]:
    """Device ns per operation with ``n`` of them queued behind a spin, and the host's ns to
    queue one."""
    spin, begin, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    torch.cuda.synchronize()
    spin.record()
    torch.cuda._sleep(SPIN_CYCLES)
    begin.record()
    t0 = time.perf_counter()
    for _ in range(n):
        op()
    host = time.perf_counter() - t0
    end.record()
    torch.cuda.synchronize()
    if check and host * 1e3 > spin.elapsed_time(begin):
        raise RuntimeError(f"queuing took {host * 1e3:.1f} ms, longer than the spin: raise SPIN_CYCLES")
    return begin.elapsed_time(end) * 1e6 / n, host * 1e9 / n


def queue_depth(op: Callable[[], object]) -> dict[int, float]:
    """Host ns per launch when ``n`` launches are queued behind a spin, by n: past the depth of the
    launch queue the host waits for the device to drain it."""
    return {n: median(queued_ns(op, n, check=False)[1] for _ in range(3)) for n in DEPTHS}


def profiled(op: Callable[[], object]) -> dict[str, float]:
    """One queued batch and 200 lone launches under torch.profiler (CUPTI): the kernels' median
    duration, their median gap when queued, and the median delay from a lone launch call's return
    to its kernel's start."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        per_op, _ = queued_ns(op)
        for _ in range(200):
            torch.cuda.synchronize()
            op()
        torch.cuda.synchronize()
    events = profiler_events(prof)
    kernels = sorted((e for e in events if e.get("cat") == "kernel" and e["dur"] < 1e4), key=lambda e: e["ts"])
    launches = {e["args"].get("correlation"): e for e in events if e.get("cat") == "cuda_runtime"}
    queued, lone = kernels[:QUEUED], kernels[QUEUED:]
    gaps = [b["ts"] - (a["ts"] + a["dur"]) for a, b in zip(queued[:-1], queued[1:], strict=True)]
    latency = [k["ts"] - (c["ts"] + c["dur"]) for k in lone
               if (c := launches.get(k["args"].get("correlation"))) is not None]
    return {"kernel_ns": 1e3 * median(k["dur"] for k in kernels), "profiled_per_op_ns": per_op,
            "profiled_gap_ns": 1e3 * median(gaps), "profiled_latency_ns": 1e3 * median(latency) if latency else None,
            "kernels_per_op": len(kernels) / (QUEUED + 200)}


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, op in workloads().items():
        for _ in range(20):
            op()  # warm up: handles, caches, autotuning
        runs = [queued_ns(op) for _ in range(BATCHES)]
        per_op = median(r[0] for r in runs)
        host = median(r[1] for r in runs)
        prof = profiled(op)
        row = {"op": name, "per_op_ns": per_op, "host_ns_per_op": host, **prof,
               "gap_ns": per_op / prof["kernels_per_op"] - prof["kernel_ns"]}
        rows.append(row)
        print(f"{name:11} per op {per_op:8.0f} ns  kernel {prof['kernel_ns']:8.0f} ns  gap {row['gap_ns']:6.0f} ns  "
              f"(CUPTI: per op {prof['profiled_per_op_ns']:8.0f}, gap {prof['profiled_gap_ns']:6.0f}, "
              f"latency {prof['profiled_latency_ns'] or 0:6.0f})  host {host:6.0f} ns/op", flush=True)
    depth = queue_depth(workloads()["add_1k"])
    print("host ns per launch, by launches queued:", {n: round(v) for n, v in depth.items()})
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "queued": QUEUED, "ops": rows,
              "host_ns_per_launch_by_queued": depth,
              "gap_ns": median(r["gap_ns"] for r in rows),
              "profiled_gap_ns": median(r["profiled_gap_ns"] for r in rows)}
    (out / "launch_gap.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "ops"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
