"""Training steps found in a trace from its repeating structure, with no help from the script.

A training loop issues the same device operations in the same order every
step once it has warmed up; the first step is usually different (cuDNN's
benchmark trials, the optimizer creating its state, DDP rebuilding its
buckets) and the end of the run may add work of its own (a final sync,
saving a checkpoint).  The steady steps are therefore the longest stretch of
the operation sequence that equals itself shifted by one period ``p``:
``x[i] == x[i + p]`` for every ``i`` of the stretch, among the stretches that
reach the end of the trace (steps come last; repeats within the set-up, such
as parameter fills, or within a step, such as layers, do not).  The period is
the one whose stretch covers most (a multiple of the true period covers
less, and a micro-batch inside a step with gradient accumulation breaks at
the optimizer); candidate periods are the gaps between repeats of the same
operation, so no quadratic search is needed.

Keys are kind and name (kernel, BLAS API, cuDNN operation), not sizes: an
operation whose integer arguments change from step to step (a counter, a
data-dependent size) still marks the same place in the loop.  Steps are cut
after the first host synchronisation of the steady stretch (or where it
starts), then every ``p`` operations; a step is only reported when the
operations of a whole period follow it.

Some loops' steps differ in their operations: a packed batch of sentences
whose lengths change every step launches one copy per distinct length, so no
stretch of operations repeats.  Such a loop still waits for the device at
the same places of every step (a synchronisation at its end, the reads of
the batch's lengths), and between two waits it launches the same *kinds* of
operation, only more or fewer of them.  Its steps are then found on the
sequence of stretches between waits, each known by the set of operations it
holds and the wait that ends it: that sequence repeats, every ``m`` waits,
and a step is ``m`` such stretches, as long as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from maya.predictor.trace.format import Kind
from maya.predictor.trace.ops import device_ops, thread_names
from maya.predictor.trace.reader import Trace

MIN_STEPS = 2  # steady steps needed before a period is believed
# Calls that make the host wait for the device: where a step usually ends.
_HOST_WAITS = (int(Kind.STREAM_SYNC), int(Kind.DEVICE_SYNC), int(Kind.EVENT_SYNC))
CANDIDATES = 24  # most frequent repeat gaps tried as periods
RARE = 8  # keys seen at most this often contribute all their repeat gaps
EPILOGUE = 256  # operations after the last step (a final sync, a checkpoint) that still count as "at the end"
STRETCH_EPILOGUE = 2  # stretches between waits after the last step that still count as "at the end"


class NoIterations(ValueError):
    """The sequence does not repeat: no training loop to measure."""


class StepsDiffer(NoIterations):
    """The loop's steps differ in their operations: more steps would not help."""


@dataclass(frozen=True)
class Steps:
    """Steady steps of an operation sequence.

    ``starts``: index of each steady step's first operation; ``end``: the
    index after the last one's last operation; ``period``: operations per
    step (``starts[i + 1] - starts[i] == period``), 0 where the steps differ
    in their operations and so in their lengths; ``warmup``: operations
    before the first steady step; ``tail``: operations after the last.
    """

    period: int
    starts: tuple[int, ...]
    end: int
    warmup: int
    tail: int

    @property
    def count(self) -> int:
        return len(self.starts)

    @property
    def alike(self) -> bool:
        """Whether every step issues the same operations."""
        return self.period > 0


def _codes(keys: Sequence[Hashable]) -> npt.NDArray[np.int64]:
    index: dict[Hashable, int] = {}
    return np.fromiter((index.setdefault(k, len(index)) for k in keys), np.int64, len(keys))


def _candidate_periods(x: npt.NDArray[np.int64], anchors: Sequence[Sequence[int]] = ()) -> list[int]:
    """Distances between consecutive occurrences of the same key: the most frequent ones, and
    every one of the keys that occur only a few times (once a step: with three steps, the
    step's own length is a rare gap among the many short ones of repeated layers); and, for each
    kind of host wait (``anchors``: where each run of it begins), the distances between them:
    with many steps no key of a step is rare, but a loop that synchronises (once, or twice in a
    row: before and after its step) still waits once a step."""
    order = np.argsort(x, kind="stable")
    same = x[order][1:] == x[order][:-1]
    gaps = (order[1:] - order[:-1])[same]
    if len(gaps) == 0:
        return []
    values, counts = np.unique(gaps, return_counts=True)
    chosen = set(values[np.argsort(-counts, kind="stable")][:CANDIDATES].tolist())
    occurrences = np.bincount(x)
    rare = occurrences[x[order][1:]][same] <= RARE
    chosen |= set(np.unique(gaps[rare]).tolist())
    for positions in anchors:
        a = np.asarray(positions, dtype=np.int64)
        chosen |= set(np.unique(a[1:] - a[:-1]).tolist())
    return sorted(int(v) for v in chosen if 0 < v <= len(x) // MIN_STEPS)


def _runs(eq: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(starts, lengths) of the runs of True."""
    padded = np.concatenate(([False], eq, [False]))
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    return edges[::2], edges[1::2] - edges[::2]


def find_steps(keys: Sequence[Hashable], boundary: Callable[[Hashable], bool] | None = None,
               epilogue: int = EPILOGUE) -> Steps:
    """The steady steps of ``keys`` (one hashable per operation, in issue order).

    Any phase of a periodic stretch is a valid cut; with ``boundary`` (keys
    after which a step may begin: the host's synchronisation at the end of a
    step), the first such cut in the stretch is taken, else its start.
    ``epilogue``: the most keys after the last step that still count as the
    end of the sequence."""
    x = _codes(keys)
    n = len(x)
    # (reaches the end, covered operations, -period, stretch start): stretches that run to the end
    # of the trace (but for an epilogue) first, since a loop's steps come last and repeats
    # within set-up (filling parameters) or within a step (layers) do not.
    best: tuple[bool, int, int, int] | None = None
    anchors: dict[Hashable, list[int]] = {}
    if boundary is not None:
        for i, k in enumerate(keys):
            if boundary(k) and (i == 0 or keys[i - 1] != k):  # a run of the same wait counts once
                anchors.setdefault(k, []).append(i)
    for p in _candidate_periods(x, list(anchors.values())):
        run_starts, run_lengths = _runs(x[:-p] == x[p:])
        for start, length in zip(run_starts.tolist(), run_lengths.tolist(), strict=True):
            if length < (MIN_STEPS - 1) * p:
                continue
            end = start + length + p
            key = (n - end <= max(p, epilogue), length + p, -p, start)
            if best is None or key > best:
                best = key
    waits = _Waits(keys, boundary, sorted(i for positions in anchors.values() for i in positions)) \
        if boundary is not None else None

    if best is None:
        if waits is not None and (differing := waits.steps) is not None:
            return differing
        raise NoIterations(f"no repeating sequence of operations among {n}: "
                           f"the trace needs at least {MIN_STEPS} identical training steps")
    _, covered, neg_p, start = best
    p = -neg_p
    end = start + covered  # the stretch [start, end) equals itself shifted by p
    first = start
    if boundary is not None:
        cut = next((i for i in range(max(start, 1), start + p + 1) if boundary(keys[i - 1])), start)
        if end - cut >= MIN_STEPS * p:
            start = cut
    starts = tuple(range(start, end - p + 1, p))
    identical = Steps(period=p, starts=starts, end=starts[-1] + p, warmup=start, tail=len(x) - (starts[-1] + p))
    if waits is not None and (differing := _steps_if_cut_at_waits(identical, first, end, waits)):
        return differing
    return identical


@dataclass(frozen=True)
class _Waits:
    """The loop's waits for the device in an operation sequence (``keys``): their ``positions``, and the steps
    they cut where the loop's steps differ in their operations."""

    keys: Sequence[Hashable]
    boundary: Callable[[Hashable], bool]
    positions: list[int]

    @cached_property
    def steps(self) -> Steps | None:
        """The steps cut at the waits, where the loop waits often enough to have some (computed once, when asked)."""
        return _steps_between_waits(self.keys, self.boundary) if len(self.positions) > MIN_STEPS else None


def _steps_if_cut_at_waits(identical: Steps, start: int, end: int, waits: _Waits) -> Steps | None:
    """The stretches between the loop's waits (``waits.steps``) where they, and not the ``identical`` steps
    cut from the repeat ``[start, end)`` of their period, are the loop's steps; else None.

    So where the repeat lies between two of the loop's waits and holds fewer than half the kinds of
    operation the loop issues between them (a run inside one step: a copy per length of a packed
    batch; a loop that waits only every so many steps keeps its identical steps), and where it is
    a pair of alike steps that the waits, repeating for longer, do not cut so (a chance).  Raises
    :class:`StepsDiffer` where the repeat is a run inside a step and the waits do not repeat either."""
    keys, p, starts = waits.keys, identical.period, identical.starts
    if len(waits.positions) > MIN_STEPS and not any(start <= i < end for i in waits.positions):
        differing = waits.steps
        if differing is None:
            spacing = int(np.median(np.diff(waits.positions)))
            if p < spacing:
                raise StepsDiffer(
                    f"the operations repeat only {p} at a time ({end - start} in all), where the loop waits for "
                    f"the device every {spacing} operations or so, and never inside them: the loop's steps differ "
                    "in their operations (a packed batch of lengths that change from step to step launches one "
                    "copy per length), and neither a stretch of identical steps nor a repeating pattern of waits "
                    "was found to time")
        elif 2 * len(set(keys[start:start + p])) < len(set(keys[differing.starts[-1]:differing.end])):
            return differing
    if end - start >= (MIN_STEPS + 1) * p:
        return None
    differing = waits.steps
    if differing is None or differing.end - differing.starts[0] <= end - start:
        return None
    # Two alike steps only, where the waits repeat for longer: the loop's steps if the waits cut them
    # so (the waits then repeat over a first step too), else a chance.
    inside = [b - a for a, b in zip(differing.starts, [*differing.starts[1:], differing.end], strict=True)
              if starts[0] <= a and b <= end]
    chance = not inside or any(length != p for length in inside) or not all(i > 0 and waits.boundary(keys[i - 1])
                                                                            for i in starts)
    return differing if chance else None


def _steps_between_waits(keys: Sequence[Hashable], boundary: Callable[[Hashable], bool]) -> Steps | None:
    """Steps of a loop whose steps differ in their operations, cut after its waits for the device; None
    where the loop's waits do not repeat.

    The stretches between two runs of waits, each known by the set of operations it issues and the
    wait that ends it, repeat every ``m`` stretches where the loop's steps do; a step is ``m``
    stretches."""
    after_waits = [i + 1 for i in range(len(keys)) if boundary(keys[i]) and (i + 1 == len(keys) or keys[i + 1] != keys[i])]
    cuts = [0, *after_waits] if after_waits[0] > 0 else after_waits
    if cuts[-1] < len(keys):
        cuts.append(len(keys))
    stretches = [(frozenset(keys[a:b]), keys[b - 1]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    try:  # up to the last step, or an epilogue of a stretch or two (a final sync, a report)
        found = find_steps(stretches, epilogue=STRETCH_EPILOGUE)
    except NoIterations:
        return None
    if found.tail > max(found.period, STRETCH_EPILOGUE):
        return None
    starts = tuple(cuts[i] for i in found.starts)
    end = cuts[found.end]
    return Steps(period=0, starts=starts, end=end, warmup=starts[0], tail=len(keys) - end)


AUTOGRAD_THREAD = "pt_autograd_"  # the prefix of the names PyTorch gives its backward threads


def trace_steps(trace: Trace, thread: str | None = None) -> tuple[Steps, list[int]]:
    """Steady steps of one rank's trace: (steps, record index of each operation of the thread).

    The sequence is the device operations and host waits (stream, event and
    device synchronisations) issued by one host thread (the interleaving of
    threads differs between steps): ``thread`` by name, or the busiest of the
    threads that wait for the device, leaving out PyTorch's autograd threads
    (``pt_autograd_<device>``): the training loop's.  Autograd's threads wait
    too where ``cudnn.benchmark`` times its trials in the first backward
    pass, and may issue more operations than the loop.  Steps begin after a
    host wait where the loop has one."""
    names = thread_names(trace)
    threads = trace.records["thread"]
    per_thread: dict[int, list[tuple[int, tuple[int, str]]]] = {}
    for i, op in device_ops(trace):
        per_thread.setdefault(int(threads[i]), []).append((i, (op.kind, op.name)))
    kinds = trace.records["kind"]
    for i in np.flatnonzero(np.isin(kinds, _HOST_WAITS)).tolist():
        if int(threads[i]) in per_thread:
            per_thread[int(threads[i])].append((i, (int(kinds[i]), "")))
    for ops in per_thread.values():
        ops.sort()
    if thread is not None:
        chosen = [t for t, n in names.items() if n == thread]
        if not chosen or chosen[0] not in per_thread:
            raise NoIterations(f"no device operations from a thread named {thread!r} "
                               f"(threads: {', '.join(sorted(set(names.values()))) or 'none'})")
        tid = chosen[0]
    elif per_thread:
        # The loop's own thread: not autograd's, waiting for the device; then the busiest.
        tid = max(per_thread, key=lambda t: (not names.get(t, "").startswith(AUTOGRAD_THREAD),
                                             any(k[0] in _HOST_WAITS for _, k in per_thread[t]),
                                             len(per_thread[t])))
    else:
        raise NoIterations("the trace holds no device operations")
    records = [i for i, _ in per_thread[tid]]
    keys = [k for _, k in per_thread[tid]]
    waits = {k for k in keys if k[0] in _HOST_WAITS}
    return find_steps(keys, boundary=waits.__contains__), records
