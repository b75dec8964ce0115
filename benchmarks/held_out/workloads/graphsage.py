"""Full-graph GraphSAGE node classification on a fixed random graph.

Message passing written out as PyG does it: each layer gathers the source
nodes' features along the edges (``index_select``), sums them into the
destination nodes (``index_add_``, atomics) and divides by the in-degree,
then adds a linear map of the node's own features.  Three layers, ReLU and
dropout between them, cross-entropy on the training half of the nodes.  The
graph (uniform random edges), features and labels are made once on the host
and copied to the GPU; every step trains on the whole graph.  Adam with
weight decay; TF32 matmuls.
"""
from __future__ import annotations

import argparse
import json
import time

import torch
from torch import nn

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--nodes", type=int, default=262144)
ap.add_argument("--edges", type=int, default=2097152)
ap.add_argument("--features", type=int, default=128)
ap.add_argument("--hidden", type=int, default=128)
ap.add_argument("--layers", type=int, default=3)
ap.add_argument("--classes", type=int, default=40)
ap.add_argument("--batch", type=int, default=1, help="graphs per step (the whole graph: 1)")
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--warmup", type=int, default=5)
args = ap.parse_args()
torch.set_float32_matmul_precision("high")


class SAGEConv(nn.Module):
    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.self_lin = nn.Linear(d_in, d_out)
        self.neigh_lin = nn.Linear(d_in, d_out, bias=False)

    def forward(self, h: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, inv_deg: torch.Tensor) -> torch.Tensor:
        messages = h.index_select(0, src)
        summed = torch.zeros_like(h).index_add_(0, dst, messages)
        return self.self_lin(h) + self.neigh_lin(summed * inv_deg)


class GraphSAGE(nn.Module):
    def __init__(self, dims: list[int]) -> None:
        super().__init__()
        self.convs = nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims[:-1], dims[1:], strict=True))
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, inv_deg: torch.Tensor) -> torch.Tensor:
        for i, conv in enumerate(self.convs):
            x = conv(x, src, dst, inv_deg)
            if i + 1 < len(self.convs):
                x = self.drop(torch.relu(x))
        return x


gen = torch.Generator().manual_seed(0)
src_h = torch.randint(0, args.nodes, (args.edges,), generator=gen)
dst_h = torch.randint(0, args.nodes, (args.edges,), generator=gen)
deg_h = torch.bincount(dst_h, minlength=args.nodes).clamp(min=1).float()
train_h = torch.randperm(args.nodes, generator=gen)[: args.nodes // 2]

device = torch.device("cuda")
src, dst = src_h.to(device), dst_h.to(device)
inv_deg = (1.0 / deg_h).unsqueeze(1).to(device)
train_idx = train_h.to(device)
x = torch.randn(args.nodes, args.features, generator=gen).to(device)
y = torch.randint(0, args.classes, (args.nodes,), generator=gen).to(device)

dims = [args.features] + [args.hidden] * (args.layers - 1) + [args.classes]
model = GraphSAGE(dims).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=5e-4)
criterion = nn.CrossEntropyLoss()

step_times = []
for step in range(args.warmup + args.steps):
    torch.cuda.synchronize()
    start = time.perf_counter()
    model.train()
    optimizer.zero_grad()
    out = model(x, src, dst, inv_deg)
    loss = criterion(out[train_idx], y[train_idx])
    loss.backward()
    optimizer.step()
    torch.cuda.synchronize()
    if step >= args.warmup:
        step_times.append(time.perf_counter() - start)

print(json.dumps({
    "workload": "graphsage",
    "world_size": 1,
    "device": torch.cuda.get_device_name(),
    "step_times_s": step_times,
    "loss_last": loss.item(),
    "max_memory_allocated": torch.cuda.max_memory_allocated(),
    "max_memory_reserved": torch.cuda.max_memory_reserved(),
    "args": vars(args),
}))
