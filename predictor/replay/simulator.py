"""Replays the per-rank traces of one job on a virtual cluster: when would each operation run?

Discrete-event, as in the Maya paper:

- Each rank's host issues its intercepted calls in trace order, separated
  by the host delays measured under emulation (the CPU time between the end
  of one call and the start of the next), multiplied by ``host_slowdown``, plus a
  fixed cost per call.  The records of all host threads of a rank are taken
  in time order as one sequence: PyTorch's main thread waits while autograd's
  thread runs the backward pass, so their work does not overlap.  A thread
  that only polls events (torch's NCCL watchdog) is left out: it runs beside
  the program on a core of its own (:func:`replay_order`).
- Device work (kernels, library calls, copies, memsets, collectives) goes to
  its stream, a FIFO: it starts once its launch call has returned (plus the
  launch latency) and the stream's previous work has finished (plus the
  launch gap: a GPU starts queued kernels about 1 us apart, which a step of
  800 kernels on a busy device pays 800 times), and lasts what
  ``durations`` says.  Work its call launches piece by piece while it runs
  (a cuDNN RNN call's per-step kernels: ``paced``) reaches its stream as the
  call starts and ends no earlier than the call does, so that from an idle
  device it lasts as long as the host's launching.  The legacy
  default stream (id 0) waits for, and is waited for by, every blocking
  stream of its device.  ``cudaEventRecord`` marks the stream's time under
  (event, version); ``cudaStreamWaitEvent`` makes a stream wait for it.
- A synchronising call (stream, event or device synchronisation, a blocking
  copy) holds its rank's host until the work it waits for has finished.
- A collective starts when every member of its communicator has reached the
  same sequence number (a send when its receive has, and the reverse) and
  lasts what the collective model says.  Work queued behind a collective
  that is still waiting for its other members waits with it.
- Work that runs beside a collective's transfer on the same GPU is slower
  (:mod:`maya.predictor.replay.sharing`): the replay is run again with each
  operation's overlapped share stretched by its kind's factor, the overlaps
  taken from the run before, until the step no longer moves.

:func:`simulate` returns, per rank, each record's host issue time and each
device operation's start and end; step times and breakdowns are computed
from those (:mod:`maya.predictor.replay.step`).

The replay is compiled (numba): the traces are first laid out as flat
arrays (one row per replayed record; streams, events and collectives
numbered densely), then one loop runs every rank until its host is held,
and the next, until all have finished.  Ranks only meet in collectives,
whose start is the latest member's arrival, so the order in which ranks
are run does not change any time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from maya.predictor.replay.engine import (
    COLL,
    FREE,
    NOP,
    ON_DEVICE,
    ON_EVENT,
    ON_OP,
    ON_STREAM,
    RECORD,
    SYNC_DEVICE,
    SYNC_EVENT,
    SYNC_STREAM,
    WAIT,
    WORK,
    WORK_SYNC,
    replay,
)
from maya.predictor.trace import records as R
from maya.predictor.trace.format import Flag, Kind
from maya.predictor.trace.reader import Trace

# Host cost of one call, ns, by kind (the rest of the host's time is the measured host delay).
CALL_NS: Mapping[int, float] = {int(Kind.KERNEL): 2000.0, int(Kind.BLAS): 4000.0, int(Kind.DNN): 8000.0,
                                int(Kind.MEMCPY): 3000.0, int(Kind.MEMSET): 2000.0, int(Kind.COLL): 5000.0}
DEFAULT_CALL_NS = 500.0
# A GPU's launches, ns, where none were measured: an H100's and an H200's were 0.9-1.0 us from one
# queued kernel's end to the next one's start, 1.6 us from a launch call's return to its kernel's
# start on an idle device (benchmarks/campaigns/launch_gap.py, benchmarks/data/launch_gap).
LAUNCH_GAP_NS = 1000.0
LAUNCH_LATENCY_NS = 1500.0
SHARING_PASSES = 4  # replays at most, to settle the work stretched beside collectives' transfers

_DEVICE_WORK = [int(k) for k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.BLAS, Kind.DNN)]
_SKIPPED = [int(k) for k in (Kind.STRING, Kind.FUNC, Kind.THREAD, Kind.NOTE, Kind.DEVICE_TIME, Kind.APPROXIMATED,
                              Kind.CONT)]
_HOST_WAITS = [int(k) for k in (Kind.STREAM_SYNC, Kind.DEVICE_SYNC, Kind.EVENT_SYNC, Kind.COLL)]
_DRIVES = [*_DEVICE_WORK, *_HOST_WAITS, int(Kind.EVENT_RECORD), int(Kind.STREAM_WAIT_EVENT)]  # a thread's part in the program

_WAITS = {ON_OP: "a blocking copy", ON_STREAM: "a stream synchronisation",
          ON_DEVICE: "a device synchronisation", ON_EVENT: "an event synchronisation"}


_I = npt.NDArray[np.int64]
_F = npt.NDArray[np.float64]
_B = npt.NDArray[np.bool_]


class SimulationError(RuntimeError):
    """The traces cannot be replayed (a collective some member never reaches...)."""


@dataclass
class RankResult:
    """Times of one rank's records, ns from the start of the simulation (NaN where not applicable).

    ``issue``: when the host issued each record; ``start``/``end``: when each
    device operation ran; ``released``: when each call that held the host
    (a synchronisation, a blocking copy) let it go on; ``host_end``: when the
    host finished."""

    rank: int
    issue: npt.NDArray[np.float64]
    start: npt.NDArray[np.float64]
    end: npt.NDArray[np.float64]
    released: npt.NDArray[np.float64]
    host_end: float = 0.0


def _recorded_communicators(trace: Trace) -> dict[int, int]:
    """A recorded rank's communicators, by the order in which it first used them (negative, so that they meet
    no emulated one); {} for an emulated trace, whose ``COMM_INIT`` records name each communicator alike on
    every rank (a hash of its unique id).

    Why: record mode names a communicator by its ``ncclComm_t``, an address in its own process, so the ranks of
    a recorded job name the same communicator differently; every rank of a program that runs the same
    collectives on its groups first uses them in the same order (the default group's collectives, FSDP's
    gathers and reductions, DDP's buckets)."""
    if len(trace.of_kind(Kind.COMM_INIT)):
        return {}
    idx = trace.of_kind(Kind.COLL)
    order: dict[int, int] = {}
    for comm in R.COLL_COMM.of(trace.records["a"][idx]).tolist():
        order.setdefault(int(comm), -1 - len(order))
    return order


def replay_order(trace: Trace) -> npt.NDArray[np.int64]:
    """Records to replay: all but bookkeeping, captured ones and an observer's, in host time order
    (stable).

    An observer is a thread that gives the device no work and never waits for it, only polls
    events (torch's NCCL watchdog): on a GPU server it runs on a core of its own beside the
    program, which it does not hold up."""
    recs = trace.records
    keep = ~np.isin(recs["kind"], _SKIPPED) & ((recs["flags"] & Flag.CAPTURED) == 0)
    keep &= np.isin(recs["thread"], np.unique(recs["thread"][np.isin(recs["kind"], _DRIVES)]))
    idx = np.flatnonzero(keep)
    return idx[np.argsort(recs["t_ns"][idx], kind="stable")]


def simulate(traces: Sequence[Trace], durations: Sequence[Mapping[int, float]],
             collective_ns: Callable[[int, float, int], float], *, host_slowdown: float = 1.0,
             call_ns: Mapping[int, float] | None = CALL_NS, default_call_ns: float = DEFAULT_CALL_NS,
             gap_scale: Sequence[npt.NDArray[np.float64]] | None = None, launch_latency_ns: float = 0.0,
             launch_gap_ns: float = 0.0, sharing: Mapping[int, float] | None = None,
             call_extra_ns: Sequence[npt.NDArray[np.float64]] | None = None,
             paced: Sequence[npt.NDArray[np.bool_]] | None = None) -> list[RankResult]:
    """Replay ``traces`` (one per rank, ``trace.header['rank']``).

    ``durations[r]``: device ns of rank r's device records by record index;
    ``collective_ns(op, bytes, members)``: the device time of a collective
    that has none there (with measured times, a recorded trace's: the
    shortest member's, since the others' include waiting for it); ``host_slowdown``: how much longer the GPU
    server's host takes than the emulating one (host delays are multiplied by
    it, :mod:`maya.predictor.replay.host`);
    ``call_ns``: host cost of a call by record kind (``default_call_ns`` for
    the others; None: each call's own recorded duration, as a trace recorded
    on the real GPU has them, except for calls that wait for the device,
    whose wait the replay makes itself); ``gap_scale[r]``: a further factor on the host delay before
    each of rank r's records, by record index; ``launch_latency_ns``: from a launch call's return to
    its work's start on an idle stream; ``launch_gap_ns``: from one operation's end to the start of
    the next one queued on its stream; ``sharing``: by record kind, the factor on the time device
    work spends beside a collective's transfer on its device (None or {}: none); ``call_extra_ns[r]``:
    host ns rank r's calls cost over their kind's price, by record index (a GEMM of a new shape, a
    cuDNN RNN call); ``paced[r]``: by record index, rank r's work that its call launches piece by piece
    while it runs (a cuDNN RNN call): it starts with the call and ends no earlier than the call does."""
    if not traces:
        return []
    scale = gap_scale or [np.ones(len(t.records)) for t in traces]
    extra = call_extra_ns or [np.zeros(len(t.records)) for t in traces]
    piecewise = paced or [np.zeros(len(t.records), bool) for t in traces]
    job = _Job(traces, durations, collective_ns, host_slowdown, call_ns, default_call_ns, scale, extra, piecewise)
    return job.run(launch_latency_ns, launch_gap_ns, sharing or {})


class _Job:
    """The traces as flat arrays: ops (replayed records of every rank, rank after rank), streams
    (numbered by rank, device, stream id, so a rank's and a device's are contiguous), events and
    collectives."""

    def __init__(self, traces: Sequence[Trace], durations: Sequence[Mapping[int, float]],
                 collective_ns: Callable[[int, float, int], float], host_slowdown: float,
                 call_ns: Mapping[int, float] | None, default_call_ns: float, gap_scale: Sequence[_F],
                 call_extra: Sequence[_F], paced: Sequence[_B]) -> None:
        self.traces = traces
        self.orders = [replay_order(t) for t in traces]
        sizes = [len(o) for o in self.orders]
        self.rank_lo = np.cumsum([0, *sizes[:-1]]).astype(np.int64)
        self.rank_hi = np.cumsum(sizes).astype(np.int64)
        self.op_rank = np.repeat(np.arange(len(traces)), sizes).astype(np.int64)
        self.record = np.concatenate(self.orders)  # op -> its record index in its rank's trace
        recs = [t.records[o] for t, o in zip(traces, self.orders, strict=True)]
        cat = np.concatenate(recs)
        kind, a = cat["kind"].astype(np.int64), cat["a"]
        self.kind = kind
        self.code = _codes(kind, cat["flags"])
        self.pre, self.post = self._host_costs(recs, host_slowdown, call_ns, default_call_ns, gap_scale, call_extra)
        self.paced = np.concatenate([p[o] for p, o in zip(paced, self.orders, strict=True)]).astype(np.bool_)
        self.dur = self._durations(durations)
        self.stream = np.full(len(kind), -1, np.int64)
        self.arg = np.full(len(kind), -1, np.int64)
        self.unversioned = (kind == int(Kind.STREAM_WAIT_EVENT)) & (R.EVENT_VERSION.of(a) == 0)
        self._number_streams(cat)
        self._number_events(a)
        self._number_collectives(cat, collective_ns, durations)

    def _host_costs(self, recs: list[np.ndarray], slowdown: float, call_ns: Mapping[int, float] | None,
                    default_call_ns: float, gap_scale: Sequence[_F], call_extra: Sequence[_F]) -> tuple[_F, _F]:
        """Host time before each op (the measured delay since the previous call ended, scaled) and
        after it (the call's own cost)."""
        pre, post = [], []
        for r, (t, rec) in enumerate(zip(self.traces, recs, strict=True)):
            t_ns, dur = rec["t_ns"].astype(np.float64), rec["dur_ns"].astype(np.float64)
            for j in np.flatnonzero(rec["kind"] == int(Kind.COLL)).tolist():  # waiting for the others is an artefact
                dur[j] = max(dur[j] - float(t.ext(int(self.orders[r][j]))[R.COLL_WAIT_WORD]), 0.0)
            gap = np.zeros(len(rec))
            gap[1:] = np.maximum(t_ns[1:] - (t_ns[:-1] + dur[:-1]), 0.0)
            pre.append(gap * slowdown * gap_scale[r][self.orders[r]])
            if call_ns is None:
                cost = dur.copy()
                waits = np.isin(rec["kind"], _HOST_WAITS) | (
                    (rec["kind"] == int(Kind.MEMCPY)) & ((rec["flags"] & Flag.ASYNC) == 0))
                cost[waits] = 0.0
            else:
                cost = np.full(len(rec), default_call_ns)
                for k, v in call_ns.items():
                    cost[rec["kind"] == k] = v
                cost += call_extra[r][self.orders[r]]
            post.append(cost)
        return np.concatenate(pre), np.concatenate(post)

    def _durations(self, durations: Sequence[Mapping[int, float]]) -> npt.NDArray[np.float64]:
        dur = np.zeros(len(self.code))
        for r, d in enumerate(durations):
            where = np.full(len(self.traces[r].records), -1, np.int64)
            where[self.orders[r]] = np.arange(len(self.orders[r])) + self.rank_lo[r]
            idx = np.fromiter(d.keys(), np.int64, len(d))
            at = where[idx]
            dur[at[at >= 0]] = np.fromiter(d.values(), np.float64, len(d))[at >= 0]
        return dur

    def _number_streams(self, cat: np.ndarray) -> None:
        """Stream slots (by rank, device, stream id: a rank's streams, and a device's, are contiguous
        ranges), and for each its coupled streams: the legacy default stream (id 0) waits for every
        blocking stream of its device, and they for it."""
        device, sid = cat["device"].astype(np.int64), cat["stream"].astype(np.int64)
        queued = (self.code >= WORK) & (self.code <= COLL)
        uses = queued | (self.code == SYNC_STREAM)
        ids, slots = _dense(self.op_rank[uses], device[uses], sid[uses])
        self.stream[uses] = ids
        n = len(slots)
        self.s_ops = np.argsort(np.where(queued, self.stream, n), kind="stable")[: int(queued.sum())]
        counts = np.bincount(self.stream[queued], minlength=n)
        self.s_lo = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self.s_hi = (self.s_lo + counts).astype(np.int64)
        self.r_slo = np.searchsorted(slots[:, 0], np.arange(len(self.traces)), "left").astype(np.int64)
        self.r_shi = np.searchsorted(slots[:, 0], np.arange(len(self.traces)), "right").astype(np.int64)

        blocking = np.ones(n, bool)
        slot_of = {tuple(k): i for i, k in enumerate(slots.tolist())}
        for j in np.flatnonzero(cat["kind"] == int(Kind.STREAM_CREATE)).tolist():
            at = slot_of.get((int(self.op_rank[j]), int(device[j]), int(sid[j])))
            if at is not None:
                blocking[at] = not int(cat["a32"][j]) & R.STREAM_NON_BLOCKING

        syncs = self.code == SYNC_DEVICE
        dev_ids, dev_keys = _dense(np.concatenate([self.op_rank[syncs], slots[:, 0]]),
                                   np.concatenate([device[syncs], slots[:, 1]]))
        self.arg[syncs] = dev_ids[: int(syncs.sum())]
        slot_dev = dev_ids[int(syncs.sum()):]
        self.s_dev = slot_dev  # each stream's device, numbered densely over (rank, device)
        self.d_lo = np.searchsorted(slot_dev, np.arange(len(dev_keys)), "left").astype(np.int64)
        self.d_hi = np.searchsorted(slot_dev, np.arange(len(dev_keys)), "right").astype(np.int64)
        coupled: list[list[int]] = [[] for _ in range(n)]
        for lo, hi in zip(self.d_lo.tolist(), self.d_hi.tolist(), strict=True):
            if hi == lo or slots[lo, 2] != 0:  # no legacy default stream on this device
                continue
            others = [o for o in range(lo + 1, hi) if blocking[o]]
            coupled[lo] = others
            for o in others:
                coupled[o] = [lo]
        self.c_lo, self.c_hi, self.coupled = _csr(coupled)

    def _number_events(self, a: npt.NDArray[np.uint64]) -> None:
        ev = np.isin(self.code, [RECORD, WAIT, SYNC_EVENT])
        self.arg[ev], keys = _dense(self.op_rank[ev], R.EVENT_ID.of(a[ev]).astype(np.int64),
                                      R.EVENT_VERSION.of(a[ev]).astype(np.int64))
        self.n_events = len(keys)

    def _number_collectives(self, cat: np.ndarray, collective_ns: Callable[[int, float, int], float],
                            durations: Sequence[Mapping[int, float]]) -> None:
        """Collectives by (communicator, sequence number), point-to-point by (communicator, sender,
        receiver, sequence number); each one's duration is fixed before the replay."""
        comm_size: dict[int, int] = {}
        for t in self.traces:
            for i in t.of_kind(Kind.COMM_INIT).tolist():
                words = t.records["a"][i]
                comm_size[int(R.COMM_ID.of(words))] = int(R.COMM_SIZE.of(words))
        found: dict[tuple[int, ...], list[int]] = {}
        members: dict[tuple[int, ...], int] = {}
        a = cat["a"]
        named = [_recorded_communicators(t) for t in self.traces]
        for j in np.flatnonzero(self.code == COLL).tolist():
            comm, seq, op = int(R.COLL_COMM.of(a[j])), int(cat["a32"][j]), int(R.COLL_OP.of(a[j]))
            comm = named[self.op_rank[j]].get(comm, comm)
            if op in (R.NCCL_SEND, R.NCCL_RECV):
                me, peer = int(self.traces[self.op_rank[j]].header["rank"]), R.signed(int(R.COLL_PEER.of(a[j])))
                key: tuple[int, ...] = (comm, *((me, peer) if op == R.NCCL_SEND else (peer, me)), seq)
                members[key] = 2
            else:
                key = (comm, seq)
                members[key] = comm_size.get(comm, len(self.traces))
            found.setdefault(key, []).append(j)
        self.coll_keys = list(found)
        self.coll_members = np.array([members[k] for k in self.coll_keys], np.int64)
        self.coll_len = np.zeros(len(found))
        for c, (key, ops) in enumerate(found.items()):
            if len(ops) != members[key]:
                who = sorted(int(self.op_rank[j]) for j in ops)
                raise SimulationError(f"collective {key} of {members[key]} members is reached by rank(s) {who} "
                                      "only: a rank's trace is missing or ended early")
            self.arg[ops] = c
            nbytes = max(float(R.COLL_BYTES.of(a[j])) for j in ops)
            given = [durations[self.op_rank[j]].get(int(self.record[j])) for j in ops]
            known = [g for g in given if g is not None]
            self.coll_len[c] = min(known) if known else collective_ns(int(R.COLL_OP.of(a[ops[0]])), nbytes,
                                                                                    members[key])
        self.coll_base = np.concatenate([[0], np.cumsum(self.coll_members)[:-1]]).astype(np.int64)

    def run(self, launch_latency_ns: float, launch_gap_ns: float, sharing: Mapping[int, float]) -> list[RankResult]:
        """Replay; again with the work beside collectives' transfers stretched (``sharing``), until the
        stretch no longer changes (SHARING_PASSES at most)."""
        log_factor = np.zeros(len(self.code))
        for kind, factor in sharing.items():
            log_factor[(self.kind == kind) & ((self.code == WORK) | (self.code == WORK_SYNC))] = np.log(factor)
        passes = SHARING_PASSES if log_factor.any() and (self.code == COLL).any() else 1
        dur = self.dur
        for p in range(passes):
            issue, start, end, released, host = self._replay(dur, launch_latency_ns, launch_gap_ns)
            if p + 1 < passes:
                stretched = self.dur * np.exp(log_factor * self._beside_transfers(start, end))
                if np.all(np.abs(stretched - dur) <= 1e-3 * dur):
                    break
                dur = stretched
        out = []
        for r, t in enumerate(self.traces):
            per = [np.full(len(t.records), np.nan) for _ in range(4)]
            sel = slice(self.rank_lo[r], self.rank_hi[r])
            for arr, src in zip(per, (issue, start, end, released), strict=True):
                arr[self.orders[r]] = src[sel]
            out.append(RankResult(r, per[0], per[1], per[2], per[3], float(host[r])))
        return out

    def _replay(self, dur: _F, launch_latency_ns: float, launch_gap_ns: float) -> tuple[_F, _F, _F, _F, _F]:
        """One replay with device durations ``dur``: issue, start, end and released by op; each rank's
        host end."""
        n = len(self.code)
        issue, start, end, released = (np.full(n, np.nan) for _ in range(4))
        R = len(self.traces)
        host, wait = np.zeros(R), np.full(R, FREE, np.int64)
        c_arrived = replay(self.rank_lo, self.rank_hi, self.op_rank, self.code, self.pre, self.post, dur,
                            self.paced, self.stream, self.arg, self.unversioned, self.s_ops, self.s_lo, self.s_hi,
                            self.c_lo, self.c_hi, self.coupled, self.r_slo, self.r_shi, self.d_lo, self.d_hi,
                            self.n_events, self.coll_members, self.coll_len, self.coll_base,
                            launch_latency_ns, launch_gap_ns, issue, start, end, released, host, wait)
        stuck = [f"rank {r} waits on {_WAITS[int(wait[r])]}" for r in range(R) if wait[r] != FREE]
        stuck += [f"collective {self.coll_keys[c]} reached by {int(c_arrived[c])} of {int(self.coll_members[c])} "
                  f"members" for c in np.flatnonzero((c_arrived > 0) & (c_arrived < self.coll_members)).tolist()]
        if stuck:
            raise SimulationError("the replay is stuck: " + "; ".join(stuck))
        return issue, start, end, released, host

    def _beside_transfers(self, start: _F, end: _F) -> _F:
        """Each op's share of its time on the device during which a collective ran on the same device
        (from its start, when its last member reached it, to its end).

        Not while its kernel waits for a later peer: that stretch slows only a rank that is ahead,
        and by less than the wait (at 1/factor of its pace at worst), so the last rank to arrive
        still sets when the collective starts and the step does not move.  Replaying it anyway
        makes the ranks trade places: the stretched one falls behind in the next replay, and its
        peer is stretched in the one after."""
        share = np.zeros(len(self.code))
        queued = self.stream >= 0
        device = np.full(len(self.code), -1, np.int64)
        device[queued] = self.s_dev[self.stream[queued]]
        ran = ~np.isnan(start) & (end > start)
        colls = (self.code == COLL) & ~np.isnan(start) & ~np.isnan(end)
        for d in np.unique(device[colls]).tolist():
            lo, hi = _union(start[colls & (device == d)], end[colls & (device == d)])
            work = np.flatnonzero(ran & (device == d) & (self.code != COLL))
            inside = _covered(lo, hi, end[work]) - _covered(lo, hi, start[work])
            share[work] = inside / (end[work] - start[work])
        return share


def _union(lo: _F, hi: _F) -> tuple[_F, _F]:
    """The disjoint sorted intervals covering the intervals [lo, hi)."""
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    new = np.ones(len(lo), np.bool_)
    new[1:] = lo[1:] > np.maximum.accumulate(hi)[:-1]
    firsts = np.flatnonzero(new)
    return lo[firsts], np.maximum.reduceat(hi, firsts)


def _covered(lo: _F, hi: _F, t: _F) -> _F:
    """How much of the disjoint sorted intervals [lo, hi) lies before each time of ``t``."""
    before = np.concatenate([[0.0], np.cumsum(hi - lo)])
    i = np.searchsorted(lo, t, "right") - 1
    inside = i >= 0
    out = np.zeros(len(t))
    j = i[inside]
    out[inside] = before[j] + np.minimum(t[inside] - lo[j], hi[j] - lo[j])
    return out


def _codes(kind: npt.NDArray[np.int64], flags: npt.NDArray[np.uint8]) -> npt.NDArray[np.int64]:
    code = np.full(len(kind), NOP, np.int64)
    code[np.isin(kind, _DEVICE_WORK)] = WORK
    code[(kind == int(Kind.MEMCPY)) & ((flags & Flag.ASYNC) == 0)] = WORK_SYNC  # returns when it has run
    for k, c in ((Kind.EVENT_RECORD, RECORD), (Kind.STREAM_WAIT_EVENT, WAIT), (Kind.COLL, COLL),
                 (Kind.STREAM_SYNC, SYNC_STREAM), (Kind.DEVICE_SYNC, SYNC_DEVICE), (Kind.EVENT_SYNC, SYNC_EVENT)):
        code[kind == int(k)] = c
    return code


def _dense(*columns: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Dense ids of the rows of ``columns`` (equal rows, equal ids; numbered in sorted order), and
    the distinct rows (one per id)."""
    if len(columns[0]) == 0:
        return np.zeros(0, np.int64), np.zeros((0, len(columns)), np.int64)
    order = np.lexsort(columns[::-1])
    rows = np.stack(columns, axis=1)[order]
    new = np.concatenate([[True], np.any(rows[1:] != rows[:-1], axis=1)])
    ids = np.empty(len(order), np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids, rows[new]


def _csr(lists: list[list[int]]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    counts = np.array([len(x) for x in lists], np.int64)
    lo = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    flat = np.array([v for x in lists for v in x], np.int64)
    return lo, lo + counts, flat


