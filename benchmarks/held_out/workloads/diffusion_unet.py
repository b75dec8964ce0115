"""DDPM training step for a UNet noise predictor (64x64 RGB), single GPU.

ResNet blocks with GroupNorm and SiLU, sinusoidal timestep embedding fed
through an MLP into every block, self-attention at the 16x16 and 8x8
resolutions, skip connections between the down and up paths. The loss is
the MSE between the sampled noise and the prediction; bf16 autocast, AdamW,
and an exponential moving average of the weights as diffusion trainers keep.
"""
import argparse
import copy
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def timestep_embedding(t, dim):
    half = dim // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, cin, cout, temb, dropout=0.1):
        super().__init__()
        self.norm1 = nn.GroupNorm(32, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(32, cout)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, emb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(F.silu(emb))[:, :, None, None]
        h = self.conv2(self.dropout(F.silu(self.norm2(h))))
        return h + self.skip(x)


class SelfAttention2d(nn.Module):
    def __init__(self, ch, heads=4):
        super().__init__()
        self.heads = heads
        self.norm = nn.GroupNorm(32, ch)
        self.qkv = nn.Conv2d(ch, ch * 3, 1)
        self.proj = nn.Conv2d(ch, ch, 1)

    def forward(self, x):
        b, c, hh, ww = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, hh * ww).unbind(1)
        out = F.scaled_dot_product_attention(q.transpose(-1, -2), k.transpose(-1, -2), v.transpose(-1, -2))
        return x + self.proj(out.transpose(-1, -2).reshape(b, c, hh, ww))


class UNet(nn.Module):
    def __init__(self, ch=128, mults=(1, 2, 2, 2), attn_res=(16, 8), blocks=2, res=64):
        super().__init__()
        temb = ch * 4
        self.ch = ch
        self.time_mlp = nn.Sequential(nn.Linear(ch, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.stem = nn.Conv2d(3, ch, 3, padding=1)
        self.down = nn.ModuleList()
        skips = [ch]
        cur, r = ch, res
        for i, m in enumerate(mults):
            for _ in range(blocks):
                layer = nn.ModuleList([ResBlock(cur, ch * m, temb)])
                cur = ch * m
                if r in attn_res:
                    layer.append(SelfAttention2d(cur))
                self.down.append(layer)
                skips.append(cur)
            if i != len(mults) - 1:
                self.down.append(nn.ModuleList([nn.Conv2d(cur, cur, 3, stride=2, padding=1)]))
                skips.append(cur)
                r //= 2
        self.mid = nn.ModuleList([ResBlock(cur, cur, temb), SelfAttention2d(cur), ResBlock(cur, cur, temb)])
        self.up = nn.ModuleList()
        for i, m in reversed(list(enumerate(mults))):
            for _ in range(blocks + 1):
                layer = nn.ModuleList([ResBlock(cur + skips.pop(), ch * m, temb)])
                cur = ch * m
                if r in attn_res:
                    layer.append(SelfAttention2d(cur))
                self.up.append(layer)
            if i != 0:
                self.up.append(nn.ModuleList([nn.Upsample(scale_factor=2, mode="nearest"),
                                              nn.Conv2d(cur, cur, 3, padding=1)]))
                r *= 2
        self.out = nn.Sequential(nn.GroupNorm(32, cur), nn.SiLU(), nn.Conv2d(cur, 3, 3, padding=1))

    @staticmethod
    def _run(layer, h, emb):
        for mod in layer:
            h = mod(h, emb) if isinstance(mod, ResBlock) else mod(h)
        return h

    def forward(self, x, t):
        emb = self.time_mlp(timestep_embedding(t, self.ch))
        h = self.stem(x)
        hs = [h]
        for layer in self.down:
            h = self._run(layer, h, emb)
            hs.append(h)
        h = self._run(self.mid, h, emb)
        for layer in self.up:
            if isinstance(layer[0], ResBlock):
                h = self._run(layer, torch.cat([h, hs.pop()], dim=1), emb)
            else:
                h = self._run(layer, h, emb)
        return self.out(h)


def main():
    parser = argparse.ArgumentParser(description="DDPM UNet training")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--resolution", type=int, default=64)
    parser.add_argument("--channels", type=int, default=128)
    parser.add_argument("--timesteps", type=int, default=1000)
    parser.add_argument("--ema-decay", type=float, default=0.9999)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()

    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    model = UNet(ch=args.channels, res=args.resolution).to(device)
    ema = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-4, weight_decay=0.0)

    betas = torch.linspace(1e-4, 0.02, args.timesteps, device=device)
    alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)

    def training_step():
        x0 = torch.randn(args.batch, 3, args.resolution, args.resolution, device=device).clamp_(-1, 1)
        t = torch.randint(0, args.timesteps, (args.batch,), device=device)
        noise = torch.randn_like(x0)
        a = alphas_cumprod[t].view(-1, 1, 1, 1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        with torch.autocast("cuda", dtype=torch.bfloat16):
            pred = model(xt, t)
        loss = F.mse_loss(pred.float(), noise)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(list(ema.parameters()), list(model.parameters()), 1 - args.ema_decay)

    step_times = []
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        training_step()
        torch.cuda.synchronize()
        if step >= args.warmup:
            step_times.append(time.perf_counter() - start)

    print(json.dumps({
        "workload": "diffusion_unet",
        "world_size": 1,
        "device": torch.cuda.get_device_name(0),
        "params": sum(p.numel() for p in model.parameters()),
        "step_times_s": step_times,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "args": vars(args),
    }))


if __name__ == "__main__":
    main()
