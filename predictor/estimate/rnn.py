"""cuDNN RNN calls as the work they amount to: GEMMs and per-step pointwise kernels.

No RNN call has been profiled on a GPU, so an ``rnn_fwd``, ``rnn_bwd_data`` or
``rnn_bwd_weights`` record (``docs/dnn.md``) is timed by the work of cuDNN's
standard algorithm, pseudo-layer by pseudo-layer (layer and direction):

- forward: one GEMM of the input weights over every time step at once
  ([gates*hidden x input] x [input x tokens]), then per time step the
  recurrent GEMM ([gates*hidden x hidden] x [hidden x batch]), the LSTM
  projection if any, and one pointwise kernel (gate nonlinearities, cell
  update; in training it also stores what backward needs);
- backward data: per time step the pointwise backward kernel and the
  recurrent GEMM transposed, then one GEMM over all steps for the input's
  gradient;
- backward weights: one GEMM over all steps per weight matrix (input,
  recurrent, projection) and a reduction for the biases.

The GEMMs are built as BLAS operations (:func:`parts`) that the GEMM
estimator times like any cuBLAS call of that shape; the pointwise kernels are
FLOPs and bytes that the memory family's calibrated per-kernel cost times
(:meth:`maya.predictor.estimate.estimators.Estimators.estimate_many`).  What
this leaves out: cuDNN's own kernels may fuse or tile differently (the
persistent algorithms keep the recurrent weights on chip), and the layers of
a deep RNN run as a wavefront that overlaps them; the sum of the parts is the
device busy time of the call if it ran them one after another.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

from maya.predictor.estimate.roofline import Work
from maya.predictor.trace import records as R
from maya.predictor.trace.format import Kind
from maya.predictor.trace.ops import Op

_DNN, _BLAS = int(Kind.DNN), int(Kind.BLAS)
OPS = ("rnn_fwd", "rnn_bwd_data", "rnn_bwd_weights")
GATES = {"lstm": 4, "gru": 3, "relu": 1, "tanh": 1}
CUDNN_FMA_MATH = 3  # cudnnMathType_t: fp32 without tensor cores (torch: allow_tf32 off)
_CUDNN_FLOAT, _CUDNN_DOUBLE, _CUDNN_HALF, _CUDNN_BFLOAT16 = 0, 1, 2, 9
_CUDNN_BYTES = {_CUDNN_FLOAT: 4, _CUDNN_DOUBLE: 8, _CUDNN_HALF: 2, _CUDNN_BFLOAT16: 2}

# The BLAS call each data type's GEMMs are estimated as: API name, a3 (A/B/C/D cudaDataType and
# cublasComputeType_t), and the continuation words MODES and ALGO as torch's calls of that API
# record them (the GEMM estimator's training data).
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32, _COMPUTE_64F = 68, 77, 70
_CUDA_R_32F, _CUDA_R_64F, _CUDA_R_16F, _CUDA_R_16BF = 0, 1, 2, 14
_NO_ALGO = (1 << 64) - 1


@dataclass(frozen=True)
class _Api:
    name: str
    cuda_type: int
    modes: int
    algo: int


def _api(dtype: int, math_type: int) -> tuple[_Api, int]:
    """(BLAS API, compute type) of a cuDNN data type and math type."""
    if dtype == _CUDNN_BFLOAT16:
        return _Api("cublasGemmEx", _CUDA_R_16BF, 0, 99), _COMPUTE_32F
    if dtype == _CUDNN_HALF:
        return _Api("cublasGemmEx", _CUDA_R_16F, 0, 99), _COMPUTE_32F
    if dtype == _CUDNN_DOUBLE:
        return _Api("cublasDgemm_v2", _CUDA_R_64F, 768, _NO_ALGO), _COMPUTE_64F
    compute = _COMPUTE_32F if math_type == CUDNN_FMA_MATH else _COMPUTE_32F_FAST_TF32
    return _Api("cublasSgemm_v2", _CUDA_R_32F, 768, _NO_ALGO), compute


def _double_bits(v: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", v))[0])


def gemm_op(m: int, n: int, k: int, transa: bool, transb: bool, dtype: int, math_type: int,
            accumulate: bool = False) -> Op:
    """A BLAS operation (column-major C[m x n] = op(A) op(B)) as the interposer records one."""
    api, compute = _api(dtype, math_type)
    t = api.cuda_type
    a = (m | n << 32, k | 1 << 32, int(transa) | int(transb) << 8, t | t << 8 | t << 16 | t << 24 | compute << 32,
         32 << 20)
    ext = [0] * R.BLAS_WORDS
    lda, ldb = (k if transa else m), (n if transb else k)
    for name, value in (("LDA", lda), ("LDB", ldb), ("LDC", m), ("LDD", m), ("ALPHA", _double_bits(1.0)),
                        ("BETA", _double_bits(1.0 if accumulate else 0.0)), ("BIAS_TYPE", _NO_ALGO),
                        ("MODES", api.modes), ("ALGO", api.algo)):
        ext[R.BX[name]] = value
    return Op(_BLAS, api.name, 0, a, tuple(ext))


@dataclass(frozen=True)
class Parts:
    """The equivalent work of one RNN call: GEMMs (as BLAS operations) and pointwise kernels,
    each with how many times it runs."""

    gemms: tuple[tuple[Op, int], ...]
    pointwise: tuple[tuple[Work, int], ...]


def is_rnn(op: Op) -> bool:
    return op.kind == _DNN and op.name in OPS


def time_steps(op: Op) -> tuple[int, int]:
    """The layers and directions of an ``rnn_*`` record, and the time steps it runs over all of them: how
    many times cuDNN launches its per-step kernels."""
    r = R.Rnn.decode(op.params)
    return r.layers * r.dirs, r.layers * r.dirs * r.seq


def _pointwise(read: float, written: float, flops_per_elem: float, elems: float, size: int) -> Work:
    return Work(flops_per_elem * elems, (read + written) * size, "fp32", "hbm")


@lru_cache(maxsize=4096)
def parts(op: Op) -> Parts:
    """The GEMMs and pointwise kernels an ``rnn_*`` record amounts to (module docstring)."""
    if not is_rnn(op):
        raise ValueError(f"not an RNN record: {op.label()}")
    r = R.Rnn.decode(op.params)
    dtype = R.DNN_IO_DTYPE.of(op.a)
    size = _CUDNN_BYTES.get(dtype, 4)
    g, h, b, s, t = GATES[r.mode], r.hidden, r.batch, r.seq, r.tokens
    out = r.proj if r.proj else h
    training = bool(R.DNN_TRAINING.of(op.a))
    gemms: dict[Op, int] = {}
    points: dict[Work, int] = {}

    def gemm(m: int, n: int, k: int, transa: bool, transb: bool, count: int, accumulate: bool = False) -> None:
        if m and n and k and count:
            key = gemm_op(m, n, k, transa, transb, dtype, r.math_type, accumulate)
            gemms[key] = gemms.get(key, 0) + count

    def pointwise(w: Work, count: int) -> None:
        points[w] = points.get(w, 0) + count

    step = float(b) * h
    for layer in range(r.layers):
        width = r.input if layer == 0 else out * r.dirs
        for _ in range(r.dirs):
            if op.name == "rnn_fwd":
                gemm(g * h, t, width, True, False, 1)
                gemm(g * h, b, out, True, False, s)
                if r.proj:
                    gemm(r.proj, b, h, True, False, s)
                # Reads both GEMMs' gate pre-activations, the biases and c; writes h and c (and,
                # training, the gates for backward).
                pointwise(_pointwise((2 * g + 1) * step + 2 * g * h, (2 + (g if training else 0)) * step, 8 * g,
                                     step, size), s)
            elif op.name == "rnn_bwd_data":
                # Reads the stored gates, c, dh and dc; writes the gate gradients and dc.
                pointwise(_pointwise((g + 3) * step, (g + 1) * step, 6 * g, step, size), s)
                gemm(out, b, g * h, False, False, s)
                if r.proj:
                    gemm(h, b, r.proj, False, False, s)
                gemm(width, t, g * h, False, False, 1)
            else:
                gemm(g * h, width, t, False, True, 1, accumulate=True)
                gemm(g * h, out, t, False, True, 1, accumulate=True)
                if r.proj:
                    gemm(r.proj, h, t, False, True, 1, accumulate=True)
                pointwise(_pointwise(float(t) * g * h, 2.0 * g * h, 1, float(t) * g * h, size), 1)
    return Parts(tuple(gemms.items()), tuple(points.items()))
