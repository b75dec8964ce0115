"""The compiled loop of the replay (numba): every rank's host, streams, events and collectives.

:mod:`maya.predictor.replay.simulator` lays the traces out as flat arrays
(one row per replayed operation, streams, events and collectives numbered
densely) and calls :func:`replay`, which runs each rank until its host is
held, then the next, until no rank can go on.  Ranks only meet in
collectives, whose start is the latest member's arrival, so the order in
which ranks are run does not change any time.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

# What a replayed operation does (``code``); the five from WORK to COLL go to a stream.
NOP, WORK, WORK_SYNC, RECORD, WAIT, COLL, SYNC_STREAM, SYNC_DEVICE, SYNC_EVENT = range(9)
# What a held host waits for (``wait``).
FREE, ON_OP, ON_STREAM, ON_DEVICE, ON_EVENT = range(5)

_I = npt.NDArray[np.int64]
_F = npt.NDArray[np.float64]
_B = npt.NDArray[np.bool_]


@numba.njit(cache=True)
def replay(rank_lo: _I, rank_hi: _I, op_rank: _I, code: _I, pre: _F, post: _F, dur: _F, paced: _B, stream: _I,
            arg: _I, unversioned: _B, s_ops: _I, s_lo: _I, s_hi: _I, c_lo: _I, c_hi: _I, coupled: _I, r_slo: _I, r_shi: _I,
            d_lo: _I, d_hi: _I, n_events: int, coll_members: _I, coll_len: _F, coll_base: _I, latency: float,
            gap: float, issue: _F, start: _F, end: _F, released: _F, host: _F, wait: _I) -> _I:
    """Run each rank until its host is held or done, and the next, until no rank can go on.
    Fills issue/start/end/released (by op), host and wait (by rank); returns each
    collective's arrivals.  A ``paced`` op is work its call launches piece by piece while it runs (a
    cuDNN RNN call's per-step kernels): it reaches its stream as the call starts and cannot end before
    the call's last launch has reached the device."""
    n_streams = len(s_lo)
    pos = rank_lo.copy()  # each rank's next op
    s_head, s_issued, s_free = s_lo.copy(), s_lo.copy(), np.zeros(n_streams)
    ev_time, ev_issued = np.full(n_events, np.nan), np.zeros(n_events, np.bool_)
    c_arrived, c_ready = np.zeros(len(coll_members), np.int64), np.zeros(len(coll_members))
    c_ops = np.empty(max(1, int(coll_members.sum())), np.int64)
    arrived = np.zeros(len(code), np.bool_)
    wait_arg, wait_op = np.zeros(len(rank_lo), np.int64), np.zeros(len(rank_lo), np.int64)
    dirty = np.zeros(len(rank_lo), np.bool_)
    stack = np.empty(len(rank_lo), np.int64)
    avail = np.zeros(len(code))  # when each queued op reaches its stream
    last = np.zeros(len(code))  # when a paced op's last piece reaches it (0: not paced)
    progress = True
    while progress:
        progress = False
        for r in range(len(rank_lo)):
            while True:
                if wait[r] != FREE:
                    if not _release(r, wait, wait_arg, host, end, s_head, s_issued, s_free, d_lo, d_hi,
                                    ev_time, ev_issued):
                        break
                    released[wait_op[r]] = host[r]
                    progress = True
                if pos[r] >= rank_hi[r]:
                    break
                k = pos[r]
                pos[r] += 1
                progress = True
                host[r] += pre[k]
                issue[k] = host[r]
                host[r] += post[k]
                c = code[k]
                if paced[k]:
                    avail[k], last[k] = issue[k] + latency, host[r] + latency
                else:
                    avail[k] = host[r] + latency if launched(c) else issue[k]
                if WORK <= c <= COLL:
                    s = stream[k]
                    s_issued[s] += 1
                    if c == RECORD:
                        ev_issued[arg[k]] = True
                    dirty[r] = True
                    stack[0] = r
                    top = 1
                    while top > 0:  # resolve what can run now, on this rank and on ranks a collective released
                        top -= 1
                        q = stack[top]
                        dirty[q] = False
                        changed = True
                        while changed:
                            changed = False
                            for t in range(r_slo[q], r_shi[q]):
                                if s_head[t] < s_issued[t]:
                                    done, top = _drain(t, top, stack, dirty, op_rank, code, dur, last, stream,
                                                       arg, unversioned, s_ops, s_head, s_issued, s_free, c_lo, c_hi,
                                                       coupled, ev_time, coll_members, coll_len, coll_base,
                                                       c_arrived, c_ready, c_ops, arrived, avail, gap, start, end)
                                    changed = changed or done
                    if c == WORK_SYNC:
                        wait[r], wait_arg[r], wait_op[r] = ON_OP, k, k
                elif c == SYNC_STREAM:
                    wait[r], wait_arg[r], wait_op[r] = ON_STREAM, stream[k], k
                elif c == SYNC_DEVICE:
                    wait[r], wait_arg[r], wait_op[r] = ON_DEVICE, arg[k], k
                elif c == SYNC_EVENT:
                    wait[r], wait_arg[r], wait_op[r] = ON_EVENT, arg[k], k
    return c_arrived


@numba.njit(cache=True, inline="always")
def launched(c: int) -> bool:
    """Whether an op of code ``c`` is work the device launches (and pays the launch latency and gap for)."""
    return c == WORK or c == WORK_SYNC or c == COLL


@numba.njit(cache=True, inline="always")
def _drain(s: int, top: int, stack: _I, dirty: _B, op_rank: _I, code: _I, dur: _F, last: _F, stream: _I,
           arg: _I, unversioned: _B, s_ops: _I, s_head: _I, s_issued: _I, s_free: _F, c_lo: _I, c_hi: _I, coupled: _I,
           ev_time: _F, coll_members: _I, coll_len: _F, coll_base: _I, c_arrived: _I, c_ready: _F, c_ops: _I,
           arrived: _B, avail: _F, gap: float, start: _F, end: _F) -> tuple[bool, int]:
    """Run the issued work of stream ``s`` as far as its dependencies allow; True if any ran (and the
    new top of the stack of ranks to drain, which a finished collective pushes its other members on)."""
    ran = False
    while s_head[s] < s_issued[s]:
        ready = s_free[s]
        for j in range(c_lo[s], c_hi[s]):  # legacy default stream semantics
            o = coupled[j]
            if s_head[o] < s_issued[o]:
                return ran, top
            ready = max(ready, s_free[o])
        k = s_ops[s_head[s]]
        c = code[k]
        begin = max(ready + gap, avail[k]) if launched(c) else max(ready, avail[k])
        if c == RECORD:
            ev_time[arg[k]] = begin
        elif c == WAIT:
            t = ev_time[arg[k]]
            if np.isnan(t):
                if not unversioned[k]:  # an event recorded later, on another stream
                    return ran, top
            else:
                s_free[s] = max(s_free[s], t)
        elif c == COLL:
            x = arg[k]
            if not arrived[k]:
                arrived[k] = True
                c_ops[coll_base[x] + c_arrived[x]] = k
                c_arrived[x] += 1
                c_ready[x] = max(c_ready[x], begin)
            if c_arrived[x] < coll_members[x]:  # the others have not reached it yet
                return ran, top
            b, e = c_ready[x], c_ready[x] + coll_len[x]
            for m in range(coll_base[x], coll_base[x] + coll_members[x]):
                km = c_ops[m]
                start[km], end[km] = b, e
                s_free[stream[km]] = e
                if km != k:  # the other members' streams go on past it
                    s_head[stream[km]] += 1
                    q = op_rank[km]
                    if not dirty[q]:
                        dirty[q] = True
                        stack[top] = q
                        top += 1
        else:
            start[k] = begin
            s_free[s] = end[k] = max(begin + dur[k], last[k])
        s_head[s] += 1
        ran = True
    return ran, top


@numba.njit(cache=True, inline="always")
def _release(r: int, wait: _I, wait_arg: _I, host: _F, end: _F, s_head: _I, s_issued: _I, s_free: _F, d_lo: _I,
             d_hi: _I, ev_time: _F, ev_issued: _B) -> bool:
    """Release rank ``r``'s host if what it waits for has finished; True if released."""
    w, x = wait[r], wait_arg[r]
    if w == ON_OP:
        t = end[x]
        if np.isnan(t):
            return False
    elif w == ON_STREAM:
        if s_head[x] < s_issued[x]:
            return False
        t = s_free[x]
    elif w == ON_DEVICE:
        t = 0.0
        for s in range(d_lo[x], d_hi[x]):
            if s_head[s] < s_issued[s]:
                return False
            t = max(t, s_free[s])
    else:
        t = ev_time[x]
        if np.isnan(t):
            # An event recorded on a stream that has not reached it yet holds the host; one never
            # recorded (or recorded by a trace that does not write EVENT_RECORD) does not.
            if ev_issued[x]:
                return False
            t = host[r]
    host[r] = max(host[r], t)
    wait[r] = FREE
    return True
