"""Wide & Deep click model with sparse embedding gradients and Adagrad, on skewed ids.

The wide part is a per-id weight (an EmbeddingBag of width 1, sum pooling)
over every field's ids; the deep part embeds each field (width 64) and runs
an MLP.  Both embedding kinds produce sparse gradients, which
torch.optim.Adagrad updates row by row; the MLP uses AdamW.  Ids follow a
power law, as click logs do (a few ids are most of the traffic), and each
step copies one of eight batches drawn on the host at start-up with a
blocking ``.cuda()``.
"""
import argparse
import json
import time

import torch
from torch import nn

FIELD_ROWS = [5_000_000, 3_000_000, 1_000_000, 800_000, 400_000, 250_000, 100_000, 60_000, 20_000, 5_000,
              2_000, 1_000, 500, 200, 100, 50]


class WideDeep(nn.Module):
    def __init__(self, width, mlp):
        super().__init__()
        self.offsets = torch.tensor([0] + FIELD_ROWS[:-1]).cumsum(0)
        self.wide = nn.EmbeddingBag(sum(FIELD_ROWS), 1, mode="sum", sparse=True)
        self.deep = nn.ModuleList(nn.Embedding(rows, width, sparse=True) for rows in FIELD_ROWS)
        layers, size = [], width * len(FIELD_ROWS)
        for out in mlp:
            layers += [nn.Linear(size, out), nn.ReLU()]
            size = out
        self.mlp = nn.Sequential(*layers, nn.Linear(size, 1))

    def forward(self, ids):
        wide = self.wide(ids + self.offsets.to(ids.device))  # [B, 1], one bag per example
        deep = torch.cat([table(ids[:, f]) for f, table in enumerate(self.deep)], dim=1)
        return (wide + self.mlp(deep)).squeeze(1)


def skewed_ids(batch, gen):
    """Power-law ids per field: rows * u**4 puts half the draws in the first 1/16 of the rows."""
    u = torch.rand(batch, len(FIELD_ROWS), generator=gen)
    rows = torch.tensor(FIELD_ROWS, dtype=torch.float64)
    return (u.double() ** 4 * rows).long().clamp_max(rows.long() - 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--mlp", default="512,256,128")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()

    model = WideDeep(args.width, [int(x) for x in args.mlp.split(",")]).cuda()
    sparse = [model.wide.weight] + [t.weight for t in model.deep]
    dense = list(model.mlp.parameters())
    adagrad = torch.optim.Adagrad(sparse, lr=0.01)
    adamw = torch.optim.AdamW(dense, lr=1e-3)
    criterion = nn.BCEWithLogitsLoss()
    gen = torch.Generator().manual_seed(7)
    batches = [(skewed_ids(args.batch, gen), (torch.rand(args.batch, generator=gen) < 0.03).float())
               for _ in range(8)]

    times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        ids, clicks = (t.cuda() for t in batches[step % len(batches)])
        loss = criterion(model(ids), clicks)
        adagrad.zero_grad()
        adamw.zero_grad()
        loss.backward()
        adagrad.step()
        adamw.step()
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)

    print(json.dumps({
        "workload": "wide_deep_adagrad",
        "world_size": 1,
        "device": torch.cuda.get_device_name(),
        "embedding_rows": 2 * sum(FIELD_ROWS),
        "step_times_s": times,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "args": vars(args),
    }))


if __name__ == "__main__":
    main()
