"""cuDNN 9's RNN workspace size, fitted on what an H200 asked for.

    python -m benchmarks.calibration.rnn_workspace [--write]

The campaign ``benchmarks/campaigns/rnn_workspace.py`` read, for 2055
configurations, the workspace torch allocated for each training forward
(backward asks the same) and inference forward
(``benchmarks/data/rnn_workspace/<GPU>.json``).  Part of it is exact in every
configuration: per pseudo-layer 8 MiB plus its gate matrices (gates x hidden
x (layer input + hidden) elements), which the interposer computes
(``emulation-image/src/cudnn_rnn.c``).  The rest grows with the tokens and
the batch but changes regime in ways not pinned down; per phase, cell,
direction count and torch's algorithm it is fitted by least squares on the
relative error over six products of the sizes (``FEATURES``), leaving the
hidden sizes ``HELD`` out so that their error says how far a size the fit
never saw lands.  ``--write`` puts the coefficients into
``emulation-image/src/cudnn_rnn_workspace.h``.
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

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "benchmarks" / "data" / "rnn_workspace" / "H200-SXM-141GB.json"
HEADER = ROOT / "emulation-image" / "src" / "cudnn_rnn_workspace.h"
HELD = (200, 300, 768, 1000)  # hidden sizes left out of the fit
GATES = {"lstm": 4, "gru": 3, "rnn": 1}
ELEMENT = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}
PHASES = {"train": "train_workspace_bytes", "inf": "inference_workspace_bytes"}
ALGOS = ("standard", "small-h", "persistent")  # CUDNN_RNN_ALGO_STANDARD, PERSIST_STATIC_SMALL_H, PERSIST_STATIC
FEATURES = "tokens x hidden, tokens x input, batch x hidden x layers, batch x hidden, batch x input, " \
           "tokens x hidden x (layers - 1)"


def lengths(c: dict[str, Any]) -> list[int]:
    """The sequence lengths of the campaign's batch (``packed``: how they fall)."""
    seq, batch = int(c["seq"]), int(c["batch"])
    if c["packed"] == "lin":
        return [round(seq - (seq - max(seq // 4, 1)) * i / max(batch - 1, 1)) for i in range(batch)]
    if c["packed"] == "one":
        return [seq] + [1] * (batch - 1)
    return [seq] * batch


def algo(c: dict[str, Any]) -> str:
    """The algorithm torch 2.11 asks cuDNN for (the interposer reads it from the RNN descriptor)."""
    if c["proj"]:
        return "standard"
    if not c["packed"] and c["hidden"] <= (384 if c["mode"] == "rnn" else 192):
        return "small-h"
    h, b = int(c["hidden"]), int(c["batch"])
    persistent = (c["dtype"] == "fp16" and not c["packed"] and c["layers"] == 1 and c["dirs"] == 1 and h <= 1024
                  and h % 128 == 0 and int(c["input"]) % 128 == 0 and c["mode"] != "gru" and b % 8 == 0
                  and b <= 128 and (c["mode"] == "lstm" or b < 96 or h < 896))
    return "persistent" if persistent else "standard"


def exact_bytes(c: dict[str, Any]) -> int:
    """8 MiB and the gate matrices per pseudo-layer: the part every configuration holds exactly."""
    h, d, total = int(c["hidden"]), int(c["dirs"]), 0
    for layer in range(int(c["layers"])):
        inputs = int(c["input"]) if layer == 0 else h * d
        total += d * ((8 << 20) + GATES[str(c["mode"])] * h * (inputs + h) * ELEMENT[str(c["dtype"])])
    return total


def features(c: dict[str, Any]) -> list[float]:
    """``FEATURES`` in bytes (times the element size)."""
    e, h, layers, b, i = ELEMENT[str(c["dtype"])], c["hidden"], c["layers"], c["batch"], c["input"]
    t = sum(lengths(c))
    return [float(v * e) for v in (t * h, t * i, b * h * layers, b * h, b * i, t * h * (layers - 1))]


def predicted(c: dict[str, Any], coef: npt.NDArray[np.float64]) -> float:
    return exact_bytes(c) + max(0.0, float(np.dot(features(c), coef)))


def fit(rows: Sequence[dict[str, Any]], key: str) -> npt.NDArray[np.float64]:
    """The rest's coefficients, least squares on the error relative to the whole workspace."""
    x = np.array([features(c) for c in rows])
    total = np.array([float(c[key]) for c in rows])
    rest = total - np.array([exact_bytes(c) for c in rows])
    return np.round(np.linalg.lstsq(x / total[:, None], rest / total, rcond=None)[0], 3)


def fits(cases: Sequence[dict[str, Any]]) -> tuple[dict[tuple[str, str, int, str], npt.NDArray[np.float64]],
                                                   dict[str, dict[bool, list[float]]]]:
    """Coefficients per (phase, cell, directions, algorithm), and per phase the relative errors of the
    configurations fitted (False) and held out (True)."""
    table, errors = {}, {p: {False: [], True: []} for p in PHASES}
    for phase, key in PHASES.items():
        for mode in GATES:
            for dirs in (1, 2):
                for a in ALGOS:
                    group = [c for c in cases if c["mode"] == mode and c["dirs"] == dirs and algo(c) == a]
                    if not group:
                        continue
                    coef = fit([c for c in group if c["hidden"] not in HELD] or group, key)
                    table[(phase, mode, dirs, a)] = coef
                    for c in group:
                        errors[phase][c["hidden"] in HELD].append(predicted(c, coef) / c[key] - 1)
    return table, errors


def header(table: dict[tuple[str, str, int, str], npt.NDArray[np.float64]]) -> str:
    """The C table ``rnn_ws_coef[phase][cell][dirs - 1][algorithm][feature]``; a class the data lacks
    takes the standard algorithm's coefficients."""
    def row(phase: str, mode: str, dirs: int, a: str) -> str:
        coef = table.get((phase, mode, dirs, a), table[(phase, mode, dirs, "standard")])
        return "{" + ", ".join(f"{v:g}" for v in coef) + "}"

    lines = ["/* Generated by `python -m benchmarks.calibration.rnn_workspace --write` from",
             f" * benchmarks/data/rnn_workspace/{DATA.name}: the part of cuDNN 9's RNN workspace beyond 8 MiB and",
             " * the gate matrices per pseudo-layer, per element of the data type, as products of the sizes:",
             f" * {FEATURES}.",
             " * [phase: training, inference][cell: LSTM, GRU, RNN][directions - 1][algorithm: " + ", ".join(ALGOS)
             + "] */",
             "static const double rnn_ws_coef[2][3][2][3][6] = {"]
    for phase in PHASES:
        lines.append("    {")
        for mode in GATES:
            lines.append("        {")
            for dirs in (1, 2):
                lines.append("            {" + ", ".join(row(phase, mode, dirs, a) for a in ALGOS) + "},")
            lines.append("        },")
        lines.append("    },")
    lines.append("};")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"write the table into {HEADER.relative_to(ROOT)}")
    a = ap.parse_args()
    cases = json.loads(DATA.read_text())["cases"]
    table, errors = fits(cases)
    for phase, by in errors.items():
        for held, errs in by.items():
            e = np.abs(errs)
            print(f"{phase:5} {'held-out hidden sizes' if held else 'fitted':21} {len(e):5} configurations: "
                  f"|error| median {100 * np.median(e):.1f}%, 90th percentile {100 * np.percentile(e, 90):.1f}%, "
                  f"max {100 * e.max():.0f}%")
    if a.write:
        HEADER.write_text(header(table))
        print(f"wrote {HEADER.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
