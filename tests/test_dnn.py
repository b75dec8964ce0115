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
- every DNN record is asynchronous, on the handle's stream, and no cuDNN call
  was reported unsupported.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from emulated import requires_library, run_emulated

from maya.predictor.trace import Flag, Kind, read_trace

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
