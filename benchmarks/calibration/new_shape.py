"""The host cost of a GEMM shape new to the process, from its measurements on GPU servers.

    python -m benchmarks.calibration.new_shape [--write]

``benchmarks/campaigns/gemm_first_shape.py`` times, on a GPU server, the host's time in torch for the first
call of each of many fresh row counts of a linear layer's GEMMs (four forms, bf16 and fp32) against a call
of a row count already run (``benchmarks/data/gemm_first_shape/``, one file per machine and size).  A
case's cost is the median of its later half of first calls (the first few dozen new shapes of the
backward's input gradient cost about 2 ms each once per process, paid in a job's first steps) less the
median seen call; a precision's is the median over its cases of every file of the GPU (the files named
after it; a GPU no server of was measured takes every file's).  ``--write`` puts them into
``predictor/host_calibration.json`` as ``new_gemm_shape_ns`` of every calibrated GPU (as
``benchmarks.calibration.host`` does when it recalibrates).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import median

from benchmarks.calibration import set_host_values
from maya.predictor.replay.host import NEW_SHAPE_PRECISIONS

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data" / "gemm_first_shape"
PRECISION = {"bfloat16": NEW_SHAPE_PRECISIONS[0], "float16": NEW_SHAPE_PRECISIONS[0],
             "float32": NEW_SHAPE_PRECISIONS[1]}
GPUS = ("H100-SXM-80GB", "H200-SXM-141GB")


def case_costs_us(measured: dict) -> dict[str, float]:
    """Per case (``form/dtype``) of one file: the later half of its first calls' median less its seen calls'."""
    out = {}
    for case, c in measured["cases"].items():
        first = c["first_us"]
        out[case] = median(first[len(first) // 2:]) - median(c["seen_us"])
    return out


def measurements(gpu: str = "") -> list[Path]:
    """The measured files, one per machine and size: ``gpu``'s (every file where none is), or every one."""
    every = sorted(DATA.glob("*.json"))
    return [p for p in every if p.name.startswith(f"{gpu}-")] or every


def new_shape_ns(files: Sequence[Path] | None = None) -> dict[str, float]:
    """Per precision: the median over every file's cases of that precision (default: every measurement), ns."""
    by_precision: dict[str, list[float]] = {}
    for path in measurements() if files is None else files:
        for case, us in case_costs_us(json.loads(path.read_text())).items():
            by_precision.setdefault(PRECISION[case.split("/")[1]], []).append(us)
    return {p: round(median(v) * 1e3, -2) for p, v in by_precision.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the costs into predictor/host_calibration.json")
    a = ap.parse_args()
    files = measurements()
    for path in files:
        costs = case_costs_us(json.loads(path.read_text()))
        print(f"{path.name:40s} " + "  ".join(f"{case} {us:6.0f} us" for case, us in costs.items()))
    costs = {gpu: new_shape_ns(measurements(gpu)) for gpu in GPUS}
    for gpu, ns in costs.items():
        print(f"{gpu}: new GEMM shape, host ns over a seen one: " + ", ".join(f"{p} {v:.0f}" for p, v in ns.items()))
    if a.write:
        set_host_values("new_gemm_shape_ns", costs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
