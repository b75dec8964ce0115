"""Step times measured on real GPUs, and the same configurations emulated here.

The measurements are ``benchmarks/campaigns/gpu_fidelity_campaign.py`` runs (``--no-profile
--steps 16``: the examples at their default, held-out and three more sizes,
fresh processes, every configuration in turn so that a drift of the server's
speed spreads over all of them) on several machines of the GPU's kind
(``benchmarks/merge_lease.py``), committed as
``benchmarks/data/step_times/<GPU>/<name>.json``.  Each run's result line
holds the wall time of every step and the host's time to issue it (until
``step(i)`` returned).  The early steps warm up: cuDNN autotuning, optimizer
state, DDP buckets, and fp16's GradScaler skipping the optimizer while its
scale comes down from 2**16 (BERT skips it for about five steps).  A run's
figure is therefore the median of its later half of steps (never before step
``STEADY_FROM``), a configuration's the median over its runs.

Emulation runs the same command for ``EMULATED_STEPS`` steps: a steady step
does not depend on how many follow it, and emulated GradScalers never skip
(emulated gradients are finite).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from statistics import median

import numpy as np

from maya.predictor.trace import Kind, Trace

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "step_times"
STEADY_FROM = 2
EMULATED_STEPS = 8


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

    def median_interval(self, level: float = 0.9, draws: int = 4000) -> tuple[float, float]:
        """How closely the runs fix their median, relative to it (-0.1: 10% below): the central
        ``level`` of the medians of the runs resampled with replacement (fixed seed).  The
        server's host speed drifts over minutes and differs between machines
        (benchmarks/campaigns/host_variance.py), so a host-bound size's median is known to no better."""
        runs = np.asarray(self.step_s)
        medians = np.median(np.random.default_rng(0).choice(runs, (draws, len(runs))), axis=1)
        lo, hi = np.quantile(medians / np.median(runs) - 1, [(1 - level) / 2, (1 + level) / 2])
        return float(lo), float(hi)


def load(path: Path, gpu: str) -> Measured:
    d = json.loads(path.read_text())
    steps, hosts = [], []
    for run in d["runs"]:
        if run.get("profiled") or not run.get("results"):
            continue
        res = run["results"][0]  # rank 0
        steps.append(median(steady(res["step_times_s"])))
        if "host_times_s" in res:
            hosts.append(median(steady(res["host_times_s"])))
    return Measured(path.stem, gpu, d["argv"], int(d.get("processes", 1)), steps, hosts)


def steady(per_step: list[float]) -> list[float]:
    """A run's steady steps: its later half, never before ``STEADY_FROM``."""
    return per_step[max(STEADY_FROM, len(per_step) // 2):]


def with_steps(argv: list[str], steps: int) -> list[str]:
    """An example's command line, run for ``steps`` steps."""
    out = list(argv)
    if "--steps" in out:
        out[out.index("--steps") + 1] = str(steps)
    else:
        out += ["--steps", str(steps)]
    return out


def measured(gpu: str) -> list[Measured]:
    """Every configuration measured on ``gpu`` (a catalog name, the data folder's)."""
    return [load(p, gpu) for p in sorted((DATA / gpu).glob("*.json")) if not p.name.startswith("env")]


def named(gpu: str, names: list[str]) -> dict[str, Measured]:
    """The configurations measured on ``gpu`` called ``names``; exits naming any that was not measured."""
    known = {m.name: m for m in measured(gpu)}
    if unknown := [n for n in names if n not in known]:
        raise SystemExit(f"no measured configuration named {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return {n: known[n] for n in names}


def emulated_host_s(trace: Trace, steps: int = EMULATED_STEPS) -> float:
    """An emulated run's own host time per steady step (the trace's clock: the emulating CPU's)."""
    syncs = trace.of_kind(Kind.DEVICE_SYNC)[-(steps + 1):]
    rec = trace.records
    times = [float(rec["t_ns"][b]) - float(rec["t_ns"][a] + rec["dur_ns"][a])
             for a, b in zip(syncs[:-1], syncs[1:], strict=True)]
    return median(times[STEADY_FROM:]) / 1e9


def emulate(argv: list[str], gpu: str, processes: int, out: Path) -> Path:
    """``maya emulate`` of the configuration (for ``EMULATED_STEPS`` steps) into ``out``
    (kept: a second call reuses it, unless it did not complete: an emulation stopped half-way, its
    summary's exit code not 0, is made again)."""
    summary = out / "summary.json"
    if summary.is_file() and json.loads(summary.read_text()).get("exit_code") == 0:
        return out
    argv = with_steps(argv, EMULATED_STEPS)
    script = [sys.executable, *argv] if processes == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}", *argv]
    cmd = [sys.executable, "-m", "maya", "emulate", "--gpu", gpu, "--gpus-per-node", str(processes),
           "--out", str(out), "--", *script]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"emulating {argv} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return out
