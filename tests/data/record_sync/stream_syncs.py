"""Recorded by `maya record --out DIR -- python3 stream_syncs.py` on an H100 (tests/test_record_sync.py):
GEMMs on the legacy default stream, each followed by a synchronisation of that stream; GEMMs on a stream
of its own and its synchronisation; then GEMMs on that stream that the default stream waits for (an event
recorded there, waited for here) before a GEMM of its own, and an event's synchronisation."""
import torch

x = torch.randn(4096, 4096, device="cuda")
for _ in range(3):
    y = x @ x
    torch.cuda.current_stream().synchronize()  # the legacy default stream
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    for _ in range(3):
        z = x @ x
    s.synchronize()  # a stream of its own
    for _ in range(3):
        z = z @ x
torch.cuda.current_stream().wait_stream(s)  # event recorded on s, waited for on the default stream
w = z @ x
done = torch.cuda.Event()
done.record()
done.synchronize()
torch.cuda.synchronize()
print("ok")
