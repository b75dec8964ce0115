"""GPT-style decoder training (GPT-2 small shapes by default).

Causal `scaled_dot_product_attention`, bf16 autocast, fused AdamW (or its
per-tensor-list `--optimizer foreach`), cross-entropy loss, tied input/output
embeddings, random tokens made on the GPU, optional gradient clipping
(`--clip-grad`).  Prints one JSON line at the end (see common.py).

    python examples/gpt.py --steps 4 --profile-step 2
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from common import add_common_args, parse_args, train


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(n_embd)
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.ln2 = nn.LayerNorm(n_embd)
        self.fc = nn.Linear(n_embd, 4 * n_embd)
        self.fc_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x, causal: bool = True):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (y.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab: int, seq_len: int, n_layer: int, n_head: int, n_embd: int):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(seq_len, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("proj.weight",)) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def add_model_args(p: argparse.ArgumentParser, n_layer=12, n_head=12, n_embd=768,
                   vocab=50257, seq_len=1024, batch=8) -> None:
    p.add_argument("--n-layer", type=int, default=n_layer)
    p.add_argument("--n-head", type=int, default=n_head)
    p.add_argument("--n-embd", type=int, default=n_embd)
    p.add_argument("--vocab", type=int, default=vocab)
    p.add_argument("--seq-len", type=int, default=seq_len)
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--optimizer", choices=["fused", "foreach"], default="fused", help="AdamW implementation")
    p.add_argument("--clip-grad", type=float, default=0.0, metavar="NORM",
                   help="clip the gradients' total norm to NORM every step (default: no clipping)")


def adamw(params, args: argparse.Namespace) -> torch.optim.AdamW:
    """AdamW as --optimizer asks: one fused kernel, or per-tensor-list kernels grouped in Python."""
    fused = args.optimizer == "fused"
    return torch.optim.AdamW(params, lr=args.lr, weight_decay=0.1, fused=fused, foreach=not fused)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(p)
    add_common_args(p)
    args = parse_args(p)
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    with dev:
        model = GPT(args.vocab, args.seq_len, args.n_layer, args.n_head, args.n_embd)
    opt = adamw(model.parameters(), args)

    def step(i: int) -> None:
        data = torch.randint(0, args.vocab, (args.batch, args.seq_len + 1), device=dev)
        x, y = data[:, :-1], data[:, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, args.vocab), y.reshape(-1))
        loss.backward()
        if args.clip_grad:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad)
        opt.step()
        opt.zero_grad(set_to_none=True)

    n_params = sum(p.numel() for p in model.parameters())
    train("gpt", args, step, {"parameters": n_params})


if __name__ == "__main__":
    main()
