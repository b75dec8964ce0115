"""Data-parallel training of a small GPT with DistributedDataParallel over NCCL.

Launch with `torchrun --nproc_per_node 2 examples/ddp.py`.  Same model as
gpt.py (smaller by default), bf16 autocast, fused AdamW (or `--optimizer
foreach`), optional gradient clipping (`--clip-grad`).  Every rank prints
one JSON line at the end (see common.py); `--profile-out` and
`--result-out` get a per-rank suffix.
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from common import add_common_args, parse_args, train
from gpt import GPT, adamw, add_model_args
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_model_args(p, n_layer=6, n_head=8, n_embd=512, seq_len=512, batch=8)
    p.add_argument("--bucket-mb", type=int, default=25, help="DDP bucket size in MiB")
    add_common_args(p)
    args = parse_args(p)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    torch.manual_seed(args.seed)
    dev = torch.device("cuda", local_rank)
    with dev:
        model = GPT(args.vocab, args.seq_len, args.n_layer, args.n_head, args.n_embd)
    ddp = DDP(model, device_ids=[local_rank], bucket_cap_mb=args.bucket_mb)
    opt = adamw(ddp.parameters(), args)
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed + dist.get_rank())

    def step(i: int) -> None:
        data = torch.randint(0, args.vocab, (args.batch, args.seq_len + 1), device=dev, generator=gen)
        x, y = data[:, :-1], data[:, 1:]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = ddp(x)
            loss = F.cross_entropy(logits.view(-1, args.vocab), y.reshape(-1))
        loss.backward()
        if args.clip_grad:
            torch.nn.utils.clip_grad_norm_(ddp.parameters(), args.clip_grad)
        opt.step()
        opt.zero_grad(set_to_none=True)

    n_params = sum(p.numel() for p in model.parameters())
    try:
        train("ddp", args, step, {"parameters": n_params})
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
