#!/usr/bin/env python3
"""The memory a cuDNN RNN call takes: its reserve space and the peak of its forward and backward.

Runs unchanged on a GPU machine (its own python3 and torch; seconds) and under ``maya emulate``:

    python3 benchmarks/campaigns/rnn_memory.py --out "$OUT/rnn_memory.json"
    maya emulate --gpu H200-SXM-141GB --out DIR -- python benchmarks/campaigns/rnn_memory.py --out rnn_memory.json

For each configuration (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``; layers, directions,
hidden and input size, an LSTM projection, batch, sequence, fp32 or bf16,
padded or packed): one training forward and backward from an empty cache,
and what they took: the reserve space cuDNN asked for (the ``result3``
torch's autograd node keeps for the backward, its bytes), and the peak
allocated memory over what was allocated before, during the forward and
during the backward (torch's caching allocator: outputs, the reserve, and
cuDNN's workspace, which torch allocates and frees inside the call).  Set
beside the same script under emulation, the differences are the
emulation's sizes of the workspace and reserve (``cudnnGetRNNTempSpaceSizes``,
``emulation-image/src/cudnn_rnn.c``), which no GPU measured before.
"""
import argparse
import itertools
import json
import platform

import torch
from torch.nn.utils.rnn import pack_padded_sequence

MODULES = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def configs() -> list[dict[str, object]]:
    out = []
    for mode, layers, dirs, hidden, batch, seq, dtype in itertools.product(
            MODULES, (1, 2, 3), (1, 2), (128, 512, 1024), (8, 64), (16, 100), DTYPES):
        out.append({"mode": mode, "layers": layers, "dirs": dirs, "hidden": hidden, "input": hidden // 2,
                    "proj": 0, "batch": batch, "seq": seq, "dtype": dtype, "packed": False})
    for mode, dirs, packed, proj in itertools.product(MODULES, (1, 2), (False, True), (0, 64)):
        if proj and mode != "lstm":
            continue
        out.append({"mode": mode, "layers": 2, "dirs": dirs, "hidden": 256, "input": 96, "proj": proj,
                    "batch": 32, "seq": 50, "dtype": "fp32", "packed": packed})
    for layers, dirs, hidden, proj in itertools.product((1, 2, 3), (1, 2), (256, 512), (64, 128)):
        out.append({"mode": "lstm", "layers": layers, "dirs": dirs, "hidden": hidden, "input": 96, "proj": proj,
                    "batch": 16, "seq": 40, "dtype": "fp32", "packed": False})
    return out


def measure(c: dict) -> dict:
    dtype = DTYPES[str(c["dtype"])]
    kw = {"proj_size": int(c["proj"])} if c["proj"] else {}
    m = MODULES[str(c["mode"])](int(c["input"]), int(c["hidden"]), int(c["layers"]),
                                bidirectional=int(c["dirs"]) == 2, **kw).to("cuda", dtype)
    seq, batch = int(c["seq"]), int(c["batch"])
    x = torch.randn(seq, batch, int(c["input"]), device="cuda", dtype=dtype, requires_grad=True)
    inp = x
    if c["packed"]:  # lengths from seq down to a quarter of it, longest first
        lengths = torch.linspace(seq, max(seq // 4, 1), batch).round().long()
        inp = pack_padded_sequence(x, lengths)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out, _ = m(inp)
    y = out.data if c["packed"] else out
    fwd_peak = torch.cuda.max_memory_allocated() - base
    node = y.grad_fn
    while node is not None and not hasattr(node, "_saved_result3"):  # packed: the data's node is a view's
        node = node.next_functions[0][0] if node.next_functions else None
    reserve = node._saved_result3 if node is not None else None
    reserve_bytes = reserve.numel() * reserve.element_size() if reserve is not None else -1
    after_fwd = torch.cuda.memory_allocated()
    grad = torch.ones_like(y)
    torch.cuda.reset_peak_memory_stats()
    y.backward(grad)
    bwd_peak = torch.cuda.max_memory_allocated() - after_fwd
    torch.cuda.synchronize()
    return {"reserve_bytes": reserve_bytes, "forward_peak_bytes": fwd_peak, "backward_peak_bytes": bwd_peak,
            "forward_kept_bytes": after_fwd - base}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = False
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
               "cpu": platform.processor() or platform.machine(), "cases": []}
    for c in configs():
        results["cases"].append({**c, **measure(c)})
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"{len(results['cases'])} configurations")


if __name__ == "__main__":
    main()
