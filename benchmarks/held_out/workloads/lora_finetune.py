"""LoRA fine-tuning of a frozen decoder, written the way PEFT sets it up by hand.

The base model (a GPT-NeoX-like decoder: parallel attention and MLP residual,
LayerNorm, learned positions) is cast to bf16 and frozen; low-rank adapters
(rank 16, alpha 32, dropout 0.05) sit beside the query, key, value and output
projections and train in fp32.  Only the adapters' parameters go to AdamW, so
no optimizer state exists for the base; the loss is computed in fp32 over
the sequence's shifted tokens, with padding ids ignored.  bf16 autocast, a
linear warm-up.

    python lora_finetune.py --batch 8 --seq 1024 --layers 24 --width 2048
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD = 0


class LoRALinear(nn.Module):
    """y = base(x) + (alpha / r) * B(A(dropout(x))), base frozen, B initialised to zero."""

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float):
        super().__init__()
        self.base = base
        self.lora_a = nn.Linear(base.in_features, r, bias=False)
        self.lora_b = nn.Linear(r, base.out_features, bias=False)
        nn.init.kaiming_uniform_(self.lora_a.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_b.weight)
        self.scale = alpha / r
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.base(x) + self.lora_b(self.lora_a(self.drop(x))) * self.scale


class ParallelBlock(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.norm_attn = nn.LayerNorm(width)
        self.norm_mlp = nn.LayerNorm(width)
        self.q = nn.Linear(width, width)
        self.k = nn.Linear(width, width)
        self.v = nn.Linear(width, width)
        self.o = nn.Linear(width, width)
        self.fc_in = nn.Linear(width, 4 * width)
        self.fc_out = nn.Linear(4 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        h = self.norm_attn(x)
        q, k, v = (m(h).view(b, t, self.heads, c // self.heads).transpose(1, 2) for m in (self.q, self.k, self.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        m = self.fc_out(F.gelu(self.fc_in(self.norm_mlp(x))))
        return x + self.o(a) + m


class Decoder(nn.Module):
    def __init__(self, vocab, seq, width, heads, layers):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(seq, width)
        self.blocks = nn.ModuleList(ParallelBlock(width, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.lm_head(self.norm(x))


def add_adapters(model, r, alpha, dropout):
    for p in model.parameters():
        p.requires_grad_(False)
    for blk in model.blocks:
        for name in ("q", "k", "v", "o"):
            setattr(blk, name, LoRALinear(getattr(blk, name), r, alpha, dropout))
    return [p for n, p in model.named_parameters() if "lora_" in n]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--vocab", type=int, default=50304)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()

    dev = torch.device("cuda")
    model = Decoder(args.vocab, args.seq, args.width, args.heads, args.layers).to(dev, dtype=torch.bfloat16)
    trainable = add_adapters(model, args.rank, 2.0 * args.rank, 0.05)
    for p in trainable:
        p.data = p.data.float()
    model.to(dev)
    opt = torch.optim.AdamW(trainable, lr=2e-4, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100))

    step_s = []
    for i in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        ids = torch.randint(1, args.vocab, (args.batch, args.seq), device=dev)
        ids[:, -args.seq // 8:] = PAD  # right padding on the last eighth
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, args.vocab), ids[:, 1:].reshape(-1),
                               ignore_index=PAD)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= args.warmup:
            step_s.append(time.perf_counter() - t0)

    print(json.dumps({"workload": "lora_finetune", "device": torch.cuda.get_device_name(dev),
                      "step_times_s": step_s, "max_memory_allocated": torch.cuda.max_memory_allocated(),
                      "max_memory_reserved": torch.cuda.max_memory_reserved(),
                      "trainable_parameters": sum(p.numel() for p in trainable), "args": vars(args)}), flush=True)


if __name__ == "__main__":
    main()
