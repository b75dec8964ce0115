"""torch.cat's kernels, estimated from what emulation reads of their inputs, against their measured times.

    .venv/bin/python -m benchmarks.cat_estimates [--save benchmarks/results/cat_estimates.json]

Emulates ``benchmarks/campaigns/cat_kernels.py --launch`` (each case's cat
once) on each GPU that ``benchmarks/data/cat_kernels/<GPU>.json`` measured,
pairs the emulated launches with the measured kernels in order, and prints
each launch's estimate and error, the median absolute error by form
(vectorised, scalar, strided), and the rates the scalar and strided forms
copied at (elements a second, medians over launches of a million elements
and more): the figures ``maya.predictor.estimate.work.CAT_ELEMENTS_PER_S``
holds, whose launches are therefore no test of those two forms; the
vectorised form's price is the copy family's roofline, fitted on nothing here.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

from maya.predictor import estimate
from maya.predictor.estimate.work import CAT_ELEMENTS_PER_S, cat_form, cat_inputs
from maya.predictor.trace import Kind, read_trace
from maya.predictor.trace.ops import device_ops

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "cat_kernels"
CAMPAIGN = ROOT / "benchmarks" / "campaigns" / "cat_kernels.py"
LARGE = 1_000_000  # elements: launches this large are bound by their copying, not by starting


def emulated_cats(gpu: str, scratch: Path) -> list:
    out = scratch / gpu
    cmd = [sys.executable, "-m", "maya", "emulate", "--gpu", gpu, "--gpus-per-node", "1", "--out", str(out), "--",
           sys.executable, str(CAMPAIGN), "--launch"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"maya emulate of the campaign failed:\n{p.stderr[-2000:]}")
    trace = read_trace(out / "rank0.mayatrace")
    return [op for _, op in device_ops(trace) if op.kind == int(Kind.KERNEL) and cat_inputs(op) is not None]


def evaluate(data: Path, scratch: Path) -> dict:
    measured = json.loads(data.read_text())
    gpu = data.stem
    rows = [(c["case"], ns) for c in measured["cases"] for ns in c["kernel_ns"]]
    ops = emulated_cats(gpu, scratch)
    if len(ops) != len(rows):
        raise SystemExit(f"{gpu}: {len(ops)} emulated cat launches against {len(rows)} measured kernels")
    est = estimate.load(gpu)
    launches = []
    for (case, ns), op, e in zip(rows, ops, est.estimate_many(ops), strict=True):
        cat = cat_inputs(op)
        assert cat is not None
        launches.append({"case": case, "form": cat_form(op), "elements": cat.elements, "inputs": cat.inputs,
                         "element_bytes": cat.element_bytes, "measured_ns": ns, "estimated_ns": e.ns,
                         "error": e.ns / ns - 1})
    forms = {}
    for form in ("vectorized", "scalar", "strided"):
        mine = [x for x in launches if x["form"] == form]
        large = [x["elements"] / x["measured_ns"] * 1e9 for x in mine if x["elements"] >= LARGE]
        forms[form] = {"launches": len(mine), "median_abs_error": median(abs(x["error"]) for x in mine) if mine else None,
                       "max_abs_error": max(abs(x["error"]) for x in mine) if mine else None,
                       "measured_elements_per_s": median(large) if large else None,
                       "priced_elements_per_s": CAT_ELEMENTS_PER_S.get(form)}
    return {"gpu": gpu, "measured_on": measured["gpu"], "torch": measured["torch"], "launches": launches,
            "forms": forms, "median_abs_error": median(abs(x["error"]) for x in launches)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", type=Path, help="write the figures here as JSON")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        for data in sorted(DATA.glob("*.json")):
            r = evaluate(data, Path(scratch))
            results.append(r)
            print(f"{r['gpu']} (measured on {r['measured_on']}, torch {r['torch']}): {len(r['launches'])} launches")
            for x in r["launches"]:
                print(f"  {x['case']:20} {x['form']:10} {x['elements']:>11} elements x{x['inputs']:<4} "
                      f"measured {x['measured_ns'] / 1e3:8.1f} us  estimated {x['estimated_ns'] / 1e3:8.1f} us "
                      f"{100 * x['error']:+7.1f}%")
            for form, f in r["forms"].items():
                rate = f"{f['measured_elements_per_s'] / 1e9:.0f} G elements/s" if f["measured_elements_per_s"] else "-"
                priced = f", priced at {f['priced_elements_per_s'] / 1e9:.0f}" if f["priced_elements_per_s"] else ""
                print(f"  {form:10} {f['launches']:3} launches: median abs error {100 * f['median_abs_error']:.1f}%, "
                      f"max {100 * f['max_abs_error']:.1f}%; large launches copied {rate}{priced}")
            print(f"  all: median abs error {100 * r['median_abs_error']:.1f}%")
    if args.save:
        args.save.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
