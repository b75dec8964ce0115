"""How much one emulation's host delays differ from the next on this machine: the floor under
the error of a host-bound prediction.

    python -m benchmarks.emulation_noise [--runs 10] [--configs cnn-w32,gpt-s512] [--work DIR]

Emulates each configuration ``--runs`` times (interleaved, back to back) for the H100 and reads
what the replay steadies the host delays to: the quickest steady step's emulated delays
(:func:`maya.predictor.replay.host.steady_step_delays`).  It prints, per configuration, their median,
coefficient of variation and worst run over the median, the spread of medians of three
(what ``maya predict --repeat 3`` takes), and how far the emulation's own
``maya.cpu_probe`` reading and the emulation just before it (lag-1 autocorrelation, each run
over its configuration's median) foretell a run: a probe that tracked the noise could correct
for it, and neighbours alike in time would mean the machine drifts over minutes; and how the
delays follow the Python yardstick sampled in the steady steps (``steady_pace_ns``; the slope of
log delays on log reading, where the readings differ by a tenth or more: the emulating CPU's slow
phases, ``maya/_hook/_maya_pace.py``).  It also
predicts each run as ``maya predict --repeat 1`` does and reads how much the step follows its
host (``sensitivity.host``): the spread of those predictions against that sensitivity is what
sets ``HOST_SENSITIVE`` in ``maya/predict.py``, above which ``maya predict`` emulates again.  Saves benchmarks/results/emulation_noise.json (``--save``: elsewhere; that file feeds the
interval table, ``benchmarks/calibration/uncertainty.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.step_truth import emulate, named
from maya.predict import predict_folder, rank_traces
from maya.predictor.replay.host import steady_step_delays

ROOT = Path(__file__).resolve().parent.parent

GPU = "H100-SXM-80GB"
RESULTS = ROOT / "benchmarks" / "results" / "emulation_noise.json"


def summarise(runs: list[dict], names: list[str]) -> dict[str, dict[str, Any]]:
    """Per configuration: the quickest steps' median, CV, worst over median, the range of the
    medians of consecutive triples (over the median), and their correlation with the probe."""
    out = {}
    for name in names:
        q = np.array([r["quickest_ms"] for r in runs if r["name"] == name])
        probes = np.array([r["probe_ns"] or np.nan for r in runs if r["name"] == name])
        triples = [float(np.median(q[i:i + 3])) for i in range(0, len(q) - 2, 3)]
        m = float(np.median(q))
        step = [r["predicted_ms"] for r in runs if r["name"] == name]
        pace = np.array([r.get("steady_pace_ns") or np.nan for r in runs if r["name"] == name], dtype=float)
        read = np.isfinite(pace)
        slope = (float(np.polyfit(np.log(pace[read]), np.log(q[read]), 1)[0])
                 if read.sum() >= 3 and np.ptp(np.log(pace[read])) > 0.1 else None)
        out[name] = {"runs": len(q), "median_ms": m, "cv": float(q.std() / q.mean()),
                     "pace_elasticity": slope,
                     "predicted_spread": (max(step) - min(step)) / float(np.median(step)),
                     "host_sensitivity": [r["host_sensitivity"] for r in runs if r["name"] == name],
                     "worst_over_median": float(q.max() / m),
                     "median_of_3_range": (max(triples) - min(triples)) / m if triples else None,
                     "probe_correlation": float(np.corrcoef(q, probes)[0, 1]) if np.isfinite(probes).all() else None}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="emulations per configuration (default %(default)s)")
    ap.add_argument("--configs", default="cnn-w32,gpt-s512", help="measured configurations (default %(default)s)")
    ap.add_argument("--work", type=Path, default=None, help="emulations kept here (reused when present)")
    ap.add_argument("--save", type=Path, default=RESULTS,
                    help="results file (default %(default)s, which maya predict's interval table reads)")
    a = ap.parse_args()
    names = a.configs.split(",")
    known = named(GPU, names)
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-emulation-noise-"))
    runs = []
    for k in range(a.runs):
        for name in names:
            t0 = time.time()
            folder = emulate(known[name].argv, GPU, 1, work / name / f"run{k}")
            probe_ns = json.loads((folder / "summary.json").read_text()).get("host_probe_ns")
            totals = steady_step_delays(rank_traces(folder)[0])[2]
            p = predict_folder(folder, GPU)
            runs.append({"name": name, "run": k, "started": t0, "probe_ns": probe_ns,
                         "quickest_ms": min(totals) / 1e6, "steps_ms": [x / 1e6 for x in totals],
                         "predicted_ms": p.step_time_s * 1e3, "host_sensitivity": p.sensitivity["host"],
                         "steady_pace_ns": p.steady_pace_ns[0] if p.steady_pace_ns else 0})
            print(f"{name:10s} run {k:2d}  quickest steady step {runs[-1]['quickest_ms']:6.2f} ms of delays  "
                  f"probe {probe_ns or float('nan'):7.1f} ns  yardstick {runs[-1]['steady_pace_ns']:7d} ns  "
                  f"predicted {p.step_time_s * 1e3:6.2f} ms, follows its host {p.sensitivity['host']:.0%}", flush=True)
    summary = summarise(runs, names)
    typical = {n: s["median_ms"] for n, s in summary.items()}
    seq = np.array([r["quickest_ms"] / typical[r["name"]] for r in runs])
    lag1 = float(np.corrcoef(seq[:-1], seq[1:])[0, 1]) if len(seq) > 2 else None
    for name, s in summary.items():
        print(f"{name:10s} median {s['median_ms']:6.2f} ms  CV {s['cv']:.1%}  worst {s['worst_over_median']:.2f}x  "
              f"medians of 3 within {s['median_of_3_range'] or 0:.1%}  probe correlation "
              f"{s['probe_correlation'] if s['probe_correlation'] is not None else float('nan'):+.2f}  "
              f"predictions spread {s['predicted_spread']:.1%}, following the host "
              f"{min(s['host_sensitivity']):.0%}-{max(s['host_sensitivity']):.0%}; delays over the yardstick's "
              f"reading, log-log slope {s['pace_elasticity'] if s['pace_elasticity'] is not None else float('nan'):.2f}")
    print(f"lag-1 autocorrelation of consecutive emulations: {lag1:+.2f}" if lag1 is not None else "")
    a.save.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv), "gpu": GPU,
                                   "summary": summary, "lag1_autocorrelation": lag1, "runs": runs}, indent=1) + "\n")
    print(f"saved {a.save}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
