# GPT-2 medium (350M class) language-model training with DistributedDataParallel.
#
# Launch: torchrun --nproc-per-node 2 ddp_gpt_medium.py
# 24 pre-LN layers of width 1024 built from nn.MultiheadAttention, tied
# embeddings, bf16 autocast, gradient clipping, pinned host batches.
import argparse
import json
import os
import time
from dataclasses import asdict, dataclass

import torch
from torch import distributed as dist
from torch import nn
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclass
class Config:
    vocab_size: int = 50304
    block_size: int = 1024
    n_layer: int = 24
    n_head: int = 16
    n_embd: int = 1024
    batch: int = 4
    lr: float = 3e-4
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    steps: int = 30
    warmup: int = 5


class DecoderLayer(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.norm_a = nn.LayerNorm(cfg.n_embd)
        self.attn = nn.MultiheadAttention(cfg.n_embd, cfg.n_head, batch_first=True)
        self.norm_m = nn.LayerNorm(cfg.n_embd)
        self.fc_in = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.fc_out = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, h, mask):
        a = self.norm_a(h)
        h = h + self.attn(a, a, a, attn_mask=mask, is_causal=True, need_weights=False)[0]
        return h + self.fc_out(F.gelu(self.fc_in(self.norm_m(h))))


class LanguageModel(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos = nn.Parameter(torch.zeros(cfg.block_size, cfg.n_embd))
        self.layers = nn.ModuleList([DecoderLayer(cfg) for _ in range(cfg.n_layer)])
        self.norm = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.head.weight = self.tok.weight
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos, std=0.01)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(cfg.block_size),
                             persistent=False)

    def forward(self, tokens):
        t = tokens.shape[1]
        h = self.tok(tokens) + self.pos[:t]
        mask = self.mask[:t, :t]
        for layer in self.layers:
            h = layer(h, mask)
        return self.head(self.norm(h))


def parse() -> Config:
    cfg = Config()
    p = argparse.ArgumentParser(description="GPT-2 medium DDP training")
    for k, v in asdict(cfg).items():
        p.add_argument("--" + k.replace("_", "-"), type=type(v), default=v)
    return Config(**vars(p.parse_args()))


def main():
    cfg = parse()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    torch.manual_seed(0)

    net = LanguageModel(cfg).cuda()
    net = DDP(net, device_ids=[local_rank], output_device=local_rank)
    params = [p for p in net.parameters() if p.requires_grad]
    optim = torch.optim.AdamW(
        [{"params": [p for p in params if p.ndim >= 2], "weight_decay": cfg.weight_decay},
         {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
        lr=cfg.lr, betas=(0.9, 0.95))

    host_batch = torch.empty((cfg.batch, cfg.block_size + 1), dtype=torch.long).pin_memory()

    def next_batch():
        host_batch.random_(0, cfg.vocab_size)
        b = host_batch.cuda(non_blocking=True)
        return b[:, :-1], b[:, 1:]

    elapsed = []
    total = cfg.warmup + cfg.steps
    for step in range(total):
        torch.cuda.synchronize()
        start = time.perf_counter()
        inputs, labels = next_batch()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = net(inputs)
        loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), cfg.grad_clip)
        optim.step()
        optim.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= cfg.warmup:
            elapsed.append(time.perf_counter() - start)

    record = {
        "workload": "ddp_gpt_medium",
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "device": torch.cuda.get_device_name(),
        "params": sum(p.numel() for p in net.module.parameters()),
        "step_times_s": elapsed,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "config": asdict(cfg),
    }
    print(json.dumps(record), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
