"""Character-level GRU language model, as in the classic char-rnn recipe.

Bytes in, bytes out: an embedding of the 256 byte values, two cuDNN GRU
layers with dropout between them, a linear head; the hidden state is carried
across segments and detached.  Adam, gradient norm clipped at 5.  fp32 with
TF32 matmuls.  The byte stream is generated on the GPU.  Small layers over
long segments: many short kernels per segment.
"""
import argparse
import json
import time

import torch
import torch.nn as nn


class CharGRU(nn.Module):
    def __init__(self, vocab, emb, hidden, layers, dropout):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.gru = nn.GRU(emb, hidden, layers, dropout=dropout, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x, h):
        y, h = self.gru(self.embed(x), h)
        return self.head(y), h


parser = argparse.ArgumentParser(description="character-level GRU language model")
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--seq", type=int, default=200)
parser.add_argument("--emb", type=int, default=64)
parser.add_argument("--hidden", type=int, default=512)
parser.add_argument("--layers", type=int, default=2)
parser.add_argument("--dropout", type=float, default=0.1)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--warmup", type=int, default=5)
args = parser.parse_args()

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
device = torch.device("cuda")
model = CharGRU(256, args.emb, args.hidden, args.layers, args.dropout).to(device)
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
loss_fn = nn.CrossEntropyLoss()

segments = args.warmup + args.steps
text = torch.randint(0, 256, (args.batch, segments * args.seq + 1), device=device)
h = torch.zeros(args.layers, args.batch, args.hidden, device=device)
model.train()
timings = []
for i in range(segments):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    x = text[:, i * args.seq:(i + 1) * args.seq]
    y = text[:, i * args.seq + 1:(i + 1) * args.seq + 1]
    h = h.detach()
    opt.zero_grad(set_to_none=True)
    logits, h = model(x, h)
    loss = loss_fn(logits.reshape(-1, 256), y.reshape(-1))
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
    torch.cuda.synchronize()
    if i >= args.warmup:
        timings.append(time.perf_counter() - t0)

print(json.dumps({
    "workload": "char_gru",
    "world_size": 1,
    "device": torch.cuda.get_device_name(),
    "step_times_s": timings,
    "max_memory_allocated": torch.cuda.max_memory_allocated(),
    "max_memory_reserved": torch.cuda.max_memory_reserved(),
    "args": vars(args),
}))
