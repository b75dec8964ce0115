"""A 2-rank DDP job emulates to the same device operations on every run (stream.c).

Covers, with ``torchrun --standalone --nproc-per-node 2`` under ``maya emulate``:
- a DDP job run twice, once with the host pausing after every step (so
  torch's NCCL watchdog thread polls many times between steps) and once
  without, gives per rank the same sequence of MALLOC/FREE sizes and of
  kernels, and the same per-step memory figures seen by the script: when
  the watchdog sees a collective complete (and so drops the bucket tensors
  it keeps alive) follows the program's device synchronisations and the
  emulated device clock, not the host's pace;
- the watchdog polls the collectives' events and sees them complete;
- the first DDP buckets are freed when DDP rebuilds them at the second step,
  as on a real GPU: the host's wait for the device at the end of the first
  step lets the watchdog see that step's all-reduce complete and hand its
  tensors back (measured on 2 x H100 with torch's allocator history).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from emulated import requires_library, run_emulated

from maya.predictor.trace import Kind, read_trace

pytestmark = pytest.mark.emulation  # every test here runs an emulation

SCRIPT = """
import json, os, sys, time
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

pause = float(sys.argv[1])
rank = int(os.environ["RANK"])
dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
torch.cuda.set_device(dev)
dist.init_process_group("nccl")
torch.manual_seed(0)
# About 16 MiB of fp32 parameters: the buckets come from the large pool.
model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).to(dev)
ddp = DDP(model, device_ids=[dev.index])
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
ends, peaks = [], []
for step in range(3):
    x = torch.randn(64, 1024, device=dev)
    ddp(x).square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    ends.append(torch.cuda.memory_allocated())
    peaks.append(torch.cuda.max_memory_allocated())
    time.sleep(pause)  # the watchdog polls every 100 ms of host time
# One write of under PIPE_BUF bytes: the two ranks share the pipe, and print() writes the
# text and its newline separately, so their lines could interleave.
os.write(1, ("RESULT " + json.dumps({"rank": rank, "ends": ends, "peaks": peaks}) + "\\n").encode())
dist.destroy_process_group()
"""


def device_operations(path: Path) -> tuple[list[tuple], list[str]]:
    """MALLOC/FREE (kind, bytes) in order, and kernel names in order."""
    trace = read_trace(path)
    rec = trace.records
    names = {int(rec["a"][i][0]): trace.string(int(rec["a"][i][2])) for i in trace.of_kind(Kind.FUNC)}
    mem = [(int(r["kind"]), int(r["a"][1])) for r in rec if int(r["kind"]) in (Kind.MALLOC, Kind.FREE)]
    kernels = [names[int(r["a"][0])] for r in rec[rec["kind"] == Kind.KERNEL]]
    return mem, kernels


def results(stdout: str) -> dict[int, dict]:
    out = {}
    for m in re.finditer(r"RESULT (\{[^{}]*\})", stdout):
        d = json.loads(m.group(1))
        out[d["rank"]] = d
    return out


@requires_library
def test_ddp_runs_are_identical(tmp_path: Path) -> None:
    runs = []
    for name, pause in (("paused", "0.3"), ("eager", "0")):
        d = tmp_path / name
        d.mkdir()
        r = run_emulated(SCRIPT, d, torchrun_nproc=2, args=[pause], timeout=180,
                         env={"MAYA_NCCL_TIMEOUT_S": "120"})
        assert r.returncode == 0, r.output
        runs.append(r)

    res = [results(r.stdout) for r in runs]
    assert set(res[0]) == set(res[1]) == {0, 1}, [r.stdout for r in runs]
    for rank in range(2):
        assert res[0][rank] == res[1][rank], (rank, res[0][rank], res[1][rank])
        a_mem, a_k = device_operations(runs[0].trace_path(rank))
        b_mem, b_k = device_operations(runs[1].trace_path(rank))
        assert len(a_mem) > 0 and len(a_k) > 50
        n = min(len(a_mem), len(b_mem))
        first = next((i for i in range(n) if a_mem[i] != b_mem[i]), n)
        assert a_mem == b_mem, f"rank {rank}: MALLOC/FREE differ at {first}: {a_mem[first:first + 3]} vs {b_mem[first:first + 3]}"
        assert a_k == b_k, f"rank {rank}: kernel sequences differ"

        # The rebuilt buckets replace the first ones at step 2: the memory held between steps
        # does not grow by a bucket's worth.
        ends = res[0][rank]["ends"]
        assert ends[0] == ends[1] == ends[2], ends

        # The watchdog (a thread that only polls) saw the collectives' events complete.
        rec = read_trace(runs[0].trace_path(rank)).records
        queries = rec[rec["kind"] == Kind.EVENT_QUERY]
        assert np.any(queries["a32"] == 0)
