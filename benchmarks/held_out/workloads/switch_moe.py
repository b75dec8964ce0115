"""Encoder with Switch-Transformer feed-forward layers (top-1 routing), trained as a token classifier.

Each token goes to the one expert of highest router probability; tokens are
grouped by expert with a stable sort, the group sizes come to the host
(``bincount``), ``torch.split`` cuts the sorted tokens into one batch per
expert, and the outputs are put back in token order, scaled by the gate.
nn.MultiheadAttention, pre-norm, bf16 autocast, fused AdamW, one GPU.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F
from torch import nn


class SwitchFFN(nn.Module):
    def __init__(self, width, hidden, experts):
        super().__init__()
        self.gate = nn.Linear(width, experts, bias=False)
        self.up = nn.ModuleList(nn.Linear(width, hidden) for _ in range(experts))
        self.down = nn.ModuleList(nn.Linear(hidden, width) for _ in range(experts))

    def forward(self, h):
        tokens = h.flatten(0, 1)
        prob = torch.softmax(self.gate(tokens).float(), dim=-1)
        gate, expert = prob.max(dim=-1)
        order = torch.argsort(expert, stable=True)
        sizes = torch.bincount(expert, minlength=len(self.up)).tolist()
        pieces = torch.split(tokens[order], sizes)
        outs = [self.down[e](F.gelu(self.up[e](piece))) for e, piece in enumerate(pieces)]
        merged = torch.empty_like(tokens)
        merged[order] = torch.cat(outs).to(merged.dtype)
        return (merged * gate.unsqueeze(1).to(merged.dtype)).view_as(h)


class Layer(nn.Module):
    def __init__(self, width, heads, hidden, experts, dropout):
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.ffn = SwitchFFN(width, hidden, experts)
        self.drop = nn.Dropout(dropout)

    def forward(self, h):
        a = self.norm1(h)
        h = h + self.drop(self.attn(a, a, a, need_weights=False)[0])
        return h + self.drop(self.ffn(self.norm2(h)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=30000)
    ap.add_argument("--classes", type=int, default=17)
    ap.add_argument("--width", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--experts", type=int, default=16)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()

    torch.manual_seed(1234)
    dev = "cuda"
    embed = nn.Embedding(args.vocab, args.width)
    body = nn.Sequential(*[Layer(args.width, args.heads, args.hidden, args.experts, args.dropout)
                           for _ in range(args.layers)])
    head = nn.Sequential(nn.LayerNorm(args.width), nn.Linear(args.width, args.classes))
    model = nn.Sequential(embed, body, head).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, fused=True)

    times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        ids = torch.randint(0, args.vocab, (args.batch, args.seq), device=dev)
        labels = torch.randint(0, args.classes, (args.batch, args.seq), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
        loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)

    print(json.dumps({
        "workload": "switch_moe",
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
