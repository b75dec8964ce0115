# DLRM-style recommender trained with Adagrad.
#
# 26 categorical features, each an EmbeddingBag of 200k x 128 summing 20 ids
# per sample; 13 dense features through a bottom MLP; pairwise dot-product
# interaction of the 27 vectors; top MLP to one logit.  fp32, dense
# embedding gradients, torch.optim.Adagrad over every parameter.  Inputs are
# drawn on the GPU every step.
import argparse
import json
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def mlp(sizes, last_act=True):
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(a, b))
        if last_act or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, tables, rows, dim, dense_in, bottom, top):
        super().__init__()
        self.embs = nn.ModuleList([nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables)])
        self.bottom = mlp([dense_in, *bottom, dim])
        n = tables + 1
        self.pairs = torch.triu_indices(n, n, offset=1)
        self.top = mlp([dim + n * (n - 1) // 2, *top, 1], last_act=False)

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        vecs = [x] + [emb(sparse[:, i]) for i, emb in enumerate(self.embs)]
        t = torch.stack(vecs, dim=1)
        dots = torch.bmm(t, t.transpose(1, 2))
        flat = dots[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([x, flat], dim=1)).squeeze(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--tables", type=int, default=26)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--pooling", type=int, default=20)
    p.add_argument("--dense", type=int, default=13)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    a = p.parse_args()

    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = DLRM(a.tables, a.rows, a.dim, a.dense, [512, 256], [1024, 1024, 512, 256]).to(dev)
    model.pairs = model.pairs.to(dev)
    opt = torch.optim.Adagrad(model.parameters(), lr=0.01)

    times = []
    for step in range(a.warmup + a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        dense = torch.randn(a.batch, a.dense, device=dev)
        sparse = torch.randint(0, a.rows, (a.batch, a.tables, a.pooling), device=dev)
        label = torch.randint(0, 2, (a.batch,), device=dev).float()
        loss = F.binary_cross_entropy_with_logits(model(dense, sparse), label)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)

    print(json.dumps({
        "workload": "dlrm_adagrad",
        "world_size": 1,
        "device": torch.cuda.get_device_name(dev),
        "step_times_s": times,
        "max_memory_allocated": torch.cuda.max_memory_allocated(dev),
        "max_memory_reserved": torch.cuda.max_memory_reserved(dev),
        "args": vars(a),
    }))


if __name__ == "__main__":
    main()
