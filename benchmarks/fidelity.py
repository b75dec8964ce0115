#!/usr/bin/env python3
"""Emulation fidelity: examples/ under `maya emulate` against real-GPU measurements.

    .venv/bin/python -m benchmarks.fidelity [--data DIR ...] [--only gpt,cnn]

For each campaign folder (benchmarks/data/gpu_fidelity/<gpu>/, written by
benchmarks/campaigns/gpu_fidelity_campaign.py on a real GPU) and each example in it,
the example runs under `maya emulate` on the catalog GPU of the same model,
with the same command line as on the GPU (without the profiler), and two
things are compared:

- memory: `max_memory_allocated` emulated vs real (median of the real runs),
  target within 1%; per-step peaks beside it;
- kernels of one step: the real step is the one the campaign profiled
  (`--profile-step K`); in the emulated trace the examples separate steps with
  `torch.cuda.synchronize()` (DEVICE_SYNC records), so step K lies between
  the loop's K-th and (K+1)-th synchronisations.  Its kernels are the KERNEL
  records' names plus the kernel names that DNN records list (what cuDNN would
  launch).  Real launches are matched by name, count by count; real
  cuBLAS/cuBLASLt GEMM kernels (nvjet_*, *gemm*, ...) that remain are matched
  by the step's BLAS records, and NCCL kernels by its COLL records (one each,
  count by count).  Target: at least 99% of the real launches matched.

Without campaign data the examples still run under emulation and the
emulated side is reported alone.  Results go to
benchmarks/results/fidelity-<date>.json and .md (date, machine, command).
"""
from __future__ import annotations

import argparse
import collections
import datetime
import difflib
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.campaigns import gpu_fidelity_campaign as campaign  # the same example table

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "gpu_fidelity"
RESULTS = ROOT / "benchmarks" / "results"

MEMORY_TARGET = 0.01
KERNEL_TARGET = 0.99

# Real kernels that a BLAS record stands for (cuBLAS/cuBLASLt launch them
# inside the library, so the emulated trace has the call, not the kernel).
BLAS_KERNEL = re.compile(
    r"^nvjet_|gemm|gemv|splitKreduce|cublas|^void (dot|scal|axpy|nrm2|asum|reduce_1Block)_kernel", re.I)
# ...but not cuDNN's implicit-GEMM convolutions, which DNN records name.
DNN_KERNEL = re.compile(r"cudnn|fprop|dgrad|wgrad|implicit_gemm|implicit_convolve|_bn_|batch_?norm", re.I)
# Second kernels of one library call (split-K reductions, workspace set-up).
# A BLAS record stands for the whole call, whatever kernels cuBLAS launched
# for it, so each record also covers at most one such kernel; they are
# counted apart ("as parts of BLAS calls") in the report.
AUX_KERNEL = re.compile(r"splitKreduce|reduce_1Block|init_device_workspace|ReduceSplitK", re.I)
NCCL_KERNEL = re.compile(r"^(void )?nccl\w*Kernel", re.I)
MEMSET_NAME = "Memset (Device)"
BLAS_SLOT, NCCL_SLOT = "<BLAS call>", "<NCCL call>"


# ------------------------------------------------------------ emulated side

def emulated_step(trace_path: Path, steps: int, step: int) -> dict[str, Any]:
    """Kernels, library calls and copies of one step of an emulated run."""
    from maya.predictor.trace import Flag, Kind, read_trace

    t = read_trace(trace_path)
    rec = t.records
    kinds = rec["kind"]
    funcs = {}
    for i in t.of_kind(Kind.FUNC):
        a = rec[i]["a"]
        funcs[int(a[0])] = t.string(int(a[2])) or t.string(int(a[1]))
    syncs = t.of_kind(Kind.DEVICE_SYNC)
    out: dict[str, Any] = {"device_syncs": int(len(syncs)), "notes": []}
    if len(syncs) < steps + 1:
        out["notes"].append(f"only {len(syncs)} DEVICE_SYNC records for {steps} steps: no step window")
        return out
    if len(syncs) != steps + 1:
        out["notes"].append(f"{len(syncs)} DEVICE_SYNC records for {steps} steps; the last {steps + 1} taken "
                            "as step boundaries")
    bounds = syncs[-(steps + 1):]
    not_captured = (rec["flags"] & int(Flag.CAPTURED)) == 0
    per_step = []
    for s in range(steps):
        lo, hi = int(bounds[s]), int(bounds[s + 1])
        w = slice(lo + 1, hi)
        per_step.append(int(((kinds[w] == Kind.KERNEL) & not_captured[w]).sum()))
    out["kernels_per_step"] = per_step
    lo, hi = int(bounds[step]), int(bounds[step + 1])
    names: collections.Counter[str] = collections.Counter()
    dnn_names: collections.Counter[str] = collections.Counter()
    blas_apis: collections.Counter[str] = collections.Counter()
    colls: collections.Counter[str] = collections.Counter()
    copies: collections.Counter[str] = collections.Counter()
    sequence: list[str] = []   # launch order, libraries' kernels as BLAS_SLOT / NCCL_SLOT
    for i in range(lo + 1, hi):
        k = int(kinds[i])
        if not not_captured[i]:
            continue
        if k == Kind.KERNEL:
            n = funcs.get(int(rec[i]["a"][0]), f"<func {int(rec[i]['a'][0])}>")
            names[n] += 1
            sequence.append(n)
        elif k == Kind.BLAS:
            blas_apis[t.string(int(rec[i]["a32"]))] += 1
            sequence.append(BLAS_SLOT)
        elif k == Kind.DNN:
            for n in dnn_kernel_names(t, i):
                dnn_names[n] += 1
                if n != MEMSET_NAME:
                    sequence.append(n)
        elif k == Kind.COLL:
            colls[_COLL_OPS.get(int(rec[i]["a"][2]) & 0xFF, "?")] += 1
            sequence.append(NCCL_SLOT)
        elif k in (Kind.MEMCPY, Kind.MEMSET):
            copies[Kind(k).name] += 1
    out.update({
        "kernel_launches": sum(names.values()),
        "kernels": dict(names.most_common()),
        "dnn_kernels": dict(dnn_names.most_common()),
        "blas_calls": dict(blas_apis.most_common()),
        "collectives": dict(colls.most_common()),
        "copies": dict(copies),
        "sequence": sequence,
        "unsupported": sorted({t.string(int(rec[i]["a"][0])) for i in t.of_kind(Kind.UNSUPPORTED)})[:50],
    })
    return out


_COLL_OPS = {1: "AllReduce", 2: "Broadcast", 3: "Reduce", 4: "AllGather", 5: "ReduceScatter",
             6: "AllToAll", 7: "Send", 8: "Recv", 9: "Gather", 10: "Scatter"}


def dnn_kernel_names(t, i: int) -> list[str]:
    """Kernel names a DNN record lists (layout in emulation-image/src/cudnn.c,
    dnn_emit, and docs/dnn.md): a[3] = params | kernels << 16 | graph words << 32;
    the continuation words hold the params, then one string id per kernel name
    (memsets appear as "Memset (Device)"), then the graph words."""
    a3 = int(t.records[i]["a"][3])
    np_, nk = a3 & 0xFFFF, (a3 >> 16) & 0xFFFF
    ext = t.ext(i)
    return [t.string(int(w)) for w in ext[np_:np_ + nk]]


# --------------------------------------------------------------- comparison

def match_kernels(real: dict[str, int], emu: dict[str, Any]) -> dict[str, Any]:
    """Match the real step's launches against the emulated step, count by count."""
    real_c = collections.Counter({k: int(v) for k, v in real.items()})
    emu_c = collections.Counter(emu.get("kernels", {}))
    dnn = collections.Counter(emu.get("dnn_kernels", {}))
    dnn.pop(MEMSET_NAME, None)          # memsets are not kernels in the profiler's list
    emu_c.update(dnn)
    total = sum(real_c.values())
    by_name = {n: min(c, emu_c[n]) for n, c in real_c.items() if emu_c[n]}
    left = real_c - collections.Counter(by_name)
    blas_pool = sum(emu.get("blas_calls", {}).values())
    coll_pool = sum(emu.get("collectives", {}).values())
    blas_used = coll_used = aux_used = 0
    unmatched: collections.Counter[str] = collections.Counter()
    blas_class = sum(c for n, c in real_c.items() if BLAS_KERNEL.search(n) and not DNN_KERNEL.search(n))
    for name, c in sorted(left.items(), key=lambda kv: (bool(AUX_KERNEL.search(kv[0])), kv[0])):
        if AUX_KERNEL.search(name) and BLAS_KERNEL.search(name) and not DNN_KERNEL.search(name):
            take = min(c, blas_pool - aux_used)
            aux_used += take
            c -= take
        elif BLAS_KERNEL.search(name) and not DNN_KERNEL.search(name):
            take = min(c, blas_pool - blas_used)
            blas_used += take
            c -= take
        elif NCCL_KERNEL.search(name):
            take = min(c, coll_pool - coll_used)
            coll_used += take
            c -= take
        if c:
            unmatched[name] = c
    matched = sum(by_name.values()) + blas_used + aux_used + coll_used
    extra = emu_c - real_c
    return {
        "real_launches": total,
        "matched": matched,
        "matched_by_name": sum(by_name.values()),
        "matched_by_blas_records": blas_used,
        "matched_as_parts_of_blas_calls": aux_used,
        "matched_by_coll_records": coll_used,
        "blas_records": blas_pool,
        "real_blas_class_launches": blas_class,
        "coll_records": coll_pool,
        "fraction": (matched / total) if total else None,
        "unmatched_real": dict(unmatched.most_common()),
        "emulated_only": dict(extra.most_common()),
        "near_misses": near_misses(list(unmatched), list(extra)),
    }


def near_misses(real: list[str], emulated: list[str], limit: int = 20) -> list[dict[str, Any]]:
    """For unmatched real names, the closest emulated-only name (same text up
    to the first '<' or '('), with the offset where they first differ."""
    out = []
    for r in real:
        stem = re.split(r"[<(]", r, maxsplit=1)[0]
        cands = [e for e in emulated if re.split(r"[<(]", e, maxsplit=1)[0] == stem]
        if not cands:
            continue
        best = max(cands, key=lambda e: difflib.SequenceMatcher(None, r, e, autojunk=False).ratio())
        diff = next((i for i, (x, y) in enumerate(zip(r, best, strict=False)) if x != y), min(len(r), len(best)))
        out.append({"real": r, "emulated": best, "first_difference": diff})
        if len(out) >= limit:
            break
    return out


def order_similarity(real_prof: dict[str, Any], emu_sequence: list[str]) -> float | None:
    """difflib ratio between the real launch order (GEMM kernels as one BLAS
    slot each, NCCL kernels as one NCCL slot) and the emulated one."""
    if not real_prof.get("sequence") or not emu_sequence:
        return None
    names = [k["name"] for k in real_prof["kernels"]]
    real = []
    for idx in real_prof["sequence"]:
        n = names[idx]
        if BLAS_KERNEL.search(n) and not DNN_KERNEL.search(n):
            n = BLAS_SLOT
        elif NCCL_KERNEL.search(n):
            n = NCCL_SLOT
        real.append(n)
    return difflib.SequenceMatcher(None, real, emu_sequence, autojunk=False).ratio()


def compare_memory(emu: dict[str, Any], real_runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"emulated": emu.get("max_memory_allocated"),
                           "emulated_reserved": emu.get("max_memory_reserved"),
                           "emulated_step_peaks": emu.get("step_max_memory_allocated")}
    if emu.get("mem_get_info_end"):
        # Device memory in use at the end as the driver sees it: context,
        # libraries' workspaces and the caching allocator's reserve.
        out["emulated_device_used_end"] = emu["mem_get_info_end"][1] - emu["mem_get_info_end"][0]
    vals = [r["max_memory_allocated"] for r in real_runs if r.get("max_memory_allocated") is not None]
    if vals:
        real = statistics.median(vals)
        out.update({"real": real, "real_runs": vals, "real_spread": (max(vals) - min(vals)) / real if real else 0,
                    "real_reserved": statistics.median(r.get("max_memory_reserved", 0) for r in real_runs),
                    "real_step_peaks": real_runs[0].get("step_max_memory_allocated")})
        if out["emulated"] is not None and real:
            out["rel_error"] = (out["emulated"] - real) / real
        used = [r["mem_get_info_end"][1] - r["mem_get_info_end"][0] for r in real_runs if r.get("mem_get_info_end")]
        if used:
            out["real_device_used_end"] = statistics.median(used)
    return out


# ------------------------------------------------------------------ running

def gpu_for(env: dict[str, Any]) -> str:
    """Catalog name for the GPU the campaign measured."""
    from maya import catalog

    name = str(env.get("gpu") or "")
    for g in catalog.all_gpus():
        if g.marketing == name or g.name.lower() == name.lower():
            return g.name
    for g in catalog.all_gpus():
        if g.name.split("-")[0].lower() in name.lower():
            return g.name
    return "H100-SXM-80GB"


def run_emulated(name: str, argv: list[str], nproc: int, gpu: str, gpus: int, out: Path,
                 timeout: float) -> dict[str, Any]:
    res_path = out / "result.json"
    cmd = campaign.launcher(name, sys.executable) + argv + ["--result-out", str(res_path)]
    full = [sys.executable, "-m", "maya", "emulate", "--gpu", gpu, "--gpus", str(max(gpus, nproc)),
            "--out", str(out), "--", *cmd]
    t0 = time.monotonic()
    try:
        p = subprocess.run(full, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, "PYTHONUNBUFFERED": "1"})
        rc, stdout, stderr = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        stdout = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    wall = time.monotonic() - t0
    results = {}
    for r in range(nproc):
        path = campaign._rank_path(str(res_path), r, nproc)
        if os.path.exists(path):
            with open(path) as f:
                results[r] = json.loads(f.read())
    if not results and nproc == 1:
        line = campaign._last_json(stdout)
        if line:
            results[0] = line
    return {"command": shlex.join(full), "returncode": rc, "wall_s": round(wall, 1), "results": results,
            "stderr_tail": stderr[-3000:] if (rc != 0 or not results) else ""}


def load_campaigns(dirs: list[Path]) -> list[tuple[Path, dict[str, Any], dict[str, dict[str, Any]]]]:
    out = []
    for d in dirs:
        env_path = d / "env.json"
        if not env_path.is_file():
            continue
        env = json.loads(env_path.read_text())
        examples = {}
        for name in campaign.EXAMPLES:
            p = d / f"{name}.json"
            if p.is_file():
                examples[name] = json.loads(p.read_text())
        out.append((d, env, examples))
    return out


def evaluate(name: str, entry: dict[str, Any] | None, env: dict[str, Any], gpu: str, work: Path,
             timeout: float) -> dict[str, Any]:
    if entry:
        argv, nproc = list(entry["argv"]), int(entry["processes"])
        steps, pstep = int(entry["steps"]), int(entry["profile_step"])
    else:
        argv, nproc = campaign.example_argv(name), campaign.EXAMPLES[name][2]
        steps, pstep = campaign.STEPS, campaign.PROFILE_STEP
    out = work / name
    out.mkdir(parents=True, exist_ok=True)
    print(f"[{name}] emulating on {gpu}: {shlex.join(argv)}", flush=True)
    run = run_emulated(name, argv, nproc, gpu, int(env.get("device_count") or nproc), out, timeout)
    row: dict[str, Any] = {"example": name, "gpu": gpu, "argv": argv, "processes": nproc, "steps": steps,
                           "profile_step": pstep, "emulation": {k: v for k, v in run.items() if k != "results"},
                           "ranks": []}
    for r in range(nproc):
        emu_res = run["results"].get(r, {})
        rank: dict[str, Any] = {"rank": r}
        trace = out / f"rank{r}.mayatrace"
        emu_step = emulated_step(trace, steps, pstep) if trace.is_file() else {"notes": ["no trace"]}
        rank["emulated_step"] = emu_step
        real_runs = []
        real_prof = None
        if entry:
            for run_ in entry["runs"]:
                for res in run_["results"]:
                    if res.get("rank", 0) == r and run_["returncode"] == 0:
                        real_runs.append(res)
            real_prof = entry.get("profiles", {}).get(str(r))
        rank["memory"] = compare_memory(emu_res, real_runs)
        if real_prof:
            real_names = {k["name"]: k["count"] for k in real_prof["kernels"]}
            rank["kernels"] = match_kernels(real_names, emu_step)
            rank["kernels"]["order_similarity"] = order_similarity(real_prof, emu_step.get("sequence", []))
            rank["real_step_kernel_launches"] = real_prof.get("kernel_launches")
        emu_step.pop("sequence", None)   # long; the trace keeps it
        row["ranks"].append(rank)
    return row


# ------------------------------------------------------------------ output

def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.2f}%"


def _gib(x: float | None) -> str:
    return "-" if x is None else f"{x / 2**30:.3f}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    head = ("example", "gpu", "rank", "rc", "emu GiB", "real GiB", "mem err", "real spread",
            "real kernels", "matched", "unmatched", "emu-only", "order")
    lines = [head]
    for row in rows:
        for rk in row["ranks"]:
            m, k = rk["memory"], rk.get("kernels", {})
            frac = k.get("fraction")
            lines.append((row["example"], row["gpu"], str(rk["rank"]), str(row["emulation"]["returncode"]),
                          _gib(m.get("emulated")), _gib(m.get("real")),
                          _pct(m.get("rel_error")),
                          "-" if "real_spread" not in m else f"{100 * m['real_spread']:.2f}%",
                          str(k.get("real_launches", "-")),
                          "-" if frac is None else f"{100 * frac:.1f}%",
                          str(sum(k.get("unmatched_real", {}).values())) if k else "-",
                          str(sum(k.get("emulated_only", {}).values())) if k else "-",
                          "-" if k.get("order_similarity") is None else f"{k['order_similarity']:.3f}"))
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in lines]


def markdown(report: dict[str, Any]) -> str:
    md = [f"# Emulation fidelity, {report['date']}", "",
          f"- command: `{report['command']}`",
          f"- machine: {report['machine']['host']} ({report['machine']['cpu']}, {report['machine']['cpus']} CPUs), "
          f"torch {report['machine']['torch']}",
          f"- targets: max_memory_allocated within {100 * MEMORY_TARGET:.0f}%, "
          f"at least {100 * KERNEL_TARGET:.0f}% of the real step's kernel launches matched",
          "- columns: mem err = (emulated - real) / real max_memory_allocated; real spread = (max - min) / median "
          "over the real runs; matched = share of the real step's launches matched (by name, GEMM kernels by BLAS "
          "records, NCCL kernels by collectives); order = difflib ratio of the launch orders", ""]
    for src in report["sources"]:
        md.append(f"- GPU data: `{src['dir']}`: {src.get('gpu')} (driver {src.get('driver')}, "
                  f"torch {src.get('torch')}, CUDA {src.get('cuda')}, cuDNN {src.get('cudnn')}, "
                  f"cuBLAS {src.get('cublas')}, NCCL {src.get('nccl')})")
    if not report["sources"]:
        md.append("- no GPU data found: emulated side only")
    md += ["", "```", *table(report["rows"]), "```", ""]
    for row in report["rows"]:
        for rk in row["ranks"]:
            k = rk.get("kernels")
            es = rk["emulated_step"]
            md.append(f"## {row['example']} rank {rk['rank']} ({row['gpu']})")
            md.append("")
            md.append(f"- emulation: rc {row['emulation']['returncode']}, {row['emulation']['wall_s']} s; "
                      f"kernels per step {es.get('kernels_per_step')}; BLAS calls in step "
                      f"{sum(es.get('blas_calls', {}).values())}; notes: {es.get('notes') or 'none'}")
            if row["emulation"].get("stderr_tail"):
                md += ["", "```", row["emulation"]["stderr_tail"][-1500:], "```"]
            if k:
                md.append(f"- kernels: {k['matched']}/{k['real_launches']} real launches matched "
                          f"({k['matched_by_name']} by name, {k['matched_by_blas_records']} by BLAS records of "
                          f"{k['blas_records']}, {k.get('matched_as_parts_of_blas_calls', 0)} as second kernels "
                          f"of those calls, {k['matched_by_coll_records']} by collectives)")
                for title, d in (("unmatched real kernels", k["unmatched_real"]),
                                 ("emulated only", k["emulated_only"])):
                    if d:
                        md.append(f"- {title}:")
                        md += [f"  - {c} × `{n[:200]}`" for n, c in list(d.items())[:25]]
                        if len(d) > 25:
                            md.append(f"  - ... {len(d) - 25} more names")
                if k.get("near_misses"):
                    md.append("- near misses (real vs emulated, from the first difference):")
                    for nm in k["near_misses"][:10]:
                        i = nm["first_difference"]
                        md.append(f"  - `{nm['real'][:60]}`... at {i}: real `...{nm['real'][max(0, i - 20):i + 60]}` "
                                  f"vs emulated `...{nm['emulated'][max(0, i - 20):i + 60]}`"
                                  + (" (emulated name ends there)" if i >= len(nm["emulated"]) else ""))
            md.append("")
    return "\n".join(md) + "\n"


def machine() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch
        tv = torch.__version__
    except ImportError:
        tv = "?"
    return {"host": platform.node(), "cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version(),
            "torch": tv}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, action="append",
                   help=f"campaign folder(s) (default: every folder under {DATA.relative_to(ROOT)})")
    p.add_argument("--only", default=None, help="comma-separated example names")
    p.add_argument("--gpu", default=None, help="catalog GPU to emulate when there is no GPU data "
                   "(default H100-SXM-80GB)")
    p.add_argument("--work", type=Path, default=None, help="keep traces here (default: a temporary folder)")
    p.add_argument("--timeout", type=float, default=900.0, help="per example, seconds")
    p.add_argument("--results", type=Path, default=RESULTS, help="where fidelity-<date>.json/.md go")
    p.add_argument("--no-write", action="store_true", help="print only, write no result files")
    a = p.parse_args()
    dirs = a.data or sorted(d for d in DATA.glob("*") if d.is_dir())
    sources = load_campaigns(dirs)
    only = set(a.only.split(",")) if a.only else None
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-fidelity-"))
    rows = []
    if not sources:
        print(f"no campaign data in {[str(d) for d in dirs] or DATA}: emulated side only", flush=True)
        gpu = a.gpu or "H100-SXM-80GB"
        for name in campaign.EXAMPLES:
            if (only and name not in only) or (not only and (campaign.EXAMPLES[name][2] > 1 or name in campaign.SIZES)):
                continue
            rows.append(evaluate(name, None, {}, gpu, work / gpu, a.timeout))
    for d, env, examples in sources:
        gpu = a.gpu or gpu_for(env)
        for name, entry in examples.items():
            if only and name not in only:
                continue
            rows.append(evaluate(name, entry, env, gpu, work / d.name, a.timeout))
    now = datetime.datetime.now(datetime.timezone.utc)
    report = {
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "command": shlex.join([sys.executable, *sys.argv]),
        "machine": machine(),
        "targets": {"memory_rel": MEMORY_TARGET, "kernel_fraction": KERNEL_TARGET},
        "sources": [{"dir": str(d.relative_to(ROOT)) if d.is_relative_to(ROOT) else str(d),
                     "gpu": env.get("gpu"), "driver": env.get("driver"), "torch": env.get("torch"),
                     "cuda": env.get("torch_cuda"), "cudnn": env.get("cudnn"),
                     "cublas": env.get("cublas_version"), "nccl": env.get("nccl")}
                    for d, env, _ in sources],
        "work": str(work),
        "rows": rows,
    }
    print("\n".join(table(rows)))
    if not a.no_write:
        a.results.mkdir(parents=True, exist_ok=True)
        stem = a.results / f"fidelity-{now.strftime('%Y-%m-%d')}"
        stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
        stem.with_suffix(".md").write_text(markdown(report))
        print(f"wrote {stem}.json and {stem}.md")
    ok = all(rk.get("kernels", {}).get("fraction", 1) is None or rk.get("kernels", {}).get("fraction", 1) >= KERNEL_TARGET
             for row in rows for rk in row["ranks"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
