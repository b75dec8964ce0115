#!/usr/bin/env python3
"""The workspace cuDNN's chosen convolution asks the allocator for, over layouts, types and channel counts.

A convolution's workspace is device memory held while it runs, so it can set
a job's peak (the held-out diffusion UNet peaks inside its last convolution,
3 output channels in NCHW, whose plan asks 68 MiB: ``benchmarks/data/memory_peak/``).
For each configuration, with ``cudnn.benchmark`` on as training scripts set
it, the forward and the backward of one ``nn.Conv2d`` are run once to let
autotuning choose, then once more with the allocator's history on: the
blocks allocated and freed inside each call are its transient memory.

Runs unchanged on a GPU and under emulation, so the two can be compared:

    python3 benchmarks/campaigns/conv_workspace.py --out conv_workspace.json
    maya emulate --gpu H100-SXM-80GB --out DIR -- python benchmarks/campaigns/conv_workspace.py --out emulated.json
"""
from __future__ import annotations

import argparse
import json
import platform

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

# (batch, in channels, out channels, kernel, image size, stride); every one in every layout and type below
SHAPES = [
    (64, 128, 3, 3, 64, 1),    # a UNet's output convolution
    (64, 3, 128, 3, 64, 1),    # a UNet's stem
    (64, 128, 128, 3, 64, 1),
    (64, 256, 256, 3, 32, 1),
    (64, 64, 4, 3, 64, 1),
    (64, 4, 64, 3, 64, 1),
    (64, 96, 96, 1, 56, 1),
    (32, 3, 64, 7, 224, 2),    # a ResNet stem
    (64, 12, 24, 3, 32, 1),
]
LAYOUTS = ["nchw", "nhwc"]


def transient(fn) -> list[int]:
    """Sizes of the blocks allocated and freed again while ``fn`` ran (its workspace)."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=100_000)
    fn()
    torch.cuda.synchronize()
    events = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
    torch.cuda.memory._record_memory_history(enabled=None)
    live: dict[int, int] = {}
    freed: list[int] = []
    for e in events:
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
        elif e["action"] == "free_completed" and e["addr"] in live:
            freed.append(live.pop(e["addr"]))
    return sorted(freed, reverse=True)


def measure(shape: tuple[int, ...], layout: str, dtype: str) -> dict:
    n, c, k, r, size, stride = shape
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    conv = torch.nn.Conv2d(c, k, r, stride=stride, padding=r // 2, bias=False).cuda().to(DTYPES[dtype])
    conv = conv.to(memory_format=fmt)
    x = torch.randn(n, c, size, size, device="cuda", dtype=DTYPES[dtype]).to(memory_format=fmt)
    x.requires_grad_(True)
    for _ in range(2):  # autotuning picks its plans on the first call
        y = conv(x)
        g = torch.ones_like(y)
        y.backward(g)
    x.grad = conv.weight.grad = None
    out: dict = {}
    out["forward"] = transient(lambda: out.__setitem__("y", conv(x)))
    y = out.pop("y")
    g = torch.ones_like(y)
    out["backward"] = transient(lambda: y.backward(g))
    return {"shape": dict(zip(("n", "c", "k", "r", "size", "stride"), shape, strict=True)), "layout": layout,
            "dtype": dtype, **out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=sorted(DTYPES), action="append",
                    help="only these types (repeatable; default: all)")
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    rows = [measure(s, lay, dt) for s in SHAPES for lay in LAYOUTS for dt in (a.dtype or DTYPES)]
    doc = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "host": platform.node(), "rows": rows}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    for r in rows:
        print(r["layout"], r["dtype"], tuple(r["shape"].values()), "fwd", r["forward"][:4], "bwd", r["backward"][:4])


if __name__ == "__main__":
    main()
