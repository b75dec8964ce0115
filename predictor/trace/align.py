"""Operation-by-operation alignment of two traces of the same script.

Typically one trace is emulated and the other recorded on a GPU: they hold
the same device operations in the same order per thread, except where the
runs really differ (a kernel the emulation launches and the GPU does not, a
call that record mode drops because nothing ran).  Threads are paired by
name (thread indices are first come, first served and differ between runs).
Operations are compared on a coarse key, kind and name, any DNN matching any
DNN, because record mode names DNN operations by API (``cudnnBackendExecute``)
where emulation names them by what they compute (``sdpa_fprop``).  Whether
aligned operations agree field by field is the caller's question
(:func:`maya.predictor.trace.ops.differing_fields`).

The alignment is a longest common subsequence, found as patience diff
finds it: anchors first, then the gaps between them.  ``difflib`` is not
used: a training trace repeats the same few hundred keys per step, and its
longest-block-first matching pairs step k of one trace with step k+1 of the
other (half of a 29,000-operation pair unmatched, in 50 s).  Here anchors
are the k-th occurrences of keys that occur as often on both sides, and
regions of at most 2**18 cells are solved exactly by dynamic programming.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from maya.predictor.trace.format import Kind
from maya.predictor.trace.ops import Op, device_ops, thread_names
from maya.predictor.trace.reader import Trace

_Ints = npt.NDArray[np.int64]


def coarse_key(op: Op) -> tuple[int, str]:
    """What must be equal for two operations to be aligned."""
    return (op.kind, "" if op.kind == Kind.DNN else op.name)


def _codes(ops_a: Sequence[Op], ops_b: Sequence[Op]) -> tuple[_Ints, _Ints]:
    """Coarse keys as small integers.  device_ops shares one Op object among
    the records of an operation, so keys are computed once per object."""
    by_key: dict[tuple[int, str], int] = {}
    by_object: dict[int, int] = {}

    def code(op: Op) -> int:
        c = by_object.get(id(op))
        if c is None:
            c = by_object[id(op)] = by_key.setdefault(coarse_key(op), len(by_key))
        return c

    return np.asarray([code(op) for op in ops_a], np.int64), np.asarray([code(op) for op in ops_b], np.int64)


def _occurrences(x: _Ints) -> _Ints:
    """For each position, how many earlier positions hold the same code."""
    order = np.argsort(x, kind="stable")
    sorted_x = x[order]
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    group_start = np.repeat(starts, np.diff(np.r_[starts, len(x)]))
    rank = np.empty(len(x), np.int64)
    rank[order] = np.arange(len(x)) - group_start
    return rank


def _increasing(seq: list[int]) -> list[int]:
    """Positions in ``seq`` of a longest strictly increasing subsequence (patience sorting)."""
    tails: list[int] = []  # smallest last value of an increasing run of each length
    tail_at: list[int] = []
    prev = [-1] * len(seq)
    for i, v in enumerate(seq):
        k = bisect.bisect_left(tails, v)
        if k == len(tails):
            tails.append(v)
            tail_at.append(i)
        else:
            tails[k] = v
            tail_at[k] = i
        prev[i] = tail_at[k - 1] if k else -1
    out = []
    i = tail_at[-1] if tail_at else -1
    while i >= 0:
        out.append(i)
        i = prev[i]
    return out[::-1]


def _paired_occurrences(a: _Ints, b: _Ints) -> tuple[_Ints, _Ints]:
    """(a position, b position), the k-th occurrence of a key in A with its
    k-th in B, for the keys that occur as often in both."""
    codes, counts_a = np.unique(a, return_counts=True)
    counts_b = np.bincount(b, minlength=int(max(a.max(), b.max())) + 1)[codes]
    equal = codes[counts_a == counts_b]
    a_sel, b_sel = np.flatnonzero(np.isin(a, equal)), np.flatnonzero(np.isin(b, equal))
    span = max(len(a), len(b)) + 1
    ka = a[a_sel] * span + _occurrences(a[a_sel])
    kb = b[b_sel] * span + _occurrences(b[b_sel])
    _, ia, ib = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
    return a_sel[ia], b_sel[ib]


def _paired_by_position(a: _Ints, b: _Ints) -> tuple[_Ints, _Ints]:
    """(a position, b position) for the rarest keys present on both sides,
    each occurrence in A with the occurrence in B nearest its proportional place."""
    codes, counts_a = np.unique(a, return_counts=True)
    counts_b = np.bincount(b, minlength=int(max(a.max(), b.max())) + 1)[codes]
    both = counts_b > 0
    if not both.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    total = counts_a[both] + counts_b[both]
    rare = codes[both][total <= 2 * total.min()]
    ia, ib = [], []
    for code in rare.tolist():
        pa, pb = np.flatnonzero(a == code), np.flatnonzero(b == code)
        target = pa * (len(b) / len(a))
        k = np.clip(np.searchsorted(pb, target), 1, len(pb) - 1) if len(pb) > 1 else np.zeros(len(pa), np.int64)
        if len(pb) > 1:
            k = np.where(np.abs(pb[k - 1] - target) <= np.abs(pb[k] - target), k - 1, k)
        ia.append(pa)
        ib.append(pb[k])
    return np.concatenate(ia), np.concatenate(ib)


def _anchors(a: _Ints, b: _Ints) -> tuple[_Ints, _Ints]:
    """Positions (in a, in b) of operations that surely correspond.

    A key that occurs as often in A as in B pairs its k-th occurrence in A
    with its k-th in B (keys whose counts differ are left to the gaps, where
    they are compared locally); when no key does, the rarest keys pair each
    occurrence with the nearest one at the same relative place.  Of those
    pairs, the largest set that does not cross is kept, as patience diff does
    with unique lines."""
    ia, ib = _paired_occurrences(a, b)
    if len(ia) == 0:
        ia, ib = _paired_by_position(a, b)
    order = np.argsort(ia, kind="stable")
    ia, ib = ia[order], ib[order]
    if len(ib) > 1 and not np.all(np.diff(ib) > 0):
        keep = _increasing(ib.tolist())
        ia, ib = ia[keep], ib[keep]
    return ia, ib


def _common_ends(a: _Ints, b: _Ints) -> tuple[int, int]:
    """Lengths of the common prefix and of the common suffix after it."""
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    prefix = int(diff[0]) if len(diff) else n
    m = n - prefix
    diff = np.flatnonzero(a[len(a) - m :][::-1] != b[len(b) - m :][::-1])
    suffix = int(diff[0]) if len(diff) else m
    return prefix, suffix


# Regions of at most this many cells (len(a) * len(b)) are aligned exactly.
_SMALL = 1 << 18


def _lcs(a: _Ints, b: _Ints) -> list[tuple[int, int]]:
    """A longest common subsequence, by dynamic programming one row at a time."""
    table = np.zeros((len(a) + 1, len(b) + 1), np.int32)
    for i in range(len(a)):
        prev = table[i]
        take = np.where(b == a[i], prev[:-1] + 1, 0)
        table[i + 1, 1:] = np.maximum.accumulate(np.maximum(prev[1:], take))
    rows, xa, xb = table.tolist(), a.tolist(), b.tolist()
    out = []
    i, j = len(a), len(b)
    while i and j:
        if xa[i - 1] == xb[j - 1] and rows[i][j] == rows[i - 1][j - 1] + 1:
            out.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif rows[i - 1][j] >= rows[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return out[::-1]


def _matches(a: _Ints, b: _Ints) -> tuple[_Ints, _Ints]:
    """Aligned positions (in a, in b), in order."""
    found_a: list[_Ints] = []
    found_b: list[_Ints] = []
    stack = [(0, len(a), 0, len(b))]  # regions still to align
    while stack:
        a0, a1, b0, b1 = stack.pop()
        prefix, suffix = _common_ends(a[a0:a1], b[b0:b1])
        found_a += [np.arange(a0, a0 + prefix), np.arange(a1 - suffix, a1)]
        found_b += [np.arange(b0, b0 + prefix), np.arange(b1 - suffix, b1)]
        a0, b0, a1, b1 = a0 + prefix, b0 + prefix, a1 - suffix, b1 - suffix
        if a0 == a1 or b0 == b1:
            continue
        if (a1 - a0) * (b1 - b0) <= _SMALL:
            pairs = np.asarray(_lcs(a[a0:a1], b[b0:b1]), np.int64).reshape(-1, 2)
            found_a.append(pairs[:, 0] + a0)
            found_b.append(pairs[:, 1] + b0)
            continue
        ia, ib = _anchors(a[a0:a1], b[b0:b1])
        if len(ia) == 0:  # nothing in common
            continue
        ia, ib = ia + a0, ib + b0
        found_a.append(ia)
        found_b.append(ib)
        lo_a, hi_a, lo_b, hi_b = np.r_[a0 - 1, ia] + 1, np.r_[ia, a1], np.r_[b0 - 1, ib] + 1, np.r_[ib, b1]
        gaps = np.flatnonzero((hi_a > lo_a) & (hi_b > lo_b))
        stack += zip(lo_a[gaps].tolist(), hi_a[gaps].tolist(), lo_b[gaps].tolist(), hi_b[gaps].tolist(), strict=True)
    ia, ib = np.concatenate(found_a).astype(np.int64), np.concatenate(found_b).astype(np.int64)
    order = np.argsort(ia, kind="stable")
    return ia[order], ib[order]


def align(ops_a: Sequence[Op], ops_b: Sequence[Op]) -> list[tuple[int | None, int | None]]:
    """Pairs of indices into the two lists, in order: ``(i, j)`` aligned,
    ``(i, None)`` only in A, ``(None, j)`` only in B (A's side of a
    differing stretch first).  Every index appears exactly once."""
    a, b = _codes(ops_a, ops_b)
    ia, ib = _matches(a, b)
    mi, mj = np.r_[ia, len(a)], np.r_[ib, len(b)]  # with an end marker
    gaps = np.flatnonzero((np.diff(np.r_[-1, mi]) > 1) | (np.diff(np.r_[-1, mj]) > 1)).tolist()
    xs, ys = mi.tolist(), mj.tolist()
    out: list[tuple[int | None, int | None]] = []
    done = 0  # matches already written
    for k in gaps:
        out += zip(xs[done:k], ys[done:k], strict=True)
        i0, j0 = (xs[k - 1] + 1, ys[k - 1] + 1) if k else (0, 0)
        out += [(i, None) for i in range(i0, xs[k])]
        out += [(None, j) for j in range(j0, ys[k])]
        done = k
    out += zip(xs[done : len(ia)], ys[done : len(ia)], strict=True)
    return out


class Pair(NamedTuple):
    """One line of an alignment of two traces: an operation of A, of B, or of both.

    ``a``/``b`` are record indices (None on the side that lacks it)."""

    thread: str
    a: int | None
    b: int | None
    op_a: Op | None
    op_b: Op | None


def _by_thread(trace: Trace) -> dict[str, tuple[list[int], list[Op]]]:
    """Record indices and operations per thread name, threads in order of first operation."""
    names = thread_names(trace)
    ops = device_ops(trace)
    index = np.asarray([i for i, _ in ops], np.int64)
    thread = trace.records["thread"][index]
    values, first = np.unique(thread, return_index=True)
    groups: dict[str, tuple[list[int], list[Op]]] = {}
    for t in values[np.argsort(first)].tolist():
        where = np.flatnonzero(thread == t).tolist()
        indices, group = groups.setdefault(names.get(t, f"#{t}"), ([], []))
        indices += index[where].tolist()
        group += [ops[k][1] for k in where]
    return groups


def align_traces(a: Trace, b: Trace) -> list[Pair]:
    """Align the device operations of two traces, thread by thread.

    Threads with the same name are aligned together; threads left over on
    both sides (e.g. a main thread called ``python3`` in one run and
    ``python`` in the other) are paired in order of their first operation.
    Pairs come thread by thread, each thread's in order."""
    ga, gb = _by_thread(a), _by_thread(b)
    only_a, only_b = [n for n in ga if n not in gb], [n for n in gb if n not in ga]
    k = min(len(only_a), len(only_b))
    threads: list[tuple[str, str | None, str | None]] = [(n, n, n) for n in ga if n in gb]
    threads += [(f"{x} | {y}", x, y) for x, y in zip(only_a[:k], only_b[:k], strict=True)]
    threads += [(x, x, None) for x in only_a[k:]]
    threads += [(y, None, y) for y in only_b[k:]]
    out: list[Pair] = []
    empty: tuple[list[int], list[Op]] = ([], [])
    for thread, na, nb in threads:
        (xi, xs), (yi, ys) = ga[na] if na is not None else empty, gb[nb] if nb is not None else empty
        for i, j in align(xs, ys):
            out.append(
                Pair(
                    thread,
                    None if i is None else xi[i],
                    None if j is None else yi[j],
                    None if i is None else xs[i],
                    None if j is None else ys[j],
                )
            )
    return out
