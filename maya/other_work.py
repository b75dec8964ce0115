"""How much of the emulating CPUs other work took while an emulation ran.

The host delays that become the host's share of a predicted step are timed on
the emulating CPUs.  Another process on them slows those delays (a CPU-bound
process on rank 0's CPU: 2.0 to 2.8 times, docs/emulating-machine.md), and the
trace clock leaves out only the time a rank spent off the CPU between calls,
not the caches and cycles the other process takes while the rank runs.  So
``maya emulate`` measures what the CPUs it may use did that its own command
did not, and says so when it was much.

From ``/proc/stat``: the CPUs' busy time (user, nice, system, irq, softirq and
steal: time the hypervisor gave to another machine) over the run, less the CPU
time of the command's processes (``RUSAGE_CHILDREN``), as a share of the CPUs'
time.  On a machine without ``/proc/stat`` nothing is measured.

Before the job, the same counts, per CPU over a fifth of a second, tell which
CPUs other work keeps busy: ``maya emulate`` gives its ranks the others first.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

STAT = Path("/proc/stat")
BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user, nice, system, irq, softirq, steal (idle 3 and iowait 4 are not)
# Above this share of the emulating CPUs taken by other work the emulation says so: a CPU-bound
# process on one of two CPUs takes a half.
NOTABLE_SHARE = 0.2
# A CPU that other work kept this busy (a share of its time) is given to ranks after the quieter ones.
BUSY_CPU = 0.5


@dataclass(frozen=True)
class Sample:
    wall_s: float
    busy_s: float  # the CPUs' busy time since boot
    children_s: float  # CPU time of this process's waited-for children
    cpus: int


def _busy_per_cpu(cpus: set[int], path: Path) -> dict[int, float] | None:
    """Each of ``cpus``' busy time since boot, seconds (None: not readable here)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    busy = {}
    for line in lines:
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            fields = rest.split()
            busy[int(name[3:])] = sum(int(fields[i]) for i in BUSY_FIELDS if i < len(fields)) / tick
    return busy


def _busy_s(cpus: set[int], path: Path) -> float | None:
    busy = _busy_per_cpu(cpus, path)
    return None if busy is None else sum(busy.values())


def _usable_cpus() -> set[int]:
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))


def quietest_cpus(window_s: float = 0.2, path: Path = STAT) -> list[int]:
    """The CPUs this process may use, in the order ``maya emulate`` gives them to ranks: those that other
    work kept ``BUSY_CPU`` or more busy over the last ``window_s`` last (the busiest last), the others in
    their own order.

    Why: rank 0 and the probe run on the first.  A CPU-bound process on it slows the emulated host delays
    through the core it shares, which the trace clock cannot leave out (+1.3 points of median error in
    ``benchmarks/busy_machine.py``, some first emulations 14-60% slow), where one on another CPU moves them
    by about a point either way; on an idle machine the order stays the CPUs' own."""
    cpus = _usable_cpus()
    before = _busy_per_cpu(cpus, path)
    time.sleep(window_s)
    after = _busy_per_cpu(cpus, path)
    if not before or not after or window_s <= 0:
        return sorted(cpus)
    taken = {c: (after.get(c, 0.0) - before.get(c, 0.0)) / window_s for c in cpus}
    return sorted(cpus, key=lambda c: (taken[c] >= BUSY_CPU, taken[c] if taken[c] >= BUSY_CPU else 0.0, c))


def sample(path: Path = STAT) -> Sample | None:
    """The emulating CPUs' state now (None: not readable here)."""
    cpus = _usable_cpus()
    busy = _busy_s(cpus, path)
    if busy is None:
        return None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Sample(time.monotonic(), busy, usage.ru_utime + usage.ru_stime, len(cpus))


def share(before: Sample | None, after: Sample | None) -> float | None:
    """The share of the emulating CPUs' time that other work took between two samples (None: not
    measured, or too short a run to say)."""
    if before is None or after is None:
        return None
    span = (after.wall_s - before.wall_s) * before.cpus
    if span < 0.5:
        return None
    others = (after.busy_s - before.busy_s) - (after.children_s - before.children_s)
    return min(1.0, max(0.0, others / span))


def warning(taken: float | None) -> str | None:
    """A line for the user when other work took a notable share of the emulating CPUs."""
    if taken is None or taken < NOTABLE_SHARE:
        return None
    return (f"maya: other work took {taken:.0%} of the emulating CPUs during this emulation; its host delays "
            "may be too long (the predicted host share too large). Emulate again on an idle machine, or on "
            "CPUs of its own (taskset)")
