#!/usr/bin/env python3
"""NCCL collectives timed on the GPUs of one host: what predictor/replay/network.py is checked against.

Runs on a GPU machine in one call, with the machine's own torch:

    torchrun --nproc-per-node 2 benchmarks/campaigns/collective_campaign.py --out "$OUT"

For each operation (all-reduce, all-gather, reduce-scatter, and a send from
rank 0 received by rank 1, as a pipeline stage does) and each size from 8 B
to 1 GiB it times, like nccl-tests, a loop of back-to-back calls on one
stream between two CUDA events, after a warm-up, several times over, and
keeps every trial.  ``bytes`` is what each rank's send buffer holds, as in
the emulated trace's COLL records (all-gather: one rank's part;
reduce-scatter: the whole buffer).  float32, NCCL's defaults (no NCCL_*
variable is set).  Rank 0 writes ``collectives.json``: the GPU, NCCL and
torch versions, ``nvidia-smi topo -m``, and one row per (op, bytes) with the
trials' per-call seconds, their median, and nccl-tests' algorithm and bus
bandwidths.

Under ``maya emulate --gpus-per-node 2 -- torchrun ...`` it runs against
the emulated GPUs, which checks its plumbing on a CPU (the times are then
meaningless).
"""
import argparse
import json
import os
import subprocess
import time

import torch
import torch.distributed as dist

OPS = ("all_reduce", "all_gather", "reduce_scatter", "send_recv")
SIZES = [8 * 4 ** i for i in range(14)] + [2 ** 30]   # 8 B, 32 B, ... 512 MiB, 1 GiB
WARMUP = 5
TRIALS = 5
SPIN_CYCLES = 20_000_000   # about 10 ms at 2 GHz: longer than issuing a trial's calls


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw: what each rank's links carry relative to the buffer."""
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n,
            "reduce_scatter": (n - 1) / n}.get(op, 1.0)


def make_call(op: str, nbytes: int, rank: int, n: int, dev: torch.device):
    count = max(nbytes // 4, 1)
    if op == "all_reduce":
        buf = torch.ones(count, device=dev)
        return lambda: dist.all_reduce(buf)
    if op == "all_gather":
        part, out = torch.ones(count, device=dev), torch.empty(count * n, device=dev)
        return lambda: dist.all_gather_into_tensor(out, part)
    if op == "reduce_scatter":
        count = max(count // n, 1) * n
        whole, part = torch.ones(count, device=dev), torch.empty(count // n, device=dev)
        return lambda: dist.reduce_scatter_tensor(part, whole)
    buf = torch.ones(count, device=dev)
    if rank == 0:
        return lambda: dist.send(buf, 1)
    if rank == 1:
        return lambda: dist.recv(buf, 0)
    return lambda: None


def iterations(nbytes: int) -> int:
    """Enough calls that a trial spans well over the events' resolution, few for the big sizes."""
    return 50 if nbytes <= 1 << 20 else max(5, 50 * (1 << 20) // nbytes)


def time_op(op: str, nbytes: int, rank: int, n: int, dev: torch.device) -> list[float]:
    call = make_call(op, nbytes, rank, n, dev)
    iters = iterations(nbytes)
    for _ in range(WARMUP):
        call()
    torch.cuda.synchronize()
    trials = []
    for _ in range(TRIALS):
        dist.barrier()
        torch.cuda.synchronize()
        # The host issues a call in tens of microseconds; queued behind a spinning kernel, the
        # calls run back to back and the events time the device alone.
        torch.cuda._sleep(SPIN_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            call()
        end.record()
        end.synchronize()
        trials.append(start.elapsed_time(end) / 1e3 / iters)
    return trials


def versions() -> dict:
    info = {"gpu": torch.cuda.get_device_name(0), "gpus": torch.cuda.device_count(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version()))}
    for key, cmd in (("driver", ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
                     ("topology", ["nvidia-smi", "topo", "-m"])):
        try:
            info[key] = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            info[key] = f"unavailable: {e}"
    return info


def save(out: str | None, info: dict, n: int, t0: float, rows: list[dict]) -> None:
    """Written after every size, so a run cut short keeps what it measured."""
    if not out:
        return
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, "collectives.json.tmp")
    with open(tmp, "w") as f:
        json.dump({**info, "world_size": n, "dtype": "float32", "warmup": WARMUP, "trials": TRIALS,
                   "wall_s": round(time.monotonic() - t0, 1), "rows": rows}, f, indent=1)
    os.replace(tmp, os.path.join(out, "collectives.json"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT"), help="output folder (default $OUT)")
    p.add_argument("--ops", default=",".join(OPS), help="comma-separated subset of " + ",".join(OPS))
    p.add_argument("--max-bytes", type=int, default=SIZES[-1], help="largest size (default 1 GiB)")
    p.add_argument("--budget-s", type=float, default=120.0, help="stop starting sizes after this")
    a = p.parse_args()
    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    n = dist.get_world_size()
    info = versions() if rank == 0 else {}
    t0 = time.monotonic()
    rows = []
    for op in a.ops.split(","):
        for nbytes in sorted(s for s in SIZES if s <= a.max_bytes):
            # Every rank must agree on whether to go on, or the next collective hangs.
            go = torch.tensor([float(time.monotonic() - t0 < a.budget_s)], device=dev)
            dist.all_reduce(go, op=dist.ReduceOp.MIN)
            if not go.item():
                break
            trials = time_op(op, nbytes, rank, n, dev)
            med = sorted(trials)[len(trials) // 2]
            algbw = nbytes * (n if op == "all_gather" else 1) / med if med > 0 else None
            rows.append({"op": op, "bytes": nbytes, "ranks": n, "iterations": iterations(nbytes),
                         "seconds": trials, "median_s": med, "algbw_GBs": algbw and algbw / 1e9,
                         "busbw_GBs": algbw and algbw * bus_factor(op, n) / 1e9})
            if rank == 0:
                save(a.out, info, n, t0, rows)
                print(f"{op:15s} {nbytes:>11d} B {med * 1e6:10.1f} us  busbw "
                      f"{(rows[-1]['busbw_GBs'] or 0):7.1f} GB/s", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
