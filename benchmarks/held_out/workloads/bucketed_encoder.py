"""Transformer encoder text classifier over length-bucketed batches.

Sentences are grouped by length into buckets and each batch is padded only
to its own bucket's length, so the sequence length (and with it every GEMM
and attention shape) changes from step to step; the buckets come round in a
fixed order.  torch's own ``nn.TransformerEncoder`` (post-norm, GELU),
key-padding mask, mean pooling over the real tokens, bf16 autocast, AdamW
with weight decay, gradient clipping.  Token ids and lengths are generated
on the host once and copied to the GPU per batch.
"""
import argparse
import json
import time

import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, vocab, dim, heads, layers, classes, max_len):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.pos = nn.Parameter(torch.randn(max_len, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids, pad):
        x = self.embed(ids) + self.pos[: ids.shape[1]]
        x = self.encoder(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(x.dtype)
        return self.head((x * keep).sum(1) / keep.sum(1))


parser = argparse.ArgumentParser(description="bucketed transformer encoder classifier")
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--buckets", default="96,160,224")
parser.add_argument("--vocab", type=int, default=32000)
parser.add_argument("--dim", type=int, default=512)
parser.add_argument("--heads", type=int, default=8)
parser.add_argument("--layers", type=int, default=6)
parser.add_argument("--classes", type=int, default=20)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--warmup", type=int, default=5)
args = parser.parse_args()

buckets = [int(b) for b in args.buckets.split(",")]
device = torch.device("cuda")
model = Classifier(args.vocab, args.dim, args.heads, args.layers, args.classes, max(buckets)).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
loss_fn = nn.CrossEntropyLoss()

g = torch.Generator().manual_seed(0)
batches = []
for i in range(args.warmup + args.steps):
    length = buckets[i % len(buckets)]
    lengths = torch.randint(length // 2 + 1, length + 1, (args.batch,), generator=g)
    ids = torch.randint(1, args.vocab, (args.batch, length), generator=g)
    pad = torch.arange(length)[None, :] >= lengths[:, None]
    ids[pad] = 0
    labels = torch.randint(0, args.classes, (args.batch,), generator=g)
    batches.append((ids.pin_memory(), pad.pin_memory(), labels.pin_memory()))

model.train()
timings = []
for i, (ids, pad, labels) in enumerate(batches):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    ids, pad, labels = (t.to(device, non_blocking=True) for t in (ids, pad, labels))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = loss_fn(model(ids, pad).float(), labels)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    torch.cuda.synchronize()
    if i >= args.warmup:
        timings.append(time.perf_counter() - t0)

print(json.dumps({
    "workload": "bucketed_encoder",
    "world_size": 1,
    "device": torch.cuda.get_device_name(),
    "step_times_s": timings,
    "max_memory_allocated": torch.cuda.max_memory_allocated(),
    "max_memory_reserved": torch.cuda.max_memory_reserved(),
    "args": vars(args),
}))
