"""cuDNN RNN calls from an idle device, as the replay times them, against the RNN sweep's measured times.

    .venv/bin/python -m benchmarks.rnn_calls [--save benchmarks/results/rnn_calls.json]

Emulates ``benchmarks/campaigns/rnn_sweep.py --emulated`` (each
configuration's forward and backward once, between CUDA events, from an idle
device, as the sweep timed its ``*_idle_ms``) and replays it on each GPU that
``benchmarks/data/rnn_sweep/`` measured, three ways: as the replay did before
RNN calls were paced by their host (a call launches its work when it
returns, priced as any cuDNN call); paced, with the host cost fitted on every
measured configuration (``benchmarks.calibration.rnn_host``, what
``maya predict`` uses); and paced, with the host cost fitted on the
configurations of the other hidden sizes only (so that no configuration is
priced by a fit it was part of).  A configuration's time is from its first
event to the end of the last device work before the next, the forward's and
the backward's apart, against each run's measured ``fwd_idle_ms`` and
``bwd_idle_ms``; and the estimated device time alone against its
``fwd_ms`` and ``bwd_ms`` (the calls queued behind a spinning kernel).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.calibration.rnn_host import GPUS, cases, priced, runs
from maya.predict import Job, prepare
from maya.predictor.replay.host import HostModel, host_model
from maya.predictor.trace import Kind

ROOT = Path(__file__).resolve().parent.parent
CAMPAIGN = ROOT / "benchmarks" / "campaigns" / "rnn_sweep.py"


def emulate(scratch: Path) -> Path:
    out = scratch / "rnn_sweep"
    cmd = [sys.executable, "-m", "maya", "emulate", "--gpu", GPUS[0], "--gpus-per-node", "1", "--out", str(out), "--",
           sys.executable, str(CAMPAIGN), "--emulated"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"maya emulate of the sweep failed:\n{p.stderr[-2000:]}")
    return out


def timed_spans(job: Job) -> list[tuple[int, int, int]]:
    """Per configuration, the record indices of its three events: the last before its ``rnn_fwd``, the
    first after it, the first after its ``rnn_bwd_weights``."""
    events = np.flatnonzero(job.traces[0].records["kind"] == int(Kind.EVENT_RECORD))
    calls = job.rnn_calls[0]
    fwd = [i for i, (name, *_) in calls.items() if name == "rnn_fwd"]
    bwd = [i for i, (name, *_) in calls.items() if name == "rnn_bwd_weights"]
    return [(int(events[events < f].max()), int(events[events > f].min()), int(events[events > b].min()))
            for f, b in zip(sorted(fwd), sorted(bwd), strict=True)]


def call_times(job: Job, spans: list[tuple[int, int, int]], host: HostModel) -> npt.NDArray[np.float64]:
    """Per configuration (``spans``: :func:`timed_spans`), (forward, backward) ns: from an event to the end of
    the device work issued before the next event (the event's own time where the work ended before it was
    recorded)."""
    result = job.replay(host)[0]
    work = np.flatnonzero(~np.isnan(result.end))
    out = []
    for e0, e1, e2 in spans:
        fwd = work[(work > e0) & (work < e1)]
        bwd = work[(work > e1) & (work < e2)]
        t0 = result.issue[e0]
        t1 = max(float(result.end[fwd].max()), result.issue[e1])
        t2 = max(float(result.end[bwd].max()), result.issue[e2])
        out.append((t1 - t0, t2 - t1))
    return np.array(out)


def device_times(job: Job, spans: list[tuple[int, int, int]]) -> npt.NDArray[np.float64]:
    """Per configuration, the estimated device ns of its forward and its backward (both backward calls)."""
    durations = job.durations[0]
    return np.array([(sum(ns for i, ns in durations.items() if e0 < i < e1),
                      sum(ns for i, ns in durations.items() if e1 < i < e2)) for e0, e1, e2 in spans])


def errors(predicted: npt.NDArray[np.float64], measured: npt.NDArray[np.float64]) -> dict[str, float]:
    e = np.abs(predicted / measured - 1)
    return {"median_abs_error": float(np.median(e)), "p90_abs_error": float(np.percentile(e, 90))}


def evaluate(gpu: str, folder: Path) -> dict[str, Any]:
    job = prepare(folder, gpu)
    spans = timed_spans(job)
    files = runs(gpu)
    measured = {path: json.loads(path.read_text()) for path in files}
    configs = measured[files[0]]["cases"]
    if len(configs) != len(spans):
        raise SystemExit(f"{gpu}: {len(spans)} emulated configurations against {len(configs)} measured")
    host = host_model(gpu)
    fp32 = cases(files)
    hidden = np.array([c["hidden"] for c in configs])
    left_out = np.zeros((len(configs), 2))
    for h in sorted(set(hidden.tolist())):
        others = [c for c in fp32 if c["hidden"] != h]
        own = replace(host, rnn_call_ns={name: (v[0], v[1], v[2]) for name, v in priced(others).items()})
        left_out[hidden == h] = call_times(job, spans, own)[hidden == h]
    ways = {"launched at its end (before)": call_times(job, spans, replace(host, rnn_call_ns={})),
            "paced, host fitted on all": call_times(job, spans, host),
            "paced, host fitted without its hidden size": left_out}
    device = device_times(job, spans)
    report: dict[str, Any] = {"gpu": gpu, "configurations": len(configs), "runs": []}
    for path, run_data in measured.items():
        run: dict[str, Any] = {"run": path.name, "measured_on": run_data["gpu"]}
        for j, direction in enumerate(("fwd", "bwd")):
            idle = np.array([c[f"{direction}_idle_ms"] for c in run_data["cases"]]) * 1e6
            own = np.array([c[f"{direction}_ms"] for c in run_data["cases"]]) * 1e6
            run[direction] = {"device_estimate_vs_device_time": errors(device[:, j], own),
                              **{way: errors(t[:, j], idle) for way, t in ways.items()}}
        report["runs"].append(run)
    lstm_lm = [i for i, c in enumerate(configs) if (c["mode"], c["layers"], c["hidden"], c["batch"], c["seq"],
                                                    c["dtype"]) == ("lstm", 3, 1024, 64, 128, "fp32")]
    if lstm_lm:
        i = lstm_lm[0]
        report["lstm_1024x3_b64_s128_fp32_ms"] = {
            **{way: [round(float(v) / 1e6, 3) for v in t[i]] for way, t in ways.items()},
            "measured_idle": [[round(d["cases"][i][f"{k}_idle_ms"], 3) for k in ("fwd", "bwd")]
                              for d in measured.values()]}
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", type=Path, help="write the figures here as JSON")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = emulate(Path(scratch))
        for gpu in GPUS:
            if not runs(gpu):
                continue
            r = evaluate(gpu, folder)
            results.append(r)
            print(f"{gpu}: {r['configurations']} configurations, {len(r['runs'])} measured run(s); median / 90th "
                  "percentile of the absolute error")
            for run in r["runs"]:
                for direction in ("fwd", "bwd"):
                    d = run[direction]
                    figures = "; ".join(f"{way} {100 * v['median_abs_error']:.1f}% / {100 * v['p90_abs_error']:.1f}%"
                                        for way, v in d.items())
                    print(f"  {run['run']} {direction}: {figures}")
            if "lstm_1024x3_b64_s128_fp32_ms" in r:
                print(f"  3 x 1024 LSTM, batch 64, 128 steps, fp32 (forward, backward ms): "
                      f"{r['lstm_1024x3_b64_s128_fp32_ms']}")
        summary = {way: median(run[d][way]["median_abs_error"] for r in results for run in r["runs"]
                               for d in ("fwd", "bwd"))
                   for way in results[0]["runs"][0]["fwd"]}
        print("median over GPUs, runs and directions of the median absolute error: "
              + "; ".join(f"{way} {100 * v:.1f}%" for way, v in summary.items()))
    if args.save:
        args.save.write_text(json.dumps({"command": "python -m benchmarks.rnn_calls", "summary": summary,
                                         "gpus": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
