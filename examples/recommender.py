"""Embedding-heavy recommender training (DLRM-style).

Several large `nn.EmbeddingBag` tables (sum pooling over a fixed number of
ids per sample) plus one `nn.Embedding` table, a bottom MLP for dense
features, pairwise dot-product interaction, a top MLP, binary cross-entropy,
Adam (default) or Adagrad.  Ids and features are made on the GPU.  Prints
one JSON line at the end (see common.py).

    python examples/recommender.py --steps 4 --profile-step 2
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from common import add_common_args, parse_args, train


def mlp(sizes: list[int], last_act: bool) -> nn.Sequential:
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_act:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Recommender(nn.Module):
    def __init__(self, tables: int, rows: int, dim: int, dense: int, top: list[int]):
        super().__init__()
        self.bags = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables))
        self.user = nn.Embedding(rows, dim)
        self.bottom = mlp([dense, 512, 256, dim], last_act=True)
        n = tables + 2
        self.top = mlp([dim + n * (n - 1) // 2] + top + [1], last_act=False)

    def forward(self, dense, bag_ids, bag_offsets, user_ids):
        feats = [self.bottom(dense), self.user(user_ids)]
        feats += [bag(ids, bag_offsets) for bag, ids in zip(self.bags, bag_ids, strict=True)]
        z = torch.stack(feats, dim=1)                      # (B, n, dim)
        inter = torch.bmm(z, z.transpose(1, 2))            # (B, n, n)
        i, j = torch.triu_indices(z.shape[1], z.shape[1], 1, device=z.device)
        return self.top(torch.cat([feats[0], inter[:, i, j]], dim=1)).squeeze(1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", type=int, default=8, help="EmbeddingBag tables")
    p.add_argument("--rows", type=int, default=1_000_000, help="rows per table")
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--pooling", type=int, default=20, help="ids per sample and table")
    p.add_argument("--dense", type=int, default=13, help="dense features")
    p.add_argument("--top", default="1024,512,256", help="top MLP widths")
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--optimizer", choices=["adam", "adagrad"], default="adam")
    p.add_argument("--lr", type=float, default=1e-3)
    add_common_args(p)
    args = parse_args(p)
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    with dev:
        model = Recommender(args.tables, args.rows, args.dim, args.dense,
                            [int(w) for w in args.top.split(",")])
    if args.optimizer == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    else:
        opt = torch.optim.Adagrad(model.parameters(), lr=args.lr)
    offsets = torch.arange(0, args.batch * args.pooling, args.pooling, device=dev)

    def step(i: int) -> None:
        dense = torch.randn(args.batch, args.dense, device=dev)
        bag_ids = [torch.randint(0, args.rows, (args.batch * args.pooling,), device=dev)
                   for _ in range(args.tables)]
        user_ids = torch.randint(0, args.rows, (args.batch,), device=dev)
        clicks = torch.randint(0, 2, (args.batch,), device=dev).float()
        loss = F.binary_cross_entropy_with_logits(model(dense, bag_ids, offsets, user_ids), clicks)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    n_params = sum(p.numel() for p in model.parameters())
    train("recommender", args, step, {"parameters": n_params})


if __name__ == "__main__":
    main()
