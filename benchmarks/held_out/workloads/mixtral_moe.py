"""Decoder LM with Mixtral-style sparse MoE feed-forward layers (top-2 of 8), routed as Hugging Face does it.

The router's top-2 experts per token become a one-hot mask; the experts that
got any token are found with ``greater(mask.sum(...), 0).nonzero()``, and each
one's tokens with ``torch.where(mask[e])``: every one of those sizes reaches
the host, which runs each hit expert (SwiGLU) on its own batch and adds the
weighted outputs back with ``index_add_``.  RMSNorm, causal SDPA attention,
bf16 autocast, fused AdamW, one GPU.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(variance + self.eps)).to(x.dtype) * self.weight


class Expert(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.w1 = nn.Linear(width, hidden, bias=False)
        self.w3 = nn.Linear(width, hidden, bias=False)
        self.w2 = nn.Linear(hidden, width, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class SparseMoe(nn.Module):
    def __init__(self, width, hidden, experts, top_k):
        super().__init__()
        self.top_k = top_k
        self.num_experts = experts
        self.gate = nn.Linear(width, experts, bias=False)
        self.experts = nn.ModuleList(Expert(width, hidden) for _ in range(experts))

    def forward(self, hidden_states):
        batch, seq, width = hidden_states.shape
        hidden_states = hidden_states.view(-1, width)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final = torch.zeros((batch * seq, width), dtype=hidden_states.dtype, device=hidden_states.device)
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            expert = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            current = hidden_states[None, top_x].reshape(-1, width)
            out = expert(current) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, out.to(hidden_states.dtype))
        return final.reshape(batch, seq, width)


class Block(nn.Module):
    def __init__(self, width, heads, hidden, experts, top_k):
        super().__init__()
        self.heads = heads
        self.norm1 = RMSNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.proj = nn.Linear(width, width, bias=False)
        self.norm2 = RMSNorm(width)
        self.moe = SparseMoe(width, hidden, experts, top_k)

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, w))
        return x + self.moe(self.norm2(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=2816)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--top-k", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()

    torch.manual_seed(7)
    dev = "cuda"
    embed = nn.Embedding(args.vocab, args.width)
    blocks = nn.Sequential(*[Block(args.width, args.heads, args.hidden, args.experts, args.top_k)
                             for _ in range(args.layers)])
    head = nn.Sequential(RMSNorm(args.width), nn.Linear(args.width, args.vocab, bias=False))
    model = nn.Sequential(embed, blocks, head).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)

    times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        ids = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)

    print(json.dumps({
        "workload": "mixtral_moe",
        "world_size": 1,
        "device": torch.cuda.get_device_name(),
        "params": sum(p.numel() for p in model.parameters()),
        "step_times_s": times,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "args": vars(args),
    }))


if __name__ == "__main__":
    main()
