"""How fast the emulating CPU runs a small training step under emulation: the yardstick of emulated host delays.

The replay turns the host delays emulated here into the GPU server's with a
factor calibrated on one emulating machine (:mod:`maya.predictor.replay.host`).
Emulating machines differ from each other, and one machine slows under load,
so ``maya emulate`` times this probe just before the job, on the CPU that
rank 0 is pinned to, under the same interposer and start-up hook as the job
(:func:`measure` takes the job's environment), and the replay scales the
delays by the calibrating machine's probe over this one.

The probe is a small MLP's training step on the emulated device (Python, the
dispatcher, autograd on its device thread, the interposer's launches, a fused
optimizer): the kind of work the jobs' delays hold.  A loop of a tiny CPU
operator does not follow the jobs from one machine to another
(``docs/host-model.md``).  A batch is timed by the probe's CPU time, not the
wall clock: the trace clock leaves the time a rank spends off the CPU out of
the job's delays, so the probe leaves it out too (timed by the wall clock,
the probe read 1.8 times slow beside a CPU-bound process on its CPU, while
the job's delays did not, and predictions came out 6-30% fast).  Its figure
is the quickest of 15 batches, each long enough (about 20 ms) to span the
scheduler's time slices: a burst of interference slows some and does not
count, as the replay's steadied delays leave it out too (the quickest steady
step).  A burst can still cover all the batches, so a
reading well above the calibrating CPU's (:func:`reference_ns`, ``DISTURBED``
times it) is taken again after the job and the quicker of the two kept
(:func:`steadier`): a CPU that really is slower reads slow both times.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from importlib import resources

BATCHES = 15
STEPS_PER_BATCH = 64
DISTURBED = 1.15  # a reading above this times the calibrating CPU's is taken again (theirs: within 1.04 in 9 of 10)

# The probe as a Python program (also run by emulation pods): argv[1] is the CPU to pin to, or "-".
PROBE_CODE = f"""
import os, sys, time
import torch
if sys.argv[1] != "-":
    os.sched_setaffinity(0, {{int(sys.argv[1])}})
torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)]).cuda()
opt = torch.optim.AdamW(model.parameters(), fused=True)
x = torch.randn(16, 64, device="cuda")
def batch(n):
    t = time.process_time_ns()
    for _ in range(n):
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return (time.process_time_ns() - t) / n
batch(4)
print(min(batch({STEPS_PER_BATCH}) for _ in range({BATCHES})))
"""


def measure(env: Mapping[str, str], cpu: int | None = None, python: str = sys.executable,
            timeout_s: float = 120.0) -> float | None:
    """ns per training step of the probe on ``cpu`` (None: where the OS puts it), run by ``python``
    in ``env``, an emulated job's environment (:func:`maya.emulate.build_env`; the probe's own trace
    goes to a folder removed after it); None when it cannot run (no torch, no interposer)."""
    with tempfile.TemporaryDirectory(prefix="maya-probe-") as traces:
        try:
            p = subprocess.run([python, "-c", PROBE_CODE, "-" if cpu is None else str(cpu)],
                               env={**env, "MAYA_TRACE_DIR": traces}, capture_output=True, text=True,
                               timeout=timeout_s)
            return float(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None
        except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
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
