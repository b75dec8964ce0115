"""Encoder-decoder Transformer (base size) for translation, trained with teacher forcing.

Uses torch.nn.Transformer (6 encoder + 6 decoder layers, d_model 512, 8 heads,
FFN 2048), shared source/target embeddings tied to the generator, a causal
target mask, source/target padding masks, label smoothing and Adam with the
inverse square root schedule.  Random token batches of fixed length are drawn on the GPU.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import torch
from torch import Tensor, nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, max_len: int = 4096):
        super().__init__()
        pos = torch.arange(max_len).unsqueeze(1)
        div = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(pos * div)
        pe[:, 1::2] = torch.cos(pos * div)
        self.register_buffer("pe", pe)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.pe[: x.size(1)]


class Seq2Seq(nn.Module):
    PAD = 0

    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, ffn: int, dropout: float):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model, padding_idx=self.PAD)
        self.pos = PositionalEncoding(d_model)
        self.drop = nn.Dropout(dropout)
        self.transformer = nn.Transformer(d_model=d_model, nhead=heads, num_encoder_layers=layers,
                                          num_decoder_layers=layers, dim_feedforward=ffn, dropout=dropout,
                                          batch_first=True)
        self.generator = nn.Linear(d_model, vocab, bias=False)
        self.generator.weight = self.embed.weight

    def encode_tokens(self, t: Tensor) -> Tensor:
        return self.drop(self.pos(self.embed(t) * math.sqrt(self.d_model)))

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        tgt_mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=src.device)
        src_pad = src == self.PAD
        tgt_pad = tgt_in == self.PAD
        out = self.transformer(self.encode_tokens(src), self.encode_tokens(tgt_in), tgt_mask=tgt_mask,
                               src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
                               memory_key_padding_mask=src_pad, tgt_is_causal=True)
        return self.generator(out)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64, help="sentence pairs per step")
    ap.add_argument("--src-len", type=int, default=256)
    ap.add_argument("--tgt-len", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--ffn", type=int, default=2048)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    opt = ap.parse_args(argv)

    device = torch.device("cuda")
    model = Seq2Seq(opt.vocab, opt.d_model, opt.heads, opt.layers, opt.ffn, opt.dropout).to(device)
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    adam = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        adam, lambda s: opt.d_model ** -0.5 * min((s + 1) ** -0.5, (s + 1) * 4000 ** -1.5))
    loss_fn = nn.CrossEntropyLoss(ignore_index=Seq2Seq.PAD, label_smoothing=0.1)
    scaler_dtype = torch.bfloat16

    step_times: list[float] = []
    for step in range(opt.warmup + opt.steps):
        torch.cuda.synchronize()
        tic = time.perf_counter()
        src = torch.randint(1, opt.vocab, (opt.batch, opt.src_len), device=device)
        tgt = torch.randint(1, opt.vocab, (opt.batch, opt.tgt_len + 1), device=device)
        with torch.autocast("cuda", dtype=scaler_dtype):
            logits = model(src, tgt[:, :-1])
            loss = loss_fn(logits.reshape(-1, opt.vocab), tgt[:, 1:].reshape(-1))
        adam.zero_grad()
        loss.backward()
        adam.step()
        schedule.step()
        torch.cuda.synchronize()
        if step >= opt.warmup:
            step_times.append(time.perf_counter() - tic)

    print(json.dumps({
        "workload": "seq2seq_transformer",
        "world_size": 1,
        "device": torch.cuda.get_device_name(),
        "step_times_s": step_times,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "tokens_per_step": opt.batch * (opt.src_len + opt.tgt_len),
        "options": vars(opt),
    }))


if __name__ == "__main__":
    main(sys.argv[1:])
