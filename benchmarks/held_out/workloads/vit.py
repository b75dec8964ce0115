#!/usr/bin/env python3
"""Vision Transformer (ViT-B/16) image classification, one GPU, bf16 autocast.

Patch embedding by a strided convolution, class token, learned position
embedding, pre-norm encoder blocks, label-smoothed cross entropy, AdamW with
a cosine schedule.  Synthetic ImageNet-sized batches are generated on the GPU.
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def get_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--patch", type=int, default=16)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--depth", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--mlp-ratio", type=float, default=4.0)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    return p.parse_args()


class PatchEmbed(nn.Module):
    def __init__(self, img, patch, dim):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.num_patches = (img // patch) ** 2

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)  # B, N, D


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Linear(dim, dim * 3, bias=True)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.to_qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
        return self.out(x.transpose(1, 2).reshape(b, n, d))


class EncoderBlock(nn.Module):
    def __init__(self, dim, heads, mlp_ratio):
        super().__init__()
        hidden = int(dim * mlp_ratio)
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return x


class VisionTransformer(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.patch_embed = PatchEmbed(a.image_size, a.patch, a.width)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, a.width))
        self.pos_embed = nn.Parameter(torch.randn(1, self.patch_embed.num_patches + 1, a.width) * 0.02)
        self.blocks = nn.Sequential(*[EncoderBlock(a.width, a.heads, a.mlp_ratio) for _ in range(a.depth)])
        self.norm = nn.LayerNorm(a.width, eps=1e-6)
        self.head = nn.Linear(a.width, a.classes)

    def forward(self, img):
        x = self.patch_embed(img)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.blocks(x)
        return self.head(self.norm(x)[:, 0])


def main():
    args = get_args()
    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = VisionTransformer(args).to(dev)
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if p.ndim == 1 or n in ("cls_token", "pos_embed") else decay).append(p)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=1e-3, fused=True)
    total = args.warmup + args.steps
    sched = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * s / total)))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    times = []
    for i in range(total):
        torch.cuda.synchronize()
        t = time.perf_counter()
        images = torch.randn(args.batch, 3, args.image_size, args.image_size, device=dev)
        labels = torch.randint(0, args.classes, (args.batch,), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = criterion(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        sched.step()
        torch.cuda.synchronize()
        if i >= args.warmup:
            times.append(time.perf_counter() - t)

    print(json.dumps(dict(
        workload="vit",
        world_size=1,
        device=torch.cuda.get_device_name(0),
        step_times_s=times,
        max_memory_allocated=torch.cuda.max_memory_allocated(),
        max_memory_reserved=torch.cuda.max_memory_reserved(),
        images_per_step=args.batch,
        args=vars(args),
    )))


if __name__ == "__main__":
    main()
