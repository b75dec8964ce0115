"""Turn a profiling campaign's recorded traces into the profile tables.

    python -m benchmarks.calibration.profiles CAMPAIGN_DIR [--jobs NAMES] [--out predictor/profiles]

CAMPAIGN_DIR holds what benchmarks/campaigns/profile_campaign.py brought back from a
GPU machine (per-job .tar.xz archives, see archives.py, of folders with rank0.mayatrace and
record.json).  Each job's command line is emulated here on the same catalog
GPU; the emulated and recorded traces are joined operation by operation
(features from the emulated operation, durations from the recorded one) and
written as predictor/profiles/<GPU>/<part>.csv.gz, stamped with the machine's
driver and library versions.  Prints, per job, how many operations matched.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.archives import extract_all
from benchmarks.profiling_jobs import JOBS
from maya.predictor.estimate.profiles import rows_from_pair, write_table
from maya.predictor.trace import read_trace

ROOT = Path(__file__).resolve().parents[2]


def part_of(job: str) -> tuple[str, str]:
    """(table name, source label) of a job."""
    if job.startswith("sweep-"):
        return job, job.removeprefix("sweep-")
    if job.startswith("held-out-"):
        return "examples-held-out", "held-out:" + job.removeprefix("held-out-")
    return "examples", "example:" + job.removeprefix("example-")


def emulate(job: str, gpu: str, out: Path, script: Path | None = None) -> Path:
    """The job's emulated trace (kept in --work: emulating the sweeps takes minutes)."""
    if (out / "rank0.mayatrace").is_file() and (out / "summary.json").is_file():
        return out / "rank0.mayatrace"
    cmd = [str(ROOT / ".venv" / "bin" / "maya"), "emulate", "--gpu", gpu, "--out", str(out), "--",
           sys.executable, str(script) if script else JOBS[job][0], *JOBS[job][1:]]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"emulating {job} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return out / "rank0.mayatrace"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("campaign", type=Path)
    p.add_argument("--jobs", default="", help="only these jobs (comma-separated)")
    p.add_argument("--out", type=Path, default=ROOT / "predictor" / "profiles")
    p.add_argument("--work", type=Path, default=None, help="working folder, reused between runs (default: a new one)")
    a = p.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-profiles-"))
    extract_all(a.campaign, work / "recorded")
    wanted = set(filter(None, a.jobs.split(",")))
    tables: dict[tuple[str, str], list] = {}
    stamps: dict[tuple[str, str], dict] = {}
    for folder in sorted((work / "recorded").iterdir()):
        job = folder.name
        if job not in JOBS or job == "smoke" or job.startswith("oracle-") or (wanted and job not in wanted):
            continue
        info = json.loads((folder / "record.json").read_text())
        if info.get("exit_code") != 0:
            print(f"{job}: skipped, the recorded run exited {info.get('exit_code')}")
            continue
        gpu = info["gpu"]
        # Sweeps carry the exact script that was recorded (job.py).
        script = folder / "job.py" if job.startswith("sweep-") and (folder / "job.py").is_file() else None
        emulated = read_trace(emulate(job, gpu, work / "emulated" / job, script))
        recorded = read_trace(folder / "rank0.mayatrace")
        table, source = part_of(job)
        rows, unmatched = rows_from_pair(emulated, recorded, source)
        print(f"{job}: {len(rows)} distinct operations, {unmatched} recorded operations unmatched")
        tables.setdefault((gpu, table), []).extend(rows)
        stamp = {k: info.get(k) for k in ("gpu", "driver", "cuda", "cublas", "cudnn", "nccl", "torch", "cupti")}
        stamp["command"] = "python3 -m benchmarks.campaigns.profile_campaign, then python -m benchmarks.calibration.profiles"
        stamps[(gpu, table)] = stamp
    for (gpu, table), rows in tables.items():
        path = a.out / gpu / f"{table}.csv.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_table(path, rows, stamps[(gpu, table)])
        print(f"wrote {path} ({len(rows)} rows, {path.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
