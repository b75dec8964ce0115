"""What a device operation is to the estimators: its family, its domain, and its FLOPs and bytes.

- :func:`family`: which estimator handles the op (``FAMILIES``);
- :func:`domain`: a coarse category (a BLAS API with its math type, a kernel
  class...) that the family's model must have seen in its training data for
  its estimate to be trusted; an unseen domain goes to the roofline fallback;
- :func:`work`: FLOPs and bytes for the roofline (:mod:`maya.predictor.estimate.roofline`).

The record words are read through :mod:`maya.predictor.trace.records`; what
is added here is their meaning for the hardware: element sizes of the CUDA
and cuDNN data types, the catalog peak an operation computes at, the
implicit GEMM of a convolution, occupancy of a launch on a GPU.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from maya.catalog import GPU
from maya.predictor.estimate.kernel_names import (
    demangle,
    is_attention_kernel,
    is_backward,
    kernel_class,
    kernel_dtype_bytes,
    template_ints,
)
from maya.predictor.estimate.roofline import Work
from maya.predictor.trace import records as R
from maya.predictor.trace.format import Kind
from maya.predictor.trace.ops import Op

FAMILIES = ("gemm", "attention", "dnn", "memory", "copy", "coll")
# Families with fitted estimators; collectives wait for the network model.
FITTED = ("gemm", "attention", "dnn", "memory", "copy")

_KERNEL, _MEMCPY, _MEMSET, _BLAS, _DNN = (int(k) for k in (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET, Kind.BLAS, Kind.DNN))

# ---------------------------------------------------------------- families


def family(op: Op) -> str:
    """The estimator family of ``op`` (``FAMILIES``)."""
    if op.kind == _BLAS:
        return "gemm"
    if op.kind == _DNN:
        return "attention" if op.name.startswith("sdpa") else "dnn"
    if op.kind == _KERNEL:
        return "attention" if is_attention_kernel(op.name) else "memory"
    if op.kind in (_MEMCPY, _MEMSET):
        return "copy"
    return "coll"


def domain(op: Op) -> str:
    """The category a fitted model must have seen to be trusted with ``op``."""
    fam = family(op)
    if fam == "gemm":
        return f"{op.name}:{gemm(op).math}"
    if fam == "attention":
        if op.kind == _DNN:
            return f"{op.name}:{dnn_dtype(op)[1]}"
        return "kernel:" + ("bwd" if is_backward(op.name) else "fwd")
    if fam == "dnn":
        return op.name
    if fam == "memory":
        return kernel_class(op.name)
    if fam == "copy":
        return copy(op).kind
    return "coll"


# ---------------------------------------------------------------- GEMM

_CUDA_TYPE_BYTES = {0: 4, 1: 8, 2: 2, 3: 1, 4: 8, 5: 16, 6: 4, 7: 2, 8: 1, 9: 2, 10: 4, 11: 8, 12: 4, 13: 8,
                    14: 2, 15: 4, 20: 2, 21: 4, 22: 2, 23: 4, 24: 8, 25: 16, 26: 8, 27: 16, 28: 1, 29: 1, 30: 1}
_CUDA_COMPLEX = {4, 5, 6, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27}
_CUDA_FP8 = {28, 29, 30, 31, 32, 33}
_CUDA_INT = {3, 8, 10, 12, 16, 18, 20, 22, 24, 26}


@dataclass(frozen=True)
class Gemm:
    """A BLAS record (:class:`~maya.predictor.trace.records.Blas`) with the catalog peak it
    computes at (``math``), its element sizes and whether it is complex."""

    rec: R.Blas
    math: str
    a_bytes: int
    d_bytes: int
    complex: bool


@lru_cache(maxsize=65536)
def gemm(op: Op) -> Gemm:
    b = R.Blas.decode(op.a, op.params)
    a_type, compute = b.a_type, b.compute
    if compute in (70, 71, 79):
        math_key = "fp64"
    elif a_type in _CUDA_FP8 or a_type in _CUDA_INT:
        math_key = "fp8"
    elif a_type in (14, 15) or compute == 75:
        math_key = "bf16"
    elif a_type in (2, 6) or compute in (64, 65, 74):
        math_key = "fp16"
    elif compute == 77:
        math_key = "tf32"
    elif a_type in (1, 5):
        math_key = "fp64"
    else:
        math_key = "fp32"
    return Gemm(b, math_key, _CUDA_TYPE_BYTES.get(a_type, 4), _CUDA_TYPE_BYTES.get(b.d_type, 4),
                a_type in _CUDA_COMPLEX)


def blas_work(op: Op) -> Work:
    g = gemm(op)
    b = g.rec
    m, n, k, batch = b.m, b.n, b.k, b.batch
    api = op.name.lower()
    if "gemv" in api:
        flops, elems_in, elems_out = 2.0 * m * n, m * n + max(m, n), max(m, n)
    elif "dot" in api:
        flops, elems_in, elems_out = 2.0 * m, 2 * m, 1
    elif "trsm" in api:
        flops, elems_in, elems_out = float(m) * n * k, k * k + m * n, m * n
    elif any(s in api for s in ("getrf", "getrs", "geqrf", "gels")):
        flops, elems_in, elems_out = 2.0 * m * n * max(min(m, n), k), m * n + n * k, m * n + n * k
    else:
        flops = 2.0 * m * n * k
        elems_in, elems_out = m * k + k * n + (m * n if b.beta_nonzero else 0), m * n
    mult = 4.0 if g.complex else 1.0
    return Work(flops * batch * mult, float(batch) * (elems_in * g.a_bytes + elems_out * g.d_bytes), g.math, "hbm")


# ---------------------------------------------------------------- cuDNN

_CUDNN_BYTES = {0: 4, 1: 8, 2: 2, 3: 1, 4: 4, 6: 1, 9: 2, 10: 8, 11: 1, 12: 1, 13: 1, 20: 8, 21: 16}


def dnn_dtype(op: Op) -> tuple[int, str]:
    """(element bytes, catalog math key) of a DNN op."""
    t = R.DNN_IO_DTYPE.of(op.a)
    size = _CUDNN_BYTES.get(t, 4)
    if t == 9:
        return size, "bf16"
    if t == 2:
        return size, "fp16"
    if t in (12, 13):
        return size, "fp8"
    if t in (1, 21):
        return size, "fp64"
    tf32 = any("tf32" in k for k in op.kernels)
    return size, "tf32" if tf32 else "fp32"


def dnn_param(op: Op, names: tuple[str, ...], name: str) -> int:
    """The DNN parameter ``name`` of a block laid out as ``names`` (0 where not recorded)."""
    return R.param(op.params, names.index(name))


def is_sdpa_backward(op: Op) -> bool:
    return "bprop" in op.name or "bwd" in op.name


@lru_cache(maxsize=65536)
def sdpa(op: Op) -> R.Sdpa:
    return R.Sdpa.decode(op.a, op.params)


def sdpa_work(op: Op) -> Work:
    size, math_key = dnn_dtype(op)
    return attention_work(sdpa(op), is_sdpa_backward(op), size, math_key)


def attention_work(s: R.Sdpa, backward: bool, size: int, math_key: str) -> Work:
    """The FLOPs and bytes of attention of shapes ``s``, forward or backward, elements of ``size`` bytes."""
    pairs = float(s.b) * s.h * s.sq * s.skv * (0.5 if s.causal and s.sq == s.skv else 1.0)
    q, o = float(s.b) * s.h * s.sq * s.d, float(s.b) * s.h * s.sq * s.dv
    kv = float(s.b) * s.hk * s.skv * (s.d + s.dv)
    if backward:
        flops = 2.0 * pairs * (3 * s.d + 2 * s.dv)
        nbytes = (2 * (q + kv) + 2 * o) * size + q * 4  # read Q K V O dO, write dQ dK dV, fp32 dQ accumulator
    else:
        flops = 2.0 * pairs * (s.d + s.dv)
        nbytes = (q + kv + o) * size + float(s.b) * s.h * s.sq * 4  # + the fp32 log-sum-exp
    if s.bias:
        nbytes += pairs * size  # the additive mask, read once per query-key pair
    return Work(flops, nbytes, math_key, "hbm")


def kernel_sdpa(op: Op) -> R.Sdpa | None:
    """The shapes an attention kernel's launch recorded (None: not one, or recorded without them)."""
    return R.Sdpa.of_kernel(op.params, launch(op).grid) if is_attention_kernel(op.name) else None


# The attention kernels that only pass over a row per query (flash's split combine, its backward's
# dO.O and dQ conversion): memory-bound, not the attention's FLOPs.
_ATTENTION_PASSES = ("flash_fwd_splitkv_combine", "flash_bwd_dot_do_o", "flash_bwd_convert_dq")


def _attention_kernel_work(op: Op, s: R.Sdpa) -> Work:
    text = demangle(op.name)
    size = kernel_dtype_bytes(op.name)
    math_key = "fp32" if size == 4 else ("bf16" if "bfloat16" in text else "fp16")
    if any(p in text for p in _ATTENTION_PASSES):
        rows = float(s.b) * s.h * s.sq
        return Work(rows * s.dv, rows * s.dv * (2 * size + 4), math_key, "hbm")
    return attention_work(s, is_backward(op.name), size, math_key)


@dataclass(frozen=True)
class Conv:
    """A convolution record's shape and the implicit GEMM's M, N, K for its direction."""

    shape: R.Conv
    gemm: tuple[int, int, int]


@lru_cache(maxsize=65536)
def conv(op: Op) -> Conv:
    s = R.Conv.decode(op.params)
    pin, pflt, pout = math.prod(s.inp), math.prod(s.flt), math.prod(s.out)
    cg = max(s.c // s.groups, 1)
    if "dgrad" in op.name:
        g = (s.n * pin, s.c, s.k * pflt)
    elif "wgrad" in op.name:
        g = (s.k, cg * pflt, s.n * pout)
    else:
        g = (s.n * pout, s.k, cg * pflt)
    return Conv(s, g)


def dnn_work(op: Op) -> Work:
    size, math_key = dnn_dtype(op)
    name = op.name
    if name.startswith("conv"):
        cv = conv(op).shape
        flops = 2.0 * cv.n * cv.k * math.prod(cv.out) * max(cv.c // cv.groups, 1) * math.prod(cv.flt)
        x = float(cv.n) * cv.c * math.prod(cv.inp)
        w = float(cv.k) * max(cv.c // cv.groups, 1) * math.prod(cv.flt)
        y = float(cv.n) * cv.k * math.prod(cv.out)
        return Work(flops, (x + w + y) * size, math_key, "hbm")
    if name.startswith("batchnorm"):
        bn = R.BATCHNORM_PARAMS
        elems = float(dnn_param(op, bn, "n")) * dnn_param(op, bn, "c") * max(dnn_param(op, bn, "spatial"), 1)
        passes = 2 if "inference" in name else (3 if "fwd" in name else 5)
        return Work(10.0 * elems, passes * elems * size, "fp32", "hbm")
    if name.startswith("pooling"):
        pool = R.POOLING_PARAMS
        elems_in, elems_out = float(dnn_param(op, pool, "in_elems")), float(dnn_param(op, pool, "out_elems"))
        window = max(dnn_param(op, pool, "window_h"), 1) * max(dnn_param(op, pool, "window_w"), 1)
        return Work(elems_out * window, (elems_in + elems_out) * size, "fp32", "hbm")
    if name.startswith("dropout_init"):
        return Work(0.0, float(dnn_param(op, R.DROPOUT_INIT_PARAMS, "states_bytes")), "", "hbm")
    if name.startswith("dropout"):
        elems = float(dnn_param(op, R.DROPOUT_PARAMS, "elems"))
        return Work(elems, elems * (2 * size + 1), "fp32", "hbm")
    return Work(0.0, 0.0, "", "hbm")


# ---------------------------------------------------------------- kernels


@lru_cache(maxsize=65536)
def launch(op: Op) -> R.Launch:
    return R.Launch.decode(op.a)


def blocks_per_sm(ln: R.Launch, gpu: GPU) -> int:
    """Resident blocks per SM allowed by threads, block slots and shared memory (registers unknown)."""
    fields = gpu.fields
    limit = min(int(fields["blocks_sm"]), int(fields["threads_sm"]) // max(ln.threads_per_block, 1))
    if ln.smem > 0:
        limit = min(limit, int(fields["smem_sm"]) // (ln.smem + 1024))
    return max(limit, 1)


def waves(ln: R.Launch, gpu: GPU) -> float:
    return ln.blocks / (gpu.sm_count * blocks_per_sm(ln, gpu))


# Elements a thread handles, by kernel class, for the byte count of a kernel
# whose arguments are unknown: a proxy the fitted models correct per class.
_ELEMS_PER_THREAD = {"vectorized_elementwise": 8, "unrolled_elementwise": 4, "elementwise": 4, "reduce": 8,
                     "softmax": 8, "layer_norm": 8, "batch_norm": 8, "copy": 4, "cat": 4, "index": 2}
_MULTI_TENSOR_CHUNK = 65536  # elements per block of torch's multi_tensor_apply


_FUNCTOR = re.compile(r"::(\w+?)Functor<((?:c10::)?\w+)")  # the functor and its element type, first template argument


@lru_cache(maxsize=4096)
def _foreach_functor(name: str) -> tuple[str, str] | None:
    """A multi_tensor_apply kernel's functor and its element type (``("Zero", "float")``), from its
    demangled name: the element type of a scalar-list kernel is its functor's, while its metadata
    names the scalars' (float) first.  Cached by name: many launches of one kernel differ only in
    their lists."""
    m = _FUNCTOR.search(demangle(name))
    return (m.group(1), m.group(2)) if m else None


def _multi_tensor_lists(functor: str | None, ints: tuple[int, ...], depth: int, fused: bool) -> int:
    """Tensor lists a multi_tensor_apply kernel reads plus those it writes.

    torch's foreach functors are ``Functor<T, depth, r_args_depth, res_arg_index>``: they read
    ``r_args_depth`` lists and write one (in place, into the first, or into the last when out of place:
    ``_foreach_sqrt`` reads one list of its two).  ``_foreach_zero_`` writes its list without reading it;
    a norm reads its lists and writes one number a block.  A fused optimizer reads all ``depth`` lists
    and writes all but the gradients."""
    if fused:
        return 2 * depth - 1
    if functor == "Zero":
        return 1
    if functor and functor.startswith("Lp"):
        return depth
    if len(ints) >= 3 and ints[1] == depth and 0 < ints[2] <= depth:
        return ints[2] + 1
    return depth + 1


def triton_facts(op: Op) -> R.TritonFacts | None:
    """What an Inductor Triton pointwise or reduction kernel's source says it moves (None for
    other kernels, and for a Triton kernel the start-up hook could not read)."""
    if op.kind != _KERNEL or kernel_class(op.name) not in ("triton_pointwise", "triton_reduction"):
        return None
    return R.TritonFacts.of(op.params)


# Elements a second that torch.cat's kernels other than the vectorised one copy at most, by form, on an H200 (132 SMs
# at 1.98 GHz): they load and store element by element, so at large sizes they are bound by their instructions, not
# by memory.  Medians of their launches of a million elements and more in benchmarks/data/cat_kernels/ (2026-11-29;
# `python -m benchmarks.cat_estimates` recomputes them): "scalar" (the _alignedK_contig and _contig forms, contiguous
# inputs), "strided" (the plain form, for inputs that are not contiguous: transposed, sliced).
CAT_ELEMENTS_PER_S = {"scalar": 421e9, "strided": 264e9}
CAT_RATE_SMS, CAT_RATE_CLOCK_KHZ = 132, 1_980_000  # the GPU they were measured on: other GPUs scale by SMs x clock


def cat_form(op: Op) -> str:
    """Which of torch.cat's kernels ``op`` launched: "vectorized" (16-byte loads and stores), "scalar" or "strided"."""
    if "CatArrayBatchedCopy_vectorized" in op.name:
        return "vectorized"
    if "CatArrayBatchedCopy_alignedK_contig" in op.name or "CatArrayBatchedCopy_contig" in op.name:
        return "scalar"
    return "strided"


def cat_inputs(op: Op) -> R.CatInputs | None:
    """What a torch.cat kernel's inputs hold (None for other kernels, and for a launch whose metadata the
    interposer did not read: a recorded trace's)."""
    if op.kind != _KERNEL or "CatArrayBatchedCopy" not in op.name:
        return None
    return R.CatInputs.of(op.params)


def kernel_work(op: Op) -> Work:
    cls = kernel_class(op.name) if not is_attention_kernel(op.name) else "attention"
    if cls == "attention" and (shapes := kernel_sdpa(op)) is not None:
        return _attention_kernel_work(op, shapes)
    if (facts := triton_facts(op)) is not None:
        return Work(float(facts.x_elements * max(facts.r_elements, 1)), float(facts.bytes_loaded + facts.bytes_stored),
                    "fp32", "hbm")
    if (cat := cat_inputs(op)) is not None:  # each input read once and written once into the output
        return Work(float(cat.elements), 2.0 * cat.elements * cat.element_bytes, "fp32", "hbm")
    size = kernel_dtype_bytes(op.name)
    ln = launch(op)
    if cls == "multi_tensor":
        ints = template_ints(op.name)
        depth = ints[0] if ints and 0 < ints[0] <= 8 else 2
        lists = R.TensorLists.of(op.params)
        elems = float(lists.elements) if lists else float(ln.blocks) * _MULTI_TENSOR_CHUNK
        functor = _foreach_functor(op.name)
        size = kernel_dtype_bytes(functor[1]) if functor else size
        lists_moved = _multi_tensor_lists(functor[0] if functor else None, ints, depth, "Fused" in op.name)
        return Work(elems * depth, elems * size * lists_moved, "fp32", "hbm")
    elems = float(ln.threads) * _ELEMS_PER_THREAD.get(cls, 4)
    return Work(elems, 2 * elems * size, "fp32", "hbm")


# ---------------------------------------------------------------- copies


def copy(op: Op) -> R.Copy:
    return R.Copy.memset(op.a) if op.kind == _MEMSET else R.Copy.memcpy(op.a32, op.a)


def copy_work(op: Op) -> Work:
    c = copy(op)
    if c.kind in ("d2d",):
        return Work(0.0, 2.0 * c.bytes, "", "hbm")
    if c.kind == "memset":
        return Work(0.0, float(c.bytes), "", "hbm")
    if c.kind == "peer":
        return Work(0.0, float(c.bytes), "", "peer")
    return Work(0.0, float(c.bytes), "", "host")


@lru_cache(maxsize=1 << 18)
def work(op: Op) -> Work:
    """The FLOPs and bytes of ``op`` (byte counts of KERNEL ops are proxies from the launch, but an
    Inductor Triton kernel's, which its source gives)."""
    fam = family(op)
    if fam == "gemm":
        return blas_work(op)
    if fam == "attention":
        return sdpa_work(op) if op.kind == _DNN else kernel_work(op)
    if fam == "dnn":
        return dnn_work(op)
    if fam == "memory":
        return kernel_work(op)
    if fam == "copy":
        return copy_work(op)
    return Work(0.0, float(R.COLL_BYTES.of(op.a)), "", "peer")  # COLL: bytes sent

