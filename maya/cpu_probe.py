"""How fast the emulating CPU runs PyTorch's dispatcher: the yardstick of emulated host delays.

The replay turns the host delays emulated here into the GPU server's with a
factor calibrated on one emulating machine (:mod:`maya.predictor.host`).
Emulating machines differ: the same steps emulated in two sessions, each on
a 2-CPU VM of the same class, took 1.3 to 1.8 times longer in the second,
and one machine slows under load.  So
``maya emulate`` times this probe just before the job, on the CPU that rank 0
is pinned to, and the replay scales the delays by the calibration machine's
probe over this one.  The probe is a tight loop of a tiny CPU operator
(Python, the dispatcher, TensorIterator), the kind of work the delays hold.
Its figure is the quickest of 15 batches, each long enough (about 20 ms) to
span the scheduler's time slices: a CPU shared with another process slows
every batch and counts; a burst of interference slows some and does not,
as the replay's steadied delays leave it out (the quickest steady step).
The median of the batches caught such bursts: one probe in eight read 1.5
times its usual figure while the emulation after it ran at its usual speed.
Even the quickest batch was 1.4 to 1.8 times its usual figure in 3 of 224
emulations, whose own host delays were as usual, and the replay shrank
their delays to as little as 0.55 of what they were (an H200 cnn-w32
prediction came out 30% short).  So a reading well above the calibrating CPU's
(:func:`reference_ns`, ``DISTURBED`` times it) is taken again after the job,
and the quicker of the two kept (:func:`steadier`): a CPU that really is
slower reads slow both times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from importlib import resources

BATCHES = 15
OPS_PER_BATCH = 20_000
DISTURBED = 1.15  # a reading above this times the calibrating CPU's is taken again (theirs: within 1.04 in 9 of 10)

_CODE = f"""
import os, sys, time
import torch
if sys.argv[1] != "-":
    os.sched_setaffinity(0, {{int(sys.argv[1])}})
torch.set_num_threads(1)
a, b, c = torch.ones(4), torch.ones(4), torch.empty(4)
def batch(n):
    t = time.perf_counter_ns()
    for _ in range(n):
        torch.add(a, b, out=c)
    return (time.perf_counter_ns() - t) / n
batch(2000)
print(min(batch({OPS_PER_BATCH}) for _ in range({BATCHES})))
"""


def measure(python: str = sys.executable, cpu: int | None = None, timeout_s: float = 120.0) -> float | None:
    """ns per operator of the probe on ``cpu`` (None: where the OS puts it), run by ``python``;
    None when that interpreter cannot run it (no torch there)."""
    try:
        p = subprocess.run([python, "-c", _CODE, "-" if cpu is None else str(cpu)],
                           capture_output=True, text=True, timeout=timeout_s)
        return float(p.stdout.strip()) if p.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def reference_ns() -> float | None:
    """The probe of the CPU that calibrated the host model (``maya.predictor``'s calibration), or None."""
    try:
        text = resources.files("maya.predictor").joinpath("host_calibration.json").read_text()
        return float(json.loads(text)["emulating_cpu"]["host_probe_ns"])
    except (OSError, ValueError, KeyError, TypeError, ModuleNotFoundError):
        return None


def steadier(first: float | None, again: Callable[[], float | None]) -> float | None:
    """``first``, or when it reads more than ``DISTURBED`` times the reference (or nothing, or
    there is no reference) the quicker of it and ``again()``."""
    reference = reference_ns()
    if first is not None and reference is not None and first <= DISTURBED * reference:
        return first
    readings = [ns for ns in (first, again()) if ns is not None]
    return min(readings, default=None)


def rank0_cpu(pinned: bool = True) -> int | None:
    """The CPU that ``maya emulate`` pins rank 0 to (the first this process may use), or None."""
    if not pinned or not hasattr(os, "sched_getaffinity"):
        return None
    return min(os.sched_getaffinity(0))


if __name__ == "__main__":
    print(measure(cpu=rank0_cpu()))
