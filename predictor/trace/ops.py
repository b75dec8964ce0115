"""Device operations of a trace, free of what is specific to one run.

An emulated trace and a trace recorded on a real GPU of the same script hold
the same operations with different pointers, function ids, communicator ids
and string ids.  :class:`Op` keeps what describes the work itself, so that
two runs can be aligned (``predictor/trace/align.py``) and repeats aggregated
(``predictor/estimate/profiles.py``).  :func:`measured` reads the durations that
record mode attaches to each operation (``DEVICE_TIME`` records).

Both walk whole traces: decoding is vectorised, and an ``Op`` is built once
per distinct operation, not once per record.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from maya.predictor.trace import records as R
from maya.predictor.trace.format import Flag, Kind
from maya.predictor.trace.reader import Trace, TraceError

DEVICE_WORK = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.BLAS, Kind.DNN, Kind.COLL)

# Records that sit between an operation and its DEVICE_TIME records without
# being operations themselves (strings and names are interned on first use).
_BOOKKEEPING = (Kind.STRING, Kind.FUNC, Kind.THREAD, Kind.NOTE, Kind.DEVICE_TIME, Kind.APPROXIMATED)

_KERNEL, _MEMCPY, _MEMSET, _BLAS, _DNN, _COLL = (int(k) for k in DEVICE_WORK)  # Op.kind is a plain int

OP_COLUMNS = ("kind", "name", "a32", "a0", "a1", "a2", "a3", "a4", "params", "kernels", "pinned")


@dataclass(frozen=True)
class Op:
    """One device operation, independent of the trace it came from (no ids, no pointers).

    ``name``: KERNEL the mangled kernel name; BLAS the API name; DNN the
    operation name (record mode: the cuDNN API name); '' otherwise.
    ``a32``: the raw a32 where it is not a string id (KERNEL source, MEMCPY
    kind, MEMSET element size), else 0.  ``a``: a0..a4 with run-specific
    values zeroed (KERNEL function id, MEMCPY pointers, MEMSET pointer, COLL
    communicator id).  ``params``: DNN parameter words; BLAS the 28 extension
    words with pointers zeroed; KERNEL its integer arguments (as many as a4 says).  ``kernels``: DNN kernel names.  ``pinned``:
    MEMCPY with a page-locked host side.
    """

    kind: int
    name: str
    a32: int
    a: tuple[int, int, int, int, int]
    params: tuple[int, ...] = ()
    kernels: tuple[str, ...] = ()
    pinned: bool = False

    def signature(self) -> tuple[Any, ...]:
        """Hashable identity used for alignment and aggregation."""
        return (self.kind, self.name, self.a32, self.a, self.params, self.kernels, self.pinned)

    def label(self) -> str:
        """Short text for reports: kind and name."""
        kind = Kind(self.kind).name
        return f"{kind} {self.name}" if self.name else kind

    def to_row(self) -> dict[str, str]:
        """CSV cells (``OP_COLUMNS``); params and kernels as JSON lists."""
        row = {"kind": str(self.kind), "name": self.name, "a32": str(self.a32)}
        row.update({f"a{i}": str(v) for i, v in enumerate(self.a)})
        row["params"] = json.dumps(list(self.params))
        row["kernels"] = json.dumps(list(self.kernels))
        row["pinned"] = str(int(self.pinned))
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, str]) -> Op:
        """Inverse of :meth:`to_row` (extra columns are ignored)."""
        a0, a1, a2, a3, a4 = (int(row[f"a{i}"]) for i in range(5))
        return cls(
            kind=int(row["kind"]),
            name=row["name"],
            a32=int(row["a32"]),
            a=(a0, a1, a2, a3, a4),
            params=tuple(int(v) for v in json.loads(row["params"])),
            kernels=tuple(str(v) for v in json.loads(row["kernels"])),
            pinned=bool(int(row["pinned"])),
        )


def differing_fields(x: Op, y: Op) -> list[str]:
    """Names of the fields in which two operations differ (a0..a4 one by one)."""
    out = []
    for f in fields(Op):
        if f.name == "a":
            out += [f"a{i}" for i in range(5) if x.a[i] != y.a[i]]
        elif getattr(x, f.name) != getattr(y, f.name):
            out.append(f.name)
    return out


class Measured(NamedTuple):
    """Device time of one operation in a recorded trace (its DEVICE_TIME records).

    ``span_ns``: last end minus first start; ``busy_ns``: sum of the
    durations; ``kernels``: the names of what ran (kernel names, or
    "memcpy"/"memset"), in record order; ``n``: how many DEVICE_TIME records.
    """

    span_ns: int
    busy_ns: int
    kernels: tuple[str, ...]
    n: int


# ---------------------------------------------------------------- decoding

_Ops = npt.NDArray[np.object_]  # Op objects, one per record


def _name(trace: Trace, sid: int) -> str:
    try:
        return trace.string(sid)
    except KeyError:
        raise TraceError(f"string id {sid} is used but never defined") from None


def thread_names(trace: Trace) -> dict[int, str]:
    """Thread index -> name, from THREAD records (indices differ between runs, names do not)."""
    recs = trace.records[trace.of_kind(Kind.THREAD)]
    return {int(R.THREAD_INDEX.of(r["a"])): _name(trace, int(R.THREAD_NAME.of(r["a"]))) for r in recs}


def _function_names(trace: Trace) -> dict[int, str]:
    recs = trace.records[trace.of_kind(Kind.FUNC)]
    return {int(R.FUNC_ID.of(r["a"])): _name(trace, int(R.FUNC_MANGLED.of(r["a"]))) for r in recs}


def _ext_matrix(trace: Trace, idx: npt.NDArray[np.int64], width: int) -> npt.NDArray[np.uint64]:
    """The first ``width`` continuation words of records ``idx`` (zero-padded), one row each."""
    nslots = -(-width // 7)
    heads = trace.slot_index
    nxt = np.append(heads[1:], len(trace._words))[idx]
    start = heads[idx] + 1
    out = np.zeros((len(idx), nslots * 7), np.uint64)
    full = nxt - start >= nslots
    if full.any():
        rows = start[full][:, None] + np.arange(nslots)
        out[full] = trace._words[rows, 1:].reshape(int(full.sum()), nslots * 7)
    for row in np.flatnonzero(~full):
        words = trace.ext(int(idx[row]))[: nslots * 7]
        out[row, : len(words)] = words
    return out[:, :width]


def _distinct(keys: npt.NDArray[np.uint64], make: Callable[[list[int]], Op]) -> _Ops:
    """One Op per distinct key row, then one reference per row."""
    if len(keys) == 0:
        return np.empty(0, dtype=object)
    # Row ids by factorising one column at a time: 1-D sorts are much faster
    # than np.unique(axis=0) on a million rows.
    code = np.zeros(len(keys), np.int64)
    for col in keys.T:
        _, col_code = np.unique(col, return_inverse=True)
        _, code = np.unique(code * (int(col_code.max()) + 1) + col_code, return_inverse=True)
    code = code.reshape(-1)
    _, first = np.unique(code, return_index=True)  # the first row of each id
    made = np.empty(len(first), dtype=object)
    made[:] = [make(row) for row in keys[first].tolist()]
    return made[code]


def _kernel_ops(trace: Trace, idx: npt.NDArray[np.int64]) -> _Ops:
    recs = trace.records[idx]
    funcs = _function_names(trace)

    def make(row: list[int]) -> Op:
        a32, a = row[0], row[1:6]
        func, n_ints = R.KERNEL_FUNC.of(a), R.KERNEL_N_INTS.of(a)
        if func not in funcs:
            raise TraceError(f"kernel launch of function id {func}, which no FUNC record names")
        a[R.KERNEL_FUNC.word] = 0
        return Op(_KERNEL, funcs[func], a32, (a[0], a[1], a[2], a[3], a[4]),
                  params=tuple(row[6:6 + min(n_ints, R.KERNEL_INTS)]))

    # How many integer arguments follow in continuation words (emulation only).
    ints = np.zeros((len(idx), R.KERNEL_INTS), np.uint64)
    with_ints = np.flatnonzero(R.KERNEL_N_INTS.of(recs["a"]) > 0)
    if len(with_ints):
        ints[with_ints] = _ext_matrix(trace, idx[with_ints], R.KERNEL_INTS)
    keys = np.column_stack([recs["a32"].astype(np.uint64), recs["a"], ints])
    return _distinct(keys, make)


def _memcpy_ops(trace: Trace, idx: npt.NDArray[np.int64]) -> _Ops:
    recs = trace.records[idx]
    pinned = (recs["flags"] & Flag.PINNED) != 0
    keys = np.column_stack([recs["a32"].astype(np.uint64), recs["a"][:, 2:], pinned.astype(np.uint64)])
    return _distinct(keys, lambda r: Op(_MEMCPY, "", r[0], (0, 0, r[1], r[2], r[3]), pinned=bool(r[4])))


def _memset_ops(trace: Trace, idx: npt.NDArray[np.int64]) -> _Ops:
    recs = trace.records[idx]
    keys = np.column_stack([recs["a32"].astype(np.uint64), recs["a"][:, 1:]])
    return _distinct(keys, lambda r: Op(_MEMSET, "", r[0], (0, r[1], r[2], r[3], r[4])))


def _coll_ops(trace: Trace, idx: npt.NDArray[np.int64]) -> _Ops:
    recs = trace.records[idx]
    return _distinct(recs["a"][:, 1:], lambda r: Op(_COLL, "", 0, (0, r[0], r[1], r[2], r[3])))


def _blas_ops(trace: Trace, idx: npt.NDArray[np.int64]) -> _Ops:
    recs = trace.records[idx]
    ext = _ext_matrix(trace, idx, R.BLAS_WORDS)
    ext[:, list(R.BLAS_POINTER_WORDS)] = 0
    keys = np.column_stack([recs["a32"].astype(np.uint64), recs["a"], ext])

    def make(row: list[int]) -> Op:
        a0, a1, a2, a3, a4 = row[1:6]
        return Op(_BLAS, _name(trace, row[0]), 0, (a0, a1, a2, a3, a4), params=tuple(row[6:]))

    return _distinct(keys, make)


def _dnn_ops(trace: Trace, idx: npt.NDArray[np.int64]) -> _Ops:
    """DNN records have variable-length extensions; they are few, so one by one (with a cache)."""
    cache: dict[tuple[int, ...], Op] = {}
    out = np.empty(len(idx), dtype=object)
    for row, i in enumerate(idx.tolist()):
        rec = trace.records[i]
        a0, a1, a2, a3, a4 = (int(v) for v in rec["a"])
        n_params, n_kernels = R.DNN_N_PARAMS.bits(a3), R.DNN_N_KERNELS.bits(a3)
        words = trace.ext(i)[: n_params + n_kernels].tolist()
        key = (int(rec["a32"]), a0, a1, a2, a3, a4, *words)
        op = cache.get(key)
        if op is None:
            if len(words) < n_params + n_kernels:
                raise TraceError(f"DNN record {i} announces {n_params + n_kernels} words and has {len(words)}")
            kernels = tuple(_name(trace, sid) for sid in words[n_params:])
            op = Op(_DNN, _name(trace, key[0]), 0, (a0, a1, a2, a3, a4), tuple(words[:n_params]), kernels)
            cache[key] = op
        out[row] = op
    return out


_BUILDERS: dict[int, Callable[[Trace, npt.NDArray[np.int64]], _Ops]] = {
    Kind.KERNEL: _kernel_ops,
    Kind.MEMCPY: _memcpy_ops,
    Kind.MEMSET: _memset_ops,
    Kind.BLAS: _blas_ops,
    Kind.DNN: _dnn_ops,
    Kind.COLL: _coll_ops,
}


def device_ops(trace: Trace) -> list[tuple[int, Op]]:
    """(record index, op) of every executed device operation, in record order.

    Records flagged ``MF_CAPTURED`` are skipped (they were captured into a
    CUDA graph, not run; the replayed copies are kept)."""
    recs = trace.records
    sel = np.flatnonzero(np.isin(recs["kind"], DEVICE_WORK) & ((recs["flags"] & Flag.CAPTURED) == 0))
    ops = np.empty(len(sel), dtype=object)
    kinds = recs["kind"][sel]
    for kind, build in _BUILDERS.items():
        where = np.flatnonzero(kinds == kind)
        if len(where):
            ops[where] = build(trace, sel[where])
    return list(zip(sel.tolist(), ops.tolist(), strict=True))


def measured(trace: Trace) -> dict[int, Measured]:
    """Record index -> device time, from the DEVICE_TIME records that follow each operation.

    A DEVICE_TIME record belongs to the nearest record before it that is not
    bookkeeping (STRING, FUNC, THREAD, NOTE or another DEVICE_TIME).  Empty
    for an emulated trace."""
    recs = trace.records
    kinds = recs["kind"]
    dt = np.flatnonzero(kinds == Kind.DEVICE_TIME)
    if len(dt) == 0:
        return {}
    candidates = np.where(np.isin(kinds, _BOOKKEEPING), -1, np.arange(len(recs)))
    owner = np.maximum.accumulate(candidates)[dt]
    dt, owner = dt[owner >= 0], owner[owner >= 0]
    if len(dt) == 0:
        return {}
    words = recs["a"][dt]
    start, end = R.DEVICE_TIME_START.of(words).astype(np.int64), R.DEVICE_TIME_END.of(words).astype(np.int64)
    owners, first = np.unique(owner, return_index=True)  # dt is sorted, so each owner's rows are contiguous
    span = np.maximum.reduceat(end, first) - np.minimum.reduceat(start, first)
    busy = np.add.reduceat(end - start, first)
    count = np.diff(np.append(first, len(dt)))
    sids, inverse = np.unique(R.DEVICE_TIME_NAME.of(words), return_inverse=True)
    names = [_name(trace, s) for s in sids.tolist()]
    inverse = np.asarray(inverse).reshape(-1)
    singles = np.empty(len(names), dtype=object)  # most operations ran one thing: share its 1-tuple
    for k, name in enumerate(names):
        singles[k] = (name,)
    kernels = singles[inverse[first]]
    per_row = inverse.tolist()
    for g in np.flatnonzero(count > 1).tolist():
        f = int(first[g])
        kernels[g] = tuple(names[k] for k in per_row[f : f + int(count[g])])
    made = map(Measured, span.tolist(), busy.tolist(), kernels.tolist(), count.tolist())
    return dict(zip(owners.tolist(), made, strict=True))
