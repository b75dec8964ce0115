"""How much ranks that outnumber the emulating CPUs slow each other's host delays: ``maya.cpu_sharing``'s factor.

    python -m benchmarks.calibration.cpu_sharing [--runs 3] [--work DIR] [--write]

Emulates calibration configurations on CPUs of their own and on shared ones, ``--runs`` times each,
interleaved: the data-parallel sizes with as many ranks as the machine has CPUs and with twice (and the
first size four and eight times) as many; the single-GPU sizes alone and beside a CPU-bound Python process
on every CPU (other work, whose slowdown is reported, not undone).  Reads per emulation what the replay
steadies the host delays to (the quickest steady step of any rank, before any factor) and each rank's
waiting for its CPU over its time on it in the steady steps (:func:`maya.cpu_sharing.waiting`; the ranks'
own: up to the ranks sharing its CPU).  Per condition, the slowdown is the shared emulations' median delays
over those of the unshared ones, and the factor ``(slowdown - 1) / log2(1 + waiting added)``, per doubling
of the runnable work on a CPU; ``SLOWDOWN_PER_WAITING`` is the median over the conditions of more ranks than
CPUs.  Prints each condition's slowdown before and after the factor (and with the factor fitted without
it), saves benchmarks/results/cpu_sharing.json, and with ``--write`` puts the factor into
``maya/cpu_sharing.py``.  The held-out suite is not used.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.step_truth import emulate, named
from maya import cpu_sharing
from maya.predict import prepare
from maya.predictor.replay.host import steady_step_delays

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "cpu_sharing.json"
MODULE = ROOT / "maya" / "cpu_sharing.py"
GPU = "H100-SXM-80GB"
SINGLE = ("gpt", "bert-w512", "cnn", "recommender-b1024")  # none of them busy_machine.py's
SEVERAL = ("ddp", "ddp-clip")
# A CPU-bound process on one CPU, which dies with the process that started it (a benchmark stopped half-way).
SPIN = "import ctypes, os, signal\nctypes.CDLL(None).prctl(1, signal.SIGKILL)\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True:\n    pass\n"


@contextmanager
def busy_cpus():  # type: ignore[no-untyped-def]
    """A CPU-bound Python process on every CPU this process may use."""
    spin = [subprocess.Popen([sys.executable, "-c", SPIN.format(cpu=c)]) for c in sorted(os.sched_getaffinity(0))]
    time.sleep(0.5)
    try:
        yield
    finally:
        for p in spin:
            p.kill()
            p.wait()


def read(folder: Path) -> dict[str, Any]:
    """The quickest steady step's host delays of any rank (ms, before any factor) and each rank's waiting."""
    job = prepare(folder, GPU)
    quickest = [min(totals) / 1e6 for _, _, totals in map(steady_step_delays, job.traces) if totals]
    if not quickest:
        raise RuntimeError(f"{folder}: no steady steps")
    own = [cpu_sharing.own_waiting(w, k) for w, k in zip(job.cpu_waiting, job.ranks_on_cpu, strict=True)]
    return {"quickest_ms": min(quickest), "ranks_quickest_ms": quickest, "waiting": list(job.cpu_waiting),
            "own_waiting": own}


def conditions(cpus: int) -> list[tuple[str, str, int, bool]]:
    """(condition, configuration, ranks, beside busy processes); each shared one follows its unshared one."""
    out = []
    for name in SINGLE:
        out += [(f"{name} alone", name, 1, False), (f"{name} beside a busy process", name, 1, True)]
    for k, name in enumerate(SEVERAL):
        out += [(f"{name} x{cpus}", name, cpus, False), (f"{name} x{2 * cpus}", name, 2 * cpus, False)]
        if k == 0:
            out += [(f"{name} x{4 * cpus}", name, 4 * cpus, False), (f"{name} x{8 * cpus}", name, 8 * cpus, False)]
    return out


def fit(runs: list[dict[str, Any]], cpus: int) -> dict[str, Any]:
    """Per shared condition: its slowdown over its configuration's unshared emulations and the waiting it
    added (the ranks': up to the ranks sharing a CPU; beside other work: all of it); the factor per doubling
    of the runnable work on a CPU, ``log2(1 + waiting)`` (the median over the conditions of more ranks than
    CPUs), and each condition's slowdown with it (other work's is not undone: ``maya.cpu_sharing``)."""
    def median(cond: str, key: str) -> float:
        return float(np.median([float(np.median(r[key])) for r in runs if r["condition"] == cond]))

    per = []
    for cond, name, ranks, busy in conditions(cpus):
        if not busy and ranks <= cpus:
            continue
        base = next(c for c, n, k, b in conditions(cpus) if n == name and not b and k <= cpus)
        key = "waiting" if busy else "own_waiting"
        added = median(cond, key) - median(base, key)
        slowdown = median(cond, "quickest_ms") / median(base, "quickest_ms")
        doublings = math.log2(1 + max(added, 0.0))
        per.append({"condition": cond, "unshared": base, "other_work": busy, "slowdown": slowdown, "waiting": added,
                    "per_doubling": (slowdown - 1) / doublings if added > 0.05 else None})
    own = [p for p in per if not p["other_work"] and p["per_doubling"] is not None]
    factor = float(np.median([p["per_doubling"] for p in own])) if own else 0.0
    for p in per:
        others = [q["per_doubling"] for q in own if q is not p]
        left_out = float(np.median(others)) if others else 0.0
        undone = 0.0 if p["other_work"] else math.log2(1 + max(p["waiting"], 0.0))
        p["corrected"] = p["slowdown"] / (1 + factor * undone)
        p["corrected_left_out"] = p["slowdown"] / (1 + left_out * undone)
    return {"slowdown_per_waiting": round(factor, 3), "conditions": per}


def write(factor: float) -> None:
    text = MODULE.read_text()
    new = re.sub(r"^SLOWDOWN_PER_WAITING = [0-9.]+$", f"SLOWDOWN_PER_WAITING = {factor}", text, flags=re.M)
    MODULE.write_text(new)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="emulations per condition (default %(default)s)")
    ap.add_argument("--work", type=Path, default=None, help="emulations kept here (reused when present)")
    ap.add_argument("--write", action="store_true", help="put the fitted factor into maya/cpu_sharing.py")
    a = ap.parse_args()
    cpus = len(os.sched_getaffinity(0))
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-cpu-sharing-"))
    known = named(GPU, sorted({n for _, n, _, _ in conditions(cpus)}))
    runs = []
    for k in range(a.runs):
        for cond, name, ranks, busy in conditions(cpus):
            folder = work / cond.replace(" ", "_") / f"run{k}"
            if busy and not (folder / "summary.json").is_file():
                with busy_cpus():
                    emulate(known[name].argv, GPU, ranks, folder)
            else:
                emulate(known[name].argv, GPU, ranks, folder)
            r = {"condition": cond, "run": k, **read(folder)}
            runs.append(r)
            print(f"{cond:32s} run {k}  quickest steady step {r['quickest_ms']:7.2f} ms of delays  waiting "
                  f"{', '.join(f'{w:.2f}' for w in r['waiting'])}", flush=True)
    result = fit(runs, cpus)
    for p in result["conditions"]:
        undone = "not undone (other work)" if p["other_work"] else \
            f"with the factor {p['corrected']:.3f} (fitted without it {p['corrected_left_out']:.3f})"
        print(f"{p['condition']:32s} slowdown {p['slowdown']:.3f} with {p['waiting']:.2f} more waiting; {undone}")
    print(f"slowdown per doubling of the runnable work on a CPU: {result['slowdown_per_waiting']} "
          f"(emulating machine: {cpus} CPUs)")
    RESULTS.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv), "gpu": GPU,
                                   "cpus": cpus, **result, "runs": runs}, indent=1) + "\n")
    print(f"saved {RESULTS}")
    if a.write:
        write(result["slowdown_per_waiting"])
        print(f"wrote SLOWDOWN_PER_WAITING = {result['slowdown_per_waiting']} into {MODULE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
