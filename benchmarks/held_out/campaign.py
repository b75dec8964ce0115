#!/usr/bin/env python3
"""Ground-truth campaign for the held-out suite: every workload, 3 fresh processes, on a GPU machine.

Runs in one call with the machine's own python3 and torch and a copy of the repository:

    python3 benchmarks/held_out/campaign.py --out "$OUT" --budget-s 480 [--only a,b] [--gpus 1|2] [--cases FILE]

Workloads come from ``suite.py``; a single-GPU workload runs on GPU 0, a DDP
workload under ``python3 -m torch.distributed.run`` when the machine has (and
``--gpus`` allows) enough GPUs.  Runs are interleaved round-robin (process 1 of
every workload, then process 2, ...) so that a budget cut, or a drift of the
server's speed, spreads over all workloads.  No run starts once the budget is
spent, nor one that its workload's previous run says would not finish in
what is left; a run still going at budget + grace is killed.

``--cases FILE`` adds cases from a JSON list of ``{"name", "argv", "nproc"}``
(argv starts with the script, relative to the repository root, and is passed
verbatim); ``--only`` picks names and the groups ``single`` and ``ddp`` (suite
workloads of one GPU, of several) and ``cases`` (all of ``--cases``).

Output, flat, rewritten after every run: ``env.json`` (GPU, driver, torch,
CUDA, cuDNN, NCCL, CPU), ``results.json`` (every run: the exact command, exit
code, wall time, each rank's JSON line, the stderr tail on failure),
``summary.csv`` (one row per run) and ``campaign.log``.

``--dry-run`` needs no GPU: each command line is parsed by its own script's
argparse (the script stops right after parsing) and the plan is printed.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# Run as a script on a GPU machine: the repository's packages by their one name.
sys.path.insert(0, ROOT)
from benchmarks.campaigns.gpu_fidelity_campaign import cpu_model  # noqa: E402
from benchmarks.held_out import suite  # noqa: E402

# NVLink multicast stays off on shared multi-GPU hosts.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
STDERR_TAIL = 4000

PROBE = r"""
import json, torch
d = {"torch": torch.__version__, "cuda": torch.version.cuda,
     "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
     "cuda_available": torch.cuda.is_available(), "device_count": torch.cuda.device_count(), "devices": []}
try:
    d["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
except Exception as e:
    d["nccl"] = f"unavailable: {e}"
try:
    d["cuda_driver_api"] = torch._C._cuda_getDriverVersion()
except Exception as e:
    d["cuda_driver_api"] = f"unavailable: {e}"
for i in range(d["device_count"]):
    p = torch.cuda.get_device_properties(i)
    d["devices"].append({"index": i, "name": p.name, "total_memory": p.total_memory,
                         "capability": f"{p.major}.{p.minor}", "sms": p.multi_processor_count})
print(json.dumps(d))
"""

# Parses a script's command line with its own argparse and stops there (no GPU needed).
PARSE_ONLY = r"""
import argparse, json, os, runpy, sys
_orig = argparse.ArgumentParser.parse_args
def _parse(self, args=None, namespace=None):
    ns = _orig(self, args, namespace)
    print(json.dumps(vars(ns)))
    raise SystemExit(0)
argparse.ArgumentParser.parse_args = _parse
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))  # as `python3 script.py` does
runpy.run_path(sys.argv[0], run_name="__main__")
raise SystemExit("the script never called ArgumentParser.parse_args")
"""


class Case:
    def __init__(self, name: str, argv: list[str], nproc: int, source: str, runs: int | None = None):
        if not argv or not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise SystemExit(f"case {name!r}: argv must be a non-empty list of strings starting with the script")
        if nproc not in (1, 2, 4, 8):
            raise SystemExit(f"case {name!r}: nproc must be 1, 2, 4 or 8, not {nproc!r}")
        self.name, self.argv, self.nproc, self.source = name, argv, nproc, source
        self.runs = runs  # fresh processes of this case (None: the campaign's --runs)
        self.last_wall_s: float | None = None

    def command(self, python: str) -> list[str]:
        if self.nproc == 1:
            return [python, *self.argv]
        return [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(self.nproc),
                *self.argv]

    def env(self, gpus: list[int] | None = None) -> dict[str, str]:
        e = dict(os.environ)
        e.update(SAFE_ENV)
        e["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in (gpus or range(self.nproc)))
        e["PYTHONUNBUFFERED"] = "1"
        return e


def build_cases(args: argparse.Namespace) -> list[Case]:
    over: list[str] = []
    if args.steps is not None:
        over += ["--steps", str(args.steps)]
    if args.warmup is not None:
        over += ["--warmup", str(args.warmup)]
    cases = [Case(w.name, [w.script, *w.argv, *over], w.gpus, "suite") for w in suite.WORKLOADS]
    if args.cases:
        try:
            with open(args.cases) as f:
                extra = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"--cases {args.cases}: cannot read a JSON list of cases: {e}") from e
        if not isinstance(extra, list):
            raise SystemExit(f"--cases {args.cases}: expected a JSON list of {{name, argv, nproc}}")
        for c in extra:
            if not isinstance(c, dict) or "name" not in c or "argv" not in c:
                raise SystemExit(f"--cases {args.cases}: each case needs 'name' and 'argv' (got {c!r})")
            cases.append(Case(str(c["name"]), c["argv"], int(c.get("nproc", 1)), "cases",
                              int(c["runs"]) if "runs" in c else None))
    names = [c.name for c in cases]
    keys = [(c.name, c.nproc) for c in cases]  # a suite workload may come again on another number of GPUs
    dup = sorted({f"{n} x{g}" for n, g in keys if keys.count((n, g)) > 1})
    if dup:
        raise SystemExit(f"duplicate cases (name and GPUs): {', '.join(dup)}")
    if args.only:
        want = [s.strip() for s in args.only.split(",") if s.strip()]
        groups = {"single": lambda c: c.source == "suite" and c.nproc == 1,
                  "ddp": lambda c: c.source == "suite" and c.nproc > 1,
                  "cases": lambda c: c.source == "cases"}
        unknown = [w for w in want if w not in names and w not in groups]
        if unknown:
            raise SystemExit(f"--only: unknown name(s) {', '.join(unknown)}; known: {', '.join(names)}, "
                             f"and the groups {', '.join(groups)}")
        cases = [c for c in cases if c.name in want or any(groups[g](c) for g in want if g in groups)]
    for c in cases:
        if not os.path.isfile(os.path.join(ROOT, c.argv[0])):
            raise SystemExit(f"case {c.name}: script {c.argv[0]} not found under {ROOT}")
    return cases


def probe_env(python: str) -> dict:
    info: dict = {"time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
                  "python": platform.python_version(), "cpu": {"model": cpu_model(), "cpus": os.cpu_count()},
                  "env": {k: v for k, v in os.environ.items()
                          if k.startswith(("NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "NVIDIA_"))}}
    import importlib.metadata as md

    info["packages"] = dict(sorted((d.metadata["Name"].lower(), d.version) for d in md.distributions()
                                   if (d.metadata["Name"] or "").lower().startswith(("nvidia-", "torch", "triton"))))
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,clocks.max.sm,"
                              "power.limit", "--format=csv,noheader"], capture_output=True, text=True, timeout=60)
        info["nvidia_smi"] = out.stdout.strip().splitlines() if out.returncode == 0 else out.stderr.strip()
        if out.returncode == 0 and info["nvidia_smi"]:
            info["driver"] = info["nvidia_smi"][0].split(",")[2].strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        info["nvidia_smi"] = f"unavailable: {e}"
    try:
        out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=ROOT)
        if out.returncode == 0:
            info.update(json.loads(out.stdout.strip().splitlines()[-1]))
        else:
            info["probe_error"] = out.stderr[-STDERR_TAIL:]
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        info["probe_error"] = repr(e)
    return info


def result_lines(stdout: str) -> list[dict]:
    """Each rank's JSON result (an object with step_times_s), in rank order.  Ranks print at the
    same time, so two results can share a line (``{...}{...}``): every object on a line is read."""
    found = []
    decoder = json.JSONDecoder()
    for line in stdout.splitlines():
        at = line.find("{")
        while at >= 0:
            try:
                d, end = decoder.raw_decode(line, at)
            except ValueError:
                at = line.find("{", at + 1)
                continue
            if isinstance(d, dict) and "step_times_s" in d:
                found.append(d)
            at = line.find("{", end)
    return sorted(found, key=lambda d: d.get("rank", 0))


def run_once(case: Case, python: str, timeout_s: float, gpus: list[int] | None = None) -> dict:
    cmd = case.command(python)
    t0 = time.perf_counter()
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    proc = subprocess.Popen(cmd, cwd=ROOT, env=case.env(gpus), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun's workers share the session
        out, err = proc.communicate()
    wall = time.perf_counter() - t0
    rec = {"name": case.name, "nproc": case.nproc, "cmd": cmd, "gpus": gpus, "started_utc": started, "rc": proc.returncode,
           "timed_out": timed_out, "wall_s": round(wall, 3), "results": result_lines(out)}
    if proc.returncode != 0 or timed_out or len(rec["results"]) != case.nproc:
        rec["stderr_tail"] = err[-STDERR_TAIL:]
        rec["stdout_tail"] = out[-STDERR_TAIL:]
    return rec


def summary_row(rec: dict, rnd: int) -> dict:
    res = rec["results"]
    row = {"name": rec["name"], "round": rnd, "nproc": rec["nproc"], "rc": rec["rc"], "wall_s": rec["wall_s"],
           "ranks_reported": len(res), "device": "", "steps": "", "median_step_s": "", "min_step_s": "",
           "max_step_s": "", "max_memory_allocated": "", "max_memory_reserved": ""}
    if res:
        times = res[0]["step_times_s"]
        row.update(device=res[0].get("device", ""), steps=len(times),
                   max_memory_allocated=max(r.get("max_memory_allocated", 0) for r in res),
                   max_memory_reserved=max(r.get("max_memory_reserved", 0) for r in res))
        if times:
            row.update(median_step_s=f"{statistics.median(times):.6f}", min_step_s=f"{min(times):.6f}",
                       max_step_s=f"{max(times):.6f}")
    return row


def write_json(path: str, obj: object) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def write_csv(path: str, rows: list[dict]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        if rows:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    os.replace(tmp, path)


def dry_run(cases: list[Case], python: str, log) -> int:
    bad = 0
    for c in cases:
        out = subprocess.run([python, "-c", PARSE_ONLY, *c.argv], cwd=ROOT, capture_output=True, text=True,
                             timeout=300)
        ok = out.returncode == 0 and out.stdout.strip().startswith("{")
        bad += not ok
        log(f"dry-run {c.name}: {'ok' if ok else 'FAILED'}: {' '.join(c.command(python))}")
        if ok:
            log(f"  parsed: {out.stdout.strip().splitlines()[-1]}")
        else:
            log(f"  {out.stderr.strip()[-1500:]}")
    if bad:
        log(f"dry-run: {bad} command line(s) failed")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="held-out suite ground truth on this GPU machine")
    ap.add_argument("--out", required=True, help="output folder (created; flat, at most 6 files)")
    ap.add_argument("--budget-s", type=float, default=480, help="start no run after this many seconds")
    ap.add_argument("--grace-s", type=float, default=60, help="kill a run still going at budget + grace")
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per case (default %(default)s)")
    ap.add_argument("--only", default="", help="comma-separated case names and groups: single, ddp (suite), cases (--cases)")
    ap.add_argument("--gpus", type=int, default=None, help="use at most this many GPUs (default: all present)")
    ap.add_argument("--cases", default=None, help="JSON file: extra cases [{name, argv, nproc}]")
    ap.add_argument("--steps", type=int, default=None, help="override the suite's --steps (plumbing tests)")
    ap.add_argument("--warmup", type=int, default=None, help="override the suite's --warmup (plumbing tests)")
    ap.add_argument("--python", default=sys.executable, help="interpreter for the workloads")
    ap.add_argument("--dry-run", action="store_true", help="parse every command line, run nothing on a GPU")
    ap.add_argument("--parallel", action="store_true",
                    help="run one-GPU cases side by side, one per GPU (a case of several GPUs runs alone)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.budget_s <= 0:
        ap.error("--runs must be >= 1 and --budget-s > 0")

    t_start = time.perf_counter()
    os.makedirs(args.out, exist_ok=True)
    log_path = os.path.join(args.out, "campaign.log")

    def log(msg: str) -> None:
        line = f"[{time.perf_counter() - t_start:7.1f}s] {msg}"
        print(line, file=sys.stderr, flush=True)
        with open(log_path, "a") as f:
            f.write(line + "\n")

    cases = build_cases(args)
    log(f"campaign: {len(cases)} case(s), {args.runs} run(s) each, budget {args.budget_s:.0f} s, "
        f"python {args.python}, repo {ROOT}")
    if args.dry_run:
        return dry_run(cases, args.python, log)

    env = probe_env(args.python)
    env["suite_frozen"] = suite.FROZEN
    write_json(os.path.join(args.out, "env.json"), env)
    present = int(env.get("device_count", 0))
    names = sorted({d["name"] for d in env.get("devices", [])})
    log(f"GPUs: {present} x {', '.join(names) or 'none'}; torch {env.get('torch')}, CUDA {env.get('cuda')}, "
        f"cuDNN {env.get('cudnn')}, NCCL {env.get('nccl')}, driver {env.get('driver', '?')}")
    if present == 0:
        log(f"no CUDA device visible (probe: {env.get('probe_error', 'device_count 0')}); nothing to run")
        return 2
    gpus = present if args.gpus is None else args.gpus
    if gpus > present:
        log(f"--gpus {gpus} but only {present} GPU(s) present; run with --gpus {present}")
        return 2
    skipped = [c.name for c in cases if c.nproc > gpus]
    cases = [c for c in cases if c.nproc <= gpus]
    if skipped:
        log(f"skipped (need more than {gpus} GPU(s)): {', '.join(skipped)}")

    state = {"campaign": {"argv": sys.argv, "budget_s": args.budget_s, "runs": args.runs, "gpus_used": gpus,
                          "suite_frozen": suite.FROZEN, "skipped_for_gpus": skipped,
                          "cases": [{"name": c.name, "argv": c.argv, "nproc": c.nproc, "source": c.source}
                                    for c in cases]},
             "runs": []}
    rows: list[dict] = []
    failures = 0
    lock = threading.Lock()
    free = list(range(gpus)) if args.parallel else None
    cond = threading.Condition(lock)
    threads: list[threading.Thread] = []

    def record(case: Case, rnd: int, rec: dict) -> None:
        nonlocal failures
        with lock:
            rec["round"] = rnd
            case.last_wall_s = rec["wall_s"]
            state["runs"].append(rec)
            rows.append(summary_row(rec, rnd))
            write_json(os.path.join(args.out, "results.json"), state)
            write_csv(os.path.join(args.out, "summary.csv"), rows)
            r = rows[-1]
            ok = rec["rc"] == 0 and r["ranks_reported"] == case.nproc
            failures += not ok
            log(f"{case.name} round {rnd}{' on GPU ' + str(rec['gpus']) if rec.get('gpus') else ''}: rc {rec['rc']}"
                f"{' (timed out)' if rec['timed_out'] else ''}, {rec['wall_s']:.1f} s, median step "
                f"{r['median_step_s'] or '-'} s, peak alloc {r['max_memory_allocated'] or '-'} B"
                f"{'' if ok else ', FAILED'}")

    def side_by_side(case: Case, rnd: int, slot: int, timeout: float) -> None:
        try:
            record(case, rnd, run_once(case, args.python, timeout, [slot]))
        finally:
            with cond:
                free.append(slot)
                cond.notify_all()

    stop = False
    for rnd in range(1, max([args.runs, *(c.runs or 0 for c in cases)]) + 1):
        for case in cases:
            if rnd > (case.runs or args.runs):
                continue
            elapsed = time.perf_counter() - t_start
            left = args.budget_s - elapsed
            if left <= 0:
                log(f"budget spent after {elapsed:.0f} s: no more runs")
                stop = True
                break
            if case.last_wall_s is not None and case.last_wall_s > left:
                log(f"skip {case.name} round {rnd}: its last run took {case.last_wall_s:.0f} s, {left:.0f} s left")
                continue
            if free is None:
                record(case, rnd, run_once(case, args.python, left + args.grace_s))
                continue
            with cond:
                need = 1 if case.nproc == 1 else gpus
                cond.wait_for(lambda need=need: len(free) >= need)
                if case.nproc == 1:
                    slot = free.pop(0)
                else:
                    taken = list(free)
                    free.clear()
            if case.nproc == 1:
                t = threading.Thread(target=side_by_side, args=(case, rnd, slot, left + args.grace_s))
                t.start()
                threads.append(t)
            else:
                try:
                    record(case, rnd, run_once(case, args.python, left + args.grace_s))
                finally:
                    with cond:
                        free.extend(taken)
                        cond.notify_all()
        if stop:
            break
    for t in threads:
        t.join()
    done = len(state["runs"])
    log(f"done: {done} run(s), {failures} failed, {time.perf_counter() - t_start:.0f} s")
    return 0 if done and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
