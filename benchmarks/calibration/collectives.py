"""The collective model against collectives measured on real GPUs.

    python -m benchmarks.calibration.collectives [--write]

The measurements are ``benchmarks/campaigns/collective_campaign.py`` runs committed as
``benchmarks/data/collectives/<GPU>-x<ranks>.json`` (each size the median of
five trials of back-to-back calls queued on the device).  ``--write`` makes
them the measured curves that ``maya predict`` times collectives with
(``predictor/collectives.json``, :class:`maya.predictor.replay.network.MeasuredNccl`).

It prints and saves (``benchmarks/results/collective_accuracy.json``):
- the analytical model (:class:`AnalyticalNccl`, calibrated on published
  8-GPU nccl-tests figures) against every measured size: how far a GPU
  count nobody measured would be off;
- the measured curves with each size left out in turn and interpolated from
  its neighbours: how far a size between measured ones is off;
- the launch cost that the smallest measured collectives imply (``LAUNCH_S``);
- the analytical model against the published figures
  (``benchmarks/data/nccl_published/figures.json``) and against published
  sweeps of all-reduce, all-gather and reduce-scatter on 8 x H100
  (``h100-8gpu-ring-sweeps.json`` there), at the sizes where the device,
  not the host that issued the calls, set the time.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

import numpy as np

from maya import catalog
from maya.predictor.replay import network
from maya.predictor.replay.network import AnalyticalNccl, Collective, Fabric, MeasuredNccl

ROOT = Path(__file__).resolve().parents[2]

DATA = ROOT / "benchmarks" / "data" / "collectives"
PUBLISHED = ROOT / "benchmarks" / "data" / "nccl_published" / "figures.json"
SWEEPS = ROOT / "benchmarks" / "data" / "nccl_published" / "h100-8gpu-ring-sweeps.json"
HOST_BOUND = 2.0  # a published row under this times its sweep's quickest timed the host, not the device
RESULTS = ROOT / "benchmarks" / "results" / "collective_accuracy.json"
SMALL = 2048  # bytes: the LL protocol's latency-bound sizes


def model_ops(op: str) -> list[str]:
    """The COLL record ops a measured op stands for: a send's time is its matching receive's."""
    return ["send", "recv"] if op == "send_recv" else [op]


def measurements() -> list[tuple[str, dict[str, Any]]]:
    """(catalog GPU, campaign output) of each committed measurement, host-paced ones left out."""
    out = []
    for path in sorted(DATA.glob("*.json")):
        if path.stem.endswith("host-paced"):
            continue
        out.append((path.stem.rsplit("-x", 1)[0], json.loads(path.read_text())))
    return out


def table(measured: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    tables = {}
    for gpu, d in measured:
        rows = [[op, r["ranks"], r["bytes"], r["median_s"]] for r in d["rows"] for op in model_ops(r["op"])]
        tables[gpu] = {"nvlink_gbps": catalog.lookup(gpu).fields.get("nvlink_gbps"), "source": d.get("machine"),
                       "nccl": d.get("nccl"), "driver": d.get("driver"), "rows": rows}
    return {"about": "Collective times measured on GPUs of one node (benchmarks/campaigns/collective_campaign.py, "
                     "written by python -m benchmarks.calibration.collectives --write): op, ranks, bytes in each rank's send "
                     "buffer, seconds (median of five trials of back-to-back calls queued on the device).",
            "tables": tables}


def errors(pairs: list[tuple[float, float]]) -> dict[str, float]:
    e = [abs(p / m - 1) for p, m in pairs]
    return {"points": len(e), "median_abs_error": median(e), "max_abs_error": max(e)}


def device_bound_sweeps(model: AnalyticalNccl) -> dict[str, list[tuple[int, float, float]]]:
    """Per op, (size, published us, model us) of the published 8-GPU sweeps' rows that the device
    timed: at least ``HOST_BOUND`` times the sweep's quickest, the host's floor."""
    out = {}
    for op, sweep in json.loads(SWEEPS.read_text())["sweeps"].items():
        floor = min(t for _, t, _ in sweep["rows"])
        out[op] = [(size, t, model.seconds(Collective(op, size / 8 if op == "all_gather" else size, 8)) * 1e6)
                   for size, t, _ in sweep["rows"] if t >= HOST_BOUND * floor]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write predictor/collectives.json from the measurements")
    a = ap.parse_args()
    measured = measurements()
    if a.write:
        network.MEASURED.write_text(json.dumps(table(measured), indent=1) + "\n")
        print(f"wrote {network.MEASURED}")
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"),
                               "command": " ".join(["python -m benchmarks.calibration.collectives", *sys.argv[1:]])}
    for gpu_name, d in measured:
        gpu = catalog.lookup(gpu_name)
        fabric = Fabric.of(gpu, d["world_size"])
        analytical = AnalyticalNccl(fabric)
        rows = []
        by_op: dict[str, list[dict[str, Any]]] = {}
        for r in d["rows"]:
            by_op.setdefault(r["op"], []).append(r)
        for op, points in by_op.items():
            sizes = np.array([float(r["bytes"]) for r in points])
            times = np.array([r["median_s"] for r in points])
            for i, r in enumerate(points):
                c = Collective(model_ops(op)[0], r["bytes"], r["ranks"])
                keep = np.arange(len(points)) != i
                left_out = MeasuredNccl({(c.op, c.ranks): (sizes[keep], times[keep])}, analytical)
                rows.append({"op": op, "bytes": r["bytes"], "measured_s": r["median_s"],
                             "analytical_s": analytical.seconds(c), "interpolated_s": left_out.seconds(c),
                             "trial_spread": (max(r["seconds"]) - min(r["seconds"])) / r["median_s"]})
        inner = [r for r in rows if r["bytes"] not in (min(x["bytes"] for x in rows), max(x["bytes"] for x in rows))]
        # At these sizes the analytical model takes LL: its time less its launch is the LL part.
        launch = median(r["measured_s"] - (r["analytical_s"] - network.LAUNCH_S) for r in rows if r["bytes"] <= SMALL)
        summary = {
            "analytical": {op: errors([(r["analytical_s"], r["measured_s"]) for r in rows if r["op"] == op])
                           for op in by_op},
            "analytical_all": errors([(r["analytical_s"], r["measured_s"]) for r in rows]),
            "interpolated_inner": errors([(r["interpolated_s"], r["measured_s"]) for r in inner]),
            "implied_launch_s": launch, "model_launch_s": network.LAUNCH_S}
        results[f"{gpu_name}-x{d['world_size']}"] = {"source": d.get("machine"), "nccl": d.get("nccl"),
                                                     "summary": summary, "rows": rows}
        print(f"{gpu_name} x{d['world_size']} ({d.get('machine')}), NCCL {d.get('nccl')}")
        print(f"{'op':15} {'bytes':>11} {'measured':>10} {'analytical':>17} {'interpolated':>19}  trials spread")
        for r in rows:
            print(f"{r['op']:15} {r['bytes']:11d} {r['measured_s'] * 1e6:8.1f}us "
                  f"{r['analytical_s'] * 1e6:8.1f}us {r['analytical_s'] / r['measured_s'] - 1:+6.1%}  "
                  f"{r['interpolated_s'] * 1e6:8.1f}us {r['interpolated_s'] / r['measured_s'] - 1:+6.1%}  "
                  f"{r['trial_spread']:6.1%}")
        print(json.dumps(summary))
    published = json.loads(PUBLISHED.read_text())["figures"]
    h100 = AnalyticalNccl(Fabric.of(catalog.lookup("H100-SXM-80GB")))
    checks = []
    for f in published:
        if not f["gpus"]:
            continue
        size = f["bytes"] or 8 * 2**30  # "large": the figure is the plateau
        per_rank = size / f["gpus"] if f["op"] == "all_gather" else size
        t = h100.seconds(Collective(f["op"], per_rank, f["gpus"], f["nodes"]))
        if "busbw_gbs" in f:
            factor = 2 * (f["gpus"] - 1) / f["gpus"] if f["op"] == "all_reduce" else (f["gpus"] - 1) / f["gpus"]
            got, want = size / t * factor / 1e9, f["busbw_gbs"]
        else:
            got, want = t * 1e6, f["time_us"]
        checks.append({"id": f["id"], "use": f["use"], "published": want, "model": got, "error": got / want - 1})
        print(f"{f['id']:28} published {want:8.2f}  model {got:8.2f}  {got / want - 1:+6.1%}  ({f['use']})")
    results["published"] = checks
    swept = {}
    for op, points in device_bound_sweeps(h100).items():
        for size, published, model in points:
            print(f"8 x H100 {op:15} {size:11d} published {published:9.1f}us  model {model:9.1f}us  "
                  f"{model / published - 1:+6.1%}")
        swept[op] = {**errors([(m, p) for _, p, m in points]), "smallest_bytes": points[0][0]}
    results["published_sweeps"] = swept
    print(json.dumps(swept))
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"saved {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
