"""RNN calls timed as their equivalent work (predictor/estimate/rnn.py) on CPU.

Covers: an ``rnn_*`` record's parts for a known LSTM shape (the input GEMM over
all tokens once, the recurrent GEMM and a pointwise kernel per time step and
pseudo-layer, FLOPs those of the cell's matrix products; backward data and
weights transposed), the GEMMs built as the BLAS calls torch records for the
data and math type (TF32 unless the math type is FMA), and the estimate: the
sum of the GEMMs' estimates (here exact measured signatures) times their
counts plus the pointwise kernels at the memory family's per-kernel cost,
with confidence ``derived``; a non-RNN record is refused.
"""

from __future__ import annotations

import struct

import pytest

from maya import catalog
from maya.predictor.estimate import estimators as E
from maya.predictor.estimate import fit as FIT
from maya.predictor.estimate import rnn
from maya.predictor.estimate.roofline import roofline_ns
from maya.predictor.estimate.work import gemm
from maya.predictor.trace import Kind
from maya.predictor.trace import records as R
from maya.predictor.trace.ops import Op

S, B, IN, H = 32, 16, 256, 512  # seq, batch, input, hidden
TRAINING = 1 << 27


def rnn_op(name: str, *, mode: int = 2, layers: int = 1, dirs: int = 1, dtype: int = 0, math_type: int = 0) -> Op:
    words = {"mode": mode, "algo": 0, "layers": layers, "dirs": dirs, "input": IN, "hidden": H, "proj": 0,
             "seq": S, "batch": B, "tokens": S * B, "bias": 2, "math": math_type, "reserve": 0,
             "dropout": struct.unpack("<Q", struct.pack("<d", 0.0))[0]}
    params = tuple(words[n] for n in R.RNN_PARAMS)
    return Op(int(Kind.DNN), name, 0, (0, 0, dtype | TRAINING | 2 << 16, len(params), 0), params)


def shapes(p: rnn.Parts) -> dict[tuple[int, int, int], int]:
    return {(gemm(g).rec.m, gemm(g).rec.n, gemm(g).rec.k): n for g, n in p.gemms}


def test_lstm_forward_is_one_input_gemm_and_a_recurrent_gemm_per_step() -> None:
    p = rnn.parts(rnn_op("rnn_fwd"))
    assert shapes(p) == {(4 * H, S * B, IN): 1, (4 * H, B, H): S}
    assert [n for _, n in p.pointwise] == [S]
    flops = sum(2.0 * gemm(g).rec.m * gemm(g).rec.n * gemm(g).rec.k * n for g, n in p.gemms)
    assert flops == 2.0 * 4 * H * (IN + H) * S * B  # the cell's matrix products over every token
    g = gemm(p.gemms[0][0])
    assert (p.gemms[0][0].name, g.math) == ("cublasSgemm_v2", "tf32")


def test_backward_data_and_weights_are_the_transposed_products() -> None:
    assert shapes(rnn.parts(rnn_op("rnn_bwd_data"))) == {(H, B, 4 * H): S, (IN, S * B, 4 * H): 1}
    assert shapes(rnn.parts(rnn_op("rnn_bwd_weights"))) == {(4 * H, IN, S * B): 1, (4 * H, H, S * B): 1}
    two = rnn.parts(rnn_op("rnn_fwd", mode=3, layers=2, dirs=2))  # GRU, 2 layers, bidirectional
    # Layer 1 reads both directions of layer 0; every pseudo-layer steps S times.
    assert shapes(two) == {(3 * H, S * B, IN): 2, (3 * H, S * B, 2 * H): 2, (3 * H, B, H): 4 * S}


def test_math_type_and_data_type_choose_the_blas_call() -> None:
    fma = rnn.parts(rnn_op("rnn_fwd", math_type=rnn.CUDNN_FMA_MATH)).gemms[0][0]
    assert gemm(fma).math == "fp32"
    bf16 = rnn.parts(rnn_op("rnn_fwd", dtype=9)).gemms[0][0]
    assert (bf16.name, gemm(bf16).math) == ("cublasGemmEx", "bf16")


def test_estimate_is_the_sum_of_its_parts_and_says_derived() -> None:
    op = rnn_op("rnn_fwd")
    p = rnn.parts(op)
    measured = {g.signature(): 1000.0 * (i + 1) for i, (g, _) in enumerate(p.gemms)}
    est = E.Estimators("H100-SXM-80GB", "H100-SXM-80GB", {}, measured, FIT.NameTable([]), 0.0)
    e = est.estimate(op)
    gpu = catalog.lookup("H100-SXM-80GB")
    expected = sum(1000.0 * (i + 1) * n for i, (_, n) in enumerate(p.gemms))
    expected += sum(n * (FIT.DEFAULT_FLOOR_NS + roofline_ns(w, gpu)) for w, n in p.pointwise)
    assert e.ns == pytest.approx(expected)
    assert (e.confidence, e.estimator) == ("derived", "rnn:derived")
    assert S * FIT.DEFAULT_FLOOR_NS < e.ns  # one pointwise kernel per step at least


def test_a_measured_rnn_record_wins_and_other_records_are_refused() -> None:
    op = rnn_op("rnn_bwd_data")
    est = E.Estimators("H100-SXM-80GB", "H100-SXM-80GB", {}, {op.signature(): 5.0}, FIT.NameTable([]), 0.0)
    assert est.estimate(op).confidence == "measured"
    with pytest.raises(ValueError, match="not an RNN record"):
        rnn.parts(Op(int(Kind.DNN), "conv_fprop", 0, (0, 0, 0, 0, 0)))
