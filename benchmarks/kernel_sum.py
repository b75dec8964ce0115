"""Kernel-only error of the estimators on whole example models.

    python -m benchmarks.kernel_sum [--gpu H100-SXM-80GB] [--campaign DIR] [--work DIR]

For each example model of a profiling campaign (recorded on a GPU, in
benchmarks/data/profile_campaign/<GPU>/examples.tar.xz), the same command is
emulated here, the two traces are aligned, and the estimated durations of the
emulated operations are summed and compared with the measured device busy time
(summed kernel durations) of their recorded counterparts: the kernel-only part of end-to-end error (no
host, no overlap, no communication).  The estimators are fitted without the
held-out sizes ("held-out:*" rows), so those models are out of sample, and
without the model's own rows for the default sizes too (leave-one-model-out).
Saves benchmarks/results/kernel_sum-<GPU>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from benchmarks.archives import extract_all
from benchmarks.calibration.profiles import emulate, part_of
from maya.predictor import estimate as estimators
from maya.predictor.estimate.profiles import join, load_profiles
from maya.predictor.trace import read_trace

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", default="H100-SXM-80GB")
    p.add_argument("--campaign", type=Path, default=None)
    p.add_argument("--work", type=Path, default=None)
    a = p.parse_args()
    campaign = a.campaign or ROOT / "benchmarks" / "data" / "profile_campaign" / a.gpu
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-kernel-sum-"))
    extract_all(campaign, work / "recorded", ("example", "held-out"))
    rows = load_profiles(a.gpu)
    results = []
    for folder in sorted((work / "recorded").iterdir()):
        job = folder.name
        _, source = part_of(job)
        # Never fit on the model being measured: held-out sizes are out of every fit, defaults out of their own.
        train = [r for r in rows if not r.source.startswith("held-out:") and r.source != source]
        est = estimators.load(a.gpu, profiles={a.gpu: train})
        emulated = read_trace(emulate(job, a.gpu, work / "emulated" / job))
        j = join(emulated, read_trace(folder / "rank0.mayatrace"))
        ops = [op for op, _, _ in j.samples]
        predicted = est.estimate_many(ops)
        measured_ns = sum(busy for _, _, busy in j.samples)
        estimated_ns = sum(e.ns for e in predicted)
        fallback_ns = sum(busy for (_, _, busy), e in zip(j.samples, predicted, strict=True)
                          if e.confidence == "fallback")
        r = {
            "model": source,
            "operations": len(ops),
            "measured_ms": round(measured_ns / 1e6, 3),
            "estimated_ms": round(estimated_ns / 1e6, 3),
            "error": round(estimated_ns / measured_ns - 1, 4) if measured_ns else None,
            "fallback_time_fraction": round(fallback_ns / measured_ns, 4) if measured_ns else None,
            "recorded_unmatched": j.unmatched,
        }
        results.append(r)
        print(f"{source:28} {r['operations']:6} ops  measured {r['measured_ms']:9.2f} ms  "
              f"estimated {r['estimated_ms']:9.2f} ms  error {100 * (r['error'] or 0):+6.1f}%  "
              f"fallback {100 * (r['fallback_time_fraction'] or 0):4.1f}% of time  "
              f"unmatched {r['recorded_unmatched']}")
    out = ROOT / "benchmarks" / "results" / f"kernel_sum-{a.gpu}.json"
    out.write_text(json.dumps({"gpu": a.gpu, "models": results}, indent=1) + "\n")
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
