"""What ranks that outnumber the emulating machine's CPUs did to each other's host delays, and the factor that undoes it.

Ranks that outnumber the CPUs share them (rank ``r`` is pinned to the ``r mod n``-th of ``n``), and a rank
sharing its CPU runs its host work slower while it runs, not only less often: on a 2-CPU emulating machine
the quickest steady step of ``examples/ddp.py`` held 1.2 times the host delays with four ranks as with two,
1.5 times with eight, 1.8 times with sixteen; beside another process every gap between a job's calls
grows, the two-microsecond ones too, whatever the scheduler's time slice (docs/emulating-machine.md).  The
trace clock leaves out only the time a rank waited for its CPU, and the Python yardstick, which fits in the L1 cache, reads a few percent slower.  What does
follow it is how much the rank waited: the kernel counts, per thread, the time it ran and the time it was
runnable but waiting for a CPU (``/proc/<pid>/schedstat``), which the start-up hook samples with the
yardstick (``maya/_hook/_maya_pace.py``).  Over the steady steps, ``waiting`` = waited / ran: about 0 on a
CPU of its own, 1 beside one other runnable rank, 3 beside three.

The host delays are divided by ``1 + SLOWDOWN_PER_WAITING * log2(1 + w)``, ``w`` the rank's waiting up to
the ranks it shares its CPU with (``ranks_on_cpu - 1``): each doubling of the ranks on a CPU slowed them by
about as much again (a quarter of the delays at two, four and eight a CPU), fitted on the calibration's
emulations with more ranks than
CPUs against the same sizes with as many (``benchmarks/calibration/cpu_sharing.py``).  Waiting beyond that
is other work's, which slows the delays by what the other work does to the core's caches (a CPU-bound
Python loop 4-12%, one streaming through memory 39-50%): it is not undone, and ``maya emulate`` says when
other work took much of its CPUs (``maya.other_work``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# The host delays' slowdown per doubling of the runnable work on the CPU (log2(1 + waited / ran)): fitted by
# ``python -m benchmarks.calibration.cpu_sharing`` (benchmarks/results/cpu_sharing.json).
SLOWDOWN_PER_WAITING = 0.244
MIN_RUN_NS = 20_000_000  # a rank that ran less than this between the samples says nothing of its CPU


def waiting(samples: Sequence[Sequence[int]], lo: int, hi: int) -> float:
    """The main thread's time waiting for a CPU over its time on one in the trace clock's [``lo``, ``hi``] (the
    steady steps), from ``samples`` ([trace clock ns, yardstick ns, ns on a CPU, ns waiting], in the order
    taken): over each two consecutive samples both stamped inside it; where they ran less than ``MIN_RUN_NS``
    there (steady steps a few samples long), over the whole run's.  Why pairs: the trace clock leaves out the
    time a rank spent off the CPU between two calls only at the second call, so a sample taken in such a
    stretch is stamped ahead of the clock, which then steps back; a pair whose stamps do not rise is left
    out.  0 where the samples do not say (no scheduler counters, too little run)."""
    pairs = [(a, b) for a, b in zip(samples, samples[1:], strict=False)
             if len(a) >= 4 and len(b) >= 4 and int(a[0]) < int(b[0])]
    for chosen in ([(a, b) for a, b in pairs if lo <= int(a[0]) and int(b[0]) <= hi], pairs):
        ran = sum(int(b[2]) - int(a[2]) for a, b in chosen)
        if ran >= MIN_RUN_NS:
            return max(0.0, sum(int(b[3]) - int(a[3]) for a, b in chosen) / ran)
    return 0.0


def ranks_on_cpu(rank: int, ranks: int, cpus: int) -> int:
    """How many of ``ranks`` share rank ``rank``'s CPU, the ranks taking ``cpus`` CPUs in turn (the start-up
    hook's pinning; 1 where the CPUs are not known)."""
    return len(range(rank % cpus, ranks, cpus)) if cpus > 0 and 0 <= rank < ranks else 1


def own_waiting(waited: float, sharing: int) -> float:
    """The part of a rank's waiting (:func:`waiting`) that its CPU's other ranks made, ``sharing`` ranks sharing
    it: at most one unit of waiting per other rank; the rest is other work's."""
    return min(waited, max(0, sharing - 1))


def delay_factor(waited: float, sharing: int) -> float:
    """The factor on a rank's emulated host delays that undoes what its CPU's other ranks did to them: it
    waited ``waited`` (:func:`waiting`) times as long as it ran, on a CPU ``sharing`` ranks share."""
    return 1.0 / (1.0 + SLOWDOWN_PER_WAITING * math.log2(1.0 + own_waiting(waited, sharing)))
