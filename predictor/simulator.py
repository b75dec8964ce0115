"""Replays the per-rank traces of one job on a virtual cluster: when would each operation run?

Discrete-event, as in the Maya paper:

- Each rank's host issues its intercepted calls in trace order, separated
  by the host delays measured under emulation (the CPU time between the end
  of one call and the start of the next), multiplied by ``host_slowdown``, plus a
  fixed cost per call.  The records of all host threads of a rank are taken
  in time order as one sequence: PyTorch's main thread waits while autograd's
  thread runs the backward pass, so their work does not overlap.
- Device work (kernels, library calls, copies, memsets, collectives) goes to
  its stream, a FIFO: it starts when the host has issued it and the stream's
  previous work has finished, and lasts what ``durations`` says.  The legacy
  default stream (id 0) waits for, and is waited for by, every blocking
  stream of its device.  ``cudaEventRecord`` marks the stream's time under
  (event, version); ``cudaStreamWaitEvent`` makes a stream wait for it.
- A synchronising call (stream, event or device synchronisation, a blocking
  copy) holds its rank's host until the work it waits for has finished.
- A collective starts when every member of its communicator has reached the
  same sequence number (a send when its receive has, and the reverse) and
  lasts what the collective model says.  Work queued behind a collective
  that is still waiting for its other members waits with it.

:func:`simulate` returns, per rank, each record's host issue time and each
device operation's start and end; step times and breakdowns are computed
from those (:mod:`maya.predictor.step`).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from maya.predictor.trace import Flag, Kind, Trace

# Host cost of one call, ns, by kind (the rest of the host's time is the measured host delay).
CALL_NS: Mapping[int, float] = {int(Kind.KERNEL): 2000.0, int(Kind.BLAS): 4000.0, int(Kind.DNN): 8000.0,
                                int(Kind.MEMCPY): 3000.0, int(Kind.MEMSET): 2000.0, int(Kind.COLL): 5000.0}
DEFAULT_CALL_NS = 500.0
NON_BLOCKING = 0x1  # cudaStreamNonBlocking, in STREAM_CREATE a32

_DEVICE_WORK = frozenset(int(k) for k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.BLAS, Kind.DNN, Kind.COLL))
_SKIPPED = frozenset(int(k) for k in (Kind.STRING, Kind.FUNC, Kind.THREAD, Kind.NOTE, Kind.DEVICE_TIME, Kind.CONT))
_COLL, _SEND, _RECV = int(Kind.COLL), 7, 8


class SimulationError(RuntimeError):
    """The traces cannot be replayed (a collective some member never reaches...)."""


@dataclass
class RankResult:
    """Times of one rank's records, ns from the start of the simulation (NaN where not applicable).

    ``issue``: when the host issued each record; ``start``/``end``: when each
    device operation ran; ``host_end``: when the host finished."""

    rank: int
    issue: npt.NDArray[np.float64]
    start: npt.NDArray[np.float64]
    end: npt.NDArray[np.float64]
    host_end: float = 0.0


@dataclass
class _Stream:
    free: float = 0.0  # when the last resolved work ends
    queue: deque[int] = field(default_factory=deque)  # records waiting behind unresolved work
    blocking: bool = True


@dataclass
class _Rank:
    rank: int
    trace: Trace
    order: npt.NDArray[np.int64]  # record indices to replay, in time order
    pos: int = 0
    host: float = 0.0
    streams: dict[tuple[int, int], _Stream] = field(default_factory=dict)
    events: dict[tuple[int, int], float] = field(default_factory=dict)
    waiting: tuple[str, tuple[int, ...]] | None = None  # why the host is held
    prev_end: float | None = None  # emulated end of the previous record


@dataclass
class _Pending:
    members: int
    ready: dict[int, float] = field(default_factory=dict)  # rank -> time its stream reached the collective
    records: dict[int, int] = field(default_factory=dict)  # rank -> record index
    nbytes: float = 0.0
    op: int = 0


def replay_order(trace: Trace) -> npt.NDArray[np.int64]:
    """Records to replay: all but bookkeeping and captured ones, in host time order (stable)."""
    recs = trace.records
    keep = ~np.isin(recs["kind"], list(_SKIPPED)) & ((recs["flags"] & Flag.CAPTURED) == 0)
    idx = np.flatnonzero(keep)
    return idx[np.argsort(recs["t_ns"][idx], kind="stable")]


def simulate(traces: Sequence[Trace], durations: Sequence[Mapping[int, float]],
             collective_ns: Callable[[int, float, int], float], *, host_slowdown: float = 1.0,
             call_ns: Mapping[int, float] = CALL_NS, default_call_ns: float = DEFAULT_CALL_NS) -> list[RankResult]:
    """Replay ``traces`` (one per rank, ``trace.header['rank']``).

    ``durations[r]``: device ns of rank r's device records by record index;
    ``collective_ns(op, bytes, members)``: the device time of a collective
    that has none there (with measured times, a recorded trace's: the
    shortest member's, since the others' include waiting for it); ``host_slowdown``: how much longer the GPU
    server's host takes than the emulating one (host delays are multiplied by
    it, :mod:`maya.predictor.host`);
    ``call_ns``: host cost of a call by record kind (``default_call_ns`` for
    the others)."""
    sim = _Simulator(traces, durations, collective_ns, host_slowdown, call_ns, default_call_ns)
    return sim.run()


class _Simulator:
    def __init__(self, traces: Sequence[Trace], durations: Sequence[Mapping[int, float]],
                 collective_ns: Callable[[int, float, int], float], host_slowdown: float,
                 call_ns: Mapping[int, float], default_call_ns: float) -> None:
        self.durations, self.collective_ns = durations, collective_ns
        self.host_slowdown, self.call_ns, self.default_call_ns = host_slowdown, call_ns, default_call_ns
        self.ranks = [_Rank(i, t, replay_order(t)) for i, t in enumerate(traces)]
        n = [len(t.records) for t in traces]
        self.issue = [np.full(k, np.nan) for k in n]
        self.start = [np.full(k, np.nan) for k in n]
        self.end = [np.full(k, np.nan) for k in n]
        self.comm_size: dict[int, int] = {}
        for t in traces:
            for i in t.of_kind(Kind.COMM_INIT).tolist():
                a1 = int(t.records["a"][i][1])
                self.comm_size[int(t.records["a"][i][0])] = a1 & 0xFFFFFFFF
        self.pending: dict[tuple[int, ...], _Pending] = {}

    # ------------------------------------------------------------ main loop

    def run(self) -> list[RankResult]:
        heap = [(0.0, r.rank) for r in self.ranks if len(r.order)]
        heapq.heapify(heap)
        held: set[int] = set()
        while heap:
            _, r = heapq.heappop(heap)
            rank = self.ranks[r]
            self._advance(rank)
            if rank.waiting is not None:
                held.add(r)
            elif rank.pos < len(rank.order):
                heapq.heappush(heap, (rank.host, r))
            for other in sorted(held):  # work this record resolved may release the others
                o = self.ranks[other]
                if self._try_release(o):
                    held.discard(other)
                    if o.pos < len(o.order):
                        heapq.heappush(heap, (o.host, other))
        if held or self.pending:
            stuck = [self._describe_wait(self.ranks[r]) for r in sorted(held)] or [
                f"collective {key} reached by {len(p.ready)} of {p.members} members" for key, p in self.pending.items()]
            raise SimulationError("the replay is stuck: " + "; ".join(stuck))
        return [RankResult(r.rank, self.issue[r.rank], self.start[r.rank], self.end[r.rank], r.host)
                for r in self.ranks]

    def _advance(self, rank: _Rank) -> None:
        """Issue the rank's next record (the host is not held)."""
        i = int(rank.order[rank.pos])
        rec = rank.trace.records[i]
        kind = int(rec["kind"])
        t_ns, dur_ns = float(rec["t_ns"]), float(rec["dur_ns"])
        if kind == _COLL:  # time spent waiting for the other ranks is an emulation artefact
            dur_ns = max(dur_ns - float(rank.trace.ext(i)[0]), 0.0)
        gap = max(t_ns - rank.prev_end, 0.0) if rank.prev_end is not None else 0.0
        rank.prev_end = t_ns + dur_ns
        rank.host += gap * self.host_slowdown
        self.issue[rank.rank][i] = rank.host
        rank.host += self.call_ns.get(kind, self.default_call_ns)
        rank.pos += 1
        self._issue(rank, i, kind, rec)
        self._try_release(rank)

    # ------------------------------------------------------------ records

    def _stream(self, rank: _Rank, device: int, stream: int) -> _Stream:
        key = (device, stream)
        s = rank.streams.get(key)
        if s is None:
            s = rank.streams[key] = _Stream()
        return s

    def _issue(self, rank: _Rank, i: int, kind: int, rec: np.void) -> None:
        device, stream = int(rec["device"]), int(rec["stream"])
        a = rec["a"]
        if kind == int(Kind.STREAM_CREATE):
            self._stream(rank, device, stream).blocking = not (int(rec["a32"]) & NON_BLOCKING)
        elif kind in _DEVICE_WORK or kind in (int(Kind.EVENT_RECORD), int(Kind.STREAM_WAIT_EVENT)):
            s = self._stream(rank, device, stream)
            s.queue.append(i)
            self._drain(rank, device, stream)
            if kind == int(Kind.MEMCPY) and not int(rec["flags"]) & Flag.ASYNC:
                rank.waiting = ("record", (i,))  # a blocking copy returns when it has run
        elif kind == int(Kind.STREAM_SYNC):
            rank.waiting = ("stream", (device, stream))
        elif kind == int(Kind.DEVICE_SYNC):
            rank.waiting = ("device", (device,))
        elif kind == int(Kind.EVENT_SYNC):
            rank.waiting = ("event", (int(a[0]), int(a[1])))

    def _ready_after(self, rank: _Rank, device: int, stream: int) -> float | None:
        """When the legacy default stream semantics let work on this stream start (None: unresolved)."""
        s = rank.streams[(device, stream)]
        if stream == 0:
            others = [o for (d, sid), o in rank.streams.items() if d == device and sid != 0 and o.blocking]
        elif s.blocking:
            others = [o for (d, sid), o in rank.streams.items() if d == device and sid == 0]
        else:
            others = []
        if any(o.queue for o in others):
            return None
        return max([s.free, *(o.free for o in others)])

    def _drain(self, rank: _Rank, device: int, stream: int) -> None:
        """Resolve the queued work of a stream as far as its dependencies allow."""
        recs = rank.trace.records
        work = [(device, stream)]
        while work:
            key = work.pop()
            s = rank.streams[key]
            before = len(s.queue)
            self._drain_queue(rank, key[0], key[1], s, recs)
            if len(s.queue) != before:  # other streams' heads may have waited on this one
                work.extend(k for k, o in rank.streams.items() if o.queue and k != key and k not in work)

    def _drain_queue(self, rank: _Rank, device: int, stream: int, s: _Stream, recs: np.ndarray) -> None:
        while s.queue:
            i = s.queue[0]
            ready = self._ready_after(rank, device, stream)
            if ready is None:
                return
            kind = int(recs["kind"][i])
            a = recs["a"][i]
            begin = max(ready, float(self.issue[rank.rank][i]))
            if kind == int(Kind.EVENT_RECORD):
                rank.events[(int(a[0]), int(a[1]))] = begin
                s.queue.popleft()
                continue
            if kind == int(Kind.STREAM_WAIT_EVENT):
                t = rank.events.get((int(a[0]), int(a[1])))
                if t is None:
                    if int(a[1]) == 0:  # never recorded: nothing to wait for
                        s.queue.popleft()
                        continue
                    return
                s.free = max(s.free, t)
                s.queue.popleft()
                continue
            if kind == _COLL:
                if not self._collective_arrives(rank, i, begin):
                    return
                s.queue.popleft()
                continue
            self.start[rank.rank][i] = begin
            s.free = self.end[rank.rank][i] = begin + float(self.durations[rank.rank].get(i, 0.0))
            s.queue.popleft()

    # ------------------------------------------------------------ collectives

    def _collective_key(self, rank: _Rank, i: int) -> tuple[tuple[int, ...], int]:
        rec = rank.trace.records[i]
        a = rec["a"]
        comm, seq, op = int(a[0]), int(rec["a32"]), int(a[2]) & 0xFF
        me = int(rank.trace.header["rank"])
        if op in (_SEND, _RECV):
            peer = int(np.int64(a[3]))
            src, dst = (me, peer) if op == _SEND else (peer, me)
            return (comm, src, dst, seq), 2
        return (comm, seq), self.comm_size.get(comm, len(self.ranks))

    def _collective_arrives(self, rank: _Rank, i: int, ready: float) -> bool:
        """Register the rank at its collective; True once the collective has a time for this rank."""
        key, members = self._collective_key(rank, i)
        p = self.pending.get(key)
        if p is None:
            p = self.pending[key] = _Pending(members)
        if rank.rank in p.ready:
            return not np.isnan(self.end[rank.rank][i])
        a = rank.trace.records["a"][i]
        p.ready[rank.rank], p.records[rank.rank] = ready, i
        p.nbytes, p.op = max(p.nbytes, float(a[4])), int(a[2]) & 0xFF
        if len(p.ready) < p.members:
            return False
        begin = max(p.ready.values())
        measured = [self.durations[r][j] for r, j in p.records.items() if j in self.durations[r]]
        length = min(measured) if measured else self.collective_ns(p.op, p.nbytes, p.members)
        for r, j in p.records.items():
            self.start[r][j], self.end[r][j] = begin, begin + length
            other = self.ranks[r]
            rec = other.trace.records[j]
            key_s = (int(rec["device"]), int(rec["stream"]))
            other.streams[key_s].free = begin + length
            if r != rank.rank:
                other.streams[key_s].queue.popleft()
                self._drain(other, *key_s)
        del self.pending[key]
        return True

    # ------------------------------------------------------------ host waits

    def _try_release(self, rank: _Rank) -> bool:
        """Release the host if what it waits for has finished; True when not held."""
        if rank.waiting is None:
            return True
        what, args = rank.waiting
        if what == "record":
            t = self.end[rank.rank][args[0]]
            done = None if np.isnan(t) else float(t)
        elif what == "stream":
            s = rank.streams.get((args[0], args[1]))
            done = rank.host if s is None else (None if s.queue else s.free)  # an unused stream has nothing to wait for
        elif what == "device":
            streams = [s for (d, _), s in rank.streams.items() if d == args[0]]
            done = None if any(s.queue for s in streams) else max([0.0, *(s.free for s in streams)])
        else:
            ev = rank.events.get((args[0], args[1]))
            # An event recorded on a stream that has not reached it yet holds the host; one never
            # recorded (or recorded by a trace that does not write EVENT_RECORD) does not.
            queued = any(int(rank.trace.records["kind"][j]) == int(Kind.EVENT_RECORD)
                         and tuple(int(w) for w in rank.trace.records["a"][j][:2]) == args
                         for st in rank.streams.values() for j in st.queue)
            done = ev if ev is not None else (None if queued else rank.host)
        if done is None:
            return False
        rank.host = max(rank.host, done)
        rank.waiting = None
        return True

    def _describe_wait(self, rank: _Rank) -> str:
        waits = [key for key, p in self.pending.items() if rank.rank in p.ready]
        what = rank.waiting[0] if rank.waiting else "nothing"
        return (f"rank {rank.rank} waits on {what}"
                + (f", in collective {waits[0]} with {len(self.pending[waits[0]].ready)} of "
                   f"{self.pending[waits[0]].members} members" if waits else ""))

