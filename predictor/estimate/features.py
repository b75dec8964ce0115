"""The features the kernel-time models are fitted on: named numbers per family of operation.

Log sizes, arithmetic intensity, the roofline time, waves of thread blocks
or output tiles over the GPU's SMs, tile padding and operand alignment
efficiency...: :func:`features` gives them by name, :func:`matrix` lays them
out in ``FEATURES`` order for a model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from maya.catalog import GPU
from maya.predictor.estimate.kernel_names import (
    KERNEL_CLASS_NAMES,
    attention_class,
    is_attention_kernel,
    is_backward,
    kernel_class,
    kernel_dtype_bytes,
    template_ints,
)
from maya.predictor.estimate.roofline import Work, roofline_ns
from maya.predictor.estimate.work import (
    blas_work,
    blocks_per_sm,
    conv,
    copy,
    copy_work,
    dnn_dtype,
    dnn_work,
    family,
    gemm,
    is_sdpa_backward,
    kernel_sdpa,
    kernel_work,
    launch,
    sdpa,
    sdpa_work,
    waves,
)
from maya.predictor.trace import records as R
from maya.predictor.trace.format import Kind
from maya.predictor.trace.ops import Op

_DNN, _MEMSET = int(Kind.DNN), int(Kind.MEMSET)

# Known BLAS API names, for a stable categorical code; others hash.
_BLAS_APIS = ("cublasLtMatmul", "cublasGemmEx", "cublasGemmStridedBatchedEx", "cublasGemmBatchedEx",
              "cublasSgemm_v2", "cublasSgemmStridedBatched", "cublasSgemmEx", "cublasDgemm_v2",
              "cublasDgemmStridedBatched", "cublasCgemm_v2", "cublasZgemm_v2", "cublasSgemv_v2", "cublasDgemv_v2",
              "cublasSdot_v2", "cublasDdot_v2", "cublasStrsm_v2", "cublasDtrsm_v2")


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else -1.0


def _code(name: str, known: Sequence[str]) -> float:
    """A stable number for a categorical value (its index, or a hash past the known ones)."""
    if name in known:
        return float(known.index(name))
    return float(len(known) + (int.from_bytes(name.encode()[-8:].rjust(8, b"\0"), "little") % 997))


def _tiles(m: int, n: int, batch: int, tm: int, tn: int, sms: int) -> dict[str, float]:
    """Output tiles of tm x tn over the SMs: waves, last-wave efficiency, padding efficiency."""
    tiles = math.ceil(m / tm) * math.ceil(n / tn) * batch
    n_waves = tiles / sms
    tag = f"{tm}x{tn}"
    return {
        f"waves_{tag}": _log2(n_waves),
        f"wave_eff_{tag}": tiles / (math.ceil(n_waves) * sms) if tiles else 0.0,
        f"pad_eff_{tag}": (m * n) / (math.ceil(m / tm) * tm * math.ceil(n / tn) * tn) if m and n else 0.0,
    }


def _align(nbytes: int) -> float:
    """log2 of the largest power of two (up to 128) dividing a size in bytes: what vector loads and
    tensor-core kernels require of operands and leading dimensions."""
    return float(min((nbytes & -nbytes).bit_length() - 1, 7)) if nbytes > 0 else 7.0


def _work_features(w: Work, gpu: GPU) -> dict[str, float]:
    return {
        "log_flops": _log2(w.flops),
        "log_bytes": _log2(w.bytes),
        "intensity": _log2(w.flops / w.bytes) if w.bytes > 0 and w.flops > 0 else -1.0,
        "log_roofline": _log2(roofline_ns(w, gpu)),
    }


def _gemm_features(op: Op, gpu: GPU) -> dict[str, float]:
    g = gemm(op)
    b = g.rec
    f = {
        "api": _code(op.name, _BLAS_APIS),
        "log_m": _log2(b.m), "log_n": _log2(b.n), "log_k": _log2(b.k), "log_batch": _log2(b.batch),
        "transa": float(b.transa), "transb": float(b.transb), "epilogue": float(b.epilogue),
        "bias": float(b.bias), "beta": float(b.beta_nonzero),
        "a_bytes": float(g.a_bytes), "d_bytes": float(g.d_bytes), "compute": float(b.compute),
        "math": float(("fp8", "fp16", "bf16", "tf32", "fp32", "fp64").index(g.math)),
        "align_m": _align(b.m * g.a_bytes), "align_n": _align(b.n * g.a_bytes), "align_k": _align(b.k * g.a_bytes),
        "align_lda": _align(b.word("LDA") * g.a_bytes), "align_ldb": _align(b.word("LDB") * g.a_bytes),
        "align_ldc": _align(b.word("LDC") * g.d_bytes),
        "pad_eff_k64": b.k / (math.ceil(b.k / 64) * 64) if b.k else 0.0,
        "log_workspace": _log2(R.BLAS_WORKSPACE.of(op.a)),
    }
    f.update(_work_features(blas_work(op), gpu))
    for tm, tn in ((64, 64), (128, 128), (256, 128)):
        f.update(_tiles(b.m, b.n, b.batch, tm, tn, gpu.sm_count))
    return f


def _attention_shape_features(s: R.Sdpa, gpu: GPU) -> dict[str, float]:
    f = {
        "log_b": _log2(s.b), "log_h": _log2(s.h), "log_hk": _log2(s.hk), "log_sq": _log2(s.sq),
        "log_skv": _log2(s.skv), "d": float(s.d), "dv": float(s.dv), "causal": float(s.causal),
        "attn_bias": float(s.bias),
    }
    for tm in (64, 128):
        f.update(_tiles(s.sq, 1, s.b * s.h, tm, 1, gpu.sm_count))
    return f


def _sdpa_features(op: Op, gpu: GPU) -> dict[str, float]:
    s = sdpa(op)
    size, math_key = dnn_dtype(op)
    f = {
        "backward": float(is_sdpa_backward(op)), "dropout": float(s.dropout), "elem_bytes": float(size),
        "n_kernels": float(len(op.kernels)), **_attention_shape_features(s, gpu),
    }
    f.update(_work_features(sdpa_work(op), gpu))
    return f


def _strided_layout(op: Op) -> tuple[int, ...] | None:
    """(dims, innermost size, output's and first input's innermost byte strides) of PyTorch's strided
    elementwise kernel, which emulation records after its N (``emulation-image/src/kernel_args.c``)."""
    if len(op.params) == 5 and "18elementwise_kernel" in op.name and "gpu_kernel_impl" in op.name:
        return tuple(int(v) for v in op.params[1:])
    return None


def _strided_features(layout: tuple[int, ...]) -> dict[str, float]:
    """Why: a copy that keeps the innermost dimension contiguous on both sides runs at copy bandwidth,
    a transposing one several times slower, at the same grid and element count."""
    dims, inner, out_stride, in_stride = layout
    return {"str_dims": float(dims), "str_inner": _log2(inner), "str_out": _log2(out_stride + 1),
            "str_in": _log2(in_stride + 1)}


def _integer_arg_features(params: tuple[int, ...]) -> dict[str, float]:
    """The kernel's integer arguments (KERNEL ``params``: sizes of grid-stride kernels), as log2 of
    their magnitudes, and of the product of the first two (rows x columns)."""
    ints = [abs(R.signed(v)) for v in params[:4]]
    f = {f"int{i}": _log2(v + 1) for i, v in enumerate(ints)}
    if ints:
        f["int_max"] = _log2(max(ints) + 1)
        f["int_prod"] = _log2(ints[0] * (ints[1] if len(ints) > 1 else 1) + 1)
    return f


def _kernel_features(op: Op, gpu: GPU) -> dict[str, float]:
    ln = launch(op)
    ints = template_ints(op.name) + (0, 0, 0)
    w = waves(ln, gpu)
    f = {
        "class": float(KERNEL_CLASS_NAMES.index(kernel_class(op.name))),
        "backward": float(is_backward(op.name)),
        "elem_bytes": float(kernel_dtype_bytes(op.name)),
        "log_gx": _log2(ln.grid[0]), "log_gy": _log2(ln.grid[1]), "log_gz": _log2(ln.grid[2]),
        "log_bx": _log2(ln.block[0]), "log_by": _log2(ln.block[1]),
        "log_tpb": _log2(ln.threads_per_block), "log_blocks": _log2(ln.blocks), "log_threads": _log2(ln.threads),
        "log_smem": _log2(ln.smem + 1), "blocks_per_sm": float(blocks_per_sm(ln, gpu)),
        "log_waves": _log2(w), "wave_eff": w / math.ceil(w),
        "t0": _log2(abs(ints[0]) + 1), "t1": _log2(abs(ints[1]) + 1), "t2": _log2(abs(ints[2]) + 1),
        "driver": float(op.a32),
        "log_pairs": 2 * _log2(ln.grid[0]) + _log2(ln.grid[1] * ln.grid[2]),  # flash: (Sq tiles)^2 x batch*heads
    }
    layout = _strided_layout(op)
    shapes = kernel_sdpa(op)  # an attention kernel's recorded shapes: its words are no integer arguments
    if shapes is None:
        f.update(_integer_arg_features(op.params[:1] if layout else op.params))  # a strided kernel's N alone
    if layout:
        f.update(_strided_features(layout))
    if is_attention_kernel(op.name):
        f["attn_class"] = float(attention_class(op.name))
    if shapes is not None:
        f.update(_attention_shape_features(shapes, gpu))
    f.update(_work_features(kernel_work(op), gpu))
    return f


_DNN_OPS = ("conv_fprop", "conv_dgrad", "conv_wgrad", "conv_fprop_bias_act", "batchnorm_fwd_training",
            "batchnorm_bwd", "batchnorm_fwd_inference", "pooling_fwd", "pooling_bwd", "dropout_fwd", "dropout_bwd",
            "dropout_init_states")
_TILE = re.compile(r"(\d+)x(\d+)x(\d+)")


def _dnn_features(op: Op, gpu: GPU) -> dict[str, float]:
    size, math_key = dnn_dtype(op)
    f = {
        "op": _code(op.name, _DNN_OPS), "elem_bytes": float(size), "layout": float(R.DNN_LAYOUT.of(op.a)),
        "engine": float(R.DNN_ENGINE.of(op.a)), "n_kernels": float(len(op.kernels)),
        "split_k": float(any("split_k" in k or "segment_k_on" in k for k in op.kernels)),
        "math": float(("fp8", "fp16", "bf16", "tf32", "fp32", "fp64").index(math_key)),
    }
    tile = next((m for m in (_TILE.search(k) for k in op.kernels if "Memset" not in k) if m), None)
    f.update({"tile_m": float(tile.group(1)), "tile_n": float(tile.group(2))} if tile else {})
    f.update({f"p{i}": _log2(R.param(op.params, i)) for i in range(4)})
    if op.name.startswith("conv"):
        cv = conv(op).shape
        gm, gn, gk = conv(op).gemm
        f.update({
            "log_gemm_m": _log2(gm), "log_gemm_n": _log2(gn), "log_gemm_k": _log2(gk),
            "filter": float(math.prod(cv.flt)), "stride": float(max(cv.stride)), "log_groups": _log2(cv.groups),
            "log_spatial": _log2(math.prod(cv.inp)),
        })
        f.update(_tiles(gm, gn, 1, 128, 128, gpu.sm_count))
    f.update(_work_features(dnn_work(op), gpu))
    return f


def _copy_features(op: Op, gpu: GPU) -> dict[str, float]:
    c = copy(op)
    f = {
        "kind": float(("memset", "h2d", "d2h", "d2d", "peer", "h2h").index(c.kind)),
        "pinned": float(op.pinned), "log_bytes": _log2(c.bytes), "elem": float(op.a32 if op.kind == _MEMSET else 0),
        "align": float(c.bytes % 16 == 0),
    }
    f["log_roofline"] = _log2(roofline_ns(copy_work(op), gpu))
    return f


# Feature names per family, in matrix column order.  Attention mixes DNN
# records (shapes known) and KERNEL launches (geometry only): columns that do
# not apply are -1.
FEATURES: dict[str, tuple[str, ...]] = {
    "gemm": (
        "api", "log_m", "log_n", "log_k", "log_batch", "transa", "transb", "epilogue", "bias", "beta", "a_bytes",
        "d_bytes", "compute", "math", "align_m", "align_n", "align_k", "align_lda", "align_ldb", "align_ldc", "pad_eff_k64", "log_workspace", "log_flops",
        "log_bytes", "intensity", "log_roofline", "waves_64x64", "wave_eff_64x64", "pad_eff_64x64",
        "waves_128x128", "wave_eff_128x128", "pad_eff_128x128", "waves_256x128", "wave_eff_256x128",
        "pad_eff_256x128",
    ),
    "attention": (
        "is_kernel", "backward", "log_b", "log_h", "log_hk", "log_sq", "log_skv", "d", "dv", "causal", "attn_bias",
        "dropout",
        "elem_bytes", "n_kernels", "waves_64x1", "wave_eff_64x1", "waves_128x1", "wave_eff_128x1", "attn_class",
        "log_gx", "log_gy", "log_gz", "log_tpb", "log_blocks", "log_threads", "log_smem", "log_waves", "log_pairs",
        "t0", "t1", "t2", "int0", "int1", "int2", "int3", "int_max", "int_prod",
        "log_flops", "log_bytes", "intensity", "log_roofline",
    ),
    "dnn": (
        "op", "elem_bytes", "layout", "engine", "n_kernels", "split_k", "math", "tile_m", "tile_n", "p0", "p1", "p2",
        "p3", "log_gemm_m", "log_gemm_n", "log_gemm_k", "filter", "stride", "log_groups", "log_spatial",
        "waves_128x128", "wave_eff_128x128", "pad_eff_128x128", "log_flops", "log_bytes", "intensity",
        "log_roofline",
    ),
    "memory": (
        "class", "backward", "elem_bytes", "log_gx", "log_gy", "log_gz", "log_bx", "log_by", "log_tpb", "log_blocks",
        "log_threads", "log_smem", "blocks_per_sm", "log_waves", "wave_eff", "t0", "t1", "t2", "driver",
        "log_bytes", "log_roofline", "int0", "int1", "int2", "int3", "int_max", "int_prod",
        "str_dims", "str_inner", "str_out", "str_in",
    ),
    "copy": ("kind", "pinned", "log_bytes", "elem", "align", "log_roofline"),
    "coll": (),
}


def features(op: Op, gpu: GPU) -> dict[str, float]:
    """Named features of ``op`` on ``gpu`` (the keys of ``FEATURES[family(op)]`` it has)."""
    fam = family(op)
    if fam == "gemm":
        return _gemm_features(op, gpu)
    if fam == "attention":
        if op.kind == _DNN:
            return {"is_kernel": 0.0, **_sdpa_features(op, gpu)}
        return {"is_kernel": 1.0, **_kernel_features(op, gpu)}
    if fam == "dnn":
        return _dnn_features(op, gpu)
    if fam == "memory":
        return _kernel_features(op, gpu)
    if fam == "copy":
        return _copy_features(op, gpu)
    return {}


def matrix(ops: Sequence[Op], gpu: GPU, fam: str) -> npt.NDArray[np.float64]:
    """Features of ops of family ``fam`` as rows, columns in ``FEATURES[fam]`` order (-1 where absent)."""
    names = FEATURES[fam]
    out = np.full((len(ops), len(names)), -1.0)
    for i, op in enumerate(ops):
        f = features(op, gpu)
        out[i] = [f.get(n, -1.0) for n in names]
    return out
