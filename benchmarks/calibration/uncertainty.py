"""How wide a prediction's 90% interval is, from the calibration cases' errors.

    python -m benchmarks.calibration.uncertainty [--write]

The interval of ``maya predict`` (``step_time_low_s``, ``step_time_high_s``)
has two parts: what the method is known to miss, and what this emulation's
own steady steps disagree on.  The first is the 90th percentile of the
absolute step-time error over the calibration cases of
``benchmarks/results/step_accuracy.json`` (the examples at every measured
size, H100 and H200); the held-out suite never enters it, so its coverage
there (``benchmarks/held_out/accuracy.py``) says whether the width holds on
jobs nobody calibrated on.  ``--write`` stores it in
``predictor/uncertainty.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "benchmarks" / "results" / "step_accuracy.json"
TABLE = ROOT / "predictor" / "uncertainty.json"


def quantile(values: list[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def table() -> dict[str, object]:
    cases = json.loads(SOURCE.read_text())["cases"]
    errors = [abs(c["error"]) for c in cases if c.get("error") is not None]
    return {"_comment": "Written by python -m benchmarks.calibration.uncertainty --write from "
                        "benchmarks/results/step_accuracy.json: the 90th percentile of the calibration cases' "
                        "absolute step-time error.",
            "cases": len(errors), "method_q90": round(quantile(errors, 0.9), 4)}


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
