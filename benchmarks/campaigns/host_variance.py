#!/usr/bin/env python3
"""Why a host-bound example's step time differs from one fresh process to the next.

Runs on a GPU machine with nothing but its python3 and torch:

    python3 -m benchmarks.campaigns.host_variance --out "$OUT" [--only cnn-w32,bert-b8] [--runs 8]

The measured step times of the host-bound sizes spread 36-64% over fresh
processes, on one machine as across machines (cnn-w32: 6.3 to 11.5 ms),
while each process's own steady steps vary 3-9% (coefficient of variation).  This runs each
example ``--runs`` times in fresh processes under three conditions, taken in
turn so that whatever varies with time affects each alike:

- ``as-is``: the example as the ground truth runs it;
- ``no-autotune``: ``torch.backends.cudnn.benchmark`` held off, so every
  process runs cuDNN's heuristic choice instead of what its own timing of
  the candidates chose;
- ``one-core``: as is, the process confined to one CPU.

Per run: the steady steps' median time and host time, the CUDA kernels of
one profiled step (which convolution engines ran), and what the process cost
the CPU (user and system time, voluntary and involuntary context switches;
the machine's steal time over the run, from /proc/stat).  Writes
``host_variance.json`` under ``--out``.
"""
import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks.campaigns.gpu_fidelity_campaign import EXAMPLES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STEPS, PROFILE_STEP, STEADY_FROM = 16, 12, 4
# cudnn.benchmark made a no-op property before the example sets it: the heuristic's engine every time.
NO_AUTOTUNE = ("import os, runpy, sys, torch\n"
               "type(torch.backends.cudnn).benchmark = property(lambda m: False, lambda m, v: None)\n"
               "sys.argv = sys.argv[1:]\n"
               "sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))\n"
               "runpy.run_path(sys.argv[0], run_name='__main__')\n")
CONDITIONS = ("as-is", "no-autotune", "one-core")


def steal_ticks() -> int:
    """The machine's steal time so far (clock ticks): what the hypervisor gave to other guests."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) if len(fields) > 8 else 0
    except OSError:
        return 0


def steady_ms(run: dict) -> dict:
    """Median step and host time of the steady steps before the profiled one (the profiler slows
    the steps after it by up to half)."""
    steady = range(STEADY_FROM, PROFILE_STEP)
    return {"step_ms": round(1e3 * statistics.median(run["step_times_s"][i] for i in steady), 3),
            "host_ms": round(1e3 * statistics.median(run["host_times_s"][i] for i in steady), 3)}


def run_once(name: str, condition: str, python: str, tmp: str) -> dict:
    script, extra, processes = EXAMPLES[name]
    if processes != 1:
        raise SystemExit(f"{name}: one process only")
    result, profile = os.path.join(tmp, "result.json"), os.path.join(tmp, "profile.json")
    args = [script, *extra, "--steps", str(STEPS), "--profile-step", str(PROFILE_STEP),
            "--profile-out", profile, "--result-out", result]
    argv = [python, "-c", NO_AUTOTUNE, *args] if condition == "no-autotune" else [python, *args]
    one_core = (lambda: os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})) \
        if condition == "one-core" else None
    before, steal0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), steal_ticks(), time.perf_counter()
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, preexec_fn=one_core, timeout=300)
    wall, steal1, after = time.perf_counter() - t0, steal_ticks(), resource.getrusage(resource.RUSAGE_CHILDREN)
    run = {"example": name, "condition": condition, "returncode": p.returncode, "wall_s": round(wall, 3),
           "user_s": round(after.ru_utime - before.ru_utime, 3), "system_s": round(after.ru_stime - before.ru_stime, 3),
           "voluntary_switches": after.ru_nvcsw - before.ru_nvcsw,
           "involuntary_switches": after.ru_nivcsw - before.ru_nivcsw,
           "steal_s": round((steal1 - steal0) / os.sysconf("SC_CLK_TCK"), 3)}
    if p.returncode != 0:
        run["stderr_tail"] = p.stderr[-2000:]
        return run
    with open(result) as f:
        r = json.load(f)
    run["step_times_s"], run["host_times_s"] = r["step_times_s"], r["host_times_s"]
    run.update(steady_ms(run))
    with open(profile) as f:
        prof = json.load(f)
    kernels = {k["name"]: k["count"] for k in prof.get("kernels", [])}
    run["kernel_launches"] = prof.get("kernel_launches")
    run["kernel_us"] = round(sum(k["total_us"] for k in prof.get("kernels", [])), 1)
    # Which kernels ran, as one short name: processes that chose the same engines share it.
    run["kernel_set"] = hashlib.sha256(json.dumps(sorted(kernels.items())).encode()).hexdigest()[:10]
    run["kernels"] = kernels
    return run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT"), help="output folder (default $OUT)")
    p.add_argument("--only", default="cnn-w32,bert-b8", help="comma-separated example names")
    p.add_argument("--runs", type=int, default=8, help="fresh processes per example and condition")
    p.add_argument("--conditions", default=",".join(CONDITIONS))
    p.add_argument("--budget-s", type=float, default=480.0, help="start no run after this")
    p.add_argument("--python", default=sys.executable)
    a = p.parse_args()
    if not a.out:
        raise SystemExit("--out (or $OUT) is needed")
    names, conditions = a.only.split(","), a.conditions.split(",")
    unknown = [n for n in names if n not in EXAMPLES] + [c for c in conditions if c not in CONDITIONS]
    if unknown:
        raise SystemExit(f"unknown example or condition: {unknown}")
    os.makedirs(a.out, exist_ok=True)
    runs, start = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            for name in names:
                for condition in conditions:
                    if time.perf_counter() - start > a.budget_s:
                        break
                    run = run_once(name, condition, a.python, tmp)
                    run["round"] = i
                    runs.append(run)
                    print(json.dumps({k: v for k, v in run.items()
                                      if k not in ("kernels", "step_times_s", "host_times_s")}), flush=True)
                    with open(os.path.join(a.out, "host_variance.json"), "w") as f:
                        json.dump({"steps": STEPS, "profile_step": PROFILE_STEP, "steady_from": STEADY_FROM,
                                   "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
