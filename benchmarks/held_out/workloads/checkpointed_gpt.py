"""Decoder LM trained with activation checkpointing and gradient accumulation.

Pre-LN blocks (fused QKV projection, ``scaled_dot_product_attention`` with a
causal mask, GELU MLP), each block wrapped in non-reentrant
``torch.utils.checkpoint`` so its activations are recomputed in the backward.
Two micro-batches accumulate into every optimizer step; bf16 autocast; AdamW
with weight decay on matrices only; linear warm-up then cosine decay through
``LambdaLR``.  Token ids are drawn on the GPU for each micro-batch.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

p = argparse.ArgumentParser()
p.add_argument("--batch", type=int, default=8, help="sequences per micro-batch")
p.add_argument("--accum", type=int, default=2, help="micro-batches per optimizer step")
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--width", type=int, default=1024)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--layers", type=int, default=16)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--steps", type=int, default=30)
p.add_argument("--warmup", type=int, default=5)
cfg = p.parse_args()


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, c))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.width)
        self.pos = nn.Parameter(torch.zeros(1, cfg.seq, cfg.width))
        self.blocks = nn.ModuleList(Block(cfg.width, cfg.heads) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos[:, : ids.shape[1]]
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False)
        return self.head(self.ln(x))


dev = "cuda"
model = Decoder().to(dev)
decay = [w for n, w in model.named_parameters() if w.dim() >= 2 and n != "pos"]
rest = [w for n, w in model.named_parameters() if w.dim() < 2 or n == "pos"]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                        lr=3e-4, betas=(0.9, 0.95))
total = cfg.warmup + cfg.steps


def lr_at(step):
    if step < 10:
        return (step + 1) / 10
    return 0.5 * (1 + math.cos(math.pi * min(1.0, step / max(total, 1))))


sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)

times = []
for step in range(total):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(cfg.accum):
        ids = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq + 1), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().view(-1, cfg.vocab), ids[:, 1:].reshape(-1)) / cfg.accum
        loss.backward()
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    if step >= cfg.warmup:
        times.append(time.perf_counter() - t0)

print(json.dumps({
    "workload": "checkpointed_gpt",
    "world_size": 1,
    "device": torch.cuda.get_device_name(),
    "step_times_s": times,
    "max_memory_allocated": torch.cuda.max_memory_allocated(),
    "max_memory_reserved": torch.cuda.max_memory_reserved(),
    "args": vars(cfg),
}))
