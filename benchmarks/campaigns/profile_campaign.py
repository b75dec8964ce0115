"""Profiling campaign for one GPU machine (run through the device tool).

    python3 -m benchmarks.campaigns.profile_campaign --out $OUT [--jobs smoke|sweeps|examples|all] [--budget-s 560]

Builds the record-mode interposer on the machine (and installs this checkout
without dependencies where ``maya.predictor`` does not import: its report
reads the traces), then runs each job under
``maya record`` (the sweeps of benchmarks/campaigns/profiling/sweep.py, the example
models at their default and held-out sizes) and packs the traces with their
record.json into one .tar.xz per job under --out (split into parts past 4 MiB: archives.py).  Back on the CPU host,
``benchmarks/calibration/profiles.py`` emulates the same jobs and joins the two
into the profile tables the estimators are fitted on.  Standard library only
(numpy for the short report); the machine's own Python and torch run the jobs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.archives import pack

ROOT = Path(__file__).resolve().parents[2]


def sh(cmd: list[str], log: list[dict], timeout: float, **kw: object) -> int:
    t0 = time.time()
    try:
        rc = subprocess.run(cmd, cwd=ROOT, timeout=max(timeout, 1), **kw).returncode  # type: ignore[call-overload]
    except subprocess.TimeoutExpired:
        rc = 124
    log.append({"cmd": cmd, "rc": rc, "wall_s": round(time.time() - t0, 1)})
    print(f"[campaign] rc={rc} {time.time() - t0:6.1f}s  {' '.join(cmd)}", flush=True)
    return rc


def report(folder: Path) -> dict[str, object]:
    """Counts of the recorded trace: operations and how many carry device times."""
    from maya.predictor import trace as mod

    out: dict[str, object] = {}
    for path in sorted(folder.glob("rank*.mayatrace")):
        t = mod.read_trace(path)
        kinds = t.records["kind"]
        ops = int(sum((kinds == k).sum() for k in (3, 4, 5, 24, 25, 27)))
        timed = int((kinds == 33).sum())
        busy = 0.0
        dt = t.records[kinds == 33]
        if len(dt):
            busy = float((dt["a"][:, 1] - dt["a"][:, 0]).sum()) / 1e9
        out[path.name] = {"kinds": t.kind_counts(), "ops": ops, "device_times": timed, "device_busy_s": round(busy, 4)}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--jobs", default="all",
                   help="smoke, sweeps, examples, oracle, all, or job names separated by commas")
    p.add_argument("--budget-s", type=float, default=560.0)
    p.add_argument("--python", default=sys.executable)
    a = p.parse_args()
    t_end = time.time() + a.budget_s
    a.out.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/maya-campaign")
    work.mkdir(parents=True, exist_ok=True)
    log: list[dict] = []
    rc = sh(["make", "-s", "-C", "emulation-image", "build/libmaya_record.so", f"PYTHON={a.python}"], log, 300)
    if rc == 0 and importlib.util.find_spec("maya.predictor") is None:
        if os.environ.get("MAYA_CAMPAIGN_INSTALLED"):
            raise SystemExit("maya.predictor does not import even after 'pip install -e .': see the pip output above")
        # The jobs and the report read traces through maya.predictor, which only an install maps
        # (pyproject's package-dir); the GPU machine's own Python, offline: no dependencies, no build
        # isolation.  An install takes effect in a new interpreter: start this campaign again.
        rc = sh([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                 "--ignore-requires-python", "-e", "."], log, 300)
        if rc == 0:
            os.environ["MAYA_CAMPAIGN_INSTALLED"] = "1"
            os.execv(sys.executable, [sys.executable, "-m", "benchmarks.campaigns.profile_campaign", *sys.argv[1:]])
    if rc != 0:
        (a.out / "campaign.json").write_text(json.dumps({"log": log}, indent=1))
        return rc
    from benchmarks.profiling_jobs import JOBS  # its oracle jobs read the step-time truth through maya.predictor

    groups = {"smoke": ["smoke"], "sweeps": [n for n in JOBS if n.startswith("sweep-")],
              "examples": [n for n in JOBS if n.startswith(("example-", "held-out-"))]}
    groups["oracle"] = [n for n in JOBS if n.startswith("oracle-")]
    groups["all"] = groups["sweeps"] + groups["examples"]
    names = [n for part in a.jobs.split(",") for n in groups.get(part, [part])]
    done: dict[str, object] = {}
    for name in names:
        left = t_end - time.time()
        if left < 20:
            print(f"[campaign] out of budget before {name}", flush=True)
            break
        folder = work / name
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        cmd = [a.python, "-m", "maya", "record", "--out", str(folder), "--", a.python, *JOBS[name]]
        with open(work / f"{name}.stdout", "w") as stdout:  # the script's own result line
            rc = sh(cmd, log, left - 10, env=env, stdout=stdout)
        if not folder.is_dir():
            continue
        shutil.copy(work / f"{name}.stdout", folder / "stdout.txt")
        # The exact script that ran, so the CPU side emulates the same sequence.
        shutil.copy(ROOT / JOBS[name][0], folder / "job.py")
        done[name] = {"rc": rc, **report(folder)}
        print(json.dumps({name: done[name]})[:2000], flush=True)
    for name in done:
        pack(work / name, a.out / f"{name}.tar.xz")
    (a.out / "campaign.json").write_text(json.dumps({"log": log, "jobs": done}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
