"""Profiling sweep (benchmarks/campaigns/profiling/sweep.py): plans, and the tiny parts under emulation.

Covers:
- the campaigns' reading of torch.profiler's Chrome trace (``chrome_trace.py``);
- what a recorded cuBLAS kernel's name says of cuBLAS's choice (``benchmarks/gemm_kernel_choice.py``);
- every full plan (built without CUDA) is deterministic, holds distinct
  operations, fits the GPU-time budget with warm-up and repeats (under the
  90 s a part may take on an H100), the wall-time budget (host time of
  cuDNN's plan building included) and the per-operation memory cap;
- each part at ``--size tiny`` runs under ``maya emulate`` with no unsupported
  API, and its trace holds the part's kind of work:
  gemm: BLAS records with the swept m, n, k, batch (cuBLAS's column-major
  order: torch's n x m), the cuBLASLt bias and GELU epilogues, TF32;
  attention: cuDNN ``sdpa_fprop``/``sdpa_bprop`` records with B, H, Hk, Sq,
  Skv, D, the flash-attention and memory-efficient kernels, the math
  backend's batched GEMMs;
  dnn: ``conv_fprop``/``conv_dgrad``/``conv_wgrad`` records with N, C, K and
  batch-norm records with N, C, H*W;
  memory: kernels only (softmax, layer norm, foreach, fused AdamW, embedding
  backward, cat, dropout, loss, gather/scatter);
  copy: host-to-device and device-to-host copies, pinned and pageable, and
  device-to-device copies, of the swept sizes, each device copy from and to
  buffers no earlier call of its operation touched;
  embedding: kernels only (EmbeddingBag's pooling and gradients, the sparse
  gradient's gather, Adagrad);
  scatter: kernels only (index_add_'s atomics, scatter_add_ and scatter_reduce_,
  index_put_'s sort and accumulation);
- every BLAS and DNN operation is issued four times (warm-up + 3 repeats) per call site;
- two emulated runs of a part issue the same device operations in the same
  order (kind, name and every field but pointers and ids).
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest
from emulated import REPO, EmulatedRun, run_emulated

from maya.predictor.trace import Kind, read_trace
from maya.predictor.trace.ops import Op, device_ops

SWEEP = REPO / "benchmarks" / "campaigns" / "profiling" / "sweep.py"
PARTS = ("gemm", "attention", "dnn", "memory", "copy", "gemm-grid", "attention-grid", "attention-mask",
         "conv-modern", "embedding", "scatter")
CALLS = 4  # warm-up + the default 3 repeats


def load_sweep() -> ModuleType:
    spec = importlib.util.spec_from_file_location("profiling_sweep", SWEEP)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sweep() -> ModuleType:
    return load_sweep()


@pytest.mark.parametrize("part", PARTS)
def test_full_plan_fits_budget(sweep, part):
    ops = sweep.PLANS[part]("full")
    again = sweep.PLANS[part]("full")
    assert [op.label for op in ops] == [op.label for op in again]
    assert len({op.label for op in ops}) == len(ops)
    assert len(ops) >= 100
    seconds = sum(op.seconds for op in ops) * CALLS
    assert seconds <= sweep.BUDGET_S <= 90
    assert sum(op.wall_s for op in ops) <= sweep.WALL_BUDGET_S
    assert max(op.device_bytes for op in ops) <= sweep.MEMORY_CAP <= 60 * 2**30


def _run_tiny(part: str, tmp_path: Path) -> EmulatedRun:
    run = run_emulated(SWEEP.read_text(), tmp_path, args=["--part", part, "--size", "tiny"])
    assert run.returncode == 0, run.output
    assert run.rank0["unsupported_apis"] == [], run.rank0["unsupported_apis"]
    return run


@pytest.fixture(scope="module", params=PARTS)
def runs(request, tmp_path_factory) -> tuple[str, list[list[Op]]]:
    """Two emulated runs of one tiny part: its device operations, in order."""
    part = request.param
    out = []
    for i in range(2):
        run = _run_tiny(part, tmp_path_factory.mktemp(f"{part}{i}"))
        out.append([op for _, op in device_ops(read_trace(run.trace_path()))])
    return part, out


@pytest.mark.emulation
def test_runs_are_deterministic(runs):
    part, (first, second) = runs
    assert len(first) == len(second), part
    for i, (x, y) in enumerate(zip(first, second, strict=True)):
        assert x.signature() == y.signature(), (part, i, x.label(), y.label())


def _blas_shape(op: Op) -> tuple[int, int, int, int]:
    return op.a[0] & 0xFFFFFFFF, op.a[0] >> 32, op.a[1] & 0xFFFFFFFF, op.a[1] >> 32


def _kernel_names(ops: list[Op]) -> set[str]:
    return {op.name for op in ops if op.kind == Kind.KERNEL}


def _check_gemm(ops: list[Op]) -> None:
    blas = [op for op in ops if op.kind == Kind.BLAS]
    # torch's (m, n, k, batch) of the tiny plan, as cuBLAS sees them (column-major: n, m).
    assert {_blas_shape(op) for op in blas} == {
        (128, 64, 32, 1), (64, 96, 48, 1), (17, 33, 65, 1), (64, 128, 32, 1), (96, 64, 32, 1), (64, 64, 64, 1),
        (64, 32, 16, 4), (32, 16, 64, 3),
    }
    assert {op.name for op in blas} >= {"cublasGemmEx", "cublasSgemm_v2", "cublasLtMatmul",
                                        "cublasGemmStridedBatchedEx"}
    assert {(op.a[2] >> 16) & 0xFFFF for op in blas} == {0, 4, 36}  # no epilogue, BIAS, GELU_BIAS
    assert {(op.a[3] >> 32) & 0xFF for op in blas} == {68, 77}  # CUBLAS_COMPUTE_32F and _32F_FAST_TF32


def _check_attention(ops: list[Op]) -> None:
    dnn = [op for op in ops if op.kind == Kind.DNN]
    assert {op.name for op in dnn} == {"sdpa_fprop", "sdpa_bprop"}
    assert {op.params[:6] for op in dnn} == {(2, 4, 4, 128, 128, 64), (1, 8, 2, 96, 160, 128)}
    names = _kernel_names(ops)
    for marker in ("flash_fwd_kernel", "flash_bwd_dq_dk_dv", "fmha_cutlassF", "fmha_cutlassB", "softmax_warp"):
        assert any(marker in n for n in names), marker
    assert "cublasSgemmStridedBatched" in {op.name for op in ops if op.kind == Kind.BLAS}  # the math backend


def _check_dnn(ops: list[Op]) -> None:
    dnn = [op for op in ops if op.kind == Kind.DNN]
    by_name = Counter(op.name for op in dnn)
    assert set(by_name) == {"conv_fprop", "conv_dgrad", "conv_wgrad", "batchnorm_fwd_training", "batchnorm_bwd"}
    assert by_name["conv_fprop"] == 4 * CALLS and by_name["conv_dgrad"] == 3 * CALLS  # the RGB stem: no dgrad
    convs = {op.params[:3] for op in dnn if op.name.startswith("conv")}
    assert convs == {(2, 16, 32), (2, 32, 16), (2, 3, 16), (2, 32, 32)}
    norms = {op.params[:3] for op in dnn if op.name.startswith("batchnorm")}
    assert norms == {(2, 16, 16 * 16), (2, 32, 8 * 8)}


def _check_memory(ops: list[Op]) -> None:
    assert not [op for op in ops if op.kind in (Kind.BLAS, Kind.DNN)]
    names = _kernel_names(ops)
    for marker in ("SoftMaxForward", "SoftMaxBackward", "layer_norm_kernel", "multi_tensor_apply", "fused_adamw",
                   "EmbeddingBackward", "CatArrayBatchedCopy", "fused_dropout", "nll_loss_backward",
                   "scatter_gather", "GeluBackwardCUDAKernel", "reduce_kernel"):
        assert any(marker in n for n in names), marker


def _check_copy(ops: list[Op]) -> None:
    copies = Counter((op.a32, op.a[2], op.pinned) for op in ops if op.kind == Kind.MEMCPY)
    expected = {(kind, size, pinned) for kind in (1, 2) for size in (1024, 3 << 16) for pinned in (False, True)}
    expected |= {(3, size, False) for size in (1024, 3 << 16)}
    assert copies == dict.fromkeys(expected, CALLS)


def _check_gemm_grid(ops: list[Op]) -> None:
    blas = [op for op in ops if op.kind == Kind.BLAS]
    assert {_blas_shape(op) for op in blas} == {(1280, 96, 64, 1), (40, 48, 64, 6)}


def _check_attention_grid(ops: list[Op]) -> None:
    dnn = [op for op in ops if op.kind == Kind.DNN]
    assert {op.name for op in dnn} == {"sdpa_fprop", "sdpa_bprop"}
    assert {op.params[:6] for op in dnn} == {(2, 8, 2, 256, 256, 128)}
    assert all((op.a[2] >> 24) & 1 for op in dnn)  # causal


def _check_attention_mask(ops: list[Op]) -> None:
    dnn = [op for op in ops if op.kind == Kind.DNN]
    assert {op.name for op in dnn} == {"sdpa_fprop", "sdpa_bprop"}
    assert {op.params[:6] for op in dnn} == {(2, 4, 4, 128, 192, 64)}
    assert all((op.a[2] >> 30) & 1 for op in dnn)  # an additive mask
    fmha = [op for op in ops if "fmha_cutlass" in op.name]
    assert fmha and {op.params[1:] for op in fmha} == {(2, 96, 96, 64, 4 | 64 << 8)}  # heads .. mask word


def _check_conv_modern(ops: list[Op]) -> None:
    convs = {op.params[:11] for op in ops if op.kind == Kind.DNN}
    # (n, c, k, groups, 2 dims, height, filter, output, padding, stride, ...): a 7x7 depthwise convolution and an
    # unpadded 4x4 stride-4 patchify stem.
    assert convs == {(2, 32, 32, 32, 2, 14, 7, 14, 3, 1, 1), (2, 3, 32, 1, 2, 32, 4, 8, 0, 4, 1)}
    assert any("layer_norm_kernel" in n for n in _kernel_names(ops))


def _check_embedding(ops: list[Op]) -> None:
    assert not [op for op in ops if op.kind in (Kind.BLAS, Kind.DNN)]
    names = _kernel_names(ops)
    # Pooling of each mode, the dense gradient's per-bag and scatter kernels, the per-sample weights' gradient,
    # max pooling's gradient, the sparse gradient's gather, Adagrad's foreach kernels.
    for marker in ("EmbeddingBag_updateOutputKernel_sum_mean", "EmbeddingBag_updateOutputKernel_max",
                   "compute_grad_weight_bags", "sum_and_scatter", "per_sample_weights_backward",
                   "EmbeddingBag_accGradParametersKernel_max", "vectorized_gather_kernel", "multi_tensor_apply"):
        assert any(marker in n for n in names), marker


def _check_scatter(ops: list[Op]) -> None:
    assert not [op for op in ops if op.kind in (Kind.BLAS, Kind.DNN)]
    names = _kernel_names(ops)
    # index_add_'s atomics, scatter_add_'s and scatter_reduce_'s, and index_put_'s sort and accumulation.
    for marker in ("indexFuncLargeIndex", "_scatter_gather_elementwise_kernel", "radix_sort",
                   "indexing_backward_kernel"):
        assert any(marker in n for n in names), marker


@pytest.mark.emulation
def test_device_copies_are_cold(tmp_path):
    """Each timed device-to-device copy reads and writes buffers no earlier call of its operation touched:
    a training step's copies find their data in HBM, not in the L2 cache a repeated pair would stay in."""
    recs = read_trace(_run_tiny("copy", tmp_path).trace_path()).records
    d2d = recs[(recs["kind"] == Kind.MEMCPY) & (recs["a32"] == 3)]
    for size in (1024, 3 << 16):
        calls = d2d[d2d["a"][:, 2] == size]
        assert len(calls) == CALLS
        assert len({int(a) for a in calls["a"][:, 0]}) == len({int(a) for a in calls["a"][:, 1]}) == CALLS


CHECKS = {"gemm-grid": _check_gemm_grid, "attention-grid": _check_attention_grid, "gemm": _check_gemm,
          "attention": _check_attention, "dnn": _check_dnn, "memory": _check_memory, "copy": _check_copy,
          "attention-mask": _check_attention_mask, "conv-modern": _check_conv_modern,
          "embedding": _check_embedding, "scatter": _check_scatter}


@pytest.mark.emulation
def test_part_records(runs):
    part, (ops, _) = runs
    CHECKS[part](ops)
    issued = Counter(op.signature() for op in ops if op.kind in (Kind.BLAS, Kind.DNN))
    assert all(n % CALLS == 0 for n in issued.values()), part  # the math backend runs some GEMMs twice a call


def test_the_campaigns_read_the_profilers_chrome_trace():
    import torch

    from benchmarks.campaigns.chrome_trace import profiler_events

    x = torch.ones(64)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.add(x, x)
    events = profiler_events(prof)
    assert any(e.get("name") == "aten::add" and e.get("dur", 0) > 0 for e in events)


def test_a_recorded_cublas_kernel_name_says_its_tile_and_helpers():
    from benchmarks.gemm_kernel_choice import kernel_description

    hopper = kernel_description((
        "memset",
        "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"))
    assert (hopper["sm90"], hopper["memset"], hopper["n_kernels"], hopper["split_k"]) == (1.0, 1.0, 2.0, 0.0)
    assert (hopper["tile_m"], hopper["tile_n"], hopper["tile_k"], hopper["warps"]) == (7.0, 7.0, 5.0, 1.0)
    ampere = kernel_description((
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
        "_ZN8cublasLt19splitKreduce_kernelILi32ELi16EiffffLb0EfffLb1ELb0ELb0ELb0EEEvNS_18cublasSplitKParamsIT4_EEPKT2_"))
    assert (ampere["sm90"], ampere["simt"], ampere["reduce"], ampere["stages"], ampere["warps"]) == (0.0, 1.0, 1.0, 3.0, 4.0)
    assert (ampere["tile_m"], ampere["tile_n"], ampere["tile_k"]) == (6.0, 6.0, 3.0)
    cutlass = kernel_description(("_ZN7cutlass7Kernel2I50cutlass_80_tensorop_s1688gemm_64x64_32x6_nn_align4EEvNT_6ParamsE",))
    assert (cutlass["cutlass"], cutlass["tile_m"], cutlass["tile_n"], cutlass["tile_k"]) == (1.0, 6.0, 6.0, 5.0)
