"""The server's host time of a cuDNN RNN call, fitted on the RNN sweep.

    python -m benchmarks.calibration.rnn_host [--write]

cuDNN launches an RNN's per-step kernels (three or so for each time step of
each layer) from the calling thread, so a call holds the server's host for
milliseconds, where the emulated library returns at once.  The sweep
(``benchmarks/campaigns/rnn_sweep.py``, one file per run under
``benchmarks/data/rnn_sweep/<GPU>*.json``) timed each call's host on GPU
servers; per GPU and direction this fits

    host ns = per call + per layer x layers + per step x layers x steps

by least squares on the logarithms over every run's fp32 calls of that GPU.
Only fp32's: torch 2.11 leaves an RNN's bf16 weights apart and copies them
into one chunk at every call (it warns; on a GPU and under emulation alike),
work the emulated trace holds as torch's own calls, where fp32 weights are
one chunk and the host time is cuDNN's.  The forward's fit prices
``rnn_fwd``.  The sweep timed the backward's two calls together (and
autograd's work between them): its per-call and per-step parts price
``rnn_bwd_data``, which launches the per-step kernels, and its per-layer
part ``rnn_bwd_weights``, which works layer by layer (a few GEMMs each) after
it.  ``--write`` puts the coefficients into
``predictor/host_calibration.json`` as ``rnn_call_ns`` (by record name: per
call, per layer, per step).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.calibration import set_host_values

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data" / "rnn_sweep"
GPUS = ("H100-SXM-80GB", "H200-SXM-141GB")
# The sweep's direction -> by record name, which of its fit's parts (per call, per layer, per step) price it
PRICED = {"fwd": {"rnn_fwd": (1.0, 1.0, 1.0)},
          "bwd": {"rnn_bwd_data": (1.0, 0.0, 1.0), "rnn_bwd_weights": (0.0, 1.0, 0.0)}}
FIT_STEPS = 20


def runs(gpu: str) -> list[Path]:
    """The sweep's runs on ``gpu`` (one file each; another GPU's name is not a prefix of this one's)."""
    return sorted(p for p in DATA.glob(f"{gpu}*.json") if p.stem == gpu or p.stem.startswith(f"{gpu}-"))


def cases(files: Sequence[Path]) -> list[dict[str, Any]]:
    """Every fp32 configuration of every run, as the sweep wrote it (module docstring: why fp32's)."""
    return [c for path in files for c in json.loads(path.read_text())["cases"] if c["dtype"] == "fp32"]


def features(rows: Sequence[dict[str, Any]]) -> npt.NDArray[np.float64]:
    """Per configuration: one call, its layers, its time steps over all layers (one direction in the sweep)."""
    layers = np.array([float(c["layers"]) for c in rows])
    return np.column_stack([np.ones(len(rows)), layers, layers * np.array([float(c["seq"]) for c in rows])])


def fit(rows: Sequence[dict[str, Any]], direction: str) -> npt.NDArray[np.float64]:
    """(per call, per layer, per step) host ns of one direction ("fwd" or "bwd"): least squares on the
    logarithms (Gauss-Newton from the fit of the relative errors), so that the small calls, whose host time
    is most of their time, weigh as much as the large, and the fit is neither high nor low at the median."""
    x = features(rows)
    y = np.array([float(c[f"{direction}_host_ms"]) * 1e6 for c in rows])
    coef = np.linalg.lstsq(x / y[:, None], np.ones(len(y)), rcond=None)[0]
    for _ in range(FIT_STEPS):
        predicted = x @ coef
        coef = coef + np.linalg.lstsq(x / predicted[:, None], np.log(y / predicted), rcond=None)[0]
    return np.asarray(coef, np.float64)


def host_ns(coef: npt.NDArray[np.float64], rows: Sequence[dict[str, Any]]) -> npt.NDArray[np.float64]:
    return features(rows) @ coef


def priced(rows: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """By record name, its (per call, per layer, per step) host ns from the fits on ``rows``."""
    out = {}
    for direction, records in PRICED.items():
        coef = fit(rows, direction)
        out.update({name: [round(float(c * share), -1) for c, share in zip(coef, shares, strict=True)]
                    for name, shares in records.items()})
    return out


def rnn_call_ns(gpu: str) -> dict[str, list[float]]:
    """By record name, the coefficients ``predictor/host_calibration.json`` holds (``{}``: no sweep of ``gpu``)."""
    rows = cases(runs(gpu))
    return priced(rows) if rows else {}


def left_out_errors(gpu: str) -> list[float]:
    """Relative errors of the fitted host time of every fp32 configuration of every run of ``gpu``, both
    directions, each from a fit without the configurations of its hidden size: how far a job's RNN call
    may lie from its price (``rnn_host_q90`` of ``predictor/uncertainty.json``)."""
    rows = cases(runs(gpu))
    out: list[float] = []
    for hidden in sorted({c["hidden"] for c in rows}):
        mine, others = [c for c in rows if c["hidden"] == hidden], [c for c in rows if c["hidden"] != hidden]
        for d in PRICED:
            measured = np.array([c[f"{d}_host_ms"] * 1e6 for c in mine])
            out.extend((host_ns(fit(others, d), mine) / measured - 1).tolist())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the fits into predictor/host_calibration.json")
    a = ap.parse_args()
    fits = {}
    for gpu in GPUS:
        rows = cases(runs(gpu))
        fits[gpu] = rnn_call_ns(gpu)
        for d, records in PRICED.items():
            err = np.abs(host_ns(fit(rows, d), rows) / np.array([c[f"{d}_host_ms"] * 1e6 for c in rows]) - 1)
            print(f"{gpu} {d} ({len(runs(gpu))} runs, {len(rows)} configurations): host time's error median "
                  f"{100 * np.median(err):.1f}%, 90th percentile {100 * np.percentile(err, 90):.1f}%")
            for name in records:
                per_call, per_layer, per_step = fits[gpu][name]
                print(f"  {name}: {per_call / 1e3:.0f} us a call + {per_layer / 1e3:.0f} us a layer + "
                      f"{per_step / 1e3:.1f} us a step")
    if a.write:
        set_host_values("rnn_call_ns", fits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
