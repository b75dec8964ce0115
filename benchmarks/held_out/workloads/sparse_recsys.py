"""Click-through-rate model with large sparse embedding tables (DeepFM style).

Ten single-valued categorical features (nn.Embedding, sparse gradients) and
two multi-valued ones (nn.EmbeddingBag, mean pooling, sparse gradients) feed
a factorization-machine interaction and a deep MLP.  Embeddings are trained
with torch.optim.SparseAdam, the dense part with Adam; fp32 throughout.
Batches are generated on the host in pinned memory and copied asynchronously.
"""
import argparse
import json
import time

import torch
from torch import nn

SINGLE_ROWS = [4_000_000, 2_000_000, 1_000_000, 1_000_000, 500_000, 200_000, 100_000, 50_000, 10_000, 1_000]
MULTI_ROWS = [2_000_000, 500_000]


class DeepFM(nn.Module):
    def __init__(self, dim, n_dense, mlp):
        super().__init__()
        self.single = nn.ModuleList(nn.Embedding(r, dim, sparse=True) for r in SINGLE_ROWS)
        self.multi = nn.ModuleList(nn.EmbeddingBag(r, dim, mode="mean", sparse=True) for r in MULTI_ROWS)
        self.linear_single = nn.ModuleList(nn.Embedding(r, 1, sparse=True) for r in SINGLE_ROWS)
        self.dense_proj = nn.Linear(n_dense, dim)
        n_fields = len(SINGLE_ROWS) + len(MULTI_ROWS) + 1
        layers, width = [], n_fields * dim
        for h in mlp:
            layers += [nn.Linear(width, h), nn.BatchNorm1d(h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)
        for e in [*self.single, *self.multi]:
            nn.init.uniform_(e.weight, -0.01, 0.01)

    def forward(self, dense, cat, bag_ids, bag_offsets):
        fields = [emb(cat[:, i]) for i, emb in enumerate(self.single)]
        fields += [bag(bag_ids[j], bag_offsets) for j, bag in enumerate(self.multi)]
        fields.append(self.dense_proj(dense))
        v = torch.stack(fields, dim=1)  # [B, F, D]
        fm = 0.5 * (v.sum(1).pow(2) - v.pow(2).sum(1)).sum(1, keepdim=True)
        first = sum(lin(cat[:, i]) for i, lin in enumerate(self.linear_single))
        return (first + fm + self.mlp(v.flatten(1))).squeeze(1)


def host_batch(batch, n_dense, bag_len, gen):
    dense = torch.randn(batch, n_dense, generator=gen)
    cat = torch.stack([torch.randint(0, r, (batch,), generator=gen) for r in SINGLE_ROWS], 1)
    bags = torch.stack([torch.randint(0, r, (batch * bag_len,), generator=gen) for r in MULTI_ROWS])
    labels = torch.randint(0, 2, (batch,), generator=gen).float()
    return [t.pin_memory() for t in (dense, cat, bags, labels)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--dense-features", type=int, default=16)
    ap.add_argument("--bag-len", type=int, default=20, help="ids per multi-valued feature")
    ap.add_argument("--mlp", default="1024,512,256")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()

    dev = torch.device("cuda")
    model = DeepFM(args.dim, args.dense_features, [int(x) for x in args.mlp.split(",")]).to(dev)
    sparse_params = [p for m in model.modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag))
                     for p in m.parameters()]
    sparse_ids = {id(p) for p in sparse_params}
    dense_params = [p for p in model.parameters() if id(p) not in sparse_ids]
    opt_sparse = torch.optim.SparseAdam(sparse_params, lr=1e-3)
    opt_dense = torch.optim.Adam(dense_params, lr=1e-3)
    loss_fn = nn.BCEWithLogitsLoss()

    gen = torch.Generator().manual_seed(0)
    batches = [host_batch(args.batch, args.dense_features, args.bag_len, gen) for _ in range(2)]
    offsets = torch.arange(0, args.batch * args.bag_len, args.bag_len, device=dev)

    times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        tic = time.perf_counter()
        dense, cat, bags, labels = (t.to(dev, non_blocking=True) for t in batches[step % 2])
        logits = model(dense, cat, bags, offsets)
        loss = loss_fn(logits, labels)
        opt_sparse.zero_grad()
        opt_dense.zero_grad()
        loss.backward()
        opt_sparse.step()
        opt_dense.step()
        torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - tic)

    print(json.dumps({
        "workload": "sparse_recsys",
        "world_size": 1,
        "device": torch.cuda.get_device_name(dev),
        "embedding_rows": sum(SINGLE_ROWS) * 2 + sum(MULTI_ROWS),
        "step_times_s": times,
        "max_memory_allocated": torch.cuda.max_memory_allocated(dev),
        "max_memory_reserved": torch.cuda.max_memory_reserved(dev),
        "args": vars(args),
    }))


if __name__ == "__main__":
    main()
