#!/usr/bin/env python3
"""The workspace bytes cuDNN asks for in an RNN call, exactly, as torch allocates them.

Runs unchanged on a GPU machine (its own python3 and torch) and under ``maya emulate``:

    python3 benchmarks/campaigns/rnn_workspace.py --out "$OUT/rnn_workspace.json"
    maya emulate --gpu H200-SXM-141GB --gpus-per-node 1 --out DIR -- python benchmarks/campaigns/rnn_workspace.py --out F

torch's ``_cudnn_rnn`` (and ``_cudnn_rnn_backward_input`` / ``_backward_weight``)
asks ``cudnnGetRNNTempSpaceSizes`` for the workspace, allocates it as a byte
tensor of exactly that size, runs the cuDNN call and frees it on return.  With
the caching allocator's history on (``torch.cuda.memory._record_memory_history``)
each call's allocation events are read back (``_snapshot()['device_traces']``:
the ``size`` of an ``alloc`` event is the size asked for, before the
allocator's rounding to 512 bytes).  Given the initial states and the output
gradients (so torch makes no zeros of its own), the only block allocated and
freed inside a call is cuDNN's workspace: one in the training forward, one in
the inference forward (``eval()`` under ``no_grad``), two in the backward
(backward data, then backward weights, each asking with the training mode).
A workspace of 0 bytes allocates nothing and reads 0.

The grid: sweeps of batch, sequence length, hidden and input size and layers
around a few base points; a product of modes, layers, directions, hidden
sizes, batches and sequences; data types (fp32 with and without TF32, bf16,
fp16); packed batches with varied lengths beside the same padded; LSTM
projections; a few large shapes; and a seeded random sample of the whole space.
The run stops taking new configurations after ``--budget-s`` seconds and
rewrites the output every few hundred, so a cut-off run still leaves its data.
"""
import argparse
import gc
import itertools
import json
import os
import platform
import random
import time

import torch
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence

MODULES = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
BASE = {"mode": "lstm", "layers": 2, "dirs": 1, "hidden": 512, "input": 512, "proj": 0, "batch": 32, "seq": 16,
        "dtype": "tf32", "packed": ""}


def cfg(section: str, **kw: object) -> dict[str, object]:
    return {**BASE, **kw, "section": section}


def configs() -> list[dict[str, object]]:
    out = []
    # 1. one factor at a time around base points (layers 2, hidden = input = 512, batch 32, 16 steps)
    bases = [dict(mode=m, dirs=d) for m in MODULES for d in (1, 2)]
    bases += [dict(mode=m, dtype="bf16") for m in ("lstm", "gru")]
    for b in bases:
        for v in (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 33, 48, 63, 64, 65, 100, 128, 200, 256):
            out.append(cfg("batch", **b, batch=v))
        for v in (1, 2, 3, 4, 5, 7, 8, 9, 15, 17, 31, 32, 33, 50, 64, 100, 128, 200, 500):
            out.append(cfg("seq", **b, seq=v))
        for v in (64, 96, 100, 127, 128, 129, 160, 192, 193, 200, 255, 256, 257, 320, 384, 385, 400, 500, 513,
                  640, 768, 1000, 1024, 1025, 1536, 2048):
            out.append(cfg("hidden", **b, hidden=v))
        for v in (1, 7, 8, 16, 100, 128, 256, 500, 1000, 1024, 2048):
            out.append(cfg("input", **b, input=v))
        for v in (1, 2, 3, 4):
            out.append(cfg("layers", **b, layers=v))
    # 2. data types; fp16 LSTM/RNN of one layer, hidden and input multiples of 128 and batch of 8 take
    # torch's PERSIST_STATIC algorithm
    for mode, dtype, hidden, batch, seq in itertools.product(MODULES, DTYPES, (128, 256, 512, 1024), (8, 64),
                                                            (16, 100)):
        out.append(cfg("dtype", mode=mode, dtype=dtype, layers=1, hidden=hidden, input=hidden, batch=batch, seq=seq))
    # 3. packed batches (lengths: linear from seq down to a quarter, one long and the rest 1, all full) and
    # the same padded
    for mode, dirs, layers, (hidden, batch, seq) in itertools.product(MODULES, (1, 2), (1, 2),
                                                                      ((256, 32, 50), (512, 7, 100))):
        for packed in ("lin", "one", "full", ""):
            out.append(cfg("packed", mode=mode, dirs=dirs, layers=layers, hidden=hidden, input=hidden // 2,
                           batch=batch, seq=seq, packed=packed))
    # 4. LSTM projections
    for layers, dirs, hidden, proj, batch in itertools.product((1, 2, 3), (1, 2), (256, 1024), (64, 200), (8, 64)):
        out.append(cfg("proj", layers=layers, dirs=dirs, hidden=hidden, input=hidden, proj=proj, batch=batch))
    # 5. large shapes
    for mode, batch, seq in itertools.product(MODULES, (1, 256), (5, 500)):
        out.append(cfg("large", mode=mode, layers=1, hidden=2048, input=1024, batch=batch, seq=seq))
    for mode in MODULES:
        out.append(cfg("large", mode=mode, layers=2, dirs=2, hidden=2048, input=2048, batch=64, seq=100))
    # 6. product
    for mode, layers, dirs, hidden, batch, seq in itertools.product(MODULES, (1, 2, 3), (1, 2), (100, 200, 512, 1024),
                                                                    (1, 8, 64), (1, 16, 100)):
        out.append(cfg("product", mode=mode, layers=layers, dirs=dirs, hidden=hidden, input=hidden // 2, batch=batch,
                       seq=seq))
    # 7. a seeded random sample of the whole space
    rng = random.Random(20261130)
    while sum(c["section"] == "random" for c in out) < 400:
        c = cfg("random", mode=rng.choice(list(MODULES)), layers=rng.randint(1, 4), dirs=rng.choice((1, 2)),
                hidden=rng.choice((64, 100, 128, 200, 256, 300, 384, 512, 640, 768, 1000, 1024, 1536, 2048)),
                input=rng.choice((16, 64, 100, 128, 256, 512, 1000, 1024)),
                batch=rng.choice((1, 3, 7, 8, 16, 32, 50, 64, 128, 256)), seq=rng.choice((1, 5, 16, 35, 100, 250, 500)),
                dtype=rng.choice(list(DTYPES)), packed=rng.choice(("", "", "", "lin", "one")))
        if c["mode"] == "lstm" and rng.random() < 0.2:
            c["proj"] = rng.choice((32, 64, 128, 200))
            if int(c["proj"]) >= int(c["hidden"]):
                continue
        tokens = int(c["batch"]) * int(c["seq"])
        if tokens * int(c["hidden"]) * int(c["layers"]) * int(c["dirs"]) > 2 ** 31:  # keep each call under ~30 GB
            continue
        out.append(c)
    return out


def lengths(kind: str, seq: int, batch: int) -> list[int]:
    """Sequence lengths of a packed batch, longest first."""
    if kind == "lin":
        return torch.linspace(seq, max(seq // 4, 1), batch).round().long().tolist()
    if kind == "one":
        return [seq] + [1] * (batch - 1)
    return [seq] * batch


def transients(trace: list[dict]) -> list[int]:
    """Sizes of the blocks allocated and freed within the recorded window, in allocation order."""
    live: dict[int, tuple[int, int]] = {}
    out = []
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            live[e["addr"]] = (i, e["size"])
        elif e["action"] == "free_requested" and e["addr"] in live:
            out.append(live.pop(e["addr"]))
    return [s for _, s in sorted(out)]


def recorded(fn) -> tuple[object, list[int]]:
    """Run fn with the allocator's history on; its result and the sizes of its transient blocks."""
    torch.cuda.memory._record_memory_history(max_entries=100000, context=None, stacks="python")
    try:
        r = fn()
        trace = torch.cuda.memory._snapshot()["device_traces"][torch.cuda.current_device()]
    finally:
        torch.cuda.memory._record_memory_history(None)
    return r, transients(trace)


def measure(c: dict) -> dict:
    dtype = DTYPES[str(c["dtype"])]
    torch.backends.cudnn.allow_tf32 = c["dtype"] == "tf32"
    mode, layers, dirs, hidden, proj = str(c["mode"]), int(c["layers"]), int(c["dirs"]), int(c["hidden"]), int(c["proj"])
    seq, batch = int(c["seq"]), int(c["batch"])
    kw = {"proj_size": proj} if proj else {}
    m = MODULES[mode](int(c["input"]), hidden, layers, bidirectional=dirs == 2, **kw).to("cuda", dtype)
    x = torch.randn(seq, batch, int(c["input"]), device="cuda", dtype=dtype)
    inp: object = x.requires_grad_()
    if c["packed"]:  # the packed data a leaf itself, so that its gradient is kept (no transient of the packing)
        p = pack_padded_sequence(x.detach(), lengths(str(c["packed"]), seq, batch))
        inp = PackedSequence(p.data.requires_grad_(), p.batch_sizes)
    h0 = torch.randn(layers * dirs, batch, proj or hidden, device="cuda", dtype=dtype, requires_grad=True)
    hx: object = h0
    if mode == "lstm":
        hx = (h0, torch.randn(layers * dirs, batch, hidden, device="cuda", dtype=dtype, requires_grad=True))
    torch.cuda.synchronize()

    (out, hn), fwd = recorded(lambda: m(inp, hx))
    y = out.data if c["packed"] else out
    outs = [y, *(hn if mode == "lstm" else (hn,))]
    grads = [torch.ones_like(t) for t in outs]
    torch.cuda.synchronize()
    _, bwd = recorded(lambda: torch.autograd.backward(outs, grads))
    outs.clear()
    grads.clear()
    out = hn = y = None
    m.eval()
    with torch.no_grad():
        _, inf = recorded(lambda: m(inp, hx))
    torch.cuda.synchronize()
    # torch flattens no bf16 weights (cudnn.is_acceptable), so each bf16 call first copies them into a
    # weight buffer of its own: kept for the backward in training, a transient before the workspace in
    # inference
    weight_bytes = sum(p.numel() for p in m.parameters()) * x.element_size()
    ws_inf = inf[1:] if len(inf) == 2 and inf[0] == weight_bytes else inf
    return {"weight_bytes": weight_bytes, "train_transients": fwd, "backward_transients": bwd,
            "inference_transients": inf,
            "train_workspace_bytes": fwd[0] if len(fwd) == 1 else (0 if not fwd else -1),
            "inference_workspace_bytes": ws_inf[0] if len(ws_inf) == 1 else (0 if not ws_inf else -1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget-s", type=float, default=240.0, help="take no new configuration after this many seconds")
    ap.add_argument("--limit", type=int, default=0, help="measure only the first N configurations (0: all)")
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = False
    t0 = time.time()
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
               "cpu": platform.processor() or platform.machine(),
               "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0)), "cases": []}
    todo = configs()
    if args.limit:
        todo = todo[:args.limit]

    def write() -> None:
        results["elapsed_s"] = round(time.time() - t0, 1)
        results["planned"] = len(todo)
        with open(args.out + ".tmp", "w") as f:
            json.dump(results, f, indent=None, separators=(",", ":"))
        os.replace(args.out + ".tmp", args.out)

    for i, c in enumerate(todo):
        if time.time() - t0 > args.budget_s:
            print(f"budget spent: {i} of {len(todo)} configurations measured")
            break
        try:
            results["cases"].append({**c, **measure(c)})
        except (RuntimeError, torch.cuda.OutOfMemoryError) as e:  # record, go on
            results["cases"].append({**c, "error": str(e).splitlines()[0][:300]})
        if i % 50 == 49:
            gc.collect()
        torch.cuda.empty_cache()
        if i % 200 == 199:
            write()
            print(f"{i + 1} configurations, {time.time() - t0:.0f} s", flush=True)
    write()
    errors = sum("error" in c for c in results["cases"])
    print(f"{len(results['cases'])} configurations ({errors} errors) in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
