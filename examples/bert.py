"""BERT-style encoder, masked-language-model training (BERT-base shapes by default).

fp16 autocast with torch.amp.GradScaler, AdamW, bidirectional
`scaled_dot_product_attention`, random tokens made on the GPU; the loss
covers a random 15% of positions through ignore_index (no data-dependent
shapes).  Prints one JSON line at the end (see common.py).

    python examples/bert.py --steps 4 --profile-step 2
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from common import add_common_args, parse_args, train


class EncoderLayer(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.dropout = dropout
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden)
        self.ffn1 = nn.Linear(hidden, ffn)
        self.ffn2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
        y = F.dropout(self.out(y.transpose(1, 2).reshape(b, t, c)), self.dropout, self.training)
        x = self.ln1(x + y)
        y = F.dropout(self.ffn2(F.gelu(self.ffn1(x))), self.dropout, self.training)
        return self.ln2(x + y)


class Bert(nn.Module):
    def __init__(self, vocab: int, seq_len: int, n_layer: int, hidden: int, heads: int, dropout: float):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq_len, hidden)
        self.typ = nn.Embedding(2, hidden)
        self.ln = nn.LayerNorm(hidden)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, 4 * hidden, dropout) for _ in range(n_layer))
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
        self.decoder = nn.Linear(hidden, vocab)
        self.decoder.weight = self.tok.weight
        self.dropout = dropout

    def forward(self, ids, types):
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.ln(self.tok(ids) + self.pos(pos) + self.typ(types))
        x = F.dropout(x, self.dropout, self.training)
        for layer in self.layers:
            x = layer(x)
        return self.decoder(self.head(x))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-layer", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=1e-4)
    add_common_args(p)
    args = parse_args(p)
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    with dev:
        model = Bert(args.vocab, args.seq_len, args.n_layer, args.hidden, args.heads, args.dropout)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scaler = torch.amp.GradScaler("cuda")

    def step(i: int) -> None:
        ids = torch.randint(0, args.vocab, (args.batch, args.seq_len), device=dev)
        types = torch.randint(0, 2, (args.batch, args.seq_len), device=dev)
        masked = torch.rand(args.batch, args.seq_len, device=dev) < 0.15
        labels = torch.where(masked, ids, torch.full_like(ids, -100))
        with torch.autocast("cuda", dtype=torch.float16):
            logits = model(ids, types)
            loss = F.cross_entropy(logits.view(-1, args.vocab), labels.view(-1), ignore_index=-100)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    n_params = sum(p.numel() for p in model.parameters())
    train("bert", args, step, {"parameters": n_params})


if __name__ == "__main__":
    main()
