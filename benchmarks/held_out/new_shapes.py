"""How often a held-out record's steady steps run a GEMM of a shape new to the process, and what
that costs the GPU server's host.

    python -m benchmarks.held_out.new_shapes [--emulations DIR]

A cuBLAS GEMM of a shape the process has not run before costs the host 0.1-0.2 ms more than a
seen one (``benchmarks/data/gemm_first_shape/``).  A mixture of experts sizes each expert's GEMMs
by its token count, which the real router changes every step; emulation draws a balanced router's
counts (``maya/_hook/_maya_device_values.py``), and the replay charges each GEMM shape new to the
emulated rank (``maya.predictor.replay.host.first_gemm_shapes``).  For every record of
``benchmarks/data/held_out/records/`` (record mode on a GPU server, diagnosis only, never fitted
on), this reads the BLAS calls of the steady steps (the replay's step finder) and splits them by
whether the process had called that signature before: calls per step, the median host time
inside the call, the host time per step that the new ones take over seen ones (their count
times the difference of the medians), and what the replay charges them (an emulation's is charged).  ``--emulations DIR`` (a ``benchmarks.held_out.accuracy
--work`` folder) reads each workload's first emulation (``DIR/<workload>/run0/rank0.mayatrace``)
the same way.  Beside each, the H100 prediction's shortfall from
``benchmarks/results/held_out_accuracy.json``.  Saves
``benchmarks/results/held_out_new_shapes.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.archives import extract_all
from benchmarks.held_out.suite import BY_NAME
from maya.predictor.replay.host import first_gemm_shapes, host_model, steady_step_delays
from maya.predictor.trace.format import Kind
from maya.predictor.trace.reader import Trace, read_trace

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "benchmarks" / "data" / "held_out" / "records"
ACCURACY = ROOT / "benchmarks" / "results" / "held_out_accuracy.json"
RESULTS = ROOT / "benchmarks" / "results" / "held_out_new_shapes.json"
GPU = "H100-SXM-80GB"


def new_shape_calls(trace: Trace) -> dict[str, Any] | None:
    """The steady steps' BLAS calls, split by whether the process had run their signature before
    (warm-up included; ``maya.predictor.replay.host.first_gemm_shapes``): per step, the median host time inside the call, and what the replay charges the new
    ones on an H100.  None: no steady steps."""
    order, spans, _ = steady_step_delays(trace)
    if not spans:
        return None
    recs = trace.records
    first = first_gemm_shapes(trace)
    steady = order[spans[0][0]:spans[-1][1]]
    blas = steady[recs["kind"][steady] == int(Kind.BLAS)]
    new_ns = recs["dur_ns"][blas[first[blas] > 0]].astype(np.float64)
    seen_ns = recs["dur_ns"][blas[first[blas] == 0]].astype(np.float64)
    steps = len(spans)
    charged = host_model(GPU).new_shape_costs(first)[steady].sum() / steps
    new_med = float(np.median(new_ns)) if len(new_ns) else None
    seen_med = float(np.median(seen_ns)) if len(seen_ns) else None
    extra = len(new_ns) / steps * (new_med - seen_med) if new_med is not None and seen_med is not None else 0.0
    return {"steady_steps": steps, "calls_per_step": (len(new_ns) + len(seen_ns)) / steps,
            "new_per_step": len(new_ns) / steps, "new_call_us": None if new_med is None else new_med / 1e3,
            "seen_call_us": None if seen_med is None else seen_med / 1e3, "new_extra_ms_per_step": extra / 1e6,
            "charged_ms_per_step": float(charged) / 1e6}


def shortfalls() -> dict[str, float]:
    """Per workload: measured minus predicted step time on one H100, ms (the committed held-out run)."""
    if not ACCURACY.is_file():
        return {}
    rows = json.loads(ACCURACY.read_text()).get("cases", [])
    return {r["workload"]: 1e3 * (r["measured_s"] - r["predicted_s"]) for r in rows
            if r.get("gpu") == GPU and r.get("gpus", 1) == 1 and r.get("predicted_s") and r.get("measured_s")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=Path, default=RECORDS, help="folder of <machine>/<workload>.tar.xz records")
    ap.add_argument("--emulations", type=Path, default=None, help="a benchmarks.held_out.accuracy --work folder")
    ap.add_argument("--save", type=Path, default=RESULTS)
    args = ap.parse_args()
    gaps = shortfalls()
    out: list[dict[str, Any]] = []
    print(f"{'workload':22} {'machine':22} {'source':9} {'BLAS/step':>9} {'new/step':>8} {'new us':>7} "
          f"{'seen us':>7} {'new ms/step':>11} {'charged':>8} {'predicted short by':>18}")
    archives = sorted({(p.parent, p.name.partition(".tar.xz")[0]) for p in args.records.glob("*/*.tar.xz*")})
    for folder, name in archives:  # a record larger than a part comes as NAME.tar.xz.00, .01...
        machine = folder.name
        if name not in BY_NAME or BY_NAME[name].gpus > 1:  # DDP: no GEMM of theirs is sized by device values
            continue
        with tempfile.TemporaryDirectory() as tmp:
            extract_all(folder, Path(tmp), (f"{name}.tar.xz",))
            found = new_shape_calls(read_trace(Path(tmp) / name / "rank0.mayatrace"))
        rows = [("record", machine, found)]
        emulated = args.emulations / name / "run0" / "rank0.mayatrace" if args.emulations else None
        if emulated and emulated.is_file() and not any(o["workload"] == name and o["source"] == "emulation"
                                                       for o in out):
            rows.append(("emulation", "-", new_shape_calls(read_trace(emulated))))
        for source, where, f in rows:
            if f is None:
                continue
            out.append({"workload": name, "machine": where, "source": source, **f,
                        "predicted_short_ms": gaps.get(name)})
            gap = gaps.get(name)
            print(f"{name:22} {where:22} {source:9} {f['calls_per_step']:9.0f} {f['new_per_step']:8.1f} "
                  f"{f['new_call_us'] or 0:7.1f} {f['seen_call_us'] or 0:7.1f} {f['new_extra_ms_per_step']:11.1f} "
                  f"{f['charged_ms_per_step']:8.1f} "
                  f"{'' if gap is None else f'{gap:.1f} ms':>18}")
    args.save.write_text(json.dumps({"records": str(args.records.relative_to(ROOT)) if args.records.is_relative_to(ROOT)
                                     else str(args.records), "rows": out}, indent=1) + "\n")
    print(f"saved {args.save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
