"""Decoder language-model training with the knobs a GPU plan varies.

A GPT-style decoder (pre-norm blocks, causal `scaled_dot_product_attention`,
bf16 autocast, fused AdamW, tied embeddings) with the settings a team tunes
when it sizes a job: the per-rank micro-batch (`--batch`), gradient
accumulation (`--accum`, micro-batches per optimizer step), activation
checkpointing (`--ckpt`) and the DDP bucket size (`--bucket-mb`).  One
process per GPU; under torchrun it trains with DistributedDataParallel over
NCCL.  One timed step is one optimizer step.  Prints one JSON line at the end
(see common.py).

    python examples/llm.py --layers 24 --width 2048 --heads 16 --batch 8 --accum 4
    torchrun --nproc-per-node 2 examples/llm.py --batch 8 --accum 2 --ckpt

`examples/plan.yaml` plans this script.
"""
import argparse
import contextlib
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from common import add_common_args, parse_args, train
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        self.ln2 = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width, bias=False)
        self.down = nn.Linear(4 * width, width, bias=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class Decoder(nn.Module):
    def __init__(self, vocab: int, seq: int, layers: int, width: int, heads: int, ckpt: bool):
        super().__init__()
        self.ckpt = ckpt
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers) if name.endswith("down.weight") else 0.02)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.ckpt and self.training else block(x)
        return self.head(self.ln_f(x))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=4, help="micro-batch per rank")
    p.add_argument("--accum", type=int, default=1, help="micro-batches per optimizer step")
    p.add_argument("--ckpt", action="store_true", help="activation checkpointing of every block")
    p.add_argument("--bucket-mb", type=int, default=25, help="DDP bucket size in MiB")
    add_common_args(p)
    args = parse_args(p)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    if world > 1:
        dist.init_process_group("nccl")
    torch.manual_seed(args.seed)
    dev = torch.device("cuda", local_rank)
    with dev:
        model = Decoder(args.vocab, args.seq, args.layers, args.width, args.heads, args.ckpt)
    net = DDP(model, device_ids=[local_rank], bucket_cap_mb=args.bucket_mb) if world > 1 else model
    opt = torch.optim.AdamW(net.parameters(), lr=3e-4, weight_decay=0.1, fused=True)
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed + (dist.get_rank() if world > 1 else 0))

    def step(i: int) -> None:
        for micro in range(args.accum):
            last = micro == args.accum - 1
            sync = contextlib.nullcontext() if last or world == 1 else net.no_sync()
            data = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=dev, generator=gen)
            with sync:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits = net(data[:, :-1])
                    loss = F.cross_entropy(logits.view(-1, args.vocab), data[:, 1:].reshape(-1)) / args.accum
                loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    n_params = sum(p.numel() for p in model.parameters())
    try:
        train("llm", args, step, {"parameters": n_params})
    finally:
        if world > 1:
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
