"""Estimated against recorded kernel time on the held-out records: the estimators' share of a held-out error.

    .venv/bin/python -m benchmarks.held_out.record_kernels [--work DIR]

Each ``maya record`` of a held-out workload under
``benchmarks/data/held_out/records/<machine>/`` (packed by
``benchmarks/archives.py``; recorded by ``record_campaign.sh``) is set against
an emulation of the same command: rank 0's operations are aligned, and the
estimators of the recorded GPU time each emulated operation that has a
recorded counterpart.  Prints, per record, the recorded device busy time of
the steps' operations (warm-up's one-off work left out, :func:`compare`), the
estimate and their difference, then the kernels whose
estimates are furthest off in time; saves
``benchmarks/results/held_out_kernels.json``.  No host, overlap or
communication: the device work alone, summed over every recorded step.
Collectives are left out: a recorded NCCL kernel's time includes its wait
for the other ranks, and the network model, not these estimators, prices
them (``docs/collectives.md``).

For diagnosis only: nothing is fitted here, and held-out records are never
fitted on (they are not profile tables).
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root is what the imports need
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.archives import extract_all
from benchmarks.held_out.accuracy import emulate
from benchmarks.held_out.suite import BY_NAME
from benchmarks.held_out.truth import DATA, ROOT
from maya.predictor import estimate as estimators
from maya.predictor.estimate.profiles import join
from maya.predictor.trace import Kind, read_trace
from maya.predictor.trace.ops import Op

RECORDS = DATA / "records"
RESULTS = ROOT / "benchmarks" / "results" / "held_out_kernels.json"
WORST = 5  # kernels listed per record


def _steps(command: list[str]) -> int:
    """The timed steps the recorded command ran (its ``--steps``)."""
    return int(command[command.index("--steps") + 1])


def compare(recorded: Path, emulated: Path, gpu: str, steps: int) -> dict[str, object]:
    """Recorded busy time against the estimate over the aligned operations of the steps, and the worst kernels.

    A step's operations are those of a signature that ran at least once per timed step (``steps``): the
    warm-up's one-off work (cuDNN's autotuning runs every candidate algorithm of a convolution once) is
    left out.  Each signature counts its median recorded time, times its launches."""
    j = join(read_trace(emulated / "rank0.mayatrace"), read_trace(recorded / "rank0.mayatrace"))
    by_signature: dict[object, tuple[Op, list[int]]] = {}
    for op, _, busy in j.samples:
        if op.kind != Kind.COLL:
            by_signature.setdefault(op.signature(), (op, []))[1].append(busy)
    repeated = [(op, busys) for op, busys in by_signature.values() if len(busys) >= steps]
    est = estimators.load(gpu).estimate_many([op for op, _ in repeated])
    by_kernel: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for (op, busys), e in zip(repeated, est, strict=True):
        k = by_kernel[op.label()[:120]]
        k[0] += statistics.median(busys) * len(busys)
        k[1] += e.ns * len(busys)
        k[2] += len(busys)
    measured_ns, estimated_ns = sum(v[0] for v in by_kernel.values()), sum(v[1] for v in by_kernel.values())
    worst = sorted(by_kernel.items(), key=lambda kv: -abs(kv[1][1] - kv[1][0]))[:WORST]
    return {"operations": int(sum(v[2] for v in by_kernel.values())), "recorded_unmatched": j.unmatched,
            "measured_ms": round(measured_ns / 1e6, 3), "estimated_ms": round(estimated_ns / 1e6, 3),
            "error": round(estimated_ns / measured_ns - 1, 4) if measured_ns else None,
            "worst": [{"kernel": name, "launches": int(n), "measured_ms": round(m / 1e6, 3),
                       "estimated_ms": round(e / 1e6, 3)} for name, (m, e, n) in worst]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=None, help="records and emulations kept here (reused when present)")
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="maya-record-kernels-"))
    rows = []
    for machine in sorted(p for p in RECORDS.iterdir() if p.is_dir()):
        extract_all(machine, work / "recorded" / machine.name)
        for recorded in sorted(p for p in (work / "recorded" / machine.name).iterdir() if p.is_dir()):
            info = json.loads((recorded / "record.json").read_text())
            w = BY_NAME[recorded.name]
            steps = _steps([str(c) for c in info["command"]])
            emulated = work / "emulated" / recorded.name
            run = emulate(w, steps, emulated, timeout_s=1800)
            if run["exit_code"] != 0:
                print(f"{machine.name}/{w.name}: emulation failed: {run['stderr_tail'][-300:]}")
                continue
            r = {"record": f"{machine.name}/{w.name}", "gpu": info["gpu"], **compare(recorded, emulated, info["gpu"], steps)}
            rows.append(r)
            print(f"{r['record']:45} {r['operations']:6} operations  recorded {r['measured_ms']:8.1f} ms  "
                  f"estimated {r['estimated_ms']:8.1f} ms  {100 * (r['error'] or 0):+6.1f}%", flush=True)
            for k in r["worst"]:
                print(f"    {k['launches']:5}x {k['kernel'][:80]:80} {k['measured_ms']:7.2f} -> {k['estimated_ms']:7.2f} ms")
    RESULTS.write_text(json.dumps({"command": "python -m benchmarks.held_out.record_kernels", "records": rows},
                                  indent=1) + "\n")
    print(f"saved {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
