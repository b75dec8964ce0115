"""Work beside a resident NCCL kernel: the factors fitted from two ranks' profiled steps
(benchmarks/calibration/sharing.py), on a hand-made profile with known answers, and the factors the
predictor keeps per compute capability (maya.predictor.replay.sharing)."""

from __future__ import annotations

import pytest

from benchmarks.calibration import sharing as nccl_sharing
from maya import catalog  # noqa: E402
from maya.predictor.replay.sharing import sharing_factors  # noqa: E402
from maya.predictor.trace import Kind  # noqa: E402

GEMM, ADD, CONV, NCCL = "nvjet_sm90_tst_128x128", "void at::native::vectorized_elementwise_kernel<add>", \
    "cudnn_generated_fort_native_sdpa_sm90", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"


def rank(nccl_at: float, durations: dict[str, float]) -> dict:
    """One rank's profile: a 1000 us NCCL kernel from ``nccl_at``, then GEMM, ADD and CONV one after
    another from t=0 on another stream."""
    names = [NCCL, GEMM, ADD, CONV]
    timeline, t = [[0, None, nccl_at, 1000.0, 1]], 0.0
    for i, name in enumerate(names[1:], 1):
        timeline.append([i, None, t, durations[name], 7])
        t += durations[name]
    return {"kernels": [{"name": n} for n in names], "timeline": timeline}


def test_factors_from_the_same_kernels_beside_and_away_from_nccl() -> None:
    """Rank 0's NCCL kernel is resident from t=0, rank 1's only after its kernels: the ratio of
    each kernel's two durations is its kind's factor."""
    plain = {GEMM: 100.0, ADD: 50.0, CONV: 20.0}
    beside = {GEMM: 175.0, ADD: 52.0, CONV: 22.0}
    profile = {"example": "x", "profiles": {"0": rank(0.0, beside), "1": rank(5000.0, plain)}}
    fitted = nccl_sharing.fit(list(nccl_sharing.pairs(profile)))
    assert fitted["BLAS"]["factor"] == pytest.approx(1.75, abs=1e-3)
    assert fitted["KERNEL"]["factor"] == pytest.approx(1.04, abs=1e-3)
    assert fitted["DNN"]["factor"] == pytest.approx(1.1, abs=1e-3)
    assert nccl_sharing.record_kind(NCCL) == "NCCL"


def test_ranks_that_ran_different_kernels_are_refused() -> None:
    other = rank(0.0, {GEMM: 1.0, ADD: 1.0, CONV: 1.0})
    other["kernels"][2]["name"] = "something_else"
    profile = {"example": "x", "profiles": {"0": rank(0.0, {GEMM: 1.0, ADD: 1.0, CONV: 1.0}), "1": other}}
    with pytest.raises(ValueError, match="different kernels"):
        list(nccl_sharing.pairs(profile))


def test_factors_kept_for_hopper_and_none_elsewhere() -> None:
    """Measured on the H200, they stand for the H100 (same compute capability); an A100 has none."""
    h200 = sharing_factors(catalog.lookup("H200-SXM-141GB"))
    assert h200 == sharing_factors(catalog.lookup("H100-SXM-80GB"))
    assert h200[int(Kind.BLAS)] > h200[int(Kind.DNN)] > 1.0 and h200[int(Kind.KERNEL)] > 1.0
    assert sharing_factors(catalog.lookup("A100-SXM-80GB")) == {}
