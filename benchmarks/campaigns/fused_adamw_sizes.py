"""Fused AdamW's launches over a model's parameters against the memory sweep's lists (GPU machine).

    OUT=DIR python3 benchmarks/campaigns/fused_adamw_sizes.py

The memory sweep's bf16 fused AdamW took about 225 us a full launch (320 blocks) where a Llama's
parameters took 127 us.  Per launch (torch.profiler), three steps each: a Llama-sized parameter list
as it is, with one element more per tensor, with four more; and the sweep's three largest fused AdamW
operations, as the sweep runs them and after five more steps.  Writes adamw_probe.json (each case's
launches in order: duration in us, grid).  Result: a tensor whose size is no multiple of 4 takes the
kernel off its vectorised path (benchmarks/data/fused_adamw_sizes/).
"""
import json, os, random, sys, tempfile
import torch
sys.path.insert(0, os.getcwd())
OUT = os.environ.get("OUT", "/tmp")

def launches(fn, calls):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    path = tempfile.mktemp(suffix=".json")
    prof.export_chrome_trace(path)
    ev = json.load(open(path))["traceEvents"]
    out = []
    for e in ev:
        if e.get("cat") == "kernel" and "adam" in e.get("name", "").lower():
            out.append((e["ts"], e["dur"], e.get("args", {}).get("grid")))
    out.sort()
    return [(round(d, 1), g) for _, d, g in out]

def make_params(shapes, dtype):
    ps = [torch.nn.Parameter(torch.randn(*s, device="cuda", dtype=dtype)) for s in shapes]
    for p in ps:
        p.grad = torch.randn_like(p)
    return ps

res = {}
dim, ffn, vocab, layers, kv = 1024, 2816, 32000, 12, 4
hd = dim // 16
llama = [(vocab, dim)]
for _ in range(layers):
    llama += [(dim,), (dim, dim), (kv * hd, dim), (kv * hd, dim), (dim, dim), (dim,), (ffn, dim), (ffn, dim), (dim, ffn)]
llama += [(dim,), (vocab, dim)]
flat = [s[0] * (s[1] if len(s) > 1 else 1) for s in llama]
for name, shapes in (("llama", llama), ("llama_odd", [(n + 1,) for n in flat]), ("llama_plus4", [(n + 4,) for n in flat])):
    ps = make_params(shapes, torch.bfloat16)
    opt = torch.optim.AdamW(ps, lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    opt.step(); opt.step(); torch.cuda.synchronize()
    res[name] = launches(opt.step, 3)
    del opt, ps
    torch.cuda.empty_cache()

from benchmarks.campaigns.profiling import sweep
ops = [op for op in sweep.PLANS["memory"]("full") if op.label.startswith("adamw_fused bf16")]
ops = sorted(ops, key=lambda o: -o.device_bytes)[:3]
for op in ops:
    call = op.setup()
    res["sweep " + op.label + " first4"] = launches(call, 4)   # as the sweep runs: warm-up + 3
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    res["sweep " + op.label + " later3"] = launches(call, 3)
    del call
    torch.cuda.empty_cache()
json.dump(res, open(os.path.join(OUT, "adamw_probe.json"), "w"), indent=0)
for k, v in res.items():
    full = [d for d, g in v if g and g[0] == 320]
    print(k, "launches", len(v), "320-block", len(full), "median", sorted(full)[len(full)//2] if full else None, "first 8", [d for d, _ in v[:8]])
