"""Word-level LSTM language model with truncated backpropagation through time.

Three cuDNN LSTM layers; the hidden state is carried from one segment to the
next and detached; gradient norm clipped at 0.25; plain SGD, as in the classic
PyTorch word_language_model recipe, on a larger vocabulary and hidden size.
fp32 weights with TF32 matmuls.  Token stream generated on the GPU.
"""
import argparse
import json
import time

import torch
import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2, tie=False):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie:
            assert nhid == ninp, "--tie needs --emsize equal to --nhid"
            self.decoder.weight = self.encoder.weight
        self.nlayers, self.nhid = nlayers, nhid
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, inp, hidden):
        emb = self.drop(self.encoder(inp))
        output, hidden = self.rnn(emb, hidden)
        return self.decoder(self.drop(output)), hidden

    def init_hidden(self, bsz):
        w = next(self.parameters())
        return (w.new_zeros(self.nlayers, bsz, self.nhid), w.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    return tuple(v.detach() for v in h)


parser = argparse.ArgumentParser(description="LSTM language model (truncated BPTT)")
parser.add_argument("--vocab", type=int, default=33278)
parser.add_argument("--emsize", type=int, default=1024)
parser.add_argument("--nhid", type=int, default=1024)
parser.add_argument("--nlayers", type=int, default=3)
parser.add_argument("--bptt", type=int, default=128)
parser.add_argument("--batch", type=int, default=64)
parser.add_argument("--lr", type=float, default=20.0)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--tie", action="store_true")
parser.add_argument("--steps", type=int, default=30)
parser.add_argument("--warmup", type=int, default=5)
args = parser.parse_args()

torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
device = torch.device("cuda")
model = RNNModel(args.vocab, args.emsize, args.nhid, args.nlayers, tie=args.tie).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

n_segments = args.warmup + args.steps
stream = torch.randint(0, args.vocab, (n_segments * args.bptt + 1, args.batch), device=device)
hidden = model.init_hidden(args.batch)
model.train()
timings = []
for i in range(n_segments):
    torch.cuda.synchronize()
    start = time.perf_counter()
    data = stream[i * args.bptt:(i + 1) * args.bptt]
    target = stream[i * args.bptt + 1:(i + 1) * args.bptt + 1].reshape(-1)
    hidden = repackage_hidden(hidden)
    model.zero_grad()
    output, hidden = model(data, hidden)
    loss = criterion(output.view(-1, args.vocab), target)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    optimizer.step()
    torch.cuda.synchronize()
    if i >= args.warmup:
        timings.append(time.perf_counter() - start)

print(json.dumps({
    "workload": "lstm_lm",
    "world_size": 1,
    "device": torch.cuda.get_device_name(),
    "step_times_s": timings,
    "max_memory_allocated": torch.cuda.max_memory_allocated(),
    "max_memory_reserved": torch.cuda.max_memory_reserved(),
    "args": vars(args),
}))
