"""Bidirectional LSTM sequence tagger (part-of-speech style) over padded, packed sentences.

Word embeddings, one bidirectional cuDNN LSTM layer over sentences of
varying length (packed, so the padding is not computed), a linear layer to
the tag scores; cross-entropy over the real tokens only.  SGD with momentum.
fp32 with TF32 matmuls.  Sentences and their lengths are generated on the
host, once, and copied to the GPU per batch.
"""
import argparse
import json
import time

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


class Tagger(nn.Module):
    def __init__(self, vocab, emb, hidden, tags):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb, padding_idx=0)
        self.lstm = nn.LSTM(emb, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, words, lengths):
        packed = pack_padded_sequence(self.embed(words), lengths, batch_first=True, enforce_sorted=False)
        y, _ = self.lstm(packed)
        y, _ = pad_packed_sequence(y, batch_first=True, total_length=words.shape[1])
        return self.out(y)


parser = argparse.ArgumentParser(description="bidirectional LSTM tagger")
parser.add_argument("--batch", type=int, default=128)
parser.add_argument("--max-len", type=int, default=64)
parser.add_argument("--vocab", type=int, default=50000)
parser.add_argument("--emb", type=int, default=300)
parser.add_argument("--hidden", type=int, default=256)
parser.add_argument("--tags", type=int, default=48)
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--warmup", type=int, default=5)
args = parser.parse_args()

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
device = torch.device("cuda")
model = Tagger(args.vocab, args.emb, args.hidden, args.tags).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
loss_fn = nn.CrossEntropyLoss(ignore_index=-100)

g = torch.Generator().manual_seed(0)
batches = []
for _ in range(args.warmup + args.steps):
    lengths = torch.randint(args.max_len // 4, args.max_len + 1, (args.batch,), generator=g)
    words = torch.randint(1, args.vocab, (args.batch, args.max_len), generator=g)
    tags = torch.randint(0, args.tags, (args.batch, args.max_len), generator=g)
    pad = torch.arange(args.max_len)[None, :] >= lengths[:, None]
    words[pad], tags[pad] = 0, -100
    batches.append((words.pin_memory(), tags.pin_memory(), lengths))

model.train()
timings = []
for i, (words, tags, lengths) in enumerate(batches):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    words, tags = words.to(device, non_blocking=True), tags.to(device, non_blocking=True)
    opt.zero_grad(set_to_none=True)
    scores = model(words, lengths)
    loss = loss_fn(scores.reshape(-1, args.tags), tags.reshape(-1))
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
    if i >= args.warmup:
        timings.append(time.perf_counter() - t0)

print(json.dumps({
    "workload": "bilstm_tagger",
    "world_size": 1,
    "device": torch.cuda.get_device_name(),
    "step_times_s": timings,
    "max_memory_allocated": torch.cuda.max_memory_allocated(),
    "max_memory_reserved": torch.cuda.max_memory_reserved(),
    "args": vars(args),
}))
