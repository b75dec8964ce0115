"""The discrete-event replay (maya.predictor.replay.simulator) and the collective model (maya.predictor.replay.network).

Hand-built traces with known answers: host delays (scaled by the host's
speed) and per-call costs; work on one stream runs in order; two
non-blocking streams overlap; an event makes one stream wait for another;
the legacy default stream waits for blocking streams; stream, device and
event synchronisation and blocking copies hold the host; a collective
starts when its last member reaches it, and the work queued behind it waits
with it; a collective a member never reaches, and collectives reached in
opposite orders, are reported.  Golden numbers
for the collective model; measured collectives interpolated between their
sizes, the analytical model where none were measured, and the replay's
count of which model timed its collectives.  ``maya predict`` end to end on a small training
script: step time, breakdown, memory, confidence, timeline, replay of a
folder, and the error for a folder without traces.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from emulated import requires_library

from maya import catalog, cli
from maya.predict import SPARE
from maya.predictor.replay.network import AnalyticalNccl, Collective, Fabric, MeasuredNccl, collective_model
from maya.predictor.replay.simulator import SimulationError, simulate
from maya.predictor.trace import Flag, Kind, TraceWriter, read_trace

US = 1000.0
NO_COST = {}  # host cost per call: none, so that times are the trace's own


class Build:
    """A rank's trace, one call at a time; durations by record index."""

    def __init__(self, rank: int = 0) -> None:
        self.w = TraceWriter(rank=rank, world_size=2)
        self.n = 0
        self.t = 0
        self.durations: dict[int, float] = {}

    def add(self, kind: Kind, *, gap_us: float = 1.0, dur_us: float = 0.0, stream: int = 0, a32: int = 0,
            a: tuple[int, ...] = (), flags: int = 0, ext: tuple[int, ...] = (), thread: int = 0,
            call_us: float = 0.0) -> int:
        self.t += int(gap_us * US)
        self.w.record(int(kind), t_ns=self.t, stream=stream, a32=a32, a=a, flags=flags, ext=ext, thread=thread,
                      dur_ns=int(call_us * US))
        if dur_us:
            self.durations[self.n] = dur_us * US
        self.n += 1
        return self.n - 1

    def kernel(self, dur_us: float, stream: int = 0, gap_us: float = 1.0) -> int:
        return self.add(Kind.KERNEL, dur_us=dur_us, stream=stream, gap_us=gap_us, flags=Flag.ASYNC)

    def trace(self, path: Path):
        self.w.write(path)
        return read_trace(path)


def run(tmp_path: Path, *builds: Build, coll_us: float = 50.0, **kw):
    traces = [b.trace(tmp_path / f"r{i}.mayatrace") for i, b in enumerate(builds)]
    return simulate(traces, [b.durations for b in builds], lambda op, nbytes, n: coll_us * US,
                    call_ns=kw.pop("call_ns", NO_COST), default_call_ns=0.0, **kw)


def test_host_delays_scaled_and_call_costs(tmp_path: Path) -> None:
    b = Build()
    b.kernel(5, gap_us=10)
    k = b.kernel(5, gap_us=100)
    (r,) = run(tmp_path, b, host_slowdown=0.5)
    assert r.issue[k] == pytest.approx(50 * US)  # the replay starts at the first record
    (r,) = run(tmp_path, b, call_ns={int(Kind.KERNEL): 3 * US})
    assert r.issue[k] == pytest.approx(103 * US)


def test_a_thread_that_only_polls_events_does_not_hold_up_the_host(tmp_path: Path) -> None:
    """torch's NCCL watchdog (thread 1 here) only sets its device and polls events; on a server it
    runs beside the program on a core of its own, so its calls and the time between them are no
    part of the program's host timeline."""
    b = Build()
    b.kernel(5, gap_us=10)
    b.add(Kind.SET_DEVICE, gap_us=30, thread=1)
    b.add(Kind.EVENT_QUERY, gap_us=30, thread=1, call_us=60)  # still inside when the main thread goes on
    k = b.kernel(5, gap_us=40)
    (r,) = run(tmp_path, b)
    assert r.issue[k] == pytest.approx(100 * US)  # the main thread's own 100 us between its calls
    assert np.isnan(r.issue[1]) and np.isnan(r.issue[2])


def test_launch_latency_on_an_idle_device_and_gap_between_queued_work(tmp_path: Path) -> None:
    b = Build()
    first = b.kernel(50, gap_us=10)
    queued = b.kernel(5, gap_us=1)  # issued while the first still runs
    late = b.kernel(5, gap_us=200)  # issued to an idle device
    (r,) = run(tmp_path, b, call_ns={int(Kind.KERNEL): 3 * US}, launch_latency_ns=2 * US, launch_gap_ns=1 * US)
    assert r.start[first] == pytest.approx(0 + 3 * US + 2 * US)  # after the launch call returns, and the latency
    assert r.start[queued] == pytest.approx(r.end[first] + 1 * US)
    assert r.start[late] == pytest.approx(r.issue[late] + 5 * US)
    (r,) = run(tmp_path, b, call_ns={int(Kind.KERNEL): 3 * US})
    assert r.start[queued] == pytest.approx(r.end[first])
    assert r.start[first] == pytest.approx(3 * US)


def test_paced_work_starts_with_its_call_and_ends_no_earlier_than_the_call(tmp_path: Path) -> None:
    """A cuDNN RNN call launches its per-step kernels as it goes: its work starts with the call (not
    when the call returns) and cannot end before its last launch has reached the device, so from an
    idle device it lasts the longer of its work and its host time, and queued behind other work it
    runs at the device's own pace."""
    b = Build()
    call = b.add(Kind.DNN, gap_us=10, dur_us=300, flags=Flag.ASYNC)  # the host's launching: 1000 us, below
    after = b.kernel(5, gap_us=1)
    busy = b.kernel(2000, gap_us=100)  # the device far behind when the next call comes
    behind = b.add(Kind.DNN, gap_us=1, dur_us=300, flags=Flag.ASYNC)
    extra = np.zeros(b.n)
    extra[[call, behind]] = 1000 * US
    paced = np.zeros(b.n, bool)
    paced[[call, behind]] = True
    lat = 2 * US
    (r,) = run(tmp_path, b, launch_latency_ns=lat, call_extra_ns=[extra], paced=[paced])
    assert r.start[call] == pytest.approx(r.issue[call] + lat)
    assert r.end[call] == pytest.approx(r.issue[call] + 1000 * US + lat)  # the host set the pace
    assert r.start[after] == pytest.approx(r.issue[after] + lat) and r.start[after] >= r.end[call]
    assert r.end[behind] == pytest.approx(r.end[busy] + 300 * US)  # launched ahead: the device's pace
    (r,) = run(tmp_path, b, launch_latency_ns=lat, call_extra_ns=[extra])  # not paced: launched when it returns
    assert r.start[call] == pytest.approx(r.issue[call] + 1000 * US + lat)
    assert r.end[call] == pytest.approx(r.start[call] + 300 * US)


def test_one_stream_runs_in_order_two_non_blocking_streams_overlap(tmp_path: Path) -> None:
    b = Build()
    for s in (1, 2):
        b.add(Kind.STREAM_CREATE, stream=s, a32=1)
    a1 = b.kernel(100, stream=1)
    a2 = b.kernel(50, stream=1)
    c = b.kernel(100, stream=2)
    sync = b.add(Kind.DEVICE_SYNC)
    after = b.kernel(1)
    (r,) = run(tmp_path, b)
    assert r.start[a2] == pytest.approx(r.end[a1])
    assert r.start[c] < r.end[a1]  # overlaps
    assert r.issue[after] == pytest.approx(max(r.end[a2], r.end[c]) + 1 * US)
    assert r.issue[sync] < r.end[a1]


def test_event_edge_between_streams(tmp_path: Path) -> None:
    b = Build()
    for s in (1, 2):
        b.add(Kind.STREAM_CREATE, stream=s, a32=1)
    k1 = b.kernel(100, stream=1)
    b.add(Kind.EVENT_RECORD, stream=1, a=(7, 1))
    b.add(Kind.STREAM_WAIT_EVENT, stream=2, a=(7, 1))
    k2 = b.kernel(10, stream=2)
    k3 = b.kernel(10, stream=1)
    (r,) = run(tmp_path, b)
    assert r.start[k2] == pytest.approx(r.end[k1])
    assert r.start[k3] == pytest.approx(r.end[k1])
    # Without the wait, stream 2 would not have waited.
    b2 = Build()
    for s in (1, 2):
        b2.add(Kind.STREAM_CREATE, stream=s, a32=1)
    k1 = b2.kernel(100, stream=1)
    k2 = b2.kernel(10, stream=2)
    (r,) = run(tmp_path, b2)
    assert r.start[k2] < r.end[k1]


def test_legacy_default_stream_waits_for_blocking_streams(tmp_path: Path) -> None:
    b = Build()
    b.add(Kind.STREAM_CREATE, stream=1)  # blocking
    b.add(Kind.STREAM_CREATE, stream=2, a32=1)  # non-blocking
    k1 = b.kernel(100, stream=1)
    k2 = b.kernel(200, stream=2)
    k0 = b.kernel(10, stream=0)
    k1b = b.kernel(10, stream=1)
    (r,) = run(tmp_path, b)
    assert r.start[k0] == pytest.approx(r.end[k1])  # but not after k2
    assert r.start[k0] < r.end[k2]
    assert r.start[k1b] == pytest.approx(r.end[k0])


def test_synchronising_calls_hold_the_host(tmp_path: Path) -> None:
    b = Build()
    b.add(Kind.STREAM_CREATE, stream=1, a32=1)
    k = b.kernel(100, stream=1)
    sync = b.add(Kind.STREAM_SYNC, stream=1)
    after_stream = b.kernel(1)
    k2 = b.kernel(100, stream=1)
    b.add(Kind.EVENT_RECORD, stream=1, a=(3, 1))
    b.add(Kind.EVENT_SYNC, a=(3, 1))
    after_event = b.kernel(1)
    copy = b.add(Kind.MEMCPY, dur_us=30, a32=2, a=(0, 0, 4096, 1 << 32))  # blocking device-to-host copy
    after_copy = b.kernel(1)
    (r,) = run(tmp_path, b)
    assert r.issue[after_stream] == pytest.approx(r.end[k] + 1 * US)
    assert r.released[sync] == pytest.approx(r.end[k])  # when the host went on
    assert r.released[copy] == pytest.approx(r.end[copy])
    assert r.issue[after_event] == pytest.approx(r.end[k2] + 1 * US)
    assert r.issue[after_copy] == pytest.approx(r.end[copy] + 1 * US)


def coll(b: Build, gap_us: float, seq: int, stream: int = 0, comm: int = 99) -> int:
    return b.add(Kind.COLL, gap_us=gap_us, stream=stream, a32=seq, a=(comm, 1024, 1 | 7 << 8, 2**64 - 1, 4096),
                 flags=Flag.ASYNC, ext=(0, 0, 0))


def test_recorded_ranks_meet_at_their_collectives_though_each_names_its_communicator_apart(tmp_path: Path) -> None:
    """A recorded job's ranks name a communicator by its address in their own process (no COMM_INIT records):
    the replay pairs their communicators by the order in which each rank first used them."""
    ranks = [Build(0), Build(1)]
    firsts, seconds = [], []
    for b, (group, other), late in zip(ranks, ((0x7F00, 0x7F80), (0x5500, 0x5580)), (1, 300), strict=True):
        firsts.append(coll(b, late, 1, comm=group))
        seconds.append(coll(b, 1, 1, comm=other))  # a second communicator's first collective
        b.add(Kind.DEVICE_SYNC)
    r0, r1 = run(tmp_path, *ranks, coll_us=50)
    assert r0.start[firsts[0]] == pytest.approx(r1.start[firsts[1]]) == pytest.approx(r1.issue[firsts[1]])
    assert r0.start[seconds[0]] == pytest.approx(r1.start[seconds[1]])


def test_collective_starts_when_its_last_member_arrives(tmp_path: Path) -> None:
    ranks = [Build(0), Build(1)]
    for i, b in enumerate(ranks):
        b.add(Kind.COMM_INIT, a32=i, a=(99, 2 | i << 32))
    before = ranks[0].kernel(20)
    c0 = coll(ranks[0], 1, 1)
    behind = ranks[0].kernel(10)
    ranks[0].add(Kind.DEVICE_SYNC)
    end0 = ranks[0].kernel(1)
    c1 = coll(ranks[1], 300, 1)  # rank 1 is late
    r0, r1 = run(tmp_path, *ranks, coll_us=50)
    assert r0.start[c0] == pytest.approx(r1.start[c1]) == pytest.approx(r1.issue[c1])
    assert r0.start[c0] > r0.end[before]
    assert r0.end[c0] == pytest.approx(r0.start[c0] + 50 * US)
    assert r0.start[behind] == pytest.approx(r0.end[c0])
    assert r0.issue[end0] == pytest.approx(r0.end[behind] + 1 * US)


def test_work_beside_a_collective_s_transfer_is_stretched_by_its_kind(tmp_path: Path) -> None:
    """Both ranks reach a collective together and queue a kernel and a GEMM beside it on another
    stream: the share of each that overlaps the transfer lasts its kind's factor longer, as often
    as the replay needs for the stretch to agree with the overlap it makes, the same on both ranks;
    work after the collective is not stretched, nor is the same work without factors."""
    ranks = [Build(0), Build(1)]
    for i, b in enumerate(ranks):
        b.add(Kind.COMM_INIT, a32=i, a=(99, 2 | i << 32))
        for s in (1, 2):
            b.add(Kind.STREAM_CREATE, stream=s, a32=1)
    beside = []
    for b in ranks:
        c = coll(b, 1, 1, stream=1)
        beside.append((c, b.kernel(100, stream=2), b.add(Kind.BLAS, dur_us=30, stream=2, flags=Flag.ASYNC)))
        b.add(Kind.DEVICE_SYNC)
    after = ranks[0].kernel(100, stream=2)
    sharing = {int(Kind.KERNEL): 1.5, int(Kind.BLAS): 2.0}
    results = run(tmp_path, *ranks, coll_us=50, sharing=sharing)
    for r, (c, k, g) in zip(results, beside, strict=True):
        assert r.start[k] < r.start[c] + 5 * US  # a us behind the collective's start: beside it for ~49 us
        d = r.end[k] - r.start[k]
        share = (r.end[c] - r.start[k]) / d
        assert 0.4 < share < 0.5
        assert d == pytest.approx(100 * US * 1.5**share, rel=2e-3)
        assert r.end[g] - r.start[g] == pytest.approx(30 * US)  # queued behind the kernel: after the transfer
    assert results[0].end[beside[0][1]] == pytest.approx(results[1].end[beside[1][1]], rel=1e-3)
    assert results[0].end[after] - results[0].start[after] == pytest.approx(100 * US)
    plain = run(tmp_path, *ranks, coll_us=50)
    assert plain[0].end[beside[0][1]] - plain[0].start[beside[0][1]] == pytest.approx(100 * US)


def test_a_rank_waiting_for_its_peer_does_not_stretch_its_work(tmp_path: Path) -> None:
    """Both ranks run the same loop (a collective, then a kernel and a GEMM beside it on another
    stream), but rank 1's host reaches each collective 300 us later, and rank 0 runs the kernel
    and the GEMM beside its waiting NCCL kernel.  That would slow rank 0 by less than its lead (at
    1/factor of its pace at worst), so rank 1 still sets when each collective starts: rank 0's work
    is not stretched, rank 1's is where it runs beside the transfer, and rank 1 finishes last."""
    ranks = [Build(0), Build(1)]
    for i, b in enumerate(ranks):
        b.add(Kind.COMM_INIT, a32=i, a=(99, 2 | i << 32))
        for s in (1, 2):
            b.add(Kind.STREAM_CREATE, stream=s, a32=1)
    work: list[list[tuple[int, int, int]]] = [[], []]
    for seq in range(1, 9):
        for b, late, mine in zip(ranks, (1, 300), work, strict=True):
            c = coll(b, late, seq, stream=1)
            mine.append((c, b.kernel(200, stream=2), b.add(Kind.BLAS, dur_us=80, stream=2, flags=Flag.ASYNC)))
            b.add(Kind.DEVICE_SYNC)
    sharing = {int(Kind.KERNEL): 1.5, int(Kind.BLAS): 2.0}
    r0, r1 = run(tmp_path, *ranks, coll_us=50, sharing=sharing)
    for (c, k, g), (c1, k1, _) in zip(*work, strict=True):
        assert r0.start[c] == pytest.approx(r1.issue[c1], abs=2 * US)  # rank 1 arrives last
        assert r0.end[g] < r0.start[c]  # rank 0's work ran while its collective waited
        assert r0.end[k] - r0.start[k] == pytest.approx(200 * US)
        assert r0.end[g] - r0.start[g] == pytest.approx(80 * US)
        assert r1.end[k1] - r1.start[k1] > 210 * US  # beside the transfer
    assert r0.host_end < r1.host_end


def test_a_collective_a_member_never_reaches_is_reported(tmp_path: Path) -> None:
    ranks = [Build(0), Build(1)]
    for i, b in enumerate(ranks):
        b.add(Kind.COMM_INIT, a32=i, a=(99, 2 | i << 32))
    coll(ranks[0], 1, 1)
    ranks[0].add(Kind.DEVICE_SYNC)
    ranks[1].kernel(5)
    with pytest.raises(SimulationError, match=r"collective \(99, 1\) of 2 members is reached by rank\(s\) \[0\] only"):
        run(tmp_path, *ranks)


def test_collectives_reached_in_opposite_orders_are_reported(tmp_path: Path) -> None:
    ranks = [Build(0), Build(1)]
    for i, b in enumerate(ranks):
        b.add(Kind.COMM_INIT, a32=i, a=(99, 2 | i << 32))
    coll(ranks[0], 1, 1)
    coll(ranks[0], 1, 2)
    coll(ranks[1], 1, 2)
    coll(ranks[1], 1, 1)
    for b in ranks:
        b.add(Kind.DEVICE_SYNC)
    with pytest.raises(SimulationError, match=r"rank 0 waits on a device synchronisation; rank 1 waits on a device "
                       r"synchronisation; collective \(99, 1\) reached by 1 of 2 members; collective \(99, 2\)"):
        run(tmp_path, *ranks)


def test_collective_model_golden_numbers() -> None:
    h200 = catalog.lookup("H200-SXM-141GB")
    fabric = Fabric.of(h200)
    bw = 450e9 * 0.82
    assert fabric.nvlink_bytes_s == pytest.approx(bw)
    model = AnalyticalNccl(fabric)
    # 2 x H200, 60 MB all-reduce: one ring step each way (2.06 us), 60 MB over 369 GB/s, 5 us of launch.
    assert model.seconds(Collective("all_reduce", 60e6, 2)) == pytest.approx(5e-6 + 4.12e-6 + 60e6 / bw)
    # 8 GPUs: 2 x 7 steps, 2 x 7/8 of the bytes.
    assert model.seconds(Collective("all_reduce", 1e9, 8)) == pytest.approx(5e-6 + 14 * 2.06e-6 + 1.75e9 / bw)
    # Small messages take LL: 0.3 of the latency, half the bandwidth.
    assert model.seconds(Collective("all_reduce", 1024, 8)) == pytest.approx(
        5e-6 + 0.3 * 14 * 2.06e-6 + 2 * 1792 / bw)
    # All-gather: bytes are one rank's part.
    assert model.seconds(Collective("all_gather", 1e8, 8)) == pytest.approx(5e-6 + 7 * 2.06e-6 + 7e8 / bw)
    # Across nodes a ring channel per rail: 8 NICs of 47 GB/s (376 GB/s) do not slow NVLink's 369;
    # the tree pays log2(nodes) network steps and moves the buffer up and down.
    multi = model.seconds(Collective("all_reduce", 1e9, 16, nodes=2))
    tree = 2 * (4e-6 + 7 * 2.06e-6) + 2 * 1e9 / bw
    assert multi == pytest.approx(5e-6 + min(30 * 4e-6 + 2 * 15 / 16 * 1e9 / bw, tree))
    assert model.seconds(Collective("all_reduce", 1e9, 1)) == pytest.approx(5e-6)


def test_measured_collectives_interpolate_log_log_and_fall_back() -> None:
    fallback = AnalyticalNccl(Fabric.of(catalog.lookup("H200-SXM-141GB")))
    curve = (np.array([1e3, 1e5, 1e7]), np.array([1e-5, 1e-5 * 10, 1e-5 * 1000]))
    model = MeasuredNccl({("all_reduce", 2): curve}, fallback)
    assert model.seconds(Collective("all_reduce", 1e5, 2)) == pytest.approx(1e-4)      # a measured size
    assert model.seconds(Collective("all_reduce", 1e4, 2)) == pytest.approx(1e-5 * 10 ** 0.5)  # log-log midpoint
    assert model.seconds(Collective("all_reduce", 1e6, 2)) == pytest.approx(1e-4 * 10)  # slope 1.5 in log-log
    assert model.seconds(Collective("all_reduce", 8, 2)) == pytest.approx(1e-5)        # below: the smallest's time
    # Above the largest: the last segment's bandwidth, 9.9 ms per 9.9 MB.
    assert model.seconds(Collective("all_reduce", 2e7, 2)) == pytest.approx(1e-2 + 1e7 * (1e-2 - 1e-4) / (1e7 - 1e5))
    for other in (Collective("all_reduce", 1e5, 4), Collective("all_gather", 1e5, 2),
                  Collective("all_reduce", 1e5, 2, nodes=2)):
        assert model.seconds(other) == fallback.seconds(other)


def test_collective_model_measured_where_the_nvlink_was() -> None:
    """H200 was measured (predictor/collectives.json); the H100 has the same NVLink, the A100 and B200 not."""
    assert isinstance(collective_model(catalog.lookup("H200-SXM-141GB"), 8), MeasuredNccl)
    h100 = collective_model(catalog.lookup("H100-SXM-80GB"), 8)
    assert isinstance(h100, MeasuredNccl) and ("all_reduce", 2) in h100.curves and ("recv", 2) in h100.curves
    assert isinstance(collective_model(catalog.lookup("A100-SXM-80GB"), 8), AnalyticalNccl)
    assert isinstance(collective_model(catalog.lookup("B200"), 8), AnalyticalNccl)


def test_replay_times_collectives_by_the_measured_curve_and_counts_which_model(tmp_path: Path) -> None:
    """2 ranks of one node on an H200: the measured 2 x H200 curve; the same ranks on two nodes: the
    analytical model.  The job keeps how much collective time each gave (``maya predict`` reports it)."""
    from maya.predict import Job
    from maya.predictor.replay.host import host_model

    ranks = [Build(0), Build(1)]
    for i, b in enumerate(ranks):
        b.add(Kind.COMM_INIT, a32=i, a=(99, 2 | i << 32))
    c = [coll(b, 1, 1) for b in ranks]
    traces = [b.trace(tmp_path / f"r{i}.mayatrace") for i, b in enumerate(ranks)]
    h200 = catalog.lookup("H200-SXM-141GB")
    for per_node, kind, model in ((2, "measured", collective_model(h200, 2)),
                                  (1, "analytical", AnalyticalNccl(Fabric.of(h200, 1)))):
        job = Job(h200, tmp_path, traces, [b.durations for b in ranks], [[] for _ in ranks], {}, [set() for _ in ranks], per_node,
                  [np.ones(len(t.records)) for t in traces], {}, {})
        r0, _ = job.replay(host_model(h200.name))
        want = model.seconds(Collective("all_reduce", 4096, 2, 2 // per_node)) * 1e9
        assert r0.end[c[0]] - r0.start[c[0]] == pytest.approx(want)
        assert job.collective_ns == pytest.approx({kind: want})


def busbw_gbs(model: AnalyticalNccl, op: str, nbytes: float, ranks: int, nodes: int = 1) -> float:
    """nccl-tests' bus bandwidth of the model's time (nbytes: the whole buffer, as nccl-tests sizes it)."""
    per_rank = nbytes / ranks if op == "all_gather" else nbytes
    t = model.seconds(Collective(op, per_rank, ranks, nodes))
    factor = 2 * (ranks - 1) / ranks if op == "all_reduce" else (ranks - 1) / ranks
    return nbytes / t * factor / 1e9


def test_collective_model_against_published_nccl_tests_figures() -> None:
    """The figures of benchmarks/data/nccl_published (sources there): bandwidth within 6%, the
    smallest all-reduce's time within 2%, and 1 KB within 20% (the model has no per-byte latency)."""
    figures = json.loads((Path(__file__).parent.parent / "benchmarks" / "data" / "nccl_published"
                          / "figures.json").read_text())["figures"]
    model = AnalyticalNccl(Fabric.of(catalog.lookup("H100-SXM-80GB")))
    checked = 0
    for f in figures:
        if not f["gpus"]:
            continue
        size = f["bytes"] or 8 * 2**30  # "large": the figure is the plateau
        if "busbw_gbs" in f:
            got = busbw_gbs(model, f["op"], size, f["gpus"], f["nodes"])
            assert got == pytest.approx(f["busbw_gbs"], rel=0.06), f["id"]
        else:
            t = model.seconds(Collective(f["op"], size, f["gpus"], f["nodes"])) * 1e6
            assert t == pytest.approx(f["time_us"], rel=0.02 if size <= 8 else 0.2), f["id"]
        checked += 1
    assert checked == 7


def test_collective_model_against_published_8_gpu_sweeps() -> None:
    """Ring sweeps on 8 x H100 (benchmarks/data/nccl_published/h100-8gpu-ring-sweeps.json), where the
    device set the time: the model is quick by up to 22% at 8-64 MiB, where NCCL's bandwidth ramps
    up, and within 6% from 1 GiB."""
    from benchmarks.calibration.collectives import device_bound_sweeps

    points = device_bound_sweeps(AnalyticalNccl(Fabric.of(catalog.lookup("H100-SXM-80GB"))))
    for op, rows in points.items():
        for size, published, model in rows:
            assert -0.22 < model / published - 1 < 0.02, (op, size)
            if size >= 2**30:
                assert model == pytest.approx(published, rel=0.06), (op, size)
    assert sum(len(rows) for rows in points.values()) == 31


PREDICT_SCRIPT = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
for step in range(4):
    loss = model(torch.randn(256, 512, device="cuda")).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    loss.item()
"""


@pytest.mark.emulation
@pytest.mark.slow
@pytest.mark.usefixtures("fitted_cache")
@requires_library
def test_maya_predict_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Emulate, estimate, replay, report: one JSON object with the fields the CLI promises."""
    script = tmp_path / "train.py"
    script.write_text(PREDICT_SCRIPT)
    timeline = tmp_path / "timeline.json"
    rc = cli.main(["predict", "--gpu", "H100-SXM-80GB", "--json", "--out", str(tmp_path / "out"),
                   "--timeline", str(timeline), "--", sys.executable, str(script)])
    assert rc == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["gpu"] == "H100-SXM-80GB" and out["fits"] is True
    assert 0 < out["step_time_s"] < 0.1 and len(out["steps_s"]) >= 2
    # The breakdown splits the steady window: its parts add up to the mean step.
    assert sum(out["breakdown"].values()) == pytest.approx(sum(out["steps_s"]) / len(out["steps_s"]), rel=1e-6)
    assert out["peak_memory_bytes"][0] > 0
    assert sum(out["confidence"].values()) == pytest.approx(1.0)
    events = json.loads(timeline.read_text())["traceEvents"]
    assert any(e.get("cat") == "BLAS" for e in events)
    # A step of microsecond kernels follows its host: emulated again (a third time where the two disagree by
    # more than 1%), the median kept; one run in a slow phase of the emulating CPU is set aside and replaced.
    each, aside = out["emulations_step_time_s"], out["emulations_slow_phase_step_time_s"]
    assert out["sensitivity"]["host"] >= 0.5 and len(each) in (1, 2, 3) and len(each) + len(aside) <= 3 + SPARE
    if not aside:
        assert len(each) in (2, 3) and (len(each) == 2) == (max(each[:2]) <= 1.01 * min(each[:2]))
    assert out["step_time_s"] == sorted(each)[(len(each) - 1) // 2]
    made = len(each) + len(aside)
    assert all((tmp_path / "out" / f"run{k}" / "summary.json").is_file() for k in range(1, made))
    # Replaying the first emulation again gives its answer; a folder without traces is refused.
    assert cli.main(["predict", "--gpu", "H100-SXM-80GB", "--json", "--from", str(tmp_path / "out")]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert again["step_time_s"] in each[:1] + aside[:1]  # the first emulation: counted, or set aside
    assert set(out["sensitivity"]) == {"host", "estimated", "rnn_host"}
    assert out["step_time_low_s"] < out["step_time_s"] < out["step_time_high_s"]
    assert cli.main(["predict", "--gpu", "H100-SXM-80GB", "--from", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    assert "90% interval" in text and "the step follows its host" in text
    assert cli.main(["predict", "--gpu", "H100-SXM-80GB", "--from", str(tmp_path)]) == 2
    assert "no rank<R>.mayatrace" in capsys.readouterr().err


@pytest.mark.emulation
@pytest.mark.slow
@pytest.mark.usefixtures("fitted_cache")
@requires_library
def test_maya_predict_repeat_keeps_the_median_emulation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text(PREDICT_SCRIPT)
    out = tmp_path / "out"
    timeline = tmp_path / "timeline.json"
    assert cli.main(["predict", "--gpu", "H100-SXM-80GB", "--json", "--repeat", "3", "--out", str(out),
                     "--timeline", str(timeline), "--", sys.executable, str(script)]) == 0
    p = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    each = p["emulations_step_time_s"]
    assert len(each) == 3 and p["step_time_s"] == sorted(each)[1]
    assert all((folder / "summary.json").is_file() for folder in (out, out / "run1", out / "run2"))
    assert timeline.is_file()
    # Each emulation replays on its own to the step time listed for it.
    assert cli.main(["predict", "--gpu", "H100-SXM-80GB", "--json", "--from", str(out / "run1")]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["step_time_s"] == each[1]
    assert cli.main(["predict", "--gpu", "H100-SXM-80GB", "--repeat", "2", "--from", str(out)]) == 2
    assert "--repeat K needs" in capsys.readouterr().err
