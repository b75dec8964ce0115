"""Carrying estimates from one GPU to another of the same architecture (predictor/estimate/speedup.py).

Covers: the measured speed-up of an operation (median over the signatures of
its domain both GPUs measured, nearest in duration), its family's where the
domain has too few, none where the family has too few; a GPU with profiles of its own borrowing a thin domain
of a family it fits (the H200's batch-norm kernels) and scaling borrowed
estimates by the measured speed-up rather than the roofline ratio (which
credits a memory-bound kernel with the whole 4.8 / 3.35 TB/s); an operation
measured on the borrowing GPU keeping its measured time; a GPU without
profiles still scaled by the roofline ratio.

The tables are the synthetic ones of test_estimators.py: the "H200" is made
5% faster than the "H100" on everything, as the real H200 is on most kernels
other than streaming ones.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_estimators import (
    FILL_F32,
    GPU,
    SOFTMAX_BF16,
    gemm_op,
    kernel_op,
    synthetic_rows,
)

from maya.predictor.estimate import loading as L
from maya.predictor.estimate import speedup as S
from maya.predictor.estimate import work as W
from maya.predictor.estimate.profiles import ProfileRow

H200 = "H200-SXM-141GB"
FASTER = 1.05  # the synthetic H200's speed-up on every operation


def faster(rows: list[ProfileRow], by: float = FASTER) -> list[ProfileRow]:
    return [ProfileRow(r.op, round(r.dur_ns / by), round(r.busy_ns / by), r.n, r.spread, r.source) for r in rows]


@pytest.fixture(scope="module")
def profiles() -> dict[str, list[ProfileRow]]:
    """The H100's synthetic table; the H200's: its copies, its memory kernels but for two softmax
    sizes (the batch-norm kernels the real H200's memory sweep lacks), and the example model."""
    h100 = synthetic_rows()
    softmax = [r for r in h100 if r.op.name == SOFTMAX_BF16 and not r.source.startswith(("example:", "held-out:"))]
    own = [r for r in h100 if W.family(r.op) in ("copy", "memory") and r.op.name != SOFTMAX_BF16]
    own += softmax[:2] + [r for r in h100 if r.source == "example:toy" and r.op.name != SOFTMAX_BF16]
    return {GPU: h100, H200: faster(own)}


def test_measured_speedups_by_domain_size_then_family() -> None:
    def sig(name: str, blocks: int) -> tuple[object, ...]:
        return kernel_op(name, blocks).signature()

    # Fills (vectorized_elementwise): short ones as fast on both GPUs, long ones 1.4x faster.
    short, long = range(1, 21), range(1001, 1021)
    lender = {sig(FILL_F32, b): 2000.0 + b for b in short} | {sig(FILL_F32, b): 1e6 + b for b in long}
    borrower = {sig(FILL_F32, b): 2000.0 + b for b in short} | {sig(FILL_F32, b): (1e6 + b) / 1.4 for b in long}
    lender |= {sig(SOFTMAX_BF16, 1): 100.0}
    borrower |= {sig(SOFTMAX_BF16, 7): 50.0}  # not measured by both
    found = S.Speedups.measured(lender, borrower)
    assert set(found.curves) == {("memory", "vectorized_elementwise"), ("memory", S.FAMILY)}
    fill = kernel_op(FILL_F32, 5000)
    assert found.of("memory", fill, 2500.0) == pytest.approx(1.0)
    assert found.of("memory", fill, 3e6) == pytest.approx(1.4)  # past the longest: the longest's
    assert found.of("memory", kernel_op(SOFTMAX_BF16, 9), 1e6) == pytest.approx(1.4)  # the family's
    assert not S.Speedups.measured(lender, borrower, {"gemm"})
    two = dict(list(borrower.items())[:2])
    assert not S.Speedups.measured(lender, two)  # fewer than MIN_COMMON: the roofline ratio stays
    assert S.Speedups().of("memory", fill, 1e6) is None


def test_thin_domain_borrowed_and_scaled_by_measured_speedup(profiles: dict[str, list[ProfileRow]],
                                                             tmp_path: Path) -> None:
    h100 = L.load(GPU, profiles=profiles, cache=tmp_path)
    h200 = L.load(H200, profiles=profiles, cache=tmp_path)
    assert h200.source == H200
    # Memory is the H200's own family, but its two softmax points are too few beside the H100's:
    # a softmax is the H100's estimate, carried over by the speed-up both GPUs measured.
    softmax = kernel_op(SOFTMAX_BF16, 3000)  # memory-bound: its roofline ratio is 3.35 / 4.8
    e100, e200 = h100.estimate(softmax), h200.estimate(softmax)
    assert e200.confidence == "scaled" and e200.estimator.startswith("scaled:")
    assert e200.ns == pytest.approx(e100.ns / FASTER, rel=0.01)
    assert "memory" not in h200.borrowed and "softmax" in h200.borrowed_domains["memory"]
    assert "vectorized_elementwise" not in h200.borrowed_domains["memory"]
    speedups = h200.borrowed_domains["memory"]["softmax"].speedups
    assert speedups.of("memory", softmax, e100.ns) == pytest.approx(FASTER, rel=0.01)
    # The H200 lacks the GEMM sweep: the family is the H100's, scaled by the examples' speed-up ...
    assert "gemm" in h200.borrowed
    big = gemm_op(4096, 4096, 16384)
    assert h200.estimate(big).ns == pytest.approx(h100.estimate(big).ns / FASTER, rel=0.01)
    # ... but a GEMM the H200 measured keeps its own time.
    toy = next(r for r in profiles[H200] if r.source == "example:toy" and W.family(r.op) == "gemm")
    assert h200.estimate(toy.op).confidence == "measured" and h200.estimate(toy.op).ns == toy.busy_ns


def test_without_own_profiles_the_roofline_ratio_stays(profiles: dict[str, list[ProfileRow]],
                                                       tmp_path: Path) -> None:
    only_h100 = {GPU: profiles[GPU]}
    h100, h200 = L.load(GPU, profiles=only_h100, cache=tmp_path), L.load(H200, profiles=only_h100, cache=tmp_path)
    assert not h200.speedups and not h200.borrowed_domains
    fill = kernel_op(FILL_F32, 1 << 20)
    assert h200.estimate(fill).ns == pytest.approx(h100.estimate(fill).ns * 3350 / 4800, rel=0.05)
    assert np.isfinite(h200.estimate(kernel_op(SOFTMAX_BF16, 3000)).ns)
