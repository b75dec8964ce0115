"""A real DDP run's peak can hold its first gradient buckets in the second step, and Maya says so.

Covers: ``first_buckets_bytes`` counts the all-reduce buffers reduced once before the buffers
began to repeat (not a broadcast at the same address, not one-off reductions after the repeating
buckets, nothing where no buffer repeats); ``Prediction`` adds them to each rank's peak for
``peak_memory_high_bytes`` and ``fits``; a plan's verdicts and reported peak count them, on the
candidate's own GPU too.  (The two-rank DDP emulation of ``test_ddp.py`` checks the figure end to end.)
"""

from __future__ import annotations

import json
from pathlib import Path

from maya.plan.evaluate import memory_verdict, peak_bytes, run_result, usable_bytes
from maya.predict import Prediction
from maya.predictor.trace import Kind, TraceWriter, read_trace
from maya.summary import first_buckets_bytes, render, summarize

GIB = 2**30
H100 = "H100-SXM-80GB"
ALL_REDUCE, BROADCAST = 1, 2


def _trace(path: Path, collectives: list[tuple[int, int, int]]) -> Path:
    """A trace of (op, buffer address, bytes) collectives, in order."""
    w = TraceWriter(rank=0, world_size=2)
    for seq, (op, address, size) in enumerate(collectives, 1):
        w.record(int(Kind.COLL), t_ns=1000 * seq, a32=seq, a=[7, size // 4, op | 7 << 8, 0, size],
                 ext=[0, address, address])
    w.write(path)
    return path


def test_the_first_steps_buckets_that_never_come_back(tmp_path: Path) -> None:
    kib = 1024
    ddp = [(BROADCAST, 0xA0000, 400 * kib), (ALL_REDUCE, 0xA0000, 400 * kib),  # the broadcast's block, reused
           # the rebuilt buckets, every step, one of them in the dropped bucket's block
           *[(ALL_REDUCE, b, 200 * kib) for _ in range(3) for b in (0xA0000, 0xC0000)],
           (ALL_REDUCE, 0xD0000, 8 * kib)]  # a one-off reduction at the end
    assert first_buckets_bytes(read_trace(_trace(tmp_path / "ddp.mayatrace", ddp))) == 400 * kib
    fresh = [(ALL_REDUCE, 0x10000 * k, 64 * kib) for k in range(1, 6)]  # new buffers every time: nothing to tell
    assert first_buckets_bytes(read_trace(_trace(tmp_path / "fresh.mayatrace", fresh))) == 0
    steady = [(ALL_REDUCE, b, 64 * kib) for _ in range(3) for b in (0xB0000, 0xC0000)]
    assert first_buckets_bytes(read_trace(_trace(tmp_path / "steady.mayatrace", steady))) == 0
    # FSDP2's clipping: its per-parameter norms all-reduced every step, in a block the allocator soon reuses
    norms = [(ALL_REDUCE, 0xE0000 + 0x1000 * min(k, 1), 588) for k in range(4)]
    assert first_buckets_bytes(read_trace(_trace(tmp_path / "norms.mayatrace", norms))) == 0


def test_the_summary_keeps_and_says_them(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    _trace(out / "rank0.mayatrace", [(ALL_REDUCE, 0xA000, 3 * 2**20)] + [(ALL_REDUCE, 0xB000, 2**20)] * 2)
    summary = summarize(out, gpu={"name": H100, "memory_bytes": 80 * GIB}, exit_code=0, command=["x"])
    assert summary["ranks"][0]["first_buckets_bytes"] == 3 * 2**20
    assert any("up to 3.0 MiB higher" in line and "NCCL watchdog" in line for line in render(summary))


def test_a_prediction_fits_only_with_them() -> None:
    p = Prediction(H100, 0.1, (0.1,), {}, [70 * GIB, 70 * GIB], 79 * GIB, {},
                   first_buckets_bytes=[10 * GIB, 10 * GIB])
    assert p.peak_memory_high_bytes == [80 * GIB, 80 * GIB] and not p.fits
    assert p.to_json()["peak_memory_high_bytes"] == [80 * GIB, 80 * GIB]
    assert Prediction(H100, 0.1, (0.1,), {}, [70 * GIB], 79 * GIB, {}).fits  # no buckets known: its peak alone


def test_a_plans_verdicts_count_them(tmp_path: Path) -> None:
    usable = usable_bytes(H100)
    ok = {"status": "ok", "exitCode": 0, "peakReservedBytes": int(50 * GIB), "peakAllocatedBytes": int(48 * GIB)}
    assert memory_verdict(ok, H100) == "fits" and peak_bytes(ok) == int(50 * GIB)
    held = {**ok, "firstBucketsBytes": int(0.95 * usable) - int(50 * GIB)}  # above 90%: emulate on it to tell
    assert memory_verdict(held, H100) == "near" and peak_bytes(held) == int(0.95 * usable)
    more = {**ok, "firstBucketsBytes": usable - int(48 * GIB) + GIB}
    assert memory_verdict(more, H100) == "oom"
    assert memory_verdict(more, H100, emulated_here=True) == "oom"  # it completed here, but some runs would not
    assert memory_verdict(held, H100, emulated_here=True) == "fits"

    out = tmp_path / "run"
    out.mkdir()
    _trace(out / "rank0.mayatrace", [(ALL_REDUCE, 0xA000, 16384)] + [(ALL_REDUCE, 0xB000, 4096)] * 2)
    (out / "summary.json").write_text(
        json.dumps(summarize(out, gpu={"name": H100}, exit_code=0, command=["x"])))
    assert run_result(out, 0, "")["firstBucketsBytes"] == 16384
