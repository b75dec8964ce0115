"""Recorded by `maya record --out DIR -- python3 stream_syncs.py` on an H100 (tests/test_record_sync.py):
GEMMs on the legacy default stream, each followed by a synchronisation of that stream, then GEMMs on a
stream of its own and its synchronisation."""
import torch

x = torch.randn(4096, 4096, device="cuda")
for _ in range(3):
    y = x @ x
    torch.cuda.current_stream().synchronize()          # the legacy default stream
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    for _ in range(3):
        z = x @ x
    s.synchronize()                                    # a stream of its own
torch.cuda.synchronize()
print("ok")
