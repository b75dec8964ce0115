"""Frame classifier over utterances of varying length: a packed, sorted, stacked bidirectional GRU.

Speech-like input (80 filterbank features a frame), utterances of random
length sorted longest first and packed (``enforce_sorted=True``), three
bidirectional cuDNN GRU layers with dropout between them, a per-frame linear
classifier over 48 classes with the padding frames ignored.  AdamW, gradient
norm clipped at 1.  fp32 (TF32 off).  Features and labels are generated on
the host once and copied to the GPU per batch; a small ordinary
``.cuda()`` copy of the lengths too.
"""
import argparse
import json
import time

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class FrameGRU(nn.Module):
    def __init__(self, feats, hidden, layers, classes):
        super().__init__()
        self.norm = nn.LayerNorm(feats)
        self.gru = nn.GRU(feats, hidden, layers, batch_first=True, bidirectional=True, dropout=0.1)
        self.out = nn.Linear(2 * hidden, classes)

    def forward(self, x, lengths):
        packed = pack_padded_sequence(self.norm(x), lengths, batch_first=True, enforce_sorted=True)
        y, _ = self.gru(packed)
        y, _ = pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])
        return self.out(y)


parser = argparse.ArgumentParser(description="packed bidirectional GRU frame classifier")
parser.add_argument("--batch", type=int, default=32)
parser.add_argument("--max-frames", type=int, default=300)
parser.add_argument("--feats", type=int, default=80)
parser.add_argument("--hidden", type=int, default=320)
parser.add_argument("--layers", type=int, default=3)
parser.add_argument("--classes", type=int, default=48)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--warmup", type=int, default=5)
args = parser.parse_args()

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
device = torch.device("cuda")
model = FrameGRU(args.feats, args.hidden, args.layers, args.classes).to(device)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss(ignore_index=-1)

g = torch.Generator().manual_seed(1)
batches = []
for _ in range(args.warmup + args.steps):
    lengths, _ = torch.randint(args.max_frames // 3, args.max_frames + 1, (args.batch,), generator=g).sort(
        descending=True)
    x = torch.randn(args.batch, args.max_frames, args.feats, generator=g)
    y = torch.randint(0, args.classes, (args.batch, args.max_frames), generator=g)
    y[torch.arange(args.max_frames)[None, :] >= lengths[:, None]] = -1
    batches.append((x.pin_memory(), y.pin_memory(), lengths))

model.train()
timings = []
for i, (x, y, lengths) in enumerate(batches):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
    frames = lengths.cuda().sum()  # the real frames of the batch, for the log
    scores = model(x, lengths)
    loss = loss_fn(scores.reshape(-1, args.classes), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    torch.cuda.synchronize()
    if i >= args.warmup:
        timings.append(time.perf_counter() - t0)

print(json.dumps({
    "workload": "packed_gru_frames",
    "world_size": 1,
    "device": torch.cuda.get_device_name(),
    "step_times_s": timings,
    "frames_last": int(frames),
    "max_memory_allocated": torch.cuda.max_memory_allocated(),
    "max_memory_reserved": torch.cuda.max_memory_reserved(),
    "args": vars(args),
}))
