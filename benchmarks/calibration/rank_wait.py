"""How long a data-parallel step waits for its slowest rank on the GPU servers: the ranks' jitter.

    python -m benchmarks.calibration.rank_wait [--write]

Reads ``maya record`` traces of a calibration size run on every GPU of servers of several GPUs
(``benchmarks/data/host_variance/<GPU>-x<N>-ranks/*.tar.xz``: ``ddp-clip-l24``, every rank
recorded, fresh processes).  Per process, each rank's host delays are summed over each steady
step (the replay's step finder), and each step's slowest rank is taken over the ranks' mean; the
process's figure is the median over its steps.  On a server each rank's host work varies from
step to step and rank to rank, and a data-parallel step goes at its slowest rank's pace, where the
replay steadies every rank alike.  Per GPU, the jitter ``s`` (a rank's relative spread about the
ranks' mean) makes ``1 + s * E[max of n standard normals]``
(:func:`maya.predictor.replay.host.rank_wait`) closest to those figures, least squares over the
processes.  ``--write`` puts it into ``predictor/host_calibration.json`` (``rank_jitter``, which
``benchmarks.calibration.host`` also writes when it recalibrates).  Saves
``benchmarks/results/rank_wait.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from benchmarks.archives import extract_all
from benchmarks.calibration import set_host_values
from maya.predictor.replay.host import expected_max_normal, rank_wait, steady_step_delays
from maya.predictor.trace.reader import read_trace

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data" / "host_variance"
RESULTS = ROOT / "benchmarks" / "results" / "rank_wait.json"


def slowest_over_mean(run: Path) -> tuple[int, float] | None:
    """(ranks, the median over steady steps of the slowest rank's host delays over the ranks' mean) of a
    recorded run of several ranks (``rank<R>.mayatrace``); None: one rank, or no steady steps."""
    traces = sorted(run.glob("rank*.mayatrace"))
    totals = [steady_step_delays(read_trace(p))[2] for p in traces]
    steps = min((len(t) for t in totals), default=0)
    if len(traces) < 2 or steps == 0:
        return None
    per_step = np.array([t[:steps] for t in totals])
    return len(traces), float(np.median(per_step.max(axis=0) / per_step.mean(axis=0)))


def fit_jitter(runs: list[tuple[int, float]]) -> float:
    """The jitter ``s`` that makes ``1 + s * E[max of n]`` closest to each run's (n, slowest over mean)."""
    e = np.array([expected_max_normal(n) for n, _ in runs])
    r = np.array([w - 1.0 for _, w in runs])
    return float(max(0.0, np.dot(e, r) / np.dot(e, e)))


def measure(data: Path = DATA) -> dict[str, dict[str, Any]]:
    """Per GPU: each recorded process's (machine, run, ranks, slowest over mean) and the fitted jitter."""
    out: dict[str, dict[str, Any]] = {}
    for folder in sorted(data.glob("*-x*-ranks")):
        gpu = folder.name.rsplit("-x", 1)[0]
        with tempfile.TemporaryDirectory() as tmp:
            extract_all(folder, Path(tmp))
            for run in sorted(p for p in Path(tmp).iterdir() if p.is_dir()):
                found = slowest_over_mean(run)
                if found:
                    out.setdefault(gpu, {"runs": []})["runs"].append(
                        {"machine": folder.name, "run": run.name, "ranks": found[0], "slowest_over_mean": found[1]})
    for m in out.values():
        m["rank_jitter"] = fit_jitter([(r["ranks"], r["slowest_over_mean"]) for r in m["runs"]])
        m["rank_wait"] = {n: rank_wait(m["rank_jitter"], n) for n in (2, 4, 8)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="put each GPU's rank_jitter into predictor/host_calibration.json")
    args = ap.parse_args()
    found = measure()
    for gpu, m in found.items():
        for r in m["runs"]:
            print(f"{gpu:16} {r['machine']:26} {r['run']:6} {r['ranks']} ranks: slowest rank "
                  f"{r['slowest_over_mean']:.3f} x their mean (median over steps)")
        waits = ", ".join(f"{n} ranks {w:.3f}" for n, w in m["rank_wait"].items())
        print(f"{gpu}: jitter {m['rank_jitter']:.3f} over {len(m['runs'])} processes; a step waits: {waits} "
              f"(median of the processes' figures {median(r['slowest_over_mean'] for r in m['runs']):.3f})")
    RESULTS.write_text(json.dumps({"command": "python -m benchmarks.calibration.rank_wait",
                                   "data": str(DATA.relative_to(ROOT)), "machines": found}, indent=1) + "\n")
    print(f"saved {RESULTS}")
    if args.write:
        set_host_values("rank_jitter", {gpu: round(m["rank_jitter"], 4) for gpu, m in found.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
