"""What a kernel's name says: its class, element type, template integers, attention or backward.

A KERNEL record carries only the kernel's integer arguments and launch, so
what the kernel does comes from its name: names are demangled (libstdc++'s
``__cxa_demangle``) before the patterns below are applied.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re
from functools import lru_cache

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

