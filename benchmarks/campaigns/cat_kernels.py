"""How long torch.cat's kernels take, by what they copy: the truth behind their estimates.

    python benchmarks/campaigns/cat_kernels.py OUT_DIR      (on the GPU machine: writes OUT_DIR/cat_kernels.json)
    python benchmarks/campaigns/cat_kernels.py --launch     (under maya emulate: each case's cats once)

A cat kernel (``CatArrayBatchedCopy`` and its forms) launches a few blocks per
SM whatever it copies, so its launch says nothing of its size; under emulation
the interposer reads its inputs' element counts from the metadata the kernel
takes by value (``emulation-image/src/kernel_args.c``), and the estimators
price it as a device-to-device copy of those bytes.  Each case here concatenates
inputs of the sizes a training step concatenates (a recommender's features, a
UNet's skip connections, a decoder's heads, many small tensors, the gradients a
split's backward joins), in fp32 and bf16, contiguous, channels-last,
transposed and sliced (the last two take the kernel's strided form); on the GPU, each case's cat runs
``REPEATS`` times under ``torch.profiler`` and its kernels' CUPTI durations are
kept (the median per kernel of the case), with the kernel names.  Under
emulation, ``--launch`` runs each case's cat once, with a device
synchronisation after each case, so that ``benchmarks/cat_estimates.py`` can
pair the emulated launches with the measured ones.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from statistics import median

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.campaigns.chrome_trace import profiler_events  # noqa: E402  (run from the repository root)

REPEATS = 20

# (name, shapes of the inputs, dim, dtype, layout: "" contiguous, "cl" channels-last, "t" the last two dimensions
# transposed, "half" the first half of the last dimension of a tensor twice as wide)
CASES: tuple[tuple[str, tuple[tuple[int, ...], ...], int, str, str], ...] = (
    ("rows-3", ((1000, 64), (24, 64), (4096, 64)), 0, "float32", ""),
    ("rows-2-small", ((64, 128), (64, 128)), 0, "float32", ""),
    ("rows-2-1m", ((1 << 20,), (1 << 20,)), 0, "float32", ""),
    ("rows-2-16m", ((1 << 24,), (1 << 24,)), 0, "float32", ""),
    ("rows-2-64m-bf16", ((1 << 26,), (1 << 26,)), 0, "bfloat16", ""),
    ("features-27", ((65536, 13),) + ((65536, 64),) * 26, 1, "float32", ""),
    ("features-27-b4096", ((4096, 13),) + ((4096, 64),) * 26, 1, "float32", ""),
    ("features-9-b16384", ((16384, 16),) + ((16384, 128),) * 8, 1, "float32", ""),
    ("pairs-b8192", ((8192, 1024), (8192, 1024)), 1, "bfloat16", ""),
    ("heads-16", ((8, 1024, 64),) * 16, 2, "bfloat16", ""),
    ("heads-12-fp32", ((32, 128, 64),) * 12, 2, "float32", ""),
    ("skip-64x32", ((8, 128, 32, 32), (8, 128, 32, 32)), 1, "bfloat16", ""),
    ("skip-64x64", ((64, 128, 64, 64), (64, 256, 64, 64)), 1, "float32", ""),
    ("skip-64x64-bf16", ((64, 128, 64, 64), (64, 256, 64, 64)), 1, "bfloat16", ""),
    ("skip-cl", ((32, 128, 56, 56), (32, 128, 56, 56)), 1, "bfloat16", "cl"),
    ("skip-cl-fp32", ((16, 64, 112, 112), (16, 32, 112, 112)), 1, "float32", "cl"),
    ("many-200", ((100,),) * 200, 0, "float32", ""),
    ("many-64-4k", ((4096,),) * 64, 0, "float32", ""),
    ("many-300-64k", ((65536,),) * 300, 0, "bfloat16", ""),
    ("last-3", ((4096, 4096, 1), (4096, 4096, 1), (4096, 4096, 1)), 2, "float32", ""),
    ("odd-3", ((1000, 3), (1000, 5), (1000, 7)), 1, "float32", ""),
    ("tokens-b64", ((64, 1, 768), (64, 196, 768)), 1, "bfloat16", ""),
    ("t-2", ((4096, 2048), (4096, 2048)), 0, "float32", "t"),
    ("t-3-bf16", ((8192, 1024),) * 3, 1, "bfloat16", "t"),
    ("t-2-small", ((256, 128), (256, 128)), 0, "float32", "t"),
    ("half-3-bf16", ((8192, 1024),) * 3, 0, "bfloat16", "half"),
    ("half-2-dim1", ((16384, 512), (16384, 512)), 1, "float32", "half"),
    ("half-4-heads", ((8, 1024, 16, 64),) * 4, 2, "bfloat16", "half"),
)


def inputs(case: tuple[tuple[int, ...], ...], dtype: str, layout: str) -> list[torch.Tensor]:
    def one(shape: tuple[int, ...]) -> torch.Tensor:
        if layout == "t":
            return torch.randn((*shape[:-2], shape[-1], shape[-2]), device="cuda", dtype=getattr(torch, dtype)).transpose(-1, -2)
        if layout == "half":
            return torch.randn((*shape[:-1], 2 * shape[-1]), device="cuda", dtype=getattr(torch, dtype))[..., :shape[-1]]
        t = torch.randn(shape, device="cuda", dtype=getattr(torch, dtype))
        return t.contiguous(memory_format=torch.channels_last) if layout == "cl" else t
    return [one(s) for s in case]


def launch() -> None:
    """Each case's cat once, a synchronisation after each (for pairing with the measured cases)."""
    for _, shapes, dim, dtype, layout in CASES:
        ts = inputs(shapes, dtype, layout)
        torch.cuda.synchronize()
        torch.cat(ts, dim=dim)
        torch.cuda.synchronize()
        del ts


def measure() -> list[dict]:
    rows = []
    for name, shapes, dim, dtype, layout in CASES:
        ts = inputs(shapes, dtype, layout)
        for _ in range(3):
            torch.cat(ts, dim=dim)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(REPEATS):
                torch.cat(ts, dim=dim)
            torch.cuda.synchronize()
        kernels = sorted((e for e in profiler_events(prof) if e.get("cat") == "kernel"), key=lambda e: e["ts"])
        per_cat = len(kernels) // REPEATS
        durations = [[1e3 * kernels[r * per_cat + k]["dur"] for r in range(REPEATS)] for k in range(per_cat)]
        rows.append({"case": name, "shapes": [list(s) for s in shapes], "dim": dim, "dtype": dtype,
                     "layout": layout, "kernels": [kernels[k]["name"] for k in range(per_cat)],
                     "kernel_ns": [median(d) for d in durations],
                     "spread": [(max(d) - min(d)) / median(d) for d in durations]})
        print(f"{name:20} {per_cat} kernel(s) {', '.join(f'{median(d) / 1e3:.1f}' for d in durations)} us", flush=True)
        del ts
    return rows


def main() -> int:
    if sys.argv[1:] == ["--launch"]:
        launch()
        return 0
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "repeats": REPEATS, "cases": measure()}
    (out / "cat_kernels.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
