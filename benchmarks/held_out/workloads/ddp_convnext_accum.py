"""ConvNeXt-Tiny image classification with DDP and gradient accumulation.

Two micro-batches per optimizer step: the first under ``no_sync()`` (no
all-reduce), the second synchronises the gradients.  Depthwise 7x7
convolutions, LayerNorm over channels, inverted-bottleneck MLPs with layer
scale, stochastic depth; bf16 autocast, channels_last, AdamW.  DDP is built
with ``gradient_as_bucket_view=True``.

    torchrun --nproc-per-node 2 ddp_convnext_accum.py --batch 64 --accum 2
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channel dimension of an NCHW tensor."""

    def forward(self, x):
        return F.layer_norm(x.permute(0, 2, 3, 1), self.normalized_shape, self.weight, self.bias,
                            self.eps).permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    def __init__(self, dim, drop_path):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pw1 = nn.Linear(dim, 4 * dim)
        self.pw2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(1e-6 * torch.ones(dim))
        self.drop_path = drop_path

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.gamma * self.pw2(F.gelu(self.pw1(self.norm(y))))
        y = y.permute(0, 3, 1, 2)
        if self.training and self.drop_path > 0:
            keep = torch.empty(x.shape[0], 1, 1, 1, device=x.device, dtype=y.dtype).bernoulli_(1 - self.drop_path)
            y = y * keep / (1 - self.drop_path)
        return x + y


class ConvNeXt(nn.Module):
    def __init__(self, depths=(3, 3, 9, 3), dims=(96, 192, 384, 768), num_classes=1000, drop_path=0.1):
        super().__init__()
        self.downsample = nn.ModuleList([nn.Sequential(nn.Conv2d(3, dims[0], 4, stride=4),
                                                       LayerNorm2d(dims[0], eps=1e-6))])
        for i in range(3):
            self.downsample.append(nn.Sequential(LayerNorm2d(dims[i], eps=1e-6),
                                                 nn.Conv2d(dims[i], dims[i + 1], 2, stride=2)))
        rates = torch.linspace(0, drop_path, sum(depths)).tolist()
        self.stages = nn.ModuleList()
        k = 0
        for i, d in enumerate(depths):
            self.stages.append(nn.Sequential(*[CNBlock(dims[i], rates[k + j]) for j in range(d)]))
            k += d
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], num_classes)

    def forward(self, x):
        for down, stage in zip(self.downsample, self.stages, strict=True):
            x = stage(down(x))
        return self.head(self.norm(x.mean((-2, -1))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=64, help="images per micro-batch per rank")
    parser.add_argument("--accum", type=int, default=2, help="micro-batches per optimizer step")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()

    rank = int(os.environ["RANK"])
    local_rank = int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    torch.backends.cudnn.benchmark = True

    model = ConvNeXt().to(device, memory_format=torch.channels_last)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank], gradient_as_bucket_view=True)
    opt = torch.optim.AdamW(model.parameters(), lr=4e-3, weight_decay=0.05)
    crit = nn.CrossEntropyLoss(label_smoothing=0.1)

    def micro_batch():
        x = torch.randn(args.batch, 3, args.image_size, args.image_size, device=device)
        y = torch.randint(0, 1000, (args.batch,), device=device)
        return x.to(memory_format=torch.channels_last), y

    def one_step():
        for m in range(args.accum):
            x, y = micro_batch()
            last = m == args.accum - 1
            ctx = model.no_sync() if not last else torch.enable_grad()
            with ctx:
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = crit(model(x), y) / args.accum
                loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step_s = []
    for i in range(args.warmup + args.steps):
        torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        one_step()
        torch.cuda.synchronize(device)
        if i >= args.warmup:
            step_s.append(time.perf_counter() - t0)

    print(json.dumps({"workload": "ddp_convnext_accum", "rank": rank, "world_size": world,
                      "device": torch.cuda.get_device_name(device), "step_times_s": step_s,
                      "max_memory_allocated": torch.cuda.max_memory_allocated(device),
                      "max_memory_reserved": torch.cuda.max_memory_reserved(device),
                      "images_per_step": args.batch * args.accum * world, "args": vars(args)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
