"""Which yardstick of an emulating CPU's speed follows the jobs' emulated host work between machines.

    python -m benchmarks.host_yardsticks read --out FILE [--emulations 2] [--gpu H100-SXM-80GB] [--only A,B]
    python -m benchmarks.host_yardsticks compare A.json B.json... [--save FILE]

The replay rescales emulated host delays by a yardstick read on the emulating CPU
(:mod:`maya.cpu_probe`).  It was a loop of a tiny CPU operator ("cpu_add" here), and between two
2-CPU VMs the jobs of the BERT, CNN and GPT examples sped up 0.48-0.59 times and the
recommender's 0.70-0.75 times while it read 0.70-0.76 (benchmarks/emulating_machine.py).

``read`` emulates every single-GPU configuration of the step-time ground truth ``--emulations``
times, keeping each one's median steady host time per step
(:func:`benchmarks.step_truth.emulated_host_s`) and the probes its emulations took, and reads
each candidate yardstick (the quickest of its batches) after every fourth configuration.  It
needs only the checkout, the built interposer and torch, so it also runs on a GPU server's CPU
(a very different machine).  ``compare`` prints, per model family, the jobs' ratio B/A beside
each yardstick's.

Read 2026-11-26 on this project's 2-CPU EPYC VM and three GPU servers' Xeons
(benchmarks/data/host_yardsticks/, benchmarks/results/host_yardsticks.json): against the VM the
jobs took 2.16x, 1.70x and 1.63x; the emulated training step, now maya.cpu_probe, read 2.00x,
1.68x and 1.54x; the tiny CPU operator 1.39x, 1.23x and 1.22x.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from benchmarks.campaigns.gpu_fidelity_campaign import cpu_model
from benchmarks.step_truth import emulate, emulated_host_s, measured
from maya.predictor.trace import read_trace

ROOT = Path(__file__).resolve().parent.parent

BATCHES = 15

_TIMER = f"""
import time, torch
torch.set_num_threads(1)
def quickest(work, n):
    work(); work()
    best = float("inf")
    for _ in range({BATCHES}):
        t = time.perf_counter_ns()
        for _ in range(n):
            work()
        best = min(best, (time.perf_counter_ns() - t) / n)
    return best
"""

# ns per unit of work, each run in a fresh interpreter.  "emulated" ones run under `maya emulate`,
# as the jobs do (the interposer's launch path, the emulated device's tensors, the pinned CPU).
# maya.cpu_probe itself (a small MLP's training step, emulated) is read by every emulation ("probe").
CANDIDATES: dict[str, tuple[bool, str]] = {
    # The probe before it: a tiny CPU operator (Python, the dispatcher, TensorIterator).
    "cpu_add": (False, _TIMER + """
a, b, c = torch.ones(4), torch.ones(4), torch.empty(4)
print(quickest(lambda: torch.add(a, b, out=c), 20000))
"""),
    # A tiny elementwise operator on the device: Python, the dispatcher, one launch.
    "emulated_launch": (True, _TIMER + """
a, b, c = (torch.ones(4, device="cuda") for _ in range(3))
print(quickest(lambda: torch.add(a, b, out=c), 5000))
"""),
    # The probe's step on the CPU: autograd on the calling thread, no interposer.
    "cpu_step": (False, _TIMER + """
m = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(8)])
opt = torch.optim.AdamW(m.parameters(), foreach=False)
x = torch.randn(16, 64)
def step():
    m(x).square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
print(quickest(step, 50))
"""),
}


def read_candidate(code: str, emulated: bool, gpu: str) -> float | None:
    with tempfile.TemporaryDirectory(prefix="maya-yardstick-") as out:
        cmd = [sys.executable, "-c", code]
        if emulated:
            cmd = [sys.executable, "-m", "maya", "emulate", "--gpu", gpu, "--out", out, "--", *cmd]
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        print(f"  failed ({p.returncode}): {p.stderr[-1500:]}", file=sys.stderr)
        return None
    return float(lines[-1])


def read(out: Path, gpu: str, emulations: int, work: Path | None, only: set[str]) -> None:
    work = work or Path(tempfile.mkdtemp(prefix="maya-yardsticks-"))
    probes: dict[str, list[float]] = {"probe": []}
    configs = {}
    singles = [m for m in measured(gpu) if m.processes == 1 and (not only or m.name in only)]
    rank = {m.name: sum(o.family == m.family for o in singles[:k]) for k, m in enumerate(singles)}
    for m in sorted(singles, key=lambda m: (rank[m.name], m.family)):  # families in turn: a cut run keeps each
        hosts = []
        for k in range(emulations):
            folder = emulate(m.argv, gpu, 1, work / m.name / f"e{k}")
            hosts.append(emulated_host_s(read_trace(folder / "rank0.mayatrace")))
            summary = json.loads((folder / "summary.json").read_text())
            if summary.get("host_probe_ns"):
                probes["probe"].append(summary["host_probe_ns"])
        configs[m.name] = {"emulated_host_s": median(hosts), "runs_s": hosts}
        print(f"{m.name:18} {1e3 * median(hosts):7.2f} ms", flush=True)
        # Candidates between the jobs (every fourth), so that a drift of the machine's speed touches both.
        for name, (emulated, code) in CANDIDATES.items() if len(configs) % 4 == 1 else ():
            ns = read_candidate(code, emulated, gpu)
            if ns is not None:
                probes.setdefault(name, []).append(ns)
        result = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_model(), "cpus": os.cpu_count(), "gpu": gpu,
                  "emulations": emulations, "yardsticks_ns": {k: median(v) for k, v in probes.items() if v},
                  "yardstick_readings_ns": probes, "configs": configs}
        out.write_text(json.dumps(result, indent=1) + "\n")  # after each: a run cut short keeps what it read
    print(json.dumps(result["yardsticks_ns"]))


def ratios(a: dict, b: dict) -> dict:
    """B's readings over A's: each yardstick, and the jobs' emulated host time (per configuration,
    the median per family and over all)."""
    yardsticks = {name: b["yardsticks_ns"][name] / a["yardsticks_ns"][name]
                  for name in sorted(set(a["yardsticks_ns"]) & set(b["yardsticks_ns"]))}
    jobs = {n: b["configs"][n]["emulated_host_s"] / c["emulated_host_s"]
            for n, c in a["configs"].items() if n in b["configs"]}
    families = {f: median(r for n, r in jobs.items() if n.split("-")[0] == f)
                for f in sorted({n.split("-")[0] for n in jobs})}
    all_jobs = median(jobs.values())
    return {"yardstick_ratio": yardsticks, "job_ratio": all_jobs, "job_ratio_by_family": families,
            "job_ratio_by_config": jobs, "yardstick_over_jobs": {k: r / all_jobs for k, r in yardsticks.items()}}


def compare(a_path: Path, b_paths: list[Path], save: Path | None) -> None:
    a = json.loads(a_path.read_text())
    pairs = {}
    for b_path in b_paths:
        b = json.loads(b_path.read_text())
        r = pairs[str(b_path)] = ratios(a, b)
        print(f"B/A: {b['cpu']} ({b_path.name}) over {a['cpu']} ({a_path.name})")
        for name, x in r["yardstick_ratio"].items():
            print(f"  yardstick {name:16} x{x:.3f}   ({100 * (r['yardstick_over_jobs'][name] - 1):+.1f}% off the jobs)")
        for family, x in r["job_ratio_by_family"].items():
            n = sum(c.split("-")[0] == family for c in r["job_ratio_by_config"])
            print(f"  jobs {family:12} x{x:.3f}  ({n} configurations)")
        print(f"  jobs, all          x{r['job_ratio']:.3f}")
    if save:
        save.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "command": " ".join(["python", *sys.argv]),
                                    "a": str(a_path), "b_over_a": pairs}, indent=1) + "\n")
        print(f"saved {save}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("read")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--gpu", default="H100-SXM-80GB")
    r.add_argument("--emulations", type=int, default=2)
    r.add_argument("--work", type=Path, default=None, help="emulations kept here (reused when present)")
    r.add_argument("--only", default="", help="configuration names, comma-separated (default: all)")
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path, nargs="+")
    c.add_argument("--save", type=Path, default=None, help="also write the ratios there (JSON)")
    a = ap.parse_args()
    if a.cmd == "read":
        read(a.out, a.gpu, a.emulations, a.work, {n for n in a.only.split(",") if n})
    else:
        compare(a.a, a.b, a.save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
