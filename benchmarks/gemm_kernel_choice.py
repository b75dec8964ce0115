"""How much of the GEMM estimator's error is cuBLAS's choice of kernel, and how much a classifier recovers.

    python -m benchmarks.gemm_kernel_choice [--gpu H100-SXM-80GB] [--work DIR]

Emulation sees a cuBLAS call's shapes, types and layout, not the kernel cuBLAS picks for it
(tile, stages, split-K), which only a real GPU's heuristics decide; record mode keeps the
kernels' names.  From the recorded GEMM sweeps of a profiling campaign
(``benchmarks/data/profile_campaign/<GPU>/``, parts ``gemm`` and ``gemm-grid``), one point per
distinct call (the median of its repeats' device busy time), split as ``maya estimators
evaluate`` splits signatures, this fits the GEMM family's extra trees on the family's features:

- ``shapes``: the features alone (what ``maya predict`` has);
- ``kernel known``: plus the kernel's tile, stages, warps, split-K and library family, read from
  the recorded name (an oracle: the best a perfect guess of cuBLAS's choice could do);
- ``kernel guessed``: a classifier of that kernel description from the shape features, its guess
  used where its confidence is at least ``--confidence``, the shapes-only model elsewhere.

It also reports the points' own noise: the median difference of the means of two halves of a
point's repeats.  Saves benchmarks/results/gemm_kernel_choice-<GPU>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.archives import extract_all
from maya import catalog
from maya.predictor.estimate.evaluation import TEST_FRACTION
from maya.predictor.estimate.features import matrix
from maya.predictor.estimate.fit import SEED, hash_fraction, regressor, roofline_times
from maya.predictor.estimate.work import family
from maya.predictor.trace import read_trace
from maya.predictor.trace.ops import Op, device_ops, measured

ROOT = Path(__file__).resolve().parent.parent
PARTS = ("sweep-gemm", "sweep-gemm-grid")
KERNEL_FEATURES = ("n_kernels", "memset", "reduce", "sm90", "cutlass", "simt", "split_k", "tile_m", "tile_n",
                   "tile_k", "stages", "warps")
_TILE = (re.compile(r"tilesize(\d+)x(\d+)x(\d+)"), re.compile(r"_(\d+)x(\d+)_(\d+)x\d+_"), re.compile(r"_(\d+)x(\d+)_"))


def kernel_description(kernels: tuple[str, ...]) -> dict[str, float]:
    """What a cuBLAS call's recorded kernel names say about the choice: the main kernel's library
    family, tile (log2), stages, warps, split-K, and the helpers around it (memset, reduction)."""
    main = [k for k in kernels if k != "memset" and "reduce" not in k.lower()] or list(kernels) or [""]
    k = max(main, key=len)
    f = {"n_kernels": float(len(kernels)), "memset": float("memset" in kernels),
         "reduce": float(any("reduce" in x.lower() for x in kernels)), "sm90": float("sm90" in k),
         "cutlass": float("cutlass" in k), "simt": float("ffma" in k or "simt" in k),
         "split_k": float("segment_k_on" in k or "splitK" in k or "split_k" in k)}
    m = next((m for m in (p.search(k) for p in _TILE) if m), None)
    f["tile_m"] = math.log2(int(m.group(1))) if m else -1.0
    f["tile_n"] = math.log2(int(m.group(2))) if m else -1.0
    f["tile_k"] = math.log2(int(m.group(3))) if m and m.lastindex and m.lastindex >= 3 else -1.0
    st = re.search(r"stage(\d+)", k)
    f["stages"] = float(st.group(1)) if st else -1.0
    wg = re.search(r"(?:warpsize|warpgroupsize)(\d+)x(\d+)x(\d+)", k)
    f["warps"] = float(int(wg.group(1)) * int(wg.group(2))) if wg else -1.0
    return f


def points(folders: list[Path]) -> tuple[list[Op], list[list[float]], list[tuple[str, ...]]]:
    """Each distinct GEMM call of the recorded traces: its op, its repeats' busy times, its kernels."""
    busy: dict[Any, list[float]] = defaultdict(list)
    first: dict[Any, tuple[Op, tuple[str, ...]]] = {}
    for folder in folders:
        trace = read_trace(folder / "rank0.mayatrace")
        times = measured(trace)
        for i, op in device_ops(trace):
            if family(op) == "gemm" and i in times and times[i].busy_ns > 0:
                sig = op.signature()
                busy[sig].append(float(times[i].busy_ns))
                first.setdefault(sig, (op, times[i].kernels))
    sigs = list(first)
    return [first[s][0] for s in sigs], [busy[s] for s in sigs], [first[s][1] for s in sigs]


def errors(pred: npt.NDArray[np.float64], true: npt.NDArray[np.float64]) -> dict[str, float]:
    ape = np.abs(pred - true) / true
    return {"median": float(np.median(ape)), "p90": float(np.percentile(ape, 90)),
            "time_weighted": float(np.sum(np.abs(pred - true)) / np.sum(true))}


def main() -> int:
    from sklearn.ensemble import ExtraTreesClassifier  # type: ignore[import-untyped]

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="H100-SXM-80GB")
    ap.add_argument("--work", type=Path, default=None, help="where the archives are extracted")
    ap.add_argument("--confidence", type=float, default=0.5, help="classifier confidence to use its guess")
    a = ap.parse_args()
    gpu = catalog.lookup(a.gpu)
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-gemm-kernels-"))
    extract_all(ROOT / "benchmarks" / "data" / "profile_campaign" / gpu.name, work, ("sweeps",))  # the GEMM parts' bundles
    folders = [work / p for p in PARTS if (work / p / "rank0.mayatrace").is_file()]
    if not folders:
        print(f"no recorded GEMM sweep for {gpu.name}", file=sys.stderr)
        return 1
    ops, repeats, kernels = points(folders)
    ns = np.array([float(np.median(r)) for r in repeats])
    test = np.array([hash_fraction(op.signature(), SEED) < TEST_FRACTION for op in ops])
    halves = [abs(np.mean(r[:len(r) // 2]) - np.mean(r[len(r) // 2:])) / np.median(r) for r in repeats if len(r) >= 4]
    base = np.log(roofline_times(ops, gpu) + float(np.percentile(ns, 5)))  # the ratio target, as the fit's
    y = np.log(ns) - base
    shapes = matrix(ops, gpu, "gemm")
    desc = [kernel_description(k) for k in kernels]
    known = np.array([[d[n] for n in KERNEL_FEATURES] for d in desc])
    described, labels = np.unique(known, axis=0, return_inverse=True)
    labels = labels.reshape(-1)

    def trees() -> Any:  # the estimators' own gemm model (the candidate they choose)
        return regressor("et", int((~test).sum()))

    true = ns[test]
    plain = np.exp(trees().fit(shapes[~test], y[~test]).predict(shapes[test]) + base[test])
    with_kernel = trees().fit(np.hstack([shapes, known])[~test], y[~test])
    oracle = np.exp(with_kernel.predict(np.hstack([shapes, known])[test]) + base[test])
    clf = ExtraTreesClassifier(n_estimators=12, max_features=1.0, min_samples_leaf=3, n_jobs=2, random_state=SEED)
    clf.fit(shapes[~test], labels[~test])
    proba = clf.predict_proba(shapes[test])
    guess = clf.classes_[proba.argmax(1)]
    sure = proba.max(1) >= a.confidence
    guessed = np.exp(with_kernel.predict(np.hstack([shapes[test], described[guess]])) + base[test])
    out = {
        "gpu": gpu.name, "parts": [f.name for f in folders], "points": len(ops), "test_points": int(test.sum()),
        "kernel_descriptions": len(described),
        "repeat_halves_median": float(np.median(halves)),
        "shapes": errors(plain, true), "kernel_known": errors(oracle, true),
        "classifier_accuracy": float(np.mean(guess == labels[test])),
        "confidence": a.confidence, "confident_share": float(np.mean(sure)),
        "classifier_accuracy_confident": float(np.mean(guess[sure] == labels[test][sure])),
        "kernel_guessed": errors(np.where(sure, guessed, plain), true),
    }
    print(f"{gpu.name}: {out['points']} GEMM calls of {', '.join(out['parts'])} ({out['test_points']} test), "
          f"{out['kernel_descriptions']} kernel descriptions; repeats' halves differ {100 * out['repeat_halves_median']:.1f}%")
    for key in ("shapes", "kernel_known", "kernel_guessed"):
        e = out[key]
        print(f"  {key:15} median {100 * e['median']:5.2f}%  p90 {100 * e['p90']:5.2f}%  "
              f"time-weighted {100 * e['time_weighted']:5.2f}%")
    print(f"  classifier: right on {100 * out['classifier_accuracy']:.0f}% of test calls; confident "
          f"(>= {a.confidence}) on {100 * out['confident_share']:.0f}%, right there on "
          f"{100 * out['classifier_accuracy_confident']:.0f}%")
    dest = ROOT / "benchmarks" / "results" / f"gemm_kernel_choice-{gpu.name}.json"
    dest.write_text(json.dumps(out, indent=1) + "\n")
    print(f"saved {dest.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
