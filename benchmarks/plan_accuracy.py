"""Is ``maya plan``'s pick right, and how fast is it?  ``examples/plan-1b.yaml`` against its grid measured on GPUs.

    python -m benchmarks.plan_accuracy [--cache DIR]

The plan (a 1.3 B-parameter decoder, micro-batch 4-32 x activation
checkpointing, on 1 x H100, 1 x H200 and 2 x H200) is planned cold, with an
empty emulation cache, then re-planned three times from the cache with other
prices, objective and deadline (the seconds a user waits for a what-if).
Every candidate is compared with the same configuration measured on real
GPUs (``benchmarks/data/held_out/*``, the ``grid-*`` cases: one fresh process
each, the median of its timed steps): step-time error, the memory verdict
(fits, or ran out of memory on the real card), and the pick: the
recommendation's measured cost (or time) against the best configuration that
really fits and meets the deadline.  Saves
``benchmarks/results/plan_accuracy.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from maya.plan.cache import Cache
from maya.plan.local import PlanRun, plan_locally
from maya.plan.spec import Deadline, Plan, load

ROOT = Path(__file__).resolve().parent.parent
PLAN = ROOT / "examples" / "plan-1b.yaml"
TRUTH = ROOT / "benchmarks" / "data" / "held_out"
# Which measured machine stands for each plan shape.
MACHINES = {("H100-SXM-80GB", 1): "H100-SXM-80GB", ("H200-SXM-141GB", 1): "H200-SXM-141GB-x2",
            ("H200-SXM-141GB", 2): "H200-SXM-141GB-x2"}


def case_name(gpus: int, micro: int, ckpt: bool) -> str:
    return f"grid-{gpus}x-b{micro}{'-ckpt' if ckpt else ''}"


def measured_grid() -> dict[tuple[str, str], dict[str, Any]]:
    """(machine folder, case) -> {step_s, oom, peak_bytes}: the grid as it ran on real GPUs."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for folder in sorted(TRUTH.iterdir()):
        path = folder / "results.json"
        if not path.is_file():
            continue
        for run in json.loads(path.read_text())["runs"]:
            if not run["name"].startswith("grid-"):
                continue
            lines = run.get("results") or []
            oom = run["rc"] != 0 and "OutOfMemoryError" in (run.get("stderr_tail", "") + run.get("stdout_tail", ""))
            if lines:
                steps = [statistics.median(r["step_times_s"][2:]) for r in lines]
                out[(folder.name, run["name"])] = {"step_s": max(steps), "oom": False,
                                                   "peak_bytes": max(r["max_memory_allocated"] for r in lines)}
            elif oom:
                out[(folder.name, run["name"])] = {"step_s": None, "oom": True, "peak_bytes": None}
    return out


def _truth(c: dict[str, Any], grid: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any] | None:
    machine = MACHINES.get((c["gpu"], c["gpus"]))
    name = case_name(c["gpus"], c["microBatch"], bool(c["knobs"].get("activationCheckpointing")))
    return grid.get((machine, name)) if machine else None


def judge(plan: Plan, status: dict[str, Any], grid: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """The recommendation against the best real configuration, under the plan's objective and deadline."""
    real = []
    for c in status["candidates"]:
        t = _truth(c, grid)
        if t is None or t["oom"] or c["status"] == "pruned" and "divide" in c["reason"]:
            continue
        cost = t["step_s"] * c["gpus"] * plan.prices[c["gpu"]] / 3600
        meets = plan.deadline is None or t["step_s"] * plan.deadline.steps <= plan.deadline.seconds
        real.append((c, t["step_s"], cost, meets))
    feasible = [r for r in real if r[3]]
    metric = 2 if plan.objective == "cost" else 1
    best = min(feasible, key=lambda r: r[metric]) if feasible else None
    rec = status.get("recommendation")
    picked = next((r for r in real if rec is not None and r[0] == rec), None) if rec else None
    out: dict[str, Any] = {"objective": plan.objective,
                           "deadline": None if plan.deadline is None else
                           {"steps": plan.deadline.steps, "duration": plan.deadline.text},
                           "recommendation": rec and _label(rec), "best_measured": best and _label(best[0])}
    if best and picked:
        out["regret"] = picked[metric] / best[metric] - 1
        out["recommendation_meets_deadline_measured"] = picked[3]
    return out


def _label(c: dict[str, Any]) -> str:
    return (f"{c['gpus']}x {c['gpu']} micro-batch {c['microBatch']} x{c['gradientAccumulation']} ckpt "
            f"{'on' if c['knobs'].get('activationCheckpointing') else 'off'}")


def timed(plan: Plan, cache: Cache) -> tuple[PlanRun, float]:
    t0 = time.monotonic()
    run = plan_locally(plan, PLAN.parent, cache=cache, progress=lambda m: print(f"  {m}", flush=True))
    return run, time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=None, help="emulation cache (default: a new empty folder)")
    args = ap.parse_args()
    cache = Cache(args.cache or Path(tempfile.mkdtemp(prefix="maya-plan-bench-")))
    plan = load(PLAN)
    print(f"cold plan of {PLAN.name} (cache {cache.root})")
    run, cold_s = timed(plan, cache)
    status = run.status(limit=None)
    grid = measured_grid()
    rows = []
    for c in status["candidates"]:
        t = _truth(c, grid)
        if t is None or c["status"] == "pruned":
            continue
        predicted_oom = c["status"] == "oom"
        row = {"candidate": _label(c), "status": c["status"], "predicted_s": c["stepTimeSeconds"],
               "measured_s": t["step_s"], "verdict_matches": predicted_oom == t["oom"],
               "predicted_peak_bytes": c["peakMemoryBytes"], "measured_peak_bytes": t["peak_bytes"]}
        if c["stepTimeSeconds"] and t["step_s"]:
            row["error"] = c["stepTimeSeconds"] / t["step_s"] - 1
        rows.append(row)
    errors = [abs(r["error"]) for r in rows if "error" in r]
    variants = {"cost": plan,
                "cost, H100 at 2.00 USD": replace(plan, prices={**plan.prices, "H100-SXM-80GB": 2.0}),
                "time, deadline 20000 steps in 3h": replace(plan, objective="time",
                                                           deadline=Deadline(20000, 3 * 3600.0, "3h")),
                "cost, deadline 20000 steps in 3h": replace(plan, deadline=Deadline(20000, 3 * 3600.0, "3h"))}
    picks, warm = {}, []
    for name, variant in variants.items():
        again, seconds = timed(variant, cache)
        warm.append(seconds)
        picks[name] = {**judge(variant, again.status(limit=None), grid), "seconds": seconds}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    result = {
        "date": time.strftime("%Y-%m-%d"), "commit": commit, "command": "python -m benchmarks.plan_accuracy",
        "plan": str(PLAN.relative_to(ROOT)), "cold_seconds": cold_s, "warm_seconds": warm,
        "candidates": status["searchedCandidates"], "evaluated": len(run.search.candidates),
        "emulations": status["emulations"], "search": status["search"],
        "step_error_median": statistics.median(errors) if errors else None,
        "step_error_max": max(errors) if errors else None,
        "verdicts_match": all(r["verdict_matches"] for r in rows), "rows": rows, "picks": picks,
    }
    out = ROOT / "benchmarks" / "results"
    (out / "plan_accuracy.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "plan_accuracy.md").write_text(render(result))
    print(render(result))
    return 0


def render(r: dict[str, Any]) -> str:
    lines = [f"# maya plan against the measured grid ({r['date']}, commit {r['commit']})", "",
             f"`{r['command']}` on `{r['plan']}`: {r['candidates']} candidates, {r['evaluated']} evaluated, "
             f"emulations {r['emulations']}; search: {r['search']}.", "",
             f"- cold plan: {r['cold_seconds']:.0f} s; re-plans from the cache: "
             + ", ".join(f"{s:.1f} s" for s in r["warm_seconds"]),
             f"- step-time error over the grid: median {100 * (r['step_error_median'] or 0):.1f}%, "
             f"max {100 * (r['step_error_max'] or 0):.1f}%",
             f"- every memory verdict matches the real run: {r['verdicts_match']}", "",
             "| objective | recommendation | best measured | regret |", "| --- | --- | --- | --- |"]
    for name, p in r["picks"].items():
        regret = p.get("regret")
        lines.append(f"| {name} | {p['recommendation']} | {p['best_measured']} | "
                     + ("" if regret is None else f"{100 * regret:+.1f}%") + " |")
    lines += ["", "| candidate | status | predicted ms | measured ms | error | verdict |", "| --- | --- | --- | --- | --- | --- |"]
    for row in r["rows"]:
        p, m, e = row["predicted_s"], row["measured_s"], row.get("error")
        cells = [row["candidate"], row["status"], "" if p is None else f"{p * 1e3:.1f}",
                 "OOM" if m is None else f"{m * 1e3:.1f}", "" if e is None else f"{100 * e:+.1f}%",
                 "match" if row["verdict_matches"] else "MISMATCH"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
