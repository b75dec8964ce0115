"""How much longer work runs beside a resident NCCL kernel, from profiled DDP steps.

    python -m benchmarks.calibration.sharing [--write]

In DDP, each rank's NCCL kernel is launched when its gradient bucket is
ready and stays on the GPU, spinning on its SMs, until its peer arrives and
the transfer ends; the backward pass runs beside it.  The two ranks of a
profiled step (``benchmarks/campaigns/gpu_fidelity_campaign.py --profile-step``, the
``timeline`` of each rank) run the same kernels in the same order, but one
rank's NCCL kernels wait longer than the other's, so the same kernel
overlaps a resident NCCL kernel on one rank and not (or less) on the other.
Per pair, x is the difference of the two overlapped shares of the kernel's
time and y the log of the ratio of its two durations; per kind of record
that the replay would have for the kernel (BLAS: cuBLAS's GEMMs, DNN:
cuDNN's, KERNEL: the rest), ``log(factor)`` is the duration-weighted least
squares slope of y on x through the origin: the factor by which a kernel's
fully overlapped time is longer.  Pairs shorter than 5 us are left out
(launch jitter).

Prints the factors per profiled configuration and pooled, saves them in
``benchmarks/results/nccl_sharing.json``; ``--write`` stores the pooled ones
in ``predictor/sharing.json`` (:mod:`maya.predictor.replay.sharing`), for the
compute capability of the profiled GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.fidelity import BLAS_KERNEL, DNN_KERNEL, NCCL_KERNEL
from maya import catalog
from maya.predictor.replay.sharing import FACTORS

ROOT = Path(__file__).resolve().parents[2]

PROFILES = sorted((ROOT / "benchmarks" / "data" / "gpu_fidelity").glob("*-ddp*"))
RESULT = ROOT / "benchmarks" / "results" / "nccl_sharing.json"
KINDS = ("BLAS", "DNN", "KERNEL")
SHORTEST_US = 5.0


def record_kind(name: str) -> str:
    """The record the replay has for a real kernel: NCCL, BLAS (cuBLAS), DNN (cuDNN) or KERNEL."""
    if NCCL_KERNEL.search(name):
        return "NCCL"
    if DNN_KERNEL.search(name):
        return "DNN"
    return "BLAS" if BLAS_KERNEL.search(name) else "KERNEL"


def overlapped(timeline: Sequence[Sequence[Any]], names: Sequence[str]) -> list[tuple[str, float, float]]:
    """Each non-NCCL kernel of one rank's timeline in order: (name, duration us, share of it that
    overlaps one of the rank's NCCL kernels)."""
    rows = [(names[int(i)], float(start), float(dur)) for i, _launch, start, dur, _stream in timeline]
    nccl = [(s, s + d) for n, s, d in rows if record_kind(n) == "NCCL"]
    out = []
    for n, s, d in rows:
        if record_kind(n) == "NCCL":
            continue
        shared = sum(max(0.0, min(s + d, b) - max(s, a)) for a, b in nccl)
        out.append((n, d, shared / d if d > 0 else 0.0))
    return out


def pairs(profile: dict[str, Any]) -> Iterable[tuple[str, float, float, float]]:
    """(record kind, weight, x, y) for each kernel of a two-rank profiled step, as the module says."""
    ranks = []
    for r in ("0", "1"):
        p = profile["profiles"][r]
        ranks.append(overlapped(p["timeline"], [k["name"] for k in p["kernels"]]))
    a, b = ranks
    if [n for n, _, _ in a] != [n for n, _, _ in b]:
        raise ValueError(f"{profile['example']}: the two ranks ran different kernels")
    for (name, da, oa), (_, db, ob) in zip(a, b, strict=True):
        if min(da, db) >= SHORTEST_US and oa != ob:
            yield record_kind(name), (da + db) / 2, oa - ob, math.log(da / db)


def fit(rows: Sequence[tuple[str, float, float, float]]) -> dict[str, dict[str, float]]:
    """Per record kind: the factor, the kernel pairs and the overlapped-share difference they span."""
    out = {}
    for kind in KINDS:
        sel = [(w, x, y) for k, w, x, y in rows if k == kind]
        sxx = sum(w * x * x for w, x, _ in sel)
        if sxx > 0:
            slope = sum(w * x * y for w, x, y in sel) / sxx
            out[kind] = {"factor": round(math.exp(slope), 3), "pairs": len(sel),
                         "weight_us": round(sum(w * abs(x) for w, x, _ in sel), 1)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help=f"store the pooled factors in {FACTORS.name}")
    args = p.parse_args()
    pooled: list[tuple[str, float, float, float]] = []
    per: dict[str, Any] = {}
    gpus: set[str] = set()
    for folder in PROFILES:
        gpus.add(catalog.lookup(folder.name.split("-ddp")[0]).name)
        for path in sorted(folder.glob("*.json")):
            data = json.loads(path.read_text())
            if len(data.get("profiles", {})) != 2 or "timeline" not in data["profiles"]["0"]:
                continue
            rows = list(pairs(data))
            pooled += rows
            per[f"{folder.name}/{data['example']}"] = fit(rows)
            print(f"{folder.name}/{data['example']}: " + ", ".join(
                f"{k} x{v['factor']} ({v['pairs']} pairs)" for k, v in per[f"{folder.name}/{data['example']}"].items()))
    if not pooled:
        sys.exit("no two-rank profiled step with a timeline under benchmarks/data/gpu_fidelity/*-ddp*")
    factors = fit(pooled)
    print("pooled: " + ", ".join(f"{k} x{v['factor']} ({v['pairs']} pairs)" for k, v in factors.items()))
    result = {"command": "python -m benchmarks.calibration.sharing", "gpus": sorted(gpus), "pooled": factors,
              "configurations": per}
    RESULT.write_text(json.dumps(result, indent=1) + "\n")
    if args.write:
        cc = {".".join(map(str, catalog.lookup(g).compute_capability)) for g in gpus}
        table = json.loads(FACTORS.read_text()) if FACTORS.is_file() else {}
        table.setdefault("by_compute_capability", {})
        for c in sorted(cc):
            table["by_compute_capability"][c] = {
                "factors": {k: v["factor"] for k, v in factors.items()},
                "source": f"benchmarks/calibration/sharing.py over {len(per)} profiled DDP steps on {', '.join(sorted(gpus))}"}
        FACTORS.write_text(json.dumps(table, indent=1) + "\n")
        print(f"wrote {FACTORS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
