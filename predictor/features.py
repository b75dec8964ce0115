"""What the estimators know about a device operation: its family, its work and its features.

An :class:`~maya.predictor.ops.Op` holds raw record words.  This module
decodes them (GEMM sizes and types from BLAS records, attention and
convolution shapes from DNN parameters, launch geometry and the kernel's
class and element type from its name for KERNEL records, byte counts for
copies) into:

- :func:`family`: which estimator handles the op (``FAMILIES``);
- :func:`domain`: a coarse category (a BLAS API with its math type, a kernel
  class...) that the family's model must have seen in its training data for
  its estimate to be trusted; an unseen domain goes to the roofline fallback;
- :func:`work`: FLOPs and bytes for the roofline (:mod:`maya.predictor.roofline`);
- :func:`features`: named numbers for the models (log sizes, arithmetic
  intensity, waves of thread blocks or output tiles over the GPU's SMs, tile
  padding efficiency...); :func:`matrix` lays them out in ``FEATURES`` order.

A KERNEL record carries only the kernel's integer arguments, so a kernel's
size is what those and its launch say (grid, block, shared memory) and its
element type what its template arguments say: names are demangled (libstdc++'s ``__cxa_demangle``) before
the patterns below are applied.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from maya.catalog import GPU
from maya.predictor.ops import Op
from maya.predictor.roofline import Work, roofline_ns
from maya.predictor.trace import Kind

FAMILIES = ("gemm", "attention", "dnn", "memory", "copy", "coll")
# Families with fitted estimators; collectives wait for the network model.
FITTED = ("gemm", "attention", "dnn", "memory", "copy")

_KERNEL, _MEMCPY, _MEMSET, _BLAS, _DNN, _COLL = (
    int(Kind.KERNEL), int(Kind.MEMCPY), int(Kind.MEMSET), int(Kind.BLAS), int(Kind.DNN), int(Kind.COLL),
)

# ---------------------------------------------------------------- kernel names

_ATTENTION_KERNEL = re.compile(
    r"flash_fwd|flash_bwd|pytorch_flash|flash_attn|fmha|attention_kernel|AttentionKernel|AttentionBackwardKernel"
    r"|mem_eff|efficient_attention|sdpa",
    re.IGNORECASE,
)
_BACKWARD = re.compile(r"bwd|backward|bprop|cutlassB|_grad|Grad", re.IGNORECASE)

# Kernel classes, first match wins: the launch pattern first (it fixes how the
# launch relates to the work), then what the kernel does.
KERNEL_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("triton_pointwise", r"^triton_poi"),
        ("triton_reduction", r"^triton_(red|per)"),
        ("triton_template", r"^triton_(tem|mm|bmm)"),
        ("triton", r"^triton"),
        ("multi_tensor", r"multi_tensor_apply"),
        ("vectorized_elementwise", r"vectorized_elementwise_kernel"),
        ("unrolled_elementwise", r"unrolled_elementwise_kernel"),
        ("softmax", r"softmax"),
        ("layer_norm", r"layer_?norm|rms_?norm|GammaBeta|RowwiseMoments|ComputeMoments|ComputeFused"),
        ("batch_norm", r"batch_?norm|bn_fw|bn_bw|welford"),
        ("embedding", r"embedding"),
        ("cat", r"CatArray|cat_"),
        ("sort", r"radix|sort|cub::|DeviceScan|DeviceSelect|unique"),
        ("reduce", r"reduce|reduction"),
        ("index", r"index|gather|scatter|take_|put_|masked"),
        ("loss", r"nll_loss|cross_entropy|loss"),
        ("random", r"distribution|philox|curand|dropout|bernoulli|randperm"),
        ("gemm", r"gemm|nvjet|cutlass|xmma|wgmma"),
        ("elementwise", r"\belementwise_kernel|elementwise_grid_stride|elementwise_kernel_with_index"),
        ("copy", r"copy|(?<!no)cast|transpose|permute|nchwToNhwc|nhwcToNchw|contiguous|convert"),
        ("elementwise_other", r"elementwise|Functor|fill"),
        ("pooling", r"pool"),
    )
)
KERNEL_CLASS_NAMES = tuple(name for name, _ in KERNEL_CLASSES) + ("other",)

# Element types in template arguments, widest meaning first where one name
# contains another (complex<float> before float).
_DTYPES: tuple[tuple[re.Pattern[str], int], ...] = tuple(
    (re.compile(p), size)
    for p, size in (
        (r"complex<double>", 16),
        (r"complex<float>|complex<c10::Half>", 8),
        (r"Float8|float8|fp8|e4m3|e5m2", 1),
        (r"BFloat16|bfloat16|__nv_bfloat16|bf16", 2),
        (r"c10::Half|half_t|__half|\bHalf\b|f16", 2),
        (r"\bdouble\b", 8),
        (r"\bfloat\b|f32|tf32", 4),
        (r"\blong\b|int64", 8),
        (r"\bint\b|int32", 4),
        (r"\bbool\b|unsigned char|signed char|int8|uint8", 1),
    )
)
_OPAQUE = re.compile(r"OpaqueType<(\d+)u?>")
_TEMPLATE_INT = re.compile(r"(?<![\w.#])(-?\d+)(?:u|l|ul|ll|ull)?(?=\s*[,>])")


@lru_cache(maxsize=1)
def _cxa_demangle() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
        func = lib.__cxa_demangle
    except (OSError, AttributeError):
        return None
    func.restype = ctypes.c_void_p
    func.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int)]
    return func


_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]


@lru_cache(maxsize=65536)
def demangle(name: str) -> str:
    """The C++ name of a mangled symbol; ``name`` itself when it is not one (nvjet_*, triton_*)."""
    func = _cxa_demangle()
    if func is None or not name.startswith("_Z"):
        return name
    status = ctypes.c_int()
    ptr = func(name.encode(), None, None, ctypes.byref(status))
    if not ptr:
        return name
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        _libc.free(ptr)


@lru_cache(maxsize=65536)
def kernel_class(name: str) -> str:
    """The class of a kernel (``KERNEL_CLASS_NAMES``) from its name."""
    text = demangle(name)
    for cls, pattern in KERNEL_CLASSES:
        if pattern.search(text):
            return cls
    return "other"


@lru_cache(maxsize=65536)
def kernel_dtype_bytes(name: str) -> int:
    """Bytes of the first element type named in the kernel's template arguments (4 if none)."""
    text = demangle(name)
    first: tuple[int, int] | None = None
    for pattern, size in _DTYPES:
        m = pattern.search(text)
        if m and (first is None or m.start() < first[0]):
            first = (m.start(), size)
    opaque = _OPAQUE.search(text)
    if opaque and (first is None or opaque.start() < first[0]):
        return int(opaque.group(1))
    return first[1] if first else 4


@lru_cache(maxsize=65536)
def template_ints(name: str) -> tuple[int, ...]:
    """Integer template arguments in order (vector widths, tile and head sizes...)."""
    return tuple(int(v) for v in _TEMPLATE_INT.findall(demangle(name)))


@lru_cache(maxsize=65536)
def is_attention_kernel(name: str) -> bool:
    return bool(_ATTENTION_KERNEL.search(demangle(name)))


_ATTENTION_CLASSES = tuple(re.compile(p) for p in (
    r"flash_fwd_splitkv", r"flash_fwd", r"flash_bwd_dq_dk_dv", r"flash_bwd_dot_do_o", r"flash_bwd_convert_dq",
    r"fmha_cutlassF", r"fmha_cutlassB", r"cudnn"))


@lru_cache(maxsize=65536)
def attention_class(name: str) -> int:
    """Which attention kernel (index in the patterns above; their count if none)."""
    text = demangle(name)
    return next((i for i, p in enumerate(_ATTENTION_CLASSES) if p.search(text)), len(_ATTENTION_CLASSES))


@lru_cache(maxsize=65536)
def is_backward(name: str) -> bool:
    """The kernel belongs to a backward pass (by its name)."""
    return bool(_BACKWARD.search(demangle(name)))


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
        return f"{op.name}:{_blas(op).math}"
    if fam == "attention":
        if op.kind == _DNN:
            return f"{op.name}:{_dnn_dtype(op)[1]}"
        return "kernel:" + ("bwd" if is_backward(op.name) else "fwd")
    if fam == "dnn":
        return op.name
    if fam == "memory":
        return kernel_class(op.name)
    if fam == "copy":
        return _copy(op).kind
    return "coll"


# ---------------------------------------------------------------- decoding

_CUDA_TYPE_BYTES = {0: 4, 1: 8, 2: 2, 3: 1, 4: 8, 5: 16, 6: 4, 7: 2, 8: 1, 9: 2, 10: 4, 11: 8, 12: 4, 13: 8,
                    14: 2, 15: 4, 20: 2, 21: 4, 22: 2, 23: 4, 24: 8, 25: 16, 26: 8, 27: 16, 28: 1, 29: 1, 30: 1}
_CUDA_COMPLEX = {4, 5, 6, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27}
_CUDA_FP8 = {28, 29, 30, 31, 32, 33}
_CUDA_INT = {3, 8, 10, 12, 16, 18, 20, 22, 24, 26}
_NO_TYPE = 0xFF

# Known BLAS API names, for a stable categorical code; others hash.
_BLAS_APIS = ("cublasLtMatmul", "cublasGemmEx", "cublasGemmStridedBatchedEx", "cublasGemmBatchedEx",
              "cublasSgemm_v2", "cublasSgemmStridedBatched", "cublasSgemmEx", "cublasDgemm_v2",
              "cublasDgemmStridedBatched", "cublasCgemm_v2", "cublasZgemm_v2", "cublasSgemv_v2", "cublasDgemv_v2",
              "cublasSdot_v2", "cublasDdot_v2", "cublasStrsm_v2", "cublasDtrsm_v2")


def _double(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<Q", bits & 0xFFFFFFFFFFFFFFFF))[0])


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else -1.0


def _code(name: str, known: Sequence[str]) -> float:
    """A stable number for a categorical value (its index, or a hash past the known ones)."""
    if name in known:
        return float(known.index(name))
    return float(len(known) + (int.from_bytes(name.encode()[-8:].rjust(8, b"\0"), "little") % 997))


@dataclass(frozen=True)
class _Blas:
    m: int
    n: int
    k: int
    batch: int
    transa: int
    transb: int
    epilogue: int
    a_type: int
    d_type: int
    compute: int
    math: str
    a_bytes: int
    d_bytes: int
    complex: bool
    beta_nonzero: bool
    bias: bool


@lru_cache(maxsize=65536)
def _blas(op: Op) -> _Blas:
    a0, a1, a2, a3, _ = op.a
    a_type, d_type, compute = a3 & 0xFF, (a3 >> 24) & 0xFF, (a3 >> 32) & 0xFF
    if d_type == _NO_TYPE:
        d_type = a_type
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
    params = op.params
    beta = _double(params[9]) if len(params) > 9 else 0.0
    bias = len(params) > 17 and (params[17] & 0xFFFFFFFF) != 0xFFFFFFFF and params[17] != 0
    return _Blas(
        m=a0 & 0xFFFFFFFF, n=a0 >> 32, k=a1 & 0xFFFFFFFF, batch=max(a1 >> 32, 1),
        transa=a2 & 0xFF, transb=(a2 >> 8) & 0xFF, epilogue=(a2 >> 16) & 0xFFFF,
        a_type=a_type, d_type=d_type, compute=compute, math=math_key,
        a_bytes=_CUDA_TYPE_BYTES.get(a_type, 4), d_bytes=_CUDA_TYPE_BYTES.get(d_type, 4),
        complex=a_type in _CUDA_COMPLEX, beta_nonzero=beta != 0.0 and not math.isnan(beta), bias=bias,
    )


def _blas_work(op: Op) -> Work:
    b = _blas(op)
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
    mult = 4.0 if b.complex else 1.0
    return Work(flops * batch * mult, float(batch) * (elems_in * b.a_bytes + elems_out * b.d_bytes), b.math, "hbm")


_CUDNN_BYTES = {0: 4, 1: 8, 2: 2, 3: 1, 4: 4, 6: 1, 9: 2, 10: 8, 11: 1, 12: 1, 13: 1, 20: 8, 21: 16}


def _dnn_dtype(op: Op) -> tuple[int, str]:
    """(element bytes, catalog math key) of a DNN op."""
    t = op.a[2] & 0xFF
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


def _p(op: Op, i: int) -> int:
    return int(op.params[i]) if i < len(op.params) else 0


@dataclass(frozen=True)
class _Sdpa:
    b: int
    h: int
    hk: int
    sq: int
    skv: int
    d: int
    dv: int
    causal: bool
    dropout: bool
    backward: bool


@lru_cache(maxsize=65536)
def _sdpa(op: Op) -> _Sdpa:
    flags = op.a[2]
    return _Sdpa(
        b=max(_p(op, 0), 1), h=max(_p(op, 1), 1), hk=max(_p(op, 2), 1), sq=_p(op, 3), skv=_p(op, 4),
        d=_p(op, 5), dv=_p(op, 6) or _p(op, 5), causal=bool(flags >> 24 & 1), dropout=bool(flags >> 25 & 1),
        backward="bprop" in op.name or "bwd" in op.name,
    )


def _sdpa_work(op: Op) -> Work:
    s = _sdpa(op)
    size, math_key = _dnn_dtype(op)
    pairs = float(s.b) * s.h * s.sq * s.skv * (0.5 if s.causal and s.sq == s.skv else 1.0)
    q, o = float(s.b) * s.h * s.sq * s.d, float(s.b) * s.h * s.sq * s.dv
    kv = float(s.b) * s.hk * s.skv * (s.d + s.dv)
    if s.backward:
        flops = 2.0 * pairs * (3 * s.d + 2 * s.dv)
        nbytes = (2 * (q + kv) + 2 * o) * size + q * 4  # read Q K V O dO, write dQ dK dV, fp32 dQ accumulator
    else:
        flops = 2.0 * pairs * (s.d + s.dv)
        nbytes = (q + kv + o) * size + float(s.b) * s.h * s.sq * 4  # + the fp32 log-sum-exp
    return Work(flops, nbytes, math_key, "hbm")


@dataclass(frozen=True)
class _Conv:
    n: int
    c: int
    k: int
    groups: int
    inp: tuple[int, ...]
    flt: tuple[int, ...]
    out: tuple[int, ...]
    stride: tuple[int, ...]
    gemm: tuple[int, int, int]  # the implicit GEMM's M, N, K for this direction


@lru_cache(maxsize=65536)
def _conv(op: Op) -> _Conv:
    n, c, k, groups, nsp = (_p(op, i) for i in range(5))
    nsp = min(max(nsp, 1), 3)
    dims = [[_p(op, 5 + 6 * d + j) for j in range(6)] for d in range(nsp)]
    inp = tuple(max(d[0], 1) for d in dims)
    flt = tuple(max(d[1], 1) for d in dims)
    out = tuple(max(d[2], 1) for d in dims)
    stride = tuple(max(d[4], 1) for d in dims)
    groups = max(groups, 1)
    pin, pflt, pout = math.prod(inp), math.prod(flt), math.prod(out)
    cg = max(c // groups, 1)
    if "dgrad" in op.name:
        gemm = (n * pin, c, k * pflt)
    elif "wgrad" in op.name:
        gemm = (k, cg * pflt, n * pout)
    else:
        gemm = (n * pout, k, cg * pflt)
    return _Conv(n, c, k, groups, inp, flt, out, stride, gemm)


def _dnn_work(op: Op) -> Work:
    size, math_key = _dnn_dtype(op)
    name = op.name
    if name.startswith("conv"):
        cv = _conv(op)
        flops = 2.0 * cv.n * cv.k * math.prod(cv.out) * max(cv.c // cv.groups, 1) * math.prod(cv.flt)
        x = float(cv.n) * cv.c * math.prod(cv.inp)
        w = float(cv.k) * max(cv.c // cv.groups, 1) * math.prod(cv.flt)
        y = float(cv.n) * cv.k * math.prod(cv.out)
        return Work(flops, (x + w + y) * size, math_key, "hbm")
    if name.startswith("batchnorm"):
        elems = float(_p(op, 0)) * _p(op, 1) * max(_p(op, 2), 1)
        passes = 2 if "inference" in name else (3 if "fwd" in name else 5)
        return Work(10.0 * elems, passes * elems * size, "fp32", "hbm")
    if name.startswith("pooling"):
        elems_in, elems_out = float(_p(op, 0)), float(_p(op, 1))
        window = max(_p(op, 2), 1) * max(_p(op, 3), 1)
        return Work(elems_out * window, (elems_in + elems_out) * size, "fp32", "hbm")
    if name.startswith("dropout_init"):
        return Work(0.0, float(_p(op, 0)), "", "hbm")
    if name.startswith("dropout"):
        elems = float(_p(op, 0))
        return Work(elems, elems * (2 * size + 1), "fp32", "hbm")
    return Work(0.0, 0.0, "", "hbm")


@dataclass(frozen=True)
class Launch:
    """A kernel launch's geometry (KERNEL a1, a2, a3)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def threads(self) -> int:
        return self.blocks * self.threads_per_block

    def blocks_per_sm(self, gpu: GPU) -> int:
        """Resident blocks per SM allowed by threads, block slots and shared memory (registers unknown)."""
        fields = gpu.fields
        limit = min(int(fields["blocks_sm"]), int(fields["threads_sm"]) // max(self.threads_per_block, 1))
        if self.smem > 0:
            limit = min(limit, int(fields["smem_sm"]) // (self.smem + 1024))
        return max(limit, 1)

    def waves(self, gpu: GPU) -> float:
        return self.blocks / (gpu.sm_count * self.blocks_per_sm(gpu))


@lru_cache(maxsize=65536)
def launch(op: Op) -> Launch:
    _, a1, a2, a3, _ = op.a
    grid = (max(a1 & 0xFFFFFFFF, 1), max((a1 >> 32) & 0xFFFF, 1), max((a1 >> 48) & 0xFFFF, 1))
    block = (max(a2 & 0xFFFF, 1), max((a2 >> 16) & 0xFFFF, 1), max((a2 >> 32) & 0xFFFF, 1))
    return Launch(grid, block, int(a3))


# Elements a thread handles, by kernel class, for the byte count of a kernel
# whose arguments are unknown: a proxy the fitted models correct per class.
_ELEMS_PER_THREAD = {"vectorized_elementwise": 8, "unrolled_elementwise": 4, "elementwise": 4, "reduce": 8,
                     "softmax": 8, "layer_norm": 8, "batch_norm": 8, "copy": 4, "cat": 4, "index": 2}
_MULTI_TENSOR_CHUNK = 65536  # elements per block of torch's multi_tensor_apply


def _kernel_work(op: Op) -> Work:
    cls = kernel_class(op.name) if not is_attention_kernel(op.name) else "attention"
    size = kernel_dtype_bytes(op.name)
    ln = launch(op)
    if cls == "multi_tensor":
        ints = template_ints(op.name)
        depth = ints[0] if ints and 0 < ints[0] <= 8 else 2
        elems = float(ln.blocks) * _MULTI_TENSOR_CHUNK
        return Work(elems * depth, elems * size * (depth + 1), "fp32", "hbm")
    elems = float(ln.threads) * _ELEMS_PER_THREAD.get(cls, 4)
    return Work(elems, 2 * elems * size, "fp32", "hbm")


@dataclass(frozen=True)
class _Copy:
    kind: str  # memset, h2d, d2h, d2d, peer, h2h
    bytes: int


def _copy(op: Op) -> _Copy:
    if op.kind == _MEMSET:
        return _Copy("memset", int(op.a[1]))
    nbytes, devices = int(op.a[2]), int(op.a[3])
    dst, src = devices & 0xFFFFFFFF, devices >> 32
    if dst and src:
        kind = "d2d" if dst == src else "peer"
    elif dst:
        kind = "h2d"
    elif src:
        kind = "d2h"
    else:
        kind = {1: "h2d", 2: "d2h", 3: "d2d"}.get(op.a32, "h2h")
    return _Copy(kind, nbytes)


def _copy_work(op: Op) -> Work:
    c = _copy(op)
    if c.kind in ("d2d",):
        return Work(0.0, 2.0 * c.bytes, "", "hbm")
    if c.kind == "memset":
        return Work(0.0, float(c.bytes), "", "hbm")
    if c.kind == "peer":
        return Work(0.0, float(c.bytes), "", "peer")
    return Work(0.0, float(c.bytes), "", "host")


@lru_cache(maxsize=1 << 18)
def work(op: Op) -> Work:
    """The FLOPs and bytes of ``op`` (byte counts of KERNEL ops are proxies from the launch)."""
    fam = family(op)
    if fam == "gemm":
        return _blas_work(op)
    if fam == "attention":
        return _sdpa_work(op) if op.kind == _DNN else _kernel_work(op)
    if fam == "dnn":
        return _dnn_work(op)
    if fam == "memory":
        return _kernel_work(op)
    if fam == "copy":
        return _copy_work(op)
    return Work(0.0, float(op.a[4]), "", "peer")  # COLL: bytes sent


# ---------------------------------------------------------------- features


def _tiles(m: int, n: int, batch: int, tm: int, tn: int, sms: int) -> dict[str, float]:
    """Output tiles of tm x tn over the SMs: waves, last-wave efficiency, padding efficiency."""
    tiles = math.ceil(m / tm) * math.ceil(n / tn) * batch
    waves = tiles / sms
    tag = f"{tm}x{tn}"
    return {
        f"waves_{tag}": _log2(waves),
        f"wave_eff_{tag}": tiles / (math.ceil(waves) * sms) if tiles else 0.0,
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
    b = _blas(op)
    f = {
        "api": _code(op.name, _BLAS_APIS),
        "log_m": _log2(b.m), "log_n": _log2(b.n), "log_k": _log2(b.k), "log_batch": _log2(b.batch),
        "transa": float(b.transa), "transb": float(b.transb), "epilogue": float(b.epilogue),
        "bias": float(b.bias), "beta": float(b.beta_nonzero),
        "a_bytes": float(b.a_bytes), "d_bytes": float(b.d_bytes), "compute": float(b.compute),
        "math": float(("fp8", "fp16", "bf16", "tf32", "fp32", "fp64").index(b.math)),
        "align_m": _align(b.m * b.a_bytes), "align_n": _align(b.n * b.a_bytes), "align_k": _align(b.k * b.a_bytes),
        "align_lda": _align(_p(op, 0) * b.a_bytes), "align_ldb": _align(_p(op, 1) * b.a_bytes),
        "align_ldc": _align(_p(op, 2) * b.d_bytes),
        "pad_eff_k64": b.k / (math.ceil(b.k / 64) * 64) if b.k else 0.0,
        "log_workspace": _log2(op.a[4]),
    }
    f.update(_work_features(_blas_work(op), gpu))
    for tm, tn in ((64, 64), (128, 128), (256, 128)):
        f.update(_tiles(b.m, b.n, b.batch, tm, tn, gpu.sm_count))
    return f


def _sdpa_features(op: Op, gpu: GPU) -> dict[str, float]:
    s = _sdpa(op)
    size, math_key = _dnn_dtype(op)
    f = {
        "backward": float(s.backward), "log_b": _log2(s.b), "log_h": _log2(s.h), "log_hk": _log2(s.hk),
        "log_sq": _log2(s.sq), "log_skv": _log2(s.skv), "d": float(s.d), "dv": float(s.dv),
        "causal": float(s.causal), "dropout": float(s.dropout), "elem_bytes": float(size),
        "n_kernels": float(len(op.kernels)),
    }
    f.update(_work_features(_sdpa_work(op), gpu))
    for tm in (64, 128):
        f.update(_tiles(s.sq, 1, s.b * s.h, tm, 1, gpu.sm_count))
    return f


def _integer_arg_features(op: Op) -> dict[str, float]:
    """The kernel's integer arguments (KERNEL ``params``: sizes of grid-stride kernels), as log2 of
    their magnitudes, and of the product of the first two (rows x columns)."""
    ints = [abs(_signed(v)) for v in op.params[:4]]
    f = {f"int{i}": _log2(v + 1) for i, v in enumerate(ints)}
    if ints:
        f["int_max"] = _log2(max(ints) + 1)
        f["int_prod"] = _log2(ints[0] * (ints[1] if len(ints) > 1 else 1) + 1)
    return f


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _kernel_features(op: Op, gpu: GPU) -> dict[str, float]:
    ln = launch(op)
    ints = template_ints(op.name) + (0, 0, 0)
    waves = ln.waves(gpu)
    f = {
        "class": float(KERNEL_CLASS_NAMES.index(kernel_class(op.name))),
        "backward": float(is_backward(op.name)),
        "elem_bytes": float(kernel_dtype_bytes(op.name)),
        "log_gx": _log2(ln.grid[0]), "log_gy": _log2(ln.grid[1]), "log_gz": _log2(ln.grid[2]),
        "log_bx": _log2(ln.block[0]), "log_by": _log2(ln.block[1]),
        "log_tpb": _log2(ln.threads_per_block), "log_blocks": _log2(ln.blocks), "log_threads": _log2(ln.threads),
        "log_smem": _log2(ln.smem + 1), "blocks_per_sm": float(ln.blocks_per_sm(gpu)),
        "log_waves": _log2(waves), "wave_eff": waves / math.ceil(waves),
        "t0": _log2(abs(ints[0]) + 1), "t1": _log2(abs(ints[1]) + 1), "t2": _log2(abs(ints[2]) + 1),
        "driver": float(op.a32),
        "log_pairs": 2 * _log2(ln.grid[0]) + _log2(ln.grid[1] * ln.grid[2]),  # flash: (Sq tiles)^2 x batch*heads
    }
    f.update(_integer_arg_features(op))
    if is_attention_kernel(op.name):
        f["attn_class"] = float(attention_class(op.name))
    f.update(_work_features(_kernel_work(op), gpu))
    return f


_DNN_OPS = ("conv_fprop", "conv_dgrad", "conv_wgrad", "conv_fprop_bias_act", "batchnorm_fwd_training",
            "batchnorm_bwd", "batchnorm_fwd_inference", "pooling_fwd", "pooling_bwd", "dropout_fwd", "dropout_bwd",
            "dropout_init_states")
_TILE = re.compile(r"(\d+)x(\d+)x(\d+)")


def _dnn_features(op: Op, gpu: GPU) -> dict[str, float]:
    size, math_key = _dnn_dtype(op)
    f = {
        "op": _code(op.name, _DNN_OPS), "elem_bytes": float(size), "layout": float((op.a[2] >> 16) & 0xFF),
        "engine": float(op.a[1] & 0xFFFFFFFF), "n_kernels": float(len(op.kernels)),
        "split_k": float(any("split_k" in k or "segment_k_on" in k for k in op.kernels)),
        "math": float(("fp8", "fp16", "bf16", "tf32", "fp32", "fp64").index(math_key)),
    }
    tile = next((m for m in (_TILE.search(k) for k in op.kernels if "Memset" not in k) if m), None)
    f.update({"tile_m": float(tile.group(1)), "tile_n": float(tile.group(2))} if tile else {})
    f.update({f"p{i}": _log2(_p(op, i)) for i in range(4)})
    if op.name.startswith("conv"):
        cv = _conv(op)
        gm, gn, gk = cv.gemm
        f.update({
            "log_gemm_m": _log2(gm), "log_gemm_n": _log2(gn), "log_gemm_k": _log2(gk),
            "filter": float(math.prod(cv.flt)), "stride": float(max(cv.stride)), "log_groups": _log2(cv.groups),
            "log_spatial": _log2(math.prod(cv.inp)),
        })
        f.update(_tiles(gm, gn, 1, 128, 128, gpu.sm_count))
    f.update(_work_features(_dnn_work(op), gpu))
    return f


def _copy_features(op: Op, gpu: GPU) -> dict[str, float]:
    c = _copy(op)
    f = {
        "kind": float(("memset", "h2d", "d2h", "d2d", "peer", "h2h").index(c.kind)),
        "pinned": float(op.pinned), "log_bytes": _log2(c.bytes), "elem": float(op.a32 if op.kind == _MEMSET else 0),
        "align": float(c.bytes % 16 == 0),
    }
    f["log_roofline"] = _log2(roofline_ns(_copy_work(op), gpu))
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
        "is_kernel", "backward", "log_b", "log_h", "log_hk", "log_sq", "log_skv", "d", "dv", "causal", "dropout",
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
