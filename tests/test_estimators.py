"""Kernel-time estimators (predictor/estimate/) on CPU.

Covers: kernel names decoded into class, element type and template integers;
GEMM, attention, convolution and copy features; fitting on synthetic
profile tables and estimating unseen shapes; the exact-signature lookup; the
roofline fallback, flagged, for an unseen kernel class; the fit cache (a
second load is a hit, other data a miss); GPUs without profiles ('scaled'
from the same architecture, 'fallback' otherwise) and GPUs whose tables
lack a family (borrowed, 'scaled'); the committed H100 tables fitted and a
held-out model's kernels estimated from them; evaluate() keeping
held-out rows out of the fit; the ``maya estimators`` command.

But for the committed tables, the tables are synthetic: durations from a hidden roofline-with-efficiency
model and 2% noise, sized to fit in a few seconds.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from maya import catalog, cli
from maya.predictor.estimate import cache as C
from maya.predictor.estimate import estimators as E
from maya.predictor.estimate import evaluation as V
from maya.predictor.estimate import features as F
from maya.predictor.estimate import fit as FIT
from maya.predictor.estimate import kernel_names as N
from maya.predictor.estimate import loading as L
from maya.predictor.estimate import work as W
from maya.predictor.estimate.profiles import ProfileRow, load_profiles
from maya.predictor.estimate.roofline import Work, roofline_ns
from maya.predictor.trace import Kind
from maya.predictor.trace.ops import Op

GPU = "H100-SXM-80GB"
H100 = catalog.lookup(GPU)
BF16, FP32 = 14, 0  # cudaDataType
CUDNN_BF16 = 9

# Real mangled names from libtorch_cuda.so (torch 2.11.0+cu130).
FILL_F32 = "_ZN2at6nativeL29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
FILL_BF16 = "_ZN2at6nativeL29vectorized_elementwise_kernelILi8ENS0_11FillFunctorIN3c108BFloat16EEESt5arrayIPcLm1EEEEviT0_T1_"
REDUCE_MAX = "_ZN2at6nativeL13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfNS0_13MaxNanFunctorIfEEEEjfLi4ELi4EEEEEvT1_"
SOFTMAX_BF16 = "_ZN2at6native43_GLOBAL__N__b6de9c8c_10_SoftMax_cu_9f978f63L19cunn_SoftMaxForwardILi8EN3c108BFloat16EffNS1_22SoftMaxForwardEpilogueEEEvPT2_PKT0_i"
CAT_2B = "_ZN2at6native40_GLOBAL__N__0f1a8107_8_Shape_cu_49f7391cL30CatArrayBatchedCopy_vectorizedINS1_10OpaqueTypeILj2EEEjLi1ELi128ELi1ELi16ELi8EEEvPcNS1_25CatArrInputTensorMetadataIT_T0_XT2_EXT3_EEENS1_16TensorSizeStrideIS8_Lj4EEEiS8_"
ADAM = "_ZN2at6native51_GLOBAL__N__f7f2fd5f_18_fused_adam_impl_cu_454205f3L25multi_tensor_apply_kernelINS1_32FusedOptimizerTensorListMetadataILi4EEENS1_20FusedAdamMathFunctorIdLi4ELNS0_9ADAM_MODEE0ELb0EEEJPKfdddddbS9_S9_EEEvT_T0_DpT1_"
MEM_EFF = "_Z39fmha_cutlassF_f32_aligned_64x64_rf_sm50N22PyTorchMemEffAttention15AttentionKernelIfN7cutlass4arch4Sm50ELb1ELi64ELi64ELi64ELb1ELb1EE6ParamsE"
MEMORY_NAMES = (FILL_F32, FILL_BF16, REDUCE_MAX, SOFTMAX_BF16, CAT_2B, ADAM)


# ---------------------------------------------------------------- op builders


def dbits(x: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", x))[0])


def gemm_op(m: int, n: int, k: int, batch: int = 1, dtype: int = BF16, api: str = "cublasLtMatmul") -> Op:
    compute = 68 if dtype != FP32 else 77
    a3 = dtype | dtype << 8 | dtype << 16 | dtype << 24 | compute << 32
    params = [0] * 28
    params[9], params[17] = dbits(0.0), 0xFFFFFFFF
    return Op(int(Kind.BLAS), api, 0, (m | n << 32, k | batch << 32, 1, a3, 1 << 25), tuple(params))


def sdpa_op(b: int, h: int, s: int, d: int, causal: bool, backward: bool) -> Op:
    params = (b, h, h, s, s, d, d, dbits(d**-0.5), dbits(0.0))
    kernels = ("Memset (Device)", f"cudnn_generated_fort_native_sdpa_sm90_flash_{'bprop' if backward else 'fprop'}")
    a2 = CUDNN_BF16 | 2 << 16 | int(causal) << 24 | 1 << 26
    return Op(int(Kind.DNN), "sdpa_bprop" if backward else "sdpa_fprop", 0,
              (0, 0, a2, len(params) | len(kernels) << 16, 0), params, kernels)


def conv_op(direction: str, n: int, c: int, k: int, hw: int, r: int, stride: int) -> Op:
    out = (hw + 2 * (r // 2) - r) // stride + 1
    dims = [hw, r, out, r // 2, stride, 1] * 2 + [0] * 6
    params = (n, c, k, 1, 2, *dims)
    kernels = (f"sm90_xmma_{direction}_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64",)
    return Op(int(Kind.DNN), f"conv_{direction}", 0, (0, 7, CUDNN_BF16 | 1 << 16 | 1 << 26, len(params) | 1 << 16, 0),
              params, kernels)


def kernel_op(name: str, blocks: int, threads: int = 128, smem: int = 0) -> Op:
    return Op(int(Kind.KERNEL), name, 0, (0, blocks | 1 << 32 | 1 << 48, threads | 1 << 16 | 1 << 32, smem, 0))


def memcpy_op(nbytes: int, kind: str) -> Op:
    devices = {"h2d": 1, "d2h": 1 << 32, "d2d": 1 | 1 << 32}[kind]
    a32 = {"h2d": 1, "d2h": 2, "d2d": 3}[kind]
    return Op(int(Kind.MEMCPY), "", a32, (0, 0, nbytes, devices, 0), pinned=kind != "d2d")


def memset_op(nbytes: int) -> Op:
    return Op(int(Kind.MEMSET), "", 0, (0, nbytes, 0, 0, 0))


# ---------------------------------------------------------------- synthetic profiles

_NAME_COST = {FILL_F32: 0.6, FILL_BF16: 0.5, REDUCE_MAX: 1.4, SOFTMAX_BF16: 2.0, CAT_2B: 1.0, ADAM: 1.1}


def true_ns(op: Op) -> float:
    """The hidden 'GPU': roofline with size-dependent efficiency, plus a launch floor."""
    fam = W.family(op)
    w = W.work(op)
    if fam == "gemm":
        m, n, k = op.a[0] & 0xFFFFFFFF, op.a[0] >> 32, op.a[1] & 0xFFFFFFFF
        tiles = math.ceil(m / 128) * math.ceil(n / 128)
        eff = 0.8 * tiles / (math.ceil(tiles / 132) * 132) * k / (k + 96)
        return 2500 + max(w.flops / (H100.peak_flops("bf16") * eff), w.bytes / (0.85 * H100.mem_bw_bytes_per_s)) * 1e9
    if fam == "attention":
        return 4000 + w.flops / (H100.peak_flops("bf16") * 0.55) * 1e9
    if fam == "dnn":
        return 5000 + w.flops / (H100.peak_flops("bf16") * 0.6) * 1e9
    if fam == "memory":
        ln = W.launch(op)
        return 1800 + ln.threads * 8 * _NAME_COST[op.name] / H100.mem_bw_bytes_per_s * 1e9
    if fam == "copy":
        link = 22e9 if op.kind == int(Kind.MEMCPY) and op.a32 in (1, 2) else 0.8 * H100.mem_bw_bytes_per_s
        return 2000 + w.bytes / link * 1e9
    raise AssertionError(fam)


def synthetic_ops(rng: np.random.Generator, scale: int) -> list[Op]:
    ops: list[Op] = []
    for _ in range(6 * scale):
        m, n, k = (int(2 ** rng.uniform(6, 14)) // 8 * 8 for _ in range(3))
        ops.append(gemm_op(m, n, k, batch=int(rng.choice([1, 1, 1, 4, 12]))))
    for _ in range(2 * scale):
        ops.append(sdpa_op(int(rng.choice([1, 2, 4, 8])), int(rng.choice([8, 12, 16, 32])),
                           int(rng.choice([256, 512, 1024, 2048, 4096])), int(rng.choice([64, 128])),
                           bool(rng.integers(2)), bool(rng.integers(2))))
    for _ in range(2 * scale):
        ops.append(conv_op(str(rng.choice(["fprop", "dgrad", "wgrad"])), int(rng.choice([16, 32, 64])),
                           int(rng.choice([64, 128, 256])), int(rng.choice([64, 128, 256])),
                           int(rng.choice([14, 28, 56])), int(rng.choice([1, 3])), int(rng.choice([1, 2]))))
    for _ in range(6 * scale):
        ops.append(kernel_op(str(rng.choice(MEMORY_NAMES)), int(2 ** rng.uniform(0, 20))))
    for _ in range(scale):
        kind = str(rng.choice(["h2d", "d2h", "d2d", "memset"]))
        nbytes = int(2 ** rng.uniform(4, 30))
        ops.append(memset_op(nbytes) if kind == "memset" else memcpy_op(nbytes, kind))
    return ops


def synthetic_rows(scale: int = 30, seed: int = 0) -> list[ProfileRow]:
    """Sweep rows, an example model ('example:toy') and its held-out sizes ('held-out:toy-big')."""
    rng = np.random.default_rng(seed)

    def row(op: Op, source: str, n: int = 5) -> ProfileRow:
        ns = round(true_ns(op) * float(np.exp(rng.normal(0, 0.02))))
        return ProfileRow(op=op, dur_ns=ns, busy_ns=ns, n=n, spread=0.02, source=source)

    rows = [row(op, W.family(op)) for op in synthetic_ops(rng, scale)]
    toy = [gemm_op(1024, 768 * j, 768) for j in (1, 3, 4)] + [sdpa_op(8, 12, 1024, 64, True, b) for b in (0, 1)]
    toy += [kernel_op(name, 6144 * j) for name in MEMORY_NAMES for j in (1, 4)]
    rows += [row(op, "example:toy", n=12) for op in toy]
    big = [gemm_op(2048, 1024 * j, 1024) for j in (1, 3, 4)] + [sdpa_op(8, 16, 2048, 64, True, b) for b in (0, 1)]
    big += [kernel_op(name, 8192 * j) for name in MEMORY_NAMES for j in (1, 4)]
    rows += [row(op, "held-out:toy-big", n=12) for op in big]
    return rows


@pytest.fixture(scope="module")
def rows() -> list[ProfileRow]:
    return synthetic_rows()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache for the module: the fits of the full table are made once."""
    return tmp_path_factory.mktemp("estimators-cache")


@pytest.fixture(scope="module")
def fitted(rows: list[ProfileRow], cache: Path) -> E.Estimators:
    return L.load(GPU, profiles={GPU: rows}, cache=cache)


# ---------------------------------------------------------------- features


def test_kernel_names_decode() -> None:
    assert N.kernel_class(FILL_BF16) == "vectorized_elementwise"
    assert N.kernel_dtype_bytes(FILL_BF16) == 2 and N.kernel_dtype_bytes(FILL_F32) == 4
    assert N.template_ints(FILL_BF16)[0] == 8
    assert N.kernel_class(REDUCE_MAX) == "reduce"
    assert N.kernel_class(SOFTMAX_BF16) == "softmax" and N.kernel_dtype_bytes(SOFTMAX_BF16) == 2
    assert N.kernel_class(CAT_2B) == "cat" and N.kernel_dtype_bytes(CAT_2B) == 2
    assert N.kernel_class(ADAM) == "multi_tensor"
    assert N.kernel_class("triton_poi_fused_add_0") == "triton_pointwise"
    assert N.kernel_class("my_custom_kernel") == "other"
    assert W.family(kernel_op(MEM_EFF, 10)) == "attention"
    assert W.family(kernel_op(FILL_F32, 10)) == "memory"


FOREACH_SQRT = ("_ZN2at6native50_GLOBAL__N__b6ca21f8_17_ForeachUnaryOp_cu_77fe623d25multi_tensor_apply_kernelINS1_18"
                "TensorListMetadataILi2EEENS1_14UnaryOpFunctorIfLi2ELi1ELi1EEEJNS0_4SqrtIfEEEEEvT_T0_DpT1_")
FOREACH_ADD_SCALAR = ("_ZN2at6native57_GLOBAL__N__e658eeb9_24_ForeachBinaryOpScalar_cu_86b9896c25multi_tensor_apply_"
                      "kernelINS1_18TensorListMetadataILi1EEENS1_21BinaryOpScalarFunctorIfLi1ELi1ELi0EEEJSt4plusIfEfEEEvT_"
                      "T0_DpT1_")
FOREACH_ADDCMUL = ("_ZN2at6native54_GLOBAL__N__f8a10d72_21_ForeachPointwiseOp_cu_ef478fac25multi_tensor_apply_kernelINS1"
                   "_18TensorListMetadataILi3EEENS1_24PointwiseOpScalarFunctorIfLi3ELi3ELi0EEEJSt10multipliesIfEfEEEvT_"
                   "T0_DpT1_")


FOREACH_ZERO = ("_ZN2at6native50_GLOBAL__N__b6ca21f8_17_ForeachUnaryOp_cu_77fe623d25multi_tensor_apply_kernelINS1_18"
                "TensorListMetadataILi1EEENS1_11ZeroFunctorIfLi1ELi1ELi0EEEJEEEvT_T0_DpT1_")
FOREACH_NORM = ("_ZN2at6native51_GLOBAL__N__d9d46141_18_ForeachReduceOp_cu_b83ec48c25multi_tensor_apply_kernelINS1_18"
                "TensorListMetadataILi1EEENS0_13LpNormFunctorIfLNS0_8NormTypeE1EfLi1ELi1ELi0EEEJPfiEEEvT_T0_DpT1_")
FOREACH_MUL_SCALARLIST_BF16 = (
    "_ZN2at6native61_GLOBAL__N__538ad94b_28_ForeachBinaryOpScalarList_cu_dda10a6925multi_tensor_apply_kernelINS1_28"
    "TensorListScalarListMetadataIfLi2EEENS1_25BinaryOpScalarListFunctorIN3c108BFloat16ELi2ELi1ELi1EEEJSt10"
    "multipliesIfEEEEvT_T0_DpT1_")


def test_multi_tensor_bytes_follow_the_lists_read_and_written() -> None:
    """A foreach kernel moves each chunk of every list it reads and of the one it writes: _foreach_sqrt reads
    one list of its two, add_ and addcmul_ write in place, a fused Adam reads four lists and writes three."""
    chunk = 65536 * 4  # one block's fp32 chunk (ADAM is double: 8 bytes an element)
    moved = {name: W.kernel_work(kernel_op(name, 10)).bytes / (10 * chunk)
             for name in (FOREACH_SQRT, FOREACH_ADD_SCALAR, FOREACH_ADDCMUL)}
    assert moved == {FOREACH_SQRT: 2.0, FOREACH_ADD_SCALAR: 2.0, FOREACH_ADDCMUL: 4.0}
    assert W.kernel_work(kernel_op(ADAM, 10)).bytes == 10 * 65536 * 8 * 7
    # Emulated launches record the elements their blocks cover: ten blocks over small tensors move less.
    covered = replace(kernel_op(FOREACH_SQRT, 10), params=(10 * 1000, 0, 10))
    assert W.kernel_work(covered).bytes == 10 * 1000 * 4 * 2
    # _foreach_zero_ writes without reading, a norm reads without writing more than a number a block, and a
    # scalar-list kernel's elements are its functor's (bf16), not its scalars' (float, named first).
    lists = (1000, 0, 1)
    assert W.kernel_work(replace(kernel_op(FOREACH_ZERO, 1), params=lists)).bytes == 1000 * 4
    assert W.kernel_work(replace(kernel_op(FOREACH_NORM, 1), params=lists)).bytes == 1000 * 4
    assert W.kernel_work(replace(kernel_op(FOREACH_MUL_SCALARLIST_BF16, 1), params=lists)).bytes == 1000 * 2 * 2


STRIDED_COPY = ("_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_22gpu_kernel_impl_nocastIZZZNS0_23direct_copy_kernel_"
                "cudaERNS_18TensorIteratorBaseEENKUlvE1_clEvENKUlvE10_clEvEUlN3c108BFloat16EE_EEvS4_RKT_EUliE_EEviT1_")


def test_strided_elementwise_layout_features() -> None:
    """The layout emulation records after N (dims, innermost size, output's and input's innermost byte
    strides) becomes features of its own; N alone stays the integer argument."""
    op = kernel_op(STRIDED_COPY, 256)
    permuted = F.features(replace(op, a=op.a[:4] + (5,), params=(32768, 4, 64, 2, 2)), H100)
    transposed = F.features(replace(op, a=op.a[:4] + (5,), params=(32768, 3, 16, 2, 128)), H100)
    assert (permuted["str_dims"], permuted["str_in"], transposed["str_in"]) == (4.0, math.log2(3), math.log2(129))
    assert permuted["int0"] == transposed["int0"] and "int1" not in permuted
    assert "str_in" not in F.features(replace(op, params=(32768,)), H100)  # recorded on a GPU: no layout


FLASH_FWD = ("_ZN13pytorch_flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsILi64ELi128ELi64ELi4ELb0ELb0EN7cutlass"
             "10bfloat16_tE19Flash_kernel_traitsILi64ELi128ELi64ELi4ES2_EELb1ELb1ELb0ELb0ELb1ELb1ELb0EEEvNS_16"
             "Flash_fwd_paramsE")
MEMEFF_BWD = ("_Z41fmha_cutlassB_bf16_aligned_64x64_k64_sm80N22PyTorchMemEffAttention23AttentionBackwardKernelIN7"
              "cutlass4arch4Sm80ENS1_10bfloat16_tELb1ELb0ELb1ELi64ELi64ELi64ELb0EE6ParamsE")


def test_attention_kernel_shapes_features_and_work() -> None:
    """The shapes an attention kernel's launch records (batch, heads, query and key lengths, head dimension,
    mask word) are its features and its work: the same grid over eight times the keys does eight times the
    work; a memory-efficient backward's batch is its grid's z; a bias adds its reads."""
    op = kernel_op(FLASH_FWD, 4)  # grid (4, 1, 1) as recorded: (query tiles, batch, heads) flattened here
    short, long = (replace(op, a=op.a[:4] + (6,), params=(3, 5, 512, k, 64, 1 | 64 << 8)) for k in (512, 4096))
    fs, fl = F.features(short, H100), F.features(long, H100)
    assert W.family(short) == "attention" and (fs["log_skv"], fl["log_skv"]) == (9.0, 12.0)
    assert (fs["log_b"], fs["log_h"], fs["d"], fs["causal"], fs["attn_bias"]) == (math.log2(3), math.log2(5), 64, 1, 0)
    assert "int0" not in fs  # the words are shapes, not integer arguments
    assert W.work(short).flops == pytest.approx(2.0 * 3 * 5 * 512 * 512 * 0.5 * 128)  # causal: half the pairs
    assert W.work(long).flops == pytest.approx(2.0 * 3 * 5 * 512 * 4096 * 128)
    bwd = kernel_op(MEMEFF_BWD, 8)
    bwd = replace(bwd, a=(0, 8 | 5 << 32 | 3 << 48) + bwd.a[2:4] + (6,), params=(0, 5, 200, 328, 64, 4 | 64 << 8))
    s = W.kernel_sdpa(bwd)
    assert s is not None and (s.b, s.bias, s.causal) == (3, True, False)
    assert W.work(bwd).flops == pytest.approx(2.0 * 3 * 5 * 200 * 328 * 320)
    assert W.kernel_sdpa(kernel_op(FLASH_FWD, 4)) is None  # recorded on a GPU: no shapes


def test_families_and_work() -> None:
    g = gemm_op(4096, 4096, 4096)
    assert W.family(g) == "gemm" and W.domain(g) == "cublasLtMatmul:bf16"
    assert W.work(g) == Work(2.0 * 4096**3, 3 * 4096 * 4096 * 2.0, "bf16", "hbm")
    f = F.features(g, H100)
    assert f["wave_eff_128x128"] == pytest.approx(1024 / (8 * 132))
    assert f["pad_eff_128x128"] == 1.0
    assert F.features(gemm_op(4000, 4096, 4096), H100)["pad_eff_128x128"] == pytest.approx(4000 / 4096)
    fwd, bwd = sdpa_op(2, 8, 1024, 64, False, False), sdpa_op(2, 8, 1024, 64, False, True)
    assert W.family(fwd) == "attention"
    assert W.work(fwd).flops == pytest.approx(2 * 2 * 8 * 1024 * 1024 * 128)
    assert W.work(bwd).flops == pytest.approx(2.5 * W.work(fwd).flops)
    assert W.work(sdpa_op(2, 8, 1024, 64, True, False)).flops == pytest.approx(W.work(fwd).flops / 2)
    conv = conv_op("fprop", 32, 64, 128, 56, 3, 1)
    assert W.family(conv) == "dnn" and W.work(conv).flops == pytest.approx(2.0 * 32 * 128 * 56 * 56 * 64 * 9)
    assert F.features(conv, H100)["tile_m"] == 128
    assert W.work(memcpy_op(1 << 20, "h2d")).link == "host"
    assert W.work(memcpy_op(1 << 20, "d2d")).bytes == 2 << 20
    assert W.family(memset_op(64)) == "copy" and W.domain(memset_op(64)) == "memset"
    for op in (g, fwd, conv, kernel_op(FILL_F32, 100), kernel_op(MEM_EFF, 100), memset_op(100)):
        m = F.matrix([op], H100, W.family(op))
        assert m.shape == (1, len(F.FEATURES[W.family(op)])) and np.isfinite(m).all()


def test_roofline() -> None:
    assert roofline_ns(Work(989.4e12, 0, "bf16"), H100) == pytest.approx(1e9)
    assert roofline_ns(Work(0, 3350e9), H100) == pytest.approx(1e9)
    a100 = catalog.lookup("A100-SXM-80GB")
    assert roofline_ns(Work(312e12, 0, "fp8"), a100) == pytest.approx(1e9)  # no fp8: fp16 peak


# ---------------------------------------------------------------- fitting and estimating


def test_fit_and_estimate_unseen_shapes(fitted: E.Estimators) -> None:
    assert set(fitted.families) == set(W.FITTED)
    rng = np.random.default_rng(123)
    for fam, tolerance in (("gemm", 0.25), ("attention", 0.2), ("memory", 0.2), ("copy", 0.3), ("dnn", 0.3)):
        ops = [op for op in synthetic_ops(rng, 10) if W.family(op) == fam][:20]
        est = fitted.estimate_many(ops)
        assert {e.confidence for e in est} <= {"fitted", "measured"}, fam
        assert all(e.family == fam and e.ns > 0 for e in est)
        errors = [abs(e.ns - true_ns(op)) / true_ns(op) for e, op in zip(est, ops, strict=True)]
        assert float(np.median(errors)) < tolerance, (fam, errors)


def test_exact_signature_is_measured(rows: list[ProfileRow], fitted: E.Estimators) -> None:
    r = next(r for r in rows if r.source == "gemm")
    e = fitted.estimate(r.op)
    assert (e.ns, e.estimator, e.confidence) == (r.dur_ns, "measured", "measured")
    held = next(r for r in rows if r.source.startswith("held-out:") and W.family(r.op) == "gemm")
    assert fitted.estimate(held.op).confidence == "fitted"  # held-out rows are never fitted


def test_unseen_kernel_falls_back(fitted: E.Estimators) -> None:
    e = fitted.estimate(kernel_op("_Z16my_custom_kernelPfi", 4096))
    assert (e.confidence, e.estimator, e.family) == ("fallback", "roofline", "memory")
    assert e.ns >= fitted.families["memory"].floor_ns * fitted.families["memory"].efficiency * 0.99
    fp64 = fitted.estimate(gemm_op(512, 512, 512, api="cublasDgemm_v2", dtype=1))
    assert fp64.confidence == "fallback"  # no fp64 GEMM in the profiles
    coll = fitted.estimate(Op(int(Kind.COLL), "", 0, (0, 1 << 20, 0, 0, 4 << 20)))
    assert (coll.family, coll.confidence) == ("coll", "fallback")


def test_cache_hit_and_miss(rows: list[ProfileRow], tmp_path: Path) -> None:
    subset = [r for r in rows if W.family(r.op) == "copy"]  # small: the default model, no selection
    first = L.load(GPU, profiles={GPU: subset}, cache=tmp_path)
    assert not first.cache_hit and first.fit_seconds > 0
    second = L.load(GPU, profiles={GPU: subset}, cache=tmp_path)
    assert second.cache_hit
    op = subset[0].op
    assert second.estimate(op) == first.estimate(op)
    other = L.load(GPU, profiles={GPU: subset[1:]}, cache=tmp_path)
    assert not other.cache_hit
    assert len(list(tmp_path.glob("*.pkl"))) == 1  # the stale fit was replaced


def test_gpus_without_profiles(rows: list[ProfileRow], cache: Path, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    profiles = {GPU: rows}
    h100 = L.load(GPU, profiles=profiles, cache=cache)
    h200 = L.load("H200-SXM-141GB", profiles=profiles, cache=cache)
    a100 = L.load("A100-SXM-80GB", profiles=profiles, cache=cache)
    assert h200.cache_hit and a100.cache_hit and (h200.source, a100.source) == (GPU, GPU)
    fill = kernel_op(FILL_F32, 1 << 20)  # bandwidth-bound: H200 has 4.8 TB/s to the H100's 3.35
    e100, e200 = h100.estimate(fill), h200.estimate(fill)
    assert e100.confidence in ("fitted", "measured")
    assert e200.confidence == "scaled" and e200.estimator.startswith("scaled:")
    assert e200.ns == pytest.approx(e100.ns * 3350 / 4800, rel=0.05)
    big = gemm_op(8192, 8192, 8192)
    assert h200.estimate(big).ns == pytest.approx(h100.estimate(big).ns, rel=0.02)  # same compute
    ea = a100.estimate(big)
    assert ea.confidence == "fallback" and ea.ns > 2.5 * h100.estimate(big).ns  # 312 vs 989 TFLOP/s
    nothing = L.load("B200", profiles={}, cache=tmp_path).estimate(big)
    assert nothing.confidence == "fallback" and nothing.ns > 0
    # An H200 with copy tables only: its own copies, the H100's other families scaled.
    partial = {**profiles, "H200-SXM-141GB": [r for r in rows if W.family(r.op) == "copy"]}
    h200_own = L.load("H200-SXM-141GB", profiles=partial, cache=tmp_path)
    assert h200_own.source == "H200-SXM-141GB" and set(h200_own.borrowed) == set(W.FITTED) - {"copy"}
    assert h200_own.estimate(big).confidence == "scaled"
    assert h200_own.estimate(memcpy_op(12345, "d2d")).confidence == "fitted"
    # A family with enough points of its own to be fitted, but under a tenth of the donor's, is
    # borrowed all the same (the H200's convolutions: its example models' against the H100's sweep).
    monkeypatch.setattr(FIT, "MIN_SELECT", 5)
    gemm_rows = [r for r in rows if W.family(r.op) == "gemm"]
    assert len(gemm_rows) > 10 * 10
    few = {**profiles, "H200-SXM-141GB": [r for r in rows if W.family(r.op) == "copy"] + gemm_rows[:10]}
    assert "gemm" in L.load("H200-SXM-141GB", profiles=few, cache=tmp_path).borrowed


def test_evaluate_keeps_held_out_rows_out(rows: list[ProfileRow], cache: Path) -> None:
    fit_rows, test_rows = V.split(rows)
    assert all(not r.source.startswith("held-out:") for r in fit_rows)
    assert V.split(rows[::-1])[0] == fit_rows[::-1]  # the split does not depend on row order
    test_sigs = {r.op.signature() for r in test_rows}
    assert not any(r.op.signature() in test_sigs for r in fit_rows)
    report = V.evaluate(GPU, profiles=rows, cache=cache)
    assert set(report["families"]) <= set(W.FAMILIES) and "gemm" in report["families"]
    gemm = report["families"]["gemm"]
    assert gemm["n"] > 0 and 0 <= gemm["median_ape"] <= gemm["p90_ape"]
    examples = report["examples"]
    assert {"all", "held-out:toy-big"} <= set(examples)
    assert 0.0 <= examples["all"]["coverage"] <= 1.0
    assert 0.0 <= examples["all"]["trial_share"] <= 1.0 and "steady_time_weighted" in examples["all"]
    assert report["fit"]["rows"] == len(fit_rows)
    json.dumps(report)


def test_autotune_trials_are_the_rarer_engines_of_one_convolution() -> None:
    params = (64, 3, 64, 1, 2, 224, 7, 112, 3, 2, 1)

    def conv(engine: int, n: int, source: str = "example:cnn", shape: tuple[int, ...] = params) -> ProfileRow:
        return ProfileRow(Op(int(Kind.DNN), "conv_fprop", 0, (0, engine, 0, 0, 0), shape), 1000, 1000, n, 0.0, source)

    chosen, trial, rare_trial = conv(3, 15), conv(0, 2), conv(7, 1)
    other_shape = conv(0, 2, shape=params[:-1] + (2,))  # its only engine: steady, however rare
    other_model = conv(0, 2, source="example:resnet")  # the same convolution in another model's run
    trials = V.autotune_trials([chosen, trial, rare_trial, other_shape, other_model])
    assert trials == {("example:cnn", trial.op.signature()), ("example:cnn", rare_trial.op.signature())}


def test_cli(rows: list[ProfileRow], cache: Path, monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(C, "cache_dir", lambda: cache)  # the fits above, read back
    monkeypatch.setattr(V, "load_profiles", lambda gpu: rows if gpu == GPU else [])
    monkeypatch.setattr(L, "_table", lambda gpu, profiles: C.Table(gpu, rows if gpu == GPU else []))
    monkeypatch.setattr(L, "profiled_gpus", lambda: [GPU])
    assert cli.main(["estimators", "evaluate", "--gpu", GPU, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["gpu"] == GPU and "gemm" in report["families"]
    assert cli.main(["estimators", "evaluate", "--gpu", GPU]) == 0
    text = capsys.readouterr().out
    assert "gemm" in text and "median" in text
    assert cli.main(["estimators", "fit", "--gpu", GPU]) == 0  # fits, unless a test above left the fit
    capsys.readouterr()
    assert cli.main(["estimators", "fit", "--gpu", GPU]) == 0
    assert "read from the cache" in capsys.readouterr().out


@pytest.mark.slow
def test_committed_profiles_fit_and_predict(fitted_once: tuple[Path, E.Estimators],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The real thing: the committed H100 tables fit (once a session, tests/conftest.py), and
    estimate a held-out model's kernels."""
    root, est = fitted_once
    cache = root / "estimators"
    assert not est.cache_hit and est.source == GPU and not est.borrowed
    # The H200 lends the H100 nothing, so only its family sizes were counted, not fitted.
    assert [p.name.split("-")[-2] for p in cache.glob("H200*")] == ["sizes"]
    assert all(est.families[f].n >= 1000 for f in W.FITTED), {f: fit.n for f, fit in est.families.items()}
    rows = [r for r in load_profiles(GPU) if r.source == "held-out:gpt-d128" and W.family(r.op) in W.FITTED]
    estimates = est.estimate_many([r.op for r in rows])
    assert all(e.confidence in ("measured", "fitted") for e in estimates)
    measured = sum(r.busy_ns * r.n for r in rows)
    error = sum(abs(e.ns - r.busy_ns) * r.n for e, r in zip(estimates, rows, strict=True)) / measured
    assert error < 0.10  # 3.6% when written; held-out rows are never fitted

    def unread(gpu: str) -> list[ProfileRow]:
        raise AssertionError(f"the tables of {gpu} were parsed for a cached fit")

    monkeypatch.setattr(C, "load_profiles", unread)  # a cached fit is found by the tables' bytes
    assert L.load(GPU, cache=cache).cache_hit
