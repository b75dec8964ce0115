"""How fast this emulating machine runs the jobs' host work, against the machine the host model was
calibrated on, and whether the CPU probe says the same.

    python -m benchmarks.emulating_machine [--emulations 3] [--gpu H100-SXM-80GB] [--work DIR]

The replay rescales emulated host delays by the calibrating CPU's probe over this one's
(maya.cpu_probe).  That holds only if jobs and probe speed up or slow down together from one
machine to the next.  For every configuration of the host calibration
(benchmarks/results/host_calibration.json, which keeps the calibrating machine's emulated host time
per steady step and probe reading for each) this emulates the same command ``--emulations`` times
here, takes the median emulated host time the same way (benchmarks/step_truth.py's
``emulated_host_s``) and prints the ratio here/there beside the probe's ratio.  Saves
benchmarks/results/emulating_machine.json.

Run once (2026-11-26, a second 2-CPU AMD EPYC VM, three emulations each), against the calibration
before the probe became an emulated training step: that probe (a loop of a tiny CPU operator)
read 0.70-0.76 of the calibrating VM's, but the jobs' ratio depended on the job: 0.48-0.59 for
BERT, the CNN and GPT, 0.70-0.75 for the recommender.  The host model was then recalibrated on
that VM with the new probe, so the saved results describe the old calibration; run this on the
next emulating VM to check the new probe.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from benchmarks.campaigns.gpu_fidelity_campaign import cpu_model
from benchmarks.step_truth import EMULATED_STEPS, emulate, emulated_host_s, measured
from maya.predict import prepare

ROOT = Path(__file__).resolve().parent.parent

CALIBRATION = ROOT / "benchmarks" / "results" / "host_calibration.json"
RESULTS = ROOT / "benchmarks" / "results" / "emulating_machine.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--emulations", type=int, default=3, help="per configuration (default %(default)s)")
    ap.add_argument("--gpu", default="H100-SXM-80GB")
    ap.add_argument("--work", type=Path, default=None, help="emulations kept here (reused when present)")
    a = ap.parse_args()
    calibration = json.loads(CALIBRATION.read_text())
    there = {r["name"]: r for r in calibration["machines"][a.gpu]["configs"]}
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-emulating-machine-"))
    rows = []
    for m in measured(a.gpu):
        if m.name not in there:
            continue
        jobs = [prepare(emulate(m.argv, a.gpu, 1, work / m.name / f"e{k}"), a.gpu) for k in range(a.emulations)]
        host = median(emulated_host_s(job.traces[0], EMULATED_STEPS) for job in jobs)
        probe = median(job.host_probe_ns for job in jobs if job.host_probe_ns)
        r = there[m.name]
        rows.append({"name": m.name, "emulated_host_s": host, "probe_ns": probe,
                     "calibrating_emulated_host_s": r["emulated_host_s"], "calibrating_probe_ns": r["host_probe_ns"],
                     "job_ratio": host / r["emulated_host_s"], "probe_ratio": probe / r["host_probe_ns"]})
        print(f"{m.name:18} host {1e3 * host:6.2f} ms here, {1e3 * r['emulated_host_s']:6.2f} there: "
              f"x{rows[-1]['job_ratio']:.3f}   probe {probe:6.0f} ns here, {r['host_probe_ns']:6.0f} there: "
              f"x{rows[-1]['probe_ratio']:.3f}", flush=True)
    jobs_r = sorted(r["job_ratio"] for r in rows)
    probes_r = sorted(r["probe_ratio"] for r in rows)
    summary = {"configs": len(rows), "job_ratio_median": median(jobs_r), "job_ratio_range": [jobs_r[0], jobs_r[-1]],
               "probe_ratio_median": median(probes_r), "probe_ratio_range": [probes_r[0], probes_r[-1]],
               "probe_over_job": median(probes_r) / median(jobs_r),
               "job_ratio_by_family": {f: median(r["job_ratio"] for r in rows if r["name"].split("-")[0] == f)
                                       for f in sorted({r["name"].split("-")[0] for r in rows})}}
    print(json.dumps(summary))
    RESULTS.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "command": " ".join(["python", *sys.argv]), "gpu": a.gpu,
        "here": {"cpu": cpu_model(), "calibrating": calibration.get("emulating_cpu")},
        "summary": summary, "configs": rows}, indent=1) + "\n")
    print(f"saved {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
