"""Fused AdamW's launches over a model's parameters against the memory sweep's lists (GPU machine).

    OUT=DIR python3 benchmarks/campaigns/fused_adamw_sizes.py

The memory sweep's bf16 fused AdamW took about 225 us a full launch (320 blocks) where a Llama's
parameters took 127 us.  Per launch (torch.profiler), three steps each: a Llama-sized parameter list
as it is, with one element more per tensor, with four more; and the sweep's three largest fused AdamW
operations, as the sweep runs them and after five more steps.  Writes adamw_probe.json (each case's
launches in order: duration in us, grid).  Result: a tensor whose size is no multiple of 4 takes the
kernel off its vectorised path (benchmarks/data/fused_adamw_sizes/).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.campaigns.chrome_trace import profiler_events  # noqa: E402  (run from the repository root)
from benchmarks.campaigns.profiling import sweep  # noqa: E402

Launch = tuple[float, list[int] | None]


def launches(step: Callable[[], object], calls: int) -> list[Launch]:
    """The fused AdamW launches of ``calls`` calls of ``step``, in order: (duration us, grid)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            step()
        torch.cuda.synchronize()
    found = sorted((e["ts"], e["dur"], e.get("args", {}).get("grid")) for e in profiler_events(prof)
                   if e.get("cat") == "kernel" and "adam" in e.get("name", "").lower())
    return [(round(d, 1), g) for _, d, g in found]


def llama_shapes(dim: int = 1024, ffn: int = 2816, vocab: int = 32000, layers: int = 12, kv_heads: int = 4,
                 heads: int = 16) -> list[tuple[int, ...]]:
    """The parameters of benchmarks/held_out/workloads/compiled_llama.py at its suite size."""
    kv = kv_heads * dim // heads
    shapes: list[tuple[int, ...]] = [(vocab, dim)]
    for _ in range(layers):
        shapes += [(dim,), (dim, dim), (kv, dim), (kv, dim), (dim, dim), (dim,), (ffn, dim), (ffn, dim), (dim, ffn)]
    return shapes + [(dim,), (vocab, dim)]


def model_lists() -> dict[str, list[Launch]]:
    flat = [s[0] * (s[1] if len(s) > 1 else 1) for s in llama_shapes()]
    cases = {"llama": llama_shapes(), "llama_odd": [(n + 1,) for n in flat], "llama_plus4": [(n + 4,) for n in flat]}
    out = {}
    for name, shapes in cases.items():
        params = [torch.nn.Parameter(torch.randn(*s, device="cuda", dtype=torch.bfloat16)) for s in shapes]
        for p in params:
            p.grad = torch.randn_like(p)
        opt = torch.optim.AdamW(params, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
        opt.step()
        opt.step()
        out[name] = launches(opt.step, 3)
        del opt, params
        torch.cuda.empty_cache()
    return out


def sweep_lists() -> dict[str, list[Launch]]:
    ops = sorted((op for op in sweep.PLANS["memory"]("full") if op.label.startswith("adamw_fused bf16")),
                 key=lambda o: -o.device_bytes)[:3]
    out = {}
    for op in ops:
        call = op.setup()
        out[f"sweep {op.label} first4"] = launches(call, 4)  # as the sweep runs it: warm-up and three more
        for _ in range(5):
            call()
        torch.cuda.synchronize()
        out[f"sweep {op.label} later3"] = launches(call, 3)
        del call
        torch.cuda.empty_cache()
    return out


def main() -> int:
    result = {**model_lists(), **sweep_lists()}
    Path(os.environ.get("OUT", "."), "adamw_probe.json").write_text(json.dumps(result, indent=0))
    for name, found in result.items():
        full = sorted(d for d, g in found if g and g[0] == 320)
        print(name, "launches", len(found), "full", len(full), "median", full[len(full) // 2] if full else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
