"""cuDNN RNN calls' memory under emulation against a GPU's: the reserve space and the calls' peaks.

    .venv/bin/python -m benchmarks.rnn_memory [--save benchmarks/results/rnn_memory.json]

Emulates ``benchmarks/campaigns/rnn_memory.py`` (one training forward and
backward of each of its configurations) and sets each configuration beside
what it measured on a GPU (``benchmarks/data/rnn_memory/<GPU>.json``): the
reserve space torch keeps for the backward, which emulation sizes as cuDNN 9
does, and the peak allocated memory over the forward and the backward,
which hold cuDNN's workspace too.  Then emulates
``benchmarks/campaigns/rnn_workspace.py`` and sets the workspace each call
asks for beside what cuDNN asked on the GPU (``benchmarks/data/rnn_workspace/``):
partly exact, partly fitted (``emulation-image/docs/dnn.md``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "rnn_memory"
CAMPAIGN = ROOT / "benchmarks" / "campaigns" / "rnn_memory.py"
KEYS = ("reserve_bytes", "forward_peak_bytes", "backward_peak_bytes")
WS_DATA = ROOT / "benchmarks" / "data" / "rnn_workspace"
WS_CAMPAIGN = ROOT / "benchmarks" / "campaigns" / "rnn_workspace.py"
WS_KEYS = ("train_workspace_bytes", "inference_workspace_bytes")


def emulated(gpu: str, scratch: Path, campaign: Path = CAMPAIGN) -> list[dict[str, Any]]:
    """The campaign's configurations as emulation measures them on ``gpu``."""
    out = scratch / "rnn_memory.json"
    cmd = [sys.executable, "-W", "ignore", "-m", "maya", "emulate", "--gpu", gpu, "--gpus-per-node", "1", "--out",
           str(scratch / "run"), "--", sys.executable, "-W", "ignore", str(campaign), "--out", str(out)]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"maya emulate of the campaign failed:\n{p.stderr[-2000:]}")
    return list(json.loads(out.read_text())["cases"])


def compare(measured: list[dict[str, Any]], emulated: list[dict[str, Any]],
            keys: tuple[str, ...] = KEYS) -> dict[str, Any]:
    """Per quantity, emulated over measured: the median, the extremes, the error's median and 90th
    percentile, and how many are within 1% and 10%."""
    if len(measured) != len(emulated):
        raise SystemExit(f"{len(emulated)} emulated configurations against {len(measured)} measured")
    out: dict[str, Any] = {"configurations": len(measured)}
    for key in keys:
        ratios = [e[key] / m[key] for m, e in zip(measured, emulated, strict=True) if m[key] > 0]
        errs = sorted(abs(r - 1) for r in ratios)
        out[key] = {"median_ratio": median(ratios), "min_ratio": min(ratios), "max_ratio": max(ratios),
                    "median_abs_error": median(errs), "p90_abs_error": errs[int(0.9 * len(errs))],
                    "within_1pct": sum(e <= 0.01 for e in errs), "within_10pct": sum(e <= 0.1 for e in errs),
                    "compared": len(ratios)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", type=Path, help="write the figures here as JSON")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for data in sorted(DATA.glob("*.json")):
            gpu = data.stem
            r = compare(json.loads(data.read_text())["cases"], emulated(gpu, Path(scratch) / gpu))
            results[gpu] = r
            print(f"{gpu}: {r['configurations']} configurations, emulated over measured")
            for key in KEYS:
                k = r[key]
                print(f"  {key:22} median {k['median_ratio']:.3f}, {k['min_ratio']:.3f} to {k['max_ratio']:.3f}; "
                      f"within 1%: {k['within_1pct']} of {k['compared']}")
        for data in sorted(WS_DATA.glob("*.json")):
            gpu = data.stem
            w = compare(json.loads(data.read_text())["cases"], emulated(gpu, Path(scratch) / f"ws-{gpu}", WS_CAMPAIGN),
                        WS_KEYS)
            results.setdefault(gpu, {})["workspace"] = w
            print(f"{gpu}: workspace of {w['configurations']} configurations, emulated over measured")
            for key in WS_KEYS:
                k = w[key]
                print(f"  {key:26} median {k['median_ratio']:.3f} (|error| median {k['median_abs_error']:.3f}, "
                      f"90% within {k['p90_abs_error']:.3f}), {k['min_ratio']:.3f} to {k['max_ratio']:.3f}; "
                      f"within 1%: {k['within_1pct']}, within 10%: {k['within_10pct']} of {k['compared']}")
    if args.save:
        args.save.write_text(json.dumps({"command": "python -m benchmarks.rnn_memory", "gpus": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
