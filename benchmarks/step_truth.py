"""Step times measured on real GPUs, and the same configurations emulated here.

The measurements are ``benchmarks/gpu_fidelity_campaign.py`` runs (``--no-profile
--steps 8``: the examples at their default, held-out and three more sizes,
fresh processes), committed as ``benchmarks/data/step_times/<GPU>/<name>.json``.
Each run's result line holds the wall time of every step and the host's time
to issue it (until ``step(i)`` returned).  Steps 0 and 1 warm up (cuDNN
autotuning, optimizer state, DDP buckets); a run's figure is the median of
its later steps, a configuration's the median over its runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "step_times"
STEADY_FROM = 2


@dataclass(frozen=True)
class Measured:
    name: str
    gpu: str
    argv: list[str]
    processes: int
    step_s: list[float]  # per run
    host_s: list[float]  # per run

    @property
    def family(self) -> str:
        return self.name.split("-")[0]

    @property
    def spread(self) -> float:
        """Run-to-run spread of the step time: (max - min) / median."""
        return (max(self.step_s) - min(self.step_s)) / median(self.step_s)


def load(path: Path, gpu: str) -> Measured:
    d = json.loads(path.read_text())
    steps, hosts = [], []
    for run in d["runs"]:
        if run.get("profiled") or not run.get("results"):
            continue
        res = run["results"][0]  # rank 0
        steps.append(median(res["step_times_s"][STEADY_FROM:]))
        if "host_times_s" in res:
            hosts.append(median(res["host_times_s"][STEADY_FROM:]))
    return Measured(path.stem, gpu, d["argv"], int(d.get("processes", 1)), steps, hosts)


def measured(gpu: str) -> list[Measured]:
    """Every configuration measured on ``gpu`` (a catalog name, the data folder's)."""
    return [load(p, gpu) for p in sorted((DATA / gpu).glob("*.json")) if p.name != "env.json"]


def emulate(argv: list[str], gpu: str, processes: int, out: Path) -> Path:
    """``maya emulate`` of the configuration into ``out`` (kept: a second call reuses it)."""
    if (out / "summary.json").is_file():
        return out
    script = [sys.executable, *argv] if processes == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}", *argv]
    cmd = [sys.executable, "-m", "maya", "emulate", "--gpu", gpu, "--gpus-per-node", str(processes),
           "--out", str(out), "--", *script]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"emulating {argv} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return out
