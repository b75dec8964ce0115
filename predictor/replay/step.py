"""A training step from a replay: its time, where the time goes, and a timeline to look at.

The steady steps are found on rank 0 (:mod:`maya.predictor.replay.iterations`);
a step lasts from the host's issue of its first operation to that of the
next step's (the last step: to the end of its last operation).  Over the
steady steps, rank 0's device time is split into compute (kernels and
library calls), exposed communication (collectives while no compute runs),
data movement (copies and memsets while neither runs) and idle time, which
is the device waiting for the host.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from maya.predictor.replay.iterations import Steps
from maya.predictor.replay.simulator import RankResult
from maya.predictor.trace.format import Kind
from maya.predictor.trace.ops import thread_names
from maya.predictor.trace.reader import Trace

_COMPUTE = (int(Kind.KERNEL), int(Kind.BLAS), int(Kind.DNN))
_COMM = (int(Kind.COLL),)
_DATA = (int(Kind.MEMCPY), int(Kind.MEMSET))


@dataclass(frozen=True)
class StepTime:
    """Steady-state step of a replay, seconds.  ``breakdown`` sums to ``step_s`` (per step, rank 0).
    ``work``: per step, the device time of the kernels, library calls and copies issued in it: equal for
    steps of the same work, whose times differ only by their host's delays."""

    step_s: float
    steps: tuple[float, ...]
    breakdown: dict[str, float]
    work: tuple[float, ...] = ()


def _union(intervals: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Disjoint sorted intervals covering the given (start, end) rows."""
    if len(intervals) == 0:
        return intervals.reshape(0, 2)
    iv = intervals[np.argsort(intervals[:, 0])]
    out = [list(iv[0])]
    for s, e in iv[1:]:
        if s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return np.array(out)


def _length(iv: npt.NDArray[np.float64], lo: float, hi: float) -> float:
    if len(iv) == 0:
        return 0.0
    return float(np.sum(np.clip(np.minimum(iv[:, 1], hi) - np.maximum(iv[:, 0], lo), 0.0, None)))


def _subtract(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Parts of the disjoint intervals ``a`` not covered by the disjoint intervals ``b``."""
    out: list[tuple[float, float]] = []
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return np.array(out).reshape(-1, 2)


def _bounds(result: RankResult, steps: Steps, records: Sequence[int]) -> list[float]:
    """Where each steady step starts on the replay's clock, and where the last one ends (ns)."""
    starts = [float(result.issue[records[s]]) for s in steps.starts]
    after = steps.end
    # The last step ends when its work has run, or where the next one starts: what follows it may be
    # other work (the end of the loop, a report, the program's exit).
    finish = _done(result, starts[-1], float(result.issue[records[after - 1]]))
    if after < len(records):
        finish = min(finish, float(result.issue[records[after]]))
    return [*starts, finish]


def _durations(bounds: Sequence[float]) -> tuple[float, ...]:
    return tuple((b - a) / 1e9 for a, b in zip(bounds[:-1], bounds[1:], strict=True))


def median_step_s(result: RankResult, steps: Steps, records: Sequence[int]) -> float:
    """The median steady step of a replay, seconds: what a replay compared with another by its step alone
    needs (an elasticity's, a calibration's), without :func:`step_time`'s breakdown and work per step."""
    return float(np.median(_durations(_bounds(result, steps, records))))


def step_time(trace: Trace, result: RankResult, steps: Steps, records: Sequence[int]) -> StepTime:
    """Step time and breakdown of rank 0 (``steps`` found on ``records``, record indices of one thread)."""
    bounds = _bounds(result, steps, records)
    durations = _durations(bounds)
    lo, hi = bounds[0], bounds[-1]
    kinds = trace.records["kind"]
    ok = ~np.isnan(result.start)

    def union(group: tuple[int, ...]) -> npt.NDArray[np.float64]:
        sel = ok & np.isin(kinds, group)
        return _union(np.column_stack([result.start[sel], result.end[sel]]))

    compute, comm, data = union(_COMPUTE), union(_COMM), union(_DATA)
    exposed_comm = _subtract(comm, compute)
    busy = _union(np.concatenate([compute, comm, data]))
    exposed_data = _subtract(_subtract(data, compute), comm)
    n = len(durations)
    window = hi - lo
    parts = {
        "compute_s": _length(compute, lo, hi),
        "exposed_communication_s": _length(exposed_comm, lo, hi),
        "data_movement_s": _length(exposed_data, lo, hi),
    }
    parts["idle_s"] = window - _length(busy, lo, hi)
    own = ok & np.isin(kinds, _COMPUTE + _DATA)
    step_of = np.searchsorted(np.asarray(bounds), result.issue[own], side="right") - 1
    inside = (step_of >= 0) & (step_of < n)
    work = np.bincount(step_of[inside], weights=(result.end[own] - result.start[own])[inside], minlength=n)
    return StepTime(float(np.median(durations)), durations, {k: v / n / 1e9 for k, v in parts.items()},
                    tuple(float(w) / 1e9 for w in work))


def _done(result: RankResult, first: float, last: float) -> float:
    """When the work issued from ``first`` to ``last`` by any thread had run: its device operations
    ended, its waits let the host go on."""
    sel = (result.issue >= first) & (result.issue <= last)
    times = np.concatenate([result.issue[sel], result.end[sel], result.released[sel]])
    return float(np.nanmax(times))


def write_timeline(path: Path, traces: Sequence[Trace], results: Sequence[RankResult], names: Sequence[
        Sequence[str]]) -> None:
    """A Chrome/Perfetto trace (open in ui.perfetto.dev): per rank a host track and one track per stream.

    ``names[r][i]``: the label of rank r's record i (kernel or API name)."""
    events: list[dict[str, Any]] = []
    for trace, res, labels in zip(traces, results, names, strict=True):
        pid = int(trace.header["rank"])
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"rank {pid}"}})
        threads = thread_names(trace)
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "host"}})
        recs = trace.records
        tids: dict[tuple[int, int], int] = {}
        for i in np.flatnonzero(~np.isnan(res.start)).tolist():
            key = (int(recs["device"][i]), int(recs["stream"][i]))
            if key not in tids:
                tids[key] = len(tids) + 1
                events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tids[key],
                               "args": {"name": f"GPU {key[0]} stream {key[1]}"}})
            events.append({"ph": "X", "pid": pid, "tid": tids[key], "name": labels[i] or Kind(int(recs["kind"][i])).name,
                           "ts": res.start[i] / 1e3, "dur": (res.end[i] - res.start[i]) / 1e3,
                           "cat": Kind(int(recs["kind"][i])).name})
        for i in np.flatnonzero(~np.isnan(res.issue)).tolist():
            kind = int(recs["kind"][i])
            if kind in (int(Kind.STREAM_SYNC), int(Kind.DEVICE_SYNC), int(Kind.EVENT_SYNC)):
                events.append({"ph": "i", "pid": pid, "tid": 0, "s": "t", "ts": res.issue[i] / 1e3,
                               "name": Kind(kind).name,
                               "args": {"thread": threads.get(int(recs["thread"][i]), "")}})
    path.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ns"}))
