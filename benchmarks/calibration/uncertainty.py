"""How wide a prediction's 90% interval is, from the calibration cases' errors.

    python -m benchmarks.calibration.uncertainty [--write]

The interval of ``maya predict`` (``step_time_low_s``, ``step_time_high_s``)
adds up (in quadrature) what the method misses, what a job unlike the
calibration cases may add, and what the job's own steady steps and
emulations disagree on.  Each part is a 90th percentile of absolute errors
measured on the calibration side, never on the held-out suite, whose
coverage (``benchmarks/held_out/accuracy.py``) then says whether the widths
hold on jobs nobody calibrated on:

- ``method_q90``: the step-time error over the calibration cases of
  ``benchmarks/results/step_accuracy.json`` (the examples at every measured
  size, H100 and H200).
- ``host_q90`` (per GPU): the host model's error on each example size with
  the factors fitted without its model (``benchmarks/results/host_calibration.json``);
  ``maya predict`` weighs it by how much the step follows the host.
- ``kernel_q90``: the error of a whole model's summed kernel time with the
  estimators fitted without that model (``benchmarks/results/kernel_sum-*.json``);
  weighed by how much the step follows the kernels whose shape no profile measured.
- ``rnn_host_q90``: the error of a cuDNN RNN call's fitted host time on the
  RNN sweep's configurations of a hidden size left out of the fit
  (``benchmarks.calibration.rnn_host``); weighed by how much the step follows
  its RNN calls' host time.
- ``emulation_q90``: how far one emulation's steadied host delays fall from
  the median of several of the same configuration
  (``benchmarks/results/emulation_noise.json``); weighed by how much the step
  follows its host, for a prediction from one emulation.

``--write`` stores them in ``predictor/uncertainty.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import median

from benchmarks.calibration.rnn_host import GPUS, left_out_errors

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
SOURCE = RESULTS / "step_accuracy.json"
TABLE = ROOT / "predictor" / "uncertainty.json"


def quantile(values: list[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def q90(errors: list[float]) -> float:
    return round(quantile([abs(e) for e in errors], 0.9), 4)


def table() -> dict[str, object]:
    cases = json.loads(SOURCE.read_text())["cases"]
    host = json.loads((RESULTS / "host_calibration.json").read_text())["machines"]
    kernel_sums = [m["error"] for path in sorted(RESULTS.glob("kernel_sum-*.json"))
                   for m in json.loads(path.read_text())["models"]]
    noise: dict[str, list[float]] = {}  # one emulation's quickest steady step's host delays, by configuration
    for run in json.loads((RESULTS / "emulation_noise.json").read_text())["runs"]:
        noise.setdefault(run["name"], []).append(run["quickest_ms"])
    return {"_comment": "Written by python -m benchmarks.calibration.uncertainty --write: 90th percentiles of "
                        "absolute errors on the calibration side (see that module's docstring).",
            "cases": len(cases), "method_q90": q90([c["error"] for c in cases if c.get("error") is not None]),
            "host_q90": {gpu: q90([c["error"] for c in m["configs"]]) for gpu, m in sorted(host.items())},
            "kernel_models": len(kernel_sums), "kernel_q90": q90(kernel_sums),
            "rnn_host_q90": q90([e for gpu in GPUS for e in left_out_errors(gpu)]),
            "emulations": sum(len(v) for v in noise.values()), "emulation_q90": q90(
                [x / median(v) - 1 for v in noise.values() for x in v])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"store it in {TABLE.relative_to(ROOT)}")
    args = ap.parse_args()
    t = table()
    print(json.dumps(t, indent=1))
    if args.write:
        TABLE.write_text(json.dumps(t, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
