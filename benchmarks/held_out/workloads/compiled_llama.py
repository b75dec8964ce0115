"""Llama-style decoder trained with torch.compile (regional: every block compiled).

RMSNorm, rotary position embeddings, grouped-query attention, SwiGLU MLP,
untied output head. Parameters are kept in bf16 with an fp32 AdamW state,
as small-model pretraining recipes do. The transformer blocks are compiled one by
one with torch.compile (Inductor generates Triton kernels for the norms,
rotary and activation fusions; the matmuls stay on cuBLAS).

    python compiled_llama.py --batch 8 --seq 1024
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rope_tables(head_dim, seq, theta=10000.0):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
    ang = torch.outer(torch.arange(seq).float(), inv)
    return torch.cos(ang), torch.sin(ang)


def apply_rope(x, cos, sin):
    # x: [b, h, t, d]; rotate pairs (x1, x2) of the two halves
    x1, x2 = x.float().chunk(2, dim=-1)
    c = cos[None, None, : x.shape[2]]
    s = sin[None, None, : x.shape[2]]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1).type_as(x)


class TransformerBlock(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, ffn_dim):
        super().__init__()
        self.n_heads, self.n_kv = n_heads, n_kv_heads
        self.hd = dim // n_heads
        self.attn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, n_heads * self.hd, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(n_heads * self.hd, dim, bias=False)
        self.ffn_norm = RMSNorm(dim)
        self.w1 = nn.Linear(dim, ffn_dim, bias=False)
        self.w3 = nn.Linear(dim, ffn_dim, bias=False)
        self.w2 = nn.Linear(ffn_dim, dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(b, t, self.n_heads, self.hd).transpose(1, 2)
        k = self.wk(h).view(b, t, self.n_kv, self.hd).transpose(1, 2)
        v = self.wv(h).view(b, t, self.n_kv, self.hd).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.wo(o.transpose(1, 2).reshape(b, t, -1))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Llama(nn.Module):
    def __init__(self, vocab, dim, layers, heads, kv_heads, ffn, seq):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(TransformerBlock(dim, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        cos, sin = rope_tables(dim // heads, seq)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    def forward(self, tokens):
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, self.cos, self.sin)
        return self.output(self.norm(x))


def main():
    ap = argparse.ArgumentParser(description="torch.compile'd Llama-style pretraining")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=2816)
    ap.add_argument("--no-compile", action="store_true", help="run eagerly")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()

    torch.manual_seed(42)
    model = Llama(args.vocab, args.dim, args.layers, args.heads, args.kv_heads, args.ffn, args.seq)
    model = model.to(device="cuda", dtype=torch.bfloat16)
    model.cos, model.sin = model.cos.float(), model.sin.float()
    if not args.no_compile:
        for layer in model.layers:
            layer.compile()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)

    step_times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        batch = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device="cuda")
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1).float(), batch[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            step_times.append(time.perf_counter() - t0)

    print(json.dumps({
        "workload": "compiled_llama",
        "world_size": 1,
        "device": torch.cuda.get_device_name(),
        "compiled": not args.no_compile,
        "params": sum(p.numel() for p in model.parameters()),
        "step_times_s": step_times,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "args": vars(args),
    }))


if __name__ == "__main__":
    main()
