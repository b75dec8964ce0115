"""Decoder-only language model whose feed-forward layers are a mixture of experts.

Top-2 softmax gating over 8 experts per layer with host-side dispatch: the
tokens are sorted by expert, the per-expert token counts are copied to the
host, and each expert's MLP runs on its contiguous slice (experts that got no
tokens are skipped).  A Switch-style load-balancing loss is added to the LM
loss.  bf16 autocast, AdamW, gradient clipping, one GPU.
"""
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Expert(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.w1 = nn.Linear(d, hidden, bias=False)
        self.w2 = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class MoELayer(nn.Module):
    def __init__(self, d, hidden, n_experts, top_k):
        super().__init__()
        self.top_k = top_k
        self.n_experts = n_experts
        self.router = nn.Linear(d, n_experts, bias=False)
        self.experts = nn.ModuleList(Expert(d, hidden) for _ in range(n_experts))

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        probs = self.router(x).float().softmax(dim=-1)
        weights, chosen = probs.topk(self.top_k, dim=-1)  # [T, k]
        weights = weights / weights.sum(dim=-1, keepdim=True)

        # load-balancing loss: fraction of tokens per expert times mean router probability
        frac = F.one_hot(chosen[:, 0], self.n_experts).float().mean(0)
        aux = self.n_experts * (frac * probs.mean(0)).sum()

        flat_expert = chosen.reshape(-1)
        order = flat_expert.argsort(stable=True)
        token_of = order // self.top_k
        counts = torch.bincount(flat_expert, minlength=self.n_experts).tolist()  # host sync
        routed = x[token_of]
        out = torch.zeros_like(routed)
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            out[start:start + n] = self.experts[e](routed[start:start + n])
            start += n
        out = out * weights.reshape(-1)[order].unsqueeze(-1).to(out.dtype)
        y = torch.zeros_like(x).index_add_(0, token_of, out)
        return y.view(shape), aux


class Block(nn.Module):
    def __init__(self, d, heads, hidden, n_experts, top_k):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.heads = heads
        self.ln2 = nn.LayerNorm(d)
        self.moe = MoELayer(d, hidden, n_experts, top_k)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        m, aux = self.moe(self.ln2(x))
        return x + m, aux


class MoELM(nn.Module):
    def __init__(self, vocab, seq, d, layers, heads, hidden, n_experts, top_k):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, hidden, n_experts, top_k) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        h = self.emb(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        aux_total = 0.0
        for blk in self.blocks:
            h, aux = blk(h)
            aux_total = aux_total + aux
        return self.out(self.ln(h)), aux_total / len(self.blocks)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--expert-hidden", type=int, default=3072)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--aux-weight", type=float, default=0.01)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()

    torch.manual_seed(0)
    model = MoELM(a.vocab, a.seq, a.d_model, a.layers, a.heads, a.expert_hidden, a.experts, a.top_k).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, betas=(0.9, 0.95))

    durations = []
    for i in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits, aux = model(tokens[:, :-1])
            lm = F.cross_entropy(logits.view(-1, a.vocab).float(), tokens[:, 1:].reshape(-1))
            loss = lm + a.aux_weight * aux
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= a.warmup:
            durations.append(time.perf_counter() - t0)

    print(json.dumps({
        "workload": "moe",
        "world_size": 1,
        "device": torch.cuda.get_device_name(),
        "params": sum(x.numel() for x in model.parameters()),
        "step_times_s": durations,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "args": vars(a),
    }))


if __name__ == "__main__":
    main()
