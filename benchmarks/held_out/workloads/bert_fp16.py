"""BERT-base masked-language-model pretraining step in fp16 mixed precision with a GradScaler.

Post-LayerNorm encoder written in the layout of the original BERT
(word/position/token-type embeddings, 12 layers, 12 heads, GELU
intermediate of 3072), an MLM head tied to the word embeddings plus the
next-sentence head.  15% of positions carry a label, the rest are ignored.
AdamW with linear warm-up and decay; gradients unscaled and clipped.
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F
from torch import nn


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads, p):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.p = p

    def split(self, x):
        b, s, _ = x.size()
        return x.view(b, s, self.heads, -1).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        ctx = F.scaled_dot_product_attention(self.split(self.query(x)), self.split(self.key(x)),
                                             self.split(self.value(x)), attn_mask=mask,
                                             dropout_p=self.p if self.training else 0.0)
        return ctx.permute(0, 2, 1, 3).flatten(2)


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, inter, p):
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads, p)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, inter)
        self.output = nn.Linear(inter, hidden)
        self.out_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(p)

    def forward(self, x, mask):
        x = self.attn_norm(x + self.dropout(self.attn_out(self.attention(x, mask))))
        return self.out_norm(x + self.dropout(self.output(F.gelu(self.intermediate(x)))))


class BertForPreTraining(nn.Module):
    def __init__(self, vocab=30522, hidden=768, layers=12, heads=12, inter=3072, max_pos=512, p=0.1):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden, padding_idx=0)
        self.position = nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.emb_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.drop = nn.Dropout(p)
        self.layers = nn.ModuleList([BertLayer(hidden, heads, inter, p) for _ in range(layers)])
        self.pooler = nn.Linear(hidden, hidden)
        self.transform = nn.Linear(hidden, hidden)
        self.transform_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(vocab))
        self.nsp = nn.Linear(hidden, 2)
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            m.weight.data.normal_(mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            m.bias.data.zero_()

    def forward(self, input_ids, token_type_ids, attention_mask):
        pos = torch.arange(input_ids.size(1), device=input_ids.device).unsqueeze(0)
        h = self.drop(self.emb_norm(self.word(input_ids) + self.position(pos) + self.token_type(token_type_ids)))
        # [B, 1, 1, S] additive mask: 0 where attended, large negative on padding
        ext = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
        for layer in self.layers:
            h = layer(h, ext)
        t = self.transform_norm(F.gelu(self.transform(h)))
        mlm_logits = F.linear(t, self.word.weight, self.mlm_bias)
        nsp_logits = self.nsp(torch.tanh(self.pooler(h[:, 0])))
        return mlm_logits, nsp_logits


def main():
    ap = argparse.ArgumentParser(description="BERT-base MLM+NSP pretraining, fp16 + GradScaler")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=30522)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps; GradScaler skips the first few")
    args = ap.parse_args()

    device = "cuda"
    model = BertForPreTraining(vocab=args.vocab).to(device)
    no_decay = ("bias", "norm.weight", "norm.bias")
    groups = [{"params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)], "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=1e-4, eps=1e-6)
    total = args.warmup + args.steps
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min((s + 1) / 10, (total - s) / total))
    scaler = torch.amp.GradScaler("cuda")

    g = torch.Generator(device=device)
    g.manual_seed(1234)
    timings = []
    for step in range(total):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        ids = torch.randint(1000, args.vocab, (args.batch, args.seq_len), device=device, generator=g)
        types = torch.zeros_like(ids)
        types[:, args.seq_len // 2:] = 1
        attn = torch.ones_like(ids)
        labels = torch.where(torch.rand(ids.shape, device=device, generator=g) < 0.15, ids, -100)
        nsp_labels = torch.randint(0, 2, (args.batch,), device=device, generator=g)
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            mlm_logits, nsp_logits = model(ids, types, attn)
            loss = (F.cross_entropy(mlm_logits.view(-1, args.vocab).float(), labels.view(-1), ignore_index=-100)
                    + F.cross_entropy(nsp_logits.float(), nsp_labels))
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        torch.cuda.synchronize()
        if step >= args.warmup:
            timings.append(time.perf_counter() - t0)

    print(json.dumps({
        "workload": "bert_fp16",
        "world_size": 1,
        "device": torch.cuda.get_device_name(),
        "step_times_s": timings,
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "loss_scale": scaler.get_scale(),
        "args": vars(args),
    }))


if __name__ == "__main__":
    main()
