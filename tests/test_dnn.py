"""cuDNN emulation (emulation-image/src/cudnn*.c; docs/dnn.md).

Covers, with small torch scripts run under the interposer:
- torch sees cuDNN 9.19 (the installed headers' version) and a bf16
  ``scaled_dot_product_attention`` (causal) goes to cuDNN attention through
  the backend API: one ``sdpa_fprop`` and one ``sdpa_bprop`` DNN record with
  batch, heads, sequence lengths and head dims of the call, the causal flag,
  the softmax scale read from the by-value tensor, the engine and kernel-config
  knob cuDNN 9.19 picks on an H100 (engine 2 knob 7 forward, engine 6 knob 26
  backward), the plan's workspace (256 bytes forward; dQ in fp32 + softmax
  sums + 256 backward) and the H100 kernel names (flash fprop/bprop,
  compute_dot_do_o_specialized, convert_dq_to_16bits);
- an fp32 channels_last conv + batch norm forward and backward with
  ``cudnn.benchmark``: conv_fprop, conv_dgrad, conv_wgrad records with N, C, K,
  spatial sizes, padding and stride; autotuning runs every candidate plan but
  the steady-state call uses cuDNN's first heuristic choice (engines 62, 67,
  65, what autotuning picked on the H100 probes) with
  ``sm90_xmma_*_implicit_gemm`` kernels; batchnorm_fwd_training and
  batchnorm_bwd (legacy Ex API) with N, C and spatial size, NHWC kernels;
- grouped-query attention (32 query heads, 8 key/value heads) records Hk, the
  GQA flag, the backward workspace cuDNN asked on the H100 and the two
  ``fmha_reduce_head`` kernels;
- full-length backward helper names, whose template flag is the 16-bit
  type (fp16 ``<false>``, bf16 ``<true>``, causal or not);
- bf16 channels_last convolutions of measured shapes name exactly the
  kernels the H100's autotuning picked (ResNet-18 ground truth: padded RGB
  stem with cutlass kernels, split-K wgrad, wide-tile fprop), with the
  measured workspace; an unmeasured batch size takes the nearest measurement;
- every DNN record is asynchronous, on the handle's stream, and no cuDNN call
  was reported unsupported.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from emulated import requires_library, run_emulated

from maya.predictor.trace import Flag, Kind, read_trace

pytestmark = pytest.mark.emulation  # every test here runs an emulation

GROUND_TRUTH = Path(__file__).resolve().parent.parent / "benchmarks/data/gpu_fidelity/H100-SXM-80GB/cnn.json"
CUDNN_DATA_FLOAT, CUDNN_DATA_BFLOAT16 = 0, 9
F_CAUSAL, F_DROPOUT, F_BACKEND, F_TRAINING, F_GQA = 1 << 24, 1 << 25, 1 << 26, 1 << 27, 1 << 28
LAYOUT_NHWC = 1


def dnn_records(trace) -> list[dict[str, Any]]:
    """Decode every DNN record (layout in docs/dnn.md)."""
    out = []
    recs = trace.records
    for i in np.nonzero(recs["kind"] == Kind.DNN)[0]:
        r = recs[i]
        a = [int(x) for x in r["a"]]
        ext = [int(x) for x in trace.ext(int(i))]
        n_params, n_kernels, n_graph = a[3] & 0xFFFF, (a[3] >> 16) & 0xFFFF, a[3] >> 32
        out.append({
            "op": trace.string(int(r["a32"])),
            "flags": int(r["flags"]),
            "stream": int(r["stream"]),
            "workspace": a[0],
            "engine": a[1] & 0xFFFFFFFF,
            "knob": a[1] >> 32,
            "dtype": a[2] & 0xFF,
            "layout": (a[2] >> 16) & 0xFF,
            "bits": a[2] & ~0xFFFFFF,
            "params": ext[:n_params],
            "kernels": [trace.string(k) for k in ext[n_params:n_params + n_kernels]],
            "graph": ext[n_params + n_kernels:n_params + n_kernels + n_graph],
        })
    return out


def as_double(word: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", word))[0]


def unsupported(trace) -> list[str]:
    recs = trace.records
    return [trace.string(int(r["a"][0])) for r in recs[recs["kind"] == Kind.UNSUPPORTED]]


SDPA = """
import torch, torch.nn.functional as F
assert torch.backends.cudnn.version() == 91900, torch.backends.cudnn.version()
q = torch.randn(2, 4, 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
k = torch.randn(2, 4, 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
v = torch.randn(2, 4, 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
torch.cuda.synchronize()
"""


@requires_library
def test_sdpa_bf16_causal_runs_cudnn_attention(tmp_path):
    run = run_emulated(SDPA, tmp_path)
    assert run.returncode == 0, run.output
    trace = read_trace(run.trace_path())
    assert not [u for u in unsupported(trace) if u.startswith("cudnn")]
    recs = dnn_records(trace)
    fwd = [r for r in recs if r["op"] == "sdpa_fprop"]
    bwd = [r for r in recs if r["op"] == "sdpa_bprop"]
    assert len(fwd) == 1 and len(bwd) == 1, [r["op"] for r in recs]
    b, h, s, d = 2, 4, 256, 64
    for r in fwd + bwd:
        assert r["params"][:7] == [b, h, h, s, s, d, d]
        assert as_double(r["params"][7]) == 0.125  # 1/sqrt(64), from the by-value tensor
        assert as_double(r["params"][8]) == 0.0
        assert r["bits"] & F_CAUSAL and r["bits"] & F_BACKEND and not r["bits"] & F_DROPOUT
        assert r["dtype"] == CUDNN_DATA_BFLOAT16
        assert r["flags"] & Flag.ASYNC
        assert r["graph"], "the operation graph is recorded"
    f, g = fwd[0], bwd[0]
    assert (f["engine"], f["knob"], f["workspace"]) == (2, 7, 256)
    assert (g["engine"], g["knob"]) == (6, 26)
    assert g["workspace"] == b * h * s * d * 4 + b * h * s * 4 + 256  # 532736, as cuDNN 9.19 on an H100
    assert f["kernels"][-1].startswith("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64")
    names = " ".join(g["kernels"])
    for family in ("compute_dot_do_o_specialized<true, 64>", "sdpa_sm90_flash_bprop_wgmma_f16", "convert_dq_to_16bits"):
        assert family in names


CONV_BN = """
import torch
torch.backends.cudnn.benchmark = True
m = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32)).cuda()
m = m.to(memory_format=torch.channels_last)
x = torch.randn(4, 16, 20, 20, device="cuda").to(memory_format=torch.channels_last).requires_grad_()
for _ in range(2):
    m(x).sum().backward()
torch.cuda.synchronize()
"""


@requires_library
def test_conv_batchnorm_forward_backward(tmp_path):
    run = run_emulated(CONV_BN, tmp_path)
    assert run.returncode == 0, run.output
    trace = read_trace(run.trace_path())
    assert not [u for u in unsupported(trace) if u.startswith("cudnn")]
    recs = dnn_records(trace)
    ops = {r["op"] for r in recs}
    assert {"conv_fprop", "conv_dgrad", "conv_wgrad", "batchnorm_fwd_training", "batchnorm_bwd"} <= ops, ops
    # N, C, K, groups, spatial dims, then (in, filter, out, pad, stride, dilation) per dimension.
    expected = [4, 16, 32, 1, 2, 20, 3, 20, 1, 1, 1, 20, 3, 20, 1, 1, 1, 0, 0, 0, 0, 0, 0]
    for op in ("conv_fprop", "conv_dgrad", "conv_wgrad"):
        calls = [r for r in recs if r["op"] == op]
        for r in calls:
            assert r["params"] == expected, (op, r["params"])
            assert r["bits"] & F_BACKEND and r["layout"] == LAYOUT_NHWC and r["dtype"] == CUDNN_DATA_FLOAT
        # Autotuning ran several engines; the last (steady-state) call runs cuDNN's first choice.
        assert len({r["engine"] for r in calls}) > 1
        assert calls[-1]["engine"] == {"conv_fprop": 62, "conv_dgrad": 67, "conv_wgrad": 65}[op]
        assert any(k.startswith(f"sm90_xmma_{op[5:]}") for k in calls[-1]["kernels"]), calls[-1]["kernels"]
    bn = [r for r in recs if r["op"].startswith("batchnorm")]
    assert [r["op"] for r in bn] == ["batchnorm_fwd_training", "batchnorm_bwd"] * 2
    for r in bn:
        assert r["params"][:3] == [4, 32, 400]  # N, C, H*W
        assert r["bits"] & F_TRAINING and r["layout"] == LAYOUT_NHWC
        assert "nhwc" in r["kernels"][-1]
    streams = {r["stream"] for r in recs}
    assert len(streams) == 1


GQA = """
import torch, torch.nn.functional as F
q = torch.randn(2, 32, 1024, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
k = torch.randn(2, 8, 1024, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
v = torch.randn(2, 8, 1024, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).sum().backward()
torch.cuda.synchronize()
"""


@requires_library
def test_sdpa_grouped_query_attention(tmp_path):
    run = run_emulated(GQA, tmp_path)
    assert run.returncode == 0, run.output
    recs = dnn_records(read_trace(run.trace_path()))
    assert [r["op"] for r in recs] == ["sdpa_fprop", "sdpa_bprop"]
    fwd, bwd = recs
    for r in recs:
        assert r["params"][:7] == [2, 32, 8, 1024, 1024, 128, 128]
        assert r["bits"] & F_GQA and r["bits"] & F_CAUSAL
    assert fwd["kernels"][-1].startswith("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128")
    assert bwd["workspace"] == 67371264  # cuDNN 9.19 on an H100 for this shape
    assert sum("fmha_reduce_head" in k for k in bwd["kernels"]) == 2


SDPA_FLAGS = """
import torch, torch.nn.functional as F
for dtype, causal in ((torch.float16, False), (torch.bfloat16, False)):
    q, k, v = (torch.randn(2, 4, 128, 64, device="cuda", dtype=dtype, requires_grad=True) for _ in range(3))
    F.scaled_dot_product_attention(q, k, v, is_causal=causal).sum().backward()
torch.cuda.synchronize()
"""

# Full names as torch.profiler shows them on an H100 (benchmarks/data/gpu_fidelity/H100-SXM-80GB/bert.json).
DOT_DO_O = ("void cudnn::fusion::compute_dot_do_o_specialized<{}, 64>(void const*, void const*, void*, void*, "
            + "unsigned int, " * 17 + "float, " + "void const*, " * 5 + "bool, void const*, void*, void const*, "
            + ", ".join(["int"] * 9) + ")")
CONVERT_DQ = ("void cudnn::fusion::convert_dq_to_16bits<{}>(void const*, void*, " + "unsigned int, " * 10
              + "float const*, float const*, float const*, float*, void const*, void*, void*, bool, bool)")


@requires_library
def test_sdpa_backward_names_full_length_and_typed(tmp_path):
    """The helper kernels' template flag is the 16-bit type (fp16: false, bf16: true,
    causal or not), and names are never truncated (the real one is 493 characters)."""
    run = run_emulated(SDPA_FLAGS, tmp_path)
    assert run.returncode == 0, run.output
    bwd = [r for r in dnn_records(read_trace(run.trace_path())) if r["op"] == "sdpa_bprop"]
    assert len(bwd) == 2
    for r, flag in zip(bwd, ("false", "true"), strict=True):
        assert not r["bits"] & F_CAUSAL
        assert DOT_DO_O.format(flag) in r["kernels"], r["kernels"]
        assert CONVERT_DQ.format(flag) in r["kernels"], r["kernels"]
    assert len(DOT_DO_O.format("false")) == 493


CONV_MEASURED = """
import torch, torch.nn.functional as F
torch.backends.cudnn.benchmark = True
def run(n, c, k, r, hw, stride):
    x = torch.randn(n, c, hw, hw, device="cuda").to(memory_format=torch.channels_last).requires_grad_(c != 3)
    w = torch.randn(k, c, r, r, device="cuda").to(memory_format=torch.channels_last).requires_grad_()
    for _ in range(2):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = F.conv2d(x, w, stride=stride, padding=r // 2)
        y.float().sum().backward()
run(64, 3, 64, 7, 224, 2)     # ResNet stem: channels padded to 8, cutlass kernels
run(64, 64, 64, 3, 56, 1)     # split-K wgrad
run(64, 256, 256, 3, 14, 1)   # wide tile fprop
run(48, 64, 64, 3, 56, 1)     # not measured: nearest measured shape (N=64)
torch.cuda.synchronize()
"""


@requires_library
def test_conv_kernels_follow_measured_autotuning(tmp_path):
    """Convolutions of shapes measured on an H100 name the kernels its autotuning
    picked (table in cudnn_kernels.c, from benchmarks/data/gpu_fidelity), with
    complete names (the cutlass wgrad kernel is a 1676-character mangled name)."""
    run = run_emulated(CONV_MEASURED, tmp_path)
    assert run.returncode == 0, run.output
    recs = dnn_records(read_trace(run.trace_path()))
    last: dict[tuple, dict] = {}
    for r in recs:
        if r["op"].startswith("conv_"):
            last[(r["op"], r["params"][0], r["params"][1], r["params"][2])] = r
    bf16 = "bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize"
    stem_f, stem_w = last[("conv_fprop", 64, 3, 64)], last[("conv_wgrad", 64, 3, 64)]
    assert stem_f["kernels"][0].startswith("void nhwcAddPaddingKernel<__nv_bfloat16")
    assert stem_f["kernels"][-1].startswith("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop")
    mangled = [k for k in stem_w["kernels"] if k.startswith("_ZN17cutlass__5x_cudnn6Kernel")]
    assert len(mangled) == 1 and len(mangled[0]) == 1676 and mangled[0].endswith("EEEEEvNT_6ParamsE")
    # Every name is exactly one the H100's profiler recorded for ResNet-18.
    real = {k["name"] for k in json.loads(GROUND_TRUTH.read_text())["profiles"]["0"]["kernels"]}
    for key, r in last.items():
        if key[1] != 48:
            assert set(r["kernels"]) - {"Memset (Device)"} <= real, (key, set(r["kernels"]) - real)
    assert ("conv_dgrad", 64, 3, 64) not in last  # the input needs no gradient
    w = last[("conv_wgrad", 64, 64, 64)]["kernels"]
    assert [k.split("tilesize")[-1] for k in w if k.startswith("sm90_xmma")] == [
        "64x64x64_warpgroupsize1x1x1_g1_execute_segment_k_on_kernel__5x_cudnn",
        "64x64x64_warpgroupsize1x1x1_g1_execute_split_k_kernel__5x_cudnn"]
    assert any("init_device_workspace_kernel" in k for k in w)
    assert last[("conv_fprop", 64, 64, 64)]["kernels"][-1] == (
        f"sm90_xmma_fprop_implicit_gemm_{bf16}64x64x64_warpgroupsize1x1x1_g1_execute_segment_k_off_kernel__5x_cudnn")
    assert last[("conv_fprop", 64, 256, 256)]["kernels"][-1] == (
        f"sm90_xmma_fprop_implicit_gemm_{bf16}128x256x32_warpgroupsize2x1x1_g1_execute_segment_k_off_kernel__5x_cudnn")
    wide_w = last[("conv_wgrad", 64, 256, 256)]
    assert wide_w["workspace"] == 0 and wide_w["engine"] == 65
    assert last[("conv_fprop", 48, 64, 64)]["kernels"] == last[("conv_fprop", 64, 64, 64)]["kernels"]
