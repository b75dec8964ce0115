#!/usr/bin/env python3
"""Device and host time of cuDNN RNN calls (torch's nn.LSTM and nn.GRU), forward and backward, over a grid of sizes.

Runs on a GPU machine with its own python3 and torch (about four minutes):

    python3 benchmarks/campaigns/rnn_sweep.py --out "$OUT/rnn_sweep.json"

and, unchanged, under emulation (``maya emulate --out DIR -- python3
benchmarks/campaigns/rnn_sweep.py --emulated``: one call of each, no timing),
so that each configuration's ``rnn_fwd``, ``rnn_bwd_data`` and
``rnn_bwd_weights`` records can be set beside its measured times (what
``docs/prediction.md`` reports was compared so; no estimator reads the
sweep yet).

Record mode does not see cuDNN's RNN calls as calls (it keeps their inner
kernels, which cuDNN spreads over several streams), so the sweep times each
call as the training step waits for it: CUDA events around the module's
forward, and around the backward of its output (``rnn_bwd_data`` and
``rnn_bwd_weights`` together), the median of ``--reps`` after ``--warmup``:
once queued behind a spinning kernel (the device's own time, the host
ahead) and once from an idle device (the host's launches may set the pace),
with the host's own time of each call.
The input requires its gradient, as an RNN after an embedding or another layer
does.  Inter-layer dropout 0.2 where there are several layers.
"""
import argparse
import itertools
import json
import platform
import statistics
import time

import torch

MODES = ("lstm", "gru")
LAYERS = (1, 2, 3)
HIDDEN = (256, 512, 1024, 2048)
BATCH = (16, 64, 128)
SEQ = (32, 128)
# About 50 ms of spinning at the H100's clock: the host queues every kernel of a call before the device
# reaches them (up to the launch queue's depth, about a thousand).
SPIN_CYCLES = 100_000_000
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def configs() -> list[dict[str, object]]:
    return [{"mode": m, "layers": n, "hidden": h, "input": h, "batch": b, "seq": s, "dtype": d}
            for d, m, n, h, b, s in itertools.product(DTYPES, MODES, LAYERS, HIDDEN, BATCH, SEQ)]


def time_config(c: dict[str, object], warmup: int, reps: int) -> dict[str, float]:
    """Median times (ms) of one configuration's forward and backward: on the device with the host ahead
    (``fwd_ms``, ``bwd_ms``: the calls queued behind a spinning kernel), on the device from an idle GPU
    (``fwd_idle_ms``, ``bwd_idle_ms``) and on the host (``fwd_host_ms``, ``bwd_host_ms``: the calls'
    own time, with the GPU busy); none under emulation (reps 0)."""
    cls = torch.nn.LSTM if c["mode"] == "lstm" else torch.nn.GRU
    dtype = DTYPES[str(c["dtype"])]
    layers = int(c["layers"])
    rnn = cls(int(c["input"]), int(c["hidden"]), layers, dropout=0.2 if layers > 1 else 0.0, device="cuda", dtype=dtype)
    x = torch.randn(int(c["seq"]), int(c["batch"]), int(c["input"]), device="cuda", dtype=dtype, requires_grad=True)
    grad = torch.randn(int(c["seq"]), int(c["batch"]), int(c["hidden"]), device="cuda", dtype=dtype)
    samples: dict[str, list[float]] = {k: [] for k in ("fwd", "bwd", "fwd_idle", "bwd_idle", "fwd_host", "bwd_host")}
    for i in range(warmup + max(reps, 1)):
        for ahead in (True, False):
            torch.cuda.synchronize()
            if ahead and reps:
                torch.cuda._sleep(SPIN_CYCLES)
            e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            e[0].record()
            t0 = time.perf_counter()
            out, _ = rnn(x)
            t1 = time.perf_counter()
            e[1].record()
            t2 = time.perf_counter()
            out.backward(grad)
            t3 = time.perf_counter()
            e[2].record()
            torch.cuda.synchronize()
            if reps and i >= warmup:
                tag = "" if ahead else "_idle"
                samples["fwd" + tag].append(e[0].elapsed_time(e[1]))
                samples["bwd" + tag].append(e[1].elapsed_time(e[2]))
                if ahead:
                    samples["fwd_host"].append((t1 - t0) * 1e3)
                    samples["bwd_host"].append((t3 - t2) * 1e3)
            rnn.zero_grad(set_to_none=True)
            x.grad = None
            if not reps:
                break
    if not reps:
        return {}
    out_ = {k + "_ms": statistics.median(v) for k, v in samples.items()}
    out_.update({k + "_spread": (max(v) - min(v)) / statistics.median(v) for k, v in samples.items()})
    return out_


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON to write (not under --emulated)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--emulated", action="store_true", help="one call of each configuration, untimed")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = False
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
               "cudnn": torch.backends.cudnn.version(), "cpu": platform.processor() or platform.machine(),
               "tf32": torch.backends.cudnn.allow_tf32, "warmup": args.warmup, "reps": args.reps, "cases": []}
    for c in configs():
        t = time_config(c, 0 if args.emulated else args.warmup, 0 if args.emulated else args.reps)
        results["cases"].append({**c, **t})
        if t:
            print(f"{c} device fwd {t['fwd_ms']:.3f} bwd {t['bwd_ms']:.3f}, idle {t['fwd_idle_ms']:.3f} "
                  f"{t['bwd_idle_ms']:.3f}, host {t['fwd_host_ms']:.3f} {t['bwd_host_ms']:.3f} ms", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
