"""The held-out suite's ground truth, read from the campaign's ``results.json`` files.

Each folder of ``benchmarks/data/held_out/`` is one GPU machine's campaign
(``campaign.py``).  A run's step time is the median of its timed steps (rank
0's, as in ``benchmarks/step_truth.py``; the script's ``--warmup`` steps are
already left out of them); a configuration's is the median over its fresh
runs, pooled over the machines that measured it (workload, GPU model, number of
GPUs), with the run-to-run spread.  A run's peak memory is the largest over its
ranks of ``max_memory_allocated`` and ``max_memory_reserved``.

The folders hold the plan benchmark's grid too (``grid-*``); only workloads of
the suite are read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

from benchmarks.held_out.campaign import result_lines
from maya import catalog

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data" / "held_out"


class TruthError(Exception):
    """The ground truth cannot be read as a campaign's results; the message says where and why."""


@dataclass(frozen=True)
class Run:
    machine: str  # the data folder's name
    step_s: float  # the median of the run's timed steps (rank 0)
    allocated_bytes: int  # max_memory_allocated, the largest over the ranks
    reserved_bytes: int  # max_memory_reserved, the largest over the ranks


@dataclass(frozen=True)
class Truth:
    workload: str
    gpu: str  # catalog name
    gpus: int  # processes, one GPU each
    runs: tuple[Run, ...]
    without_result: int = 0  # runs that left no result line (an exit code but nothing parsed)

    @property
    def step_s(self) -> float:
        return median(r.step_s for r in self.runs)

    @property
    def spread(self) -> float:
        """Run-to-run spread of the step time: (max - min) / median."""
        steps = [r.step_s for r in self.runs]
        return (max(steps) - min(steps)) / median(steps)

    @property
    def allocated_bytes(self) -> int:
        return int(median(r.allocated_bytes for r in self.runs))

    @property
    def reserved_bytes(self) -> int:
        return int(median(r.reserved_bytes for r in self.runs))

    def by_machine(self) -> dict[str, dict[str, Any]]:
        """The median step and run count of each machine that measured this configuration: machines
        differ (host speed, a neighbouring run on the second GPU), which a pooled median hides."""
        out: dict[str, dict[str, Any]] = {}
        for m in sorted({r.machine for r in self.runs}):
            steps = [r.step_s for r in self.runs if r.machine == m]
            out[m] = {"step_s": median(steps), "runs": len(steps)}
        return out


def gpu_of(device: str) -> str:
    """The catalog name of a ``torch.cuda.get_device_name()``."""
    for g in catalog.all_gpus():
        if g.marketing == device:
            return g.name
    raise TruthError(f"device {device!r} is no catalog GPU's marketing name (maya/gpus.json): add it to the catalog")


def _run(machine: str, run: dict[str, Any], where: str) -> tuple[str, int, Run] | None:
    """(catalog GPU, processes, the run), or None for a run that left no result line.  A run whose
    results list is short keeps its stdout's tail, read again here: ranks that printed on one
    line were lost to the campaign's first reading of it."""
    results = run.get("results") or []
    gpus = int(run.get("nproc") or 1)
    if len(results) < gpus:
        again = result_lines(run.get("stdout_tail") or "")
        results = again if len(again) > len(results) else results
    if not results:
        return None
    ranks = sorted(results, key=lambda r: r.get("rank") or 0)
    steps = ranks[0].get("step_times_s")
    if not steps:
        raise TruthError(f"{where}: rank {ranks[0].get('rank') or 0}'s result line has no step_times_s")
    devices = {r["device"] for r in ranks}
    if len(devices) != 1:
        raise TruthError(f"{where}: ranks on different GPUs {sorted(devices)}")
    return gpu_of(devices.pop()), gpus, Run(machine, median(steps), max(int(r["max_memory_allocated"]) for r in ranks),
                                            max(int(r["max_memory_reserved"]) for r in ranks))


def read_truth(data: Path = DATA, workloads: set[str] | None = None) -> dict[tuple[str, str, int], Truth]:
    """Every measured configuration, by (workload, catalog GPU, GPUs), of the workloads named
    (default: all but the plan grid's ``grid-*``)."""
    files = sorted(data.glob("*/results.json"))
    if not files:
        raise TruthError(f"no */results.json under {data}: the campaign's output folders go there")
    runs: dict[tuple[str, str, int], list[Run]] = {}
    empty: dict[tuple[str, str, int], int] = {}  # (workload, machine, GPUs): runs without a result line
    for path in files:
        try:
            doc = json.loads(path.read_text())
        except ValueError as e:
            raise TruthError(f"{path}: not JSON ({e})") from None
        if "runs" not in doc:
            raise TruthError(f"{path}: no 'runs' list (not a campaign.py results.json)")
        machine = path.parent.name
        for k, run in enumerate(doc["runs"]):
            name = run.get("name", "")
            if (workloads is None and name.startswith("grid-")) or (workloads is not None and name not in workloads):
                continue
            if run.get("rc") not in (0, None):
                continue  # a failed run measured nothing (the campaign keeps it with its stderr)
            got = _run(machine, run, f"{path} run {k} ({name})")
            if got is None:
                key = (name, machine, int(run.get("nproc") or 1))
                empty[key] = empty.get(key, 0) + 1
                continue
            gpu, gpus, r = got
            runs.setdefault((name, gpu, gpus), []).append(r)
    return {(name, gpu, gpus): Truth(name, gpu, gpus, tuple(rs),
                                     sum(empty.get((name, m, gpus), 0) for m in {r.machine for r in rs}))
            for (name, gpu, gpus), rs in sorted(runs.items())}
