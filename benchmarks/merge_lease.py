"""Adds one GPU machine's measurements to the committed ground truth.

    python benchmarks/merge_lease.py --gpu H100-SXM-80GB --lease r4 [--calls DIR/call_cost.jsonl] [--campaign DIR [--new]]

A lease is one lent GPU machine (its GPU's UUID names it).  Machines of one
catalog kind differ: the host cost of a kernel launch varied 1.4x, of a GEMM
1.75x, between four H100 machines, and a host-bound model's step time with
it, so the ground truth pools several machines rather than many runs of
one.  ``--calls``: the lines
of ``benchmarks/campaigns/server_call_cost.sh``, appended to
``benchmarks/data/server_call_cost/<GPU>.json``, whose ``ns_per_call`` becomes
the median over every run of every machine (``--gpu <GPU>-node``: a machine of
several such GPUs, whose call costs price jobs of several ranks).  ``--campaign``: a
``benchmarks/campaigns/gpu_fidelity_campaign.py --no-profile`` folder; each
configuration's runs are appended to ``benchmarks/data/step_times/<GPU>/``,
tagged with the lease, and its probe is kept as ``env-<lease>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CALL_COSTS = ROOT / "benchmarks" / "data" / "server_call_cost"
STEP_TIMES = ROOT / "benchmarks" / "data" / "step_times"


def write(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=1) + "\n")


def machine(campaign: Path | None) -> str | None:
    """The GPU UUID of a campaign's probe (None: no campaign)."""
    if campaign is None:
        return None
    return json.loads((campaign / "env.json").read_text())["device_properties"]["uuid"]


def merge_calls(gpu: str, lease: str, lines: Path, uuid: str | None) -> dict[str, float]:
    """Appends a lease's call-cost runs; returns the new median ns per call kind."""
    path = CALL_COSTS / f"{gpu}.json"
    d = json.loads(path.read_text()) if path.is_file() else {"gpu": gpu, "runs": []}
    if any(r.get("lease") == lease for r in d["runs"]):
        raise SystemExit(f"{path} already holds lease {lease}")
    for line in lines.read_text().splitlines():
        r = json.loads(line)
        d["runs"].append({"lease": lease, "machine": uuid, "cpu": r["cpu"], **r["calls"],
                          **{k: v for k, v in r["dnn"].items() if k != "workspace_bytes"}})
    kinds = sorted({k for r in d["runs"] for k, v in r.items() if isinstance(v, float)})
    d["ns_per_call"] = {k: round(median(r[k] for r in d["runs"] if k in r), 1) for k in kinds}
    d["command"] = "bash benchmarks/campaigns/server_call_cost.sh OUT (three runs a machine)"
    d["about"] = ("host ns per call on GPU servers of this kind; each run the median of 60 batches of 200 calls; "
                  "ns_per_call: the median over every run of every machine (lease)")
    write(path, d)
    return d["ns_per_call"]


def merge_campaign(gpu: str, lease: str, campaign: Path, new: bool = False) -> int:
    """Appends a lease's step-time runs to each configuration it measured (all or none); returns
    how many runs.  ``new``: a configuration not committed yet starts a file of its own (else it
    is refused, as a misnamed one would be)."""
    folder = STEP_TIMES / gpu
    merged = {}
    for src in sorted(campaign.glob("*.json")):
        if src.name == "env.json":
            continue
        dst = folder / src.name
        got = json.loads(src.read_text())
        if not dst.is_file() and not new:
            raise SystemExit(f"{src.name}: no such configuration in {folder} (--new to start it)")
        old = json.loads(dst.read_text()) if dst.is_file() else {**got, "runs": []}
        if got["argv"] != old["argv"]:
            raise SystemExit(f"{src.name}: command {got['argv']} differs from the committed {old['argv']}")
        if any(r.get("campaign") == lease for r in old["runs"]):
            raise SystemExit(f"{dst} already holds lease {lease}")
        runs = [{**r, "campaign": lease} for r in got["runs"] if r.get("results")]
        old["runs"] += runs
        merged[dst] = (old, len(runs))
    for dst, (d, _) in merged.items():
        write(dst, d)
    write(folder / f"env-{lease}.json", json.loads((campaign / "env.json").read_text()))
    with (folder / "campaign.log").open("a") as log:
        log.write(f"# lease {lease}, GPU {machine(campaign)}\n{(campaign / 'campaign.log').read_text()}")
    return sum(n for _, n in merged.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", required=True, help="catalog name, e.g. H100-SXM-80GB")
    ap.add_argument("--lease", required=True, help="a label for the machine, e.g. r4")
    ap.add_argument("--calls", type=Path, help="call_cost.jsonl from benchmarks/campaigns/server_call_cost.sh")
    ap.add_argument("--campaign", type=Path, help="a step-time campaign folder")
    ap.add_argument("--new", action="store_true", help="start the files of configurations not committed yet")
    a = ap.parse_args()
    if a.calls is None and a.campaign is None:
        ap.error("nothing to merge: give --calls, --campaign or both")
    if a.calls is not None:
        print(f"{a.gpu}: ns per call now {merge_calls(a.gpu, a.lease, a.calls, machine(a.campaign))}")
    if a.campaign is not None:
        print(f"{a.gpu}: {merge_campaign(a.gpu, a.lease, a.campaign, a.new)} runs added from lease {a.lease}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
