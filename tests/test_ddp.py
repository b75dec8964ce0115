"""torch.distributed with the NCCL backend under emulation (nccl.c, shm.c).

Covers, with ``torchrun --standalone --nproc-per-node 2`` under ``maya emulate``:
- DDP training of a small MLP for a few steps completes on both ranks
  (DDP's start-up shape check and parameter broadcast need real data);
- ``dist.barrier()``; an all_reduce whose sum is checked on the host after
  ``.cpu()``; all_gather (list form) and all_gather_into_tensor checked too;
- each rank writes its trace; both ranks record the same communicator
  (MK_COMM_INIT with the same id, ranks 0 and 1 of 2, world rank in a32);
- the collectives line up across ranks: same communicator ids, sequence
  numbers, ops, dtypes and counts, in the same order; small ones moved data;
- eager init (``device_id``): send/recv and batch_isend_irecv carry values,
  ``new_group([0])`` is an ``ncclCommSplit`` (a child on rank 0 only, parent
  id recorded), MAX and PRODUCT reductions; sends are numbered per peer and
  pair with the other rank's receives;
- 8 ranks from one torchrun as two virtual nodes of 4 GPUs: each rank sees
  its node's LOCAL_RANK and 4 GPUs, an all_reduce sums over all 8, and each
  trace header names the rank's virtual node.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from emulated import requires_library, run_emulated

from maya.predictor.trace import Flag, Kind, read_trace

pytestmark = pytest.mark.emulation  # every test here runs an emulation

SCRIPT = """
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(dev)
ddp = DDP(model, device_ids=[dev.index])
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(16, 32, device=dev)
    loss = ddp(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

dist.barrier()

# Values made on the host and copied over: kernels do not run under emulation.
t = torch.tensor([float(rank + 1), 10.0 * (rank + 1)]).to(dev)
dist.all_reduce(t)
got = t.cpu().tolist()
want = [sum(r + 1 for r in range(world)), sum(10.0 * (r + 1) for r in range(world))]
assert got == want, (got, want)

mine = torch.tensor([rank, 100 + rank], dtype=torch.int64).to(dev)
outs = [torch.empty(2, dtype=torch.int64, device=dev) for _ in range(world)]
dist.all_gather(outs, mine)
assert [o.cpu().tolist() for o in outs] == [[r, 100 + r] for r in range(world)], outs

flat = torch.empty(2 * world, dtype=torch.int64, device=dev)
dist.all_gather_into_tensor(flat, mine)
assert flat.cpu().tolist() == sum(([r, 100 + r] for r in range(world)), []), flat

dist.barrier()
dist.destroy_process_group()
print(f"rank {rank} ok", flush=True)
"""


@requires_library
def test_ddp_two_ranks(tmp_path: Path) -> None:
    r = run_emulated(SCRIPT, tmp_path, torchrun_nproc=2, timeout=180, env={"MAYA_NCCL_TIMEOUT_S": "120"})
    assert r.returncode == 0, r.output
    assert "rank 0 ok" in r.stdout and "rank 1 ok" in r.stdout, r.output

    traces = [read_trace(r.trace_path(k)) for k in range(2)]
    inits = []
    colls = []
    for k, t in enumerate(traces):
        rec = t.records
        init = rec[rec["kind"] == Kind.COMM_INIT]
        assert len(init) >= 1, f"rank {k}: no communicator"
        inits.append(init)
        colls.append(rec[rec["kind"] == Kind.COLL])

    # The same default communicator on both ranks, rank k of 2, world rank k.
    ids = [set(int(i) for i in init["a"][:, 0]) for init in inits]
    assert ids[0] == ids[1]
    for k, init in enumerate(inits):
        first = init[0]
        assert int(first["a"][1]) & 0xFFFFFFFF == 2
        assert int(first["a"][1]) >> 32 == k
        assert int(first["a32"]) == k
        assert not (int(first["flags"]) & Flag.FAILED)

    # Collectives line up: same comm, sequence, op|dtype|redop, count, bytes.
    c0, c1 = colls
    assert len(c0) == len(c1) and len(c0) >= 6, (len(c0), len(c1))
    for field in ("a32",):
        assert np.array_equal(c0[field], c1[field])
    assert np.array_equal(c0["a"][:, [0, 1, 2, 4]], c1["a"][:, [0, 1, 2, 4]])
    ops = c0["a"][:, 2] & 0xFF
    assert {1, 4} <= set(int(o) for o in ops)  # all-reduce and all-gather
    # Sequence numbers count up per communicator.
    for cid in set(int(i) for i in c0["a"][:, 0]):
        seq = c0["a32"][c0["a"][:, 0] == cid]
        assert list(seq) == list(range(1, len(seq) + 1))
    # The small ones (all of them here) carried real bytes.
    assert all(int(f) & Flag.DATA for f in c0["flags"])

    # DDP all-reduced its first bucket (every gradient: 2,632 floats) in the first step and rebuilt its
    # buckets in the second: on a GPU the watchdog may still hold the first there, so a real peak can be
    # that much higher (maya.summary.first_buckets_bytes).
    assert [rank["first_buckets_bytes"] for rank in r.summary["ranks"]] == [2632 * 4] * 2
    assert "DDP drops its first gradient buckets" in r.output


P2P_SCRIPT = """
import os
import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
torch.cuda.set_device(dev)
dist.init_process_group("nccl", device_id=dev)  # eager: new groups split the world

# Send/recv, plain and batched (a group of one send and one receive each).
if rank == 0:
    dist.send(torch.tensor([123.0]).to(dev), 1)
else:
    x = torch.zeros(1, device=dev)
    dist.recv(x, 0)
    assert x.cpu().item() == 123.0, x
send = torch.tensor([float(rank)]).to(dev)
recv = torch.full((1,), -1.0).to(dev)
peer = 1 - rank
for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]):
    w.wait()
assert recv.cpu().item() == float(peer), recv

# A group of rank 0 alone (rank 1 takes part in the split without a color).
solo = dist.new_group([0])
if rank == 0:
    t = torch.tensor([5, 6], dtype=torch.int32).to(dev)
    dist.all_reduce(t, group=solo, op=dist.ReduceOp.MAX)
    assert t.cpu().tolist() == [5, 6]
t = torch.tensor([rank + 1], dtype=torch.int64).to(dev)
dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
assert t.cpu().item() == 2
dist.destroy_process_group()
print(f"rank {rank} ok", flush=True)
"""


@requires_library
def test_split_and_send_recv(tmp_path: Path) -> None:
    r = run_emulated(P2P_SCRIPT, tmp_path, torchrun_nproc=2, timeout=180, env={"MAYA_NCCL_TIMEOUT_S": "120"})
    assert r.returncode == 0, r.output
    assert "rank 0 ok" in r.stdout and "rank 1 ok" in r.stdout, r.output
    recs = [read_trace(r.trace_path(k)).records for k in range(2)]
    inits = [rec[rec["kind"] == Kind.COMM_INIT] for rec in recs]
    world_id = int(inits[0][0]["a"][0])
    assert int(inits[1][0]["a"][0]) == world_id
    # Rank 0 made the split child (one rank, parent = world); rank 1 made none.
    children = [init[init["a"][:, 2] == world_id] for init in inits]
    assert len(children[0]) == 1 and len(children[1]) == 0
    assert int(children[0][0]["a"][1]) == 1  # nranks 1, rank 0
    # Sends on one rank pair with receives on the other, numbered per peer.
    for k in range(2):
        coll = recs[k][recs[k]["kind"] == Kind.COLL]
        ops = coll["a"][:, 2] & 0xFF
        sends, recvs = coll[ops == 7], coll[ops == 8]
        other = recs[1 - k][recs[1 - k]["kind"] == Kind.COLL]
        other_recvs = other[(other["a"][:, 2] & 0xFF) == 8]
        assert list(sends["a32"]) == list(range(1, len(sends) + 1))
        assert len(sends) == len(other_recvs) and len(sends) + len(recvs) >= 2
        assert all(int(f) & Flag.DATA for f in coll["flags"])


EIGHT_RANKS = """
import os
import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
# One torchrun of 8 processes plays two virtual nodes of 4 GPUs.
assert os.environ["LOCAL_RANK"] == str(rank % 4) and os.environ["LOCAL_WORLD_SIZE"] == "4"
assert torch.cuda.device_count() == 4
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
x = torch.tensor([float(rank + 1)], device="cuda")
dist.all_reduce(x)
dist.barrier()
assert x.cpu().item() == 36.0, x.cpu().item()
print(f"rank {rank} ok", flush=True)
dist.destroy_process_group()
"""


@requires_library
def test_eight_ranks_on_two_virtual_nodes(tmp_path: Path) -> None:
    """8 ranks, 4 GPUs per virtual node: each rank's trace says where it sits."""
    run = run_emulated(EIGHT_RANKS, tmp_path, torchrun_nproc=8, gpus_per_node=4, timeout=300)
    assert run.returncode == 0, run.output[-4000:]
    assert sorted(int(w) for w in re.findall(r"rank (\d+) ok", run.stdout)) == list(range(8))
    for rank in range(8):
        header = read_trace(run.trace_path(rank)).header
        assert header["rank"] == rank and header["world_size"] == 8
        assert header["node"] == rank // 4 and header["gpus_per_node"] == 4
