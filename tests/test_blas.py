"""cuBLAS / cuBLASLt emulation (emulation-image/src/cublas.c, cublaslt.c; docs/blas.md).

Covers, with one small torch script run under the interposer:
- bf16 ``nn.Linear`` forward is one ``cublasLtMatmul`` with the bias fused
  (epilogue BIAS, bias pointer = the module's bias, bias dtype bf16), m/n/k and
  transposes as torch passes them, bf16 in/out, fp32 compute and scale, the
  workspace given to the call, the ``x``/``y`` tensors as B and D;
- its backward is ``cublasGemmEx`` calls (grad input and grad weight) in bf16;
- fp32 matmul is ``cublasSgemm_v2`` with compute 32F, or 32F_FAST_TF32 when
  ``torch.backends.cuda.matmul.allow_tf32`` is on (the handle's math mode);
- fp32 ``bmm`` is ``cublasSgemmStridedBatched`` with batch and strides;
- every BLAS record is asynchronous, on a known stream, carries 28 extension
  words, alpha = 1 and beta = 0 (read through the pointer mode), and no
  cuBLAS call was reported unsupported.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import pytest
from emulated import requires_library, run_emulated

from maya.predictor.trace import Flag, Kind, read_trace

pytestmark = [pytest.mark.emulation, requires_library]  # every test here reads one emulation

# Values from library_types.h / cublas_api.h / cublasLt.h.
CUDA_R_32F, CUDA_R_16BF = 0, 14
COMPUTE_32F, COMPUTE_32F_FAST_TF32 = 68, 77
OP_N, OP_T = 0, 1
EPILOGUE_BIAS = 4
EXT_WORDS = 28
# Extension word indices (BX_* in emulation-image/src/blas.h).
LDA, LDB, LDC, STRIDE_A, STRIDE_B, STRIDE_C = 0, 1, 2, 4, 5, 6
ALPHA, BETA, A_PTR, B_PTR, C_PTR, D_PTR, BIAS, BIAS_TYPE = 8, 9, 12, 13, 14, 15, 16, 17

SCRIPT = """
import json
import torch

torch.backends.cuda.matmul.allow_tf32 = False
out = {}

lin = torch.nn.Linear(64, 48, device="cuda", dtype=torch.bfloat16)
x = torch.randn(16, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
y = lin(x)
out.update(bias=lin.bias.data_ptr(), weight=lin.weight.data_ptr(), x=x.data_ptr(), y=y.data_ptr())
y.float().sum().backward()

a = torch.randn(40, 24, device="cuda")
b = torch.randn(24, 56, device="cuda")
c = a @ b

torch.backends.cuda.matmul.allow_tf32 = True
a2 = torch.randn(72, 8, device="cuda")
b2 = torch.randn(8, 88, device="cuda")
c2 = a2 @ b2
torch.backends.cuda.matmul.allow_tf32 = False

p = torch.randn(5, 12, 20, device="cuda")
q = torch.randn(5, 20, 28, device="cuda")
r = torch.bmm(p, q)
torch.cuda.synchronize()
print("BLAS_TEST " + json.dumps(out))
"""


def _f64(word: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", int(word)))[0]


def _decode(trace: Any, i: int) -> dict[str, Any]:
    rec = trace.records[i]
    a = [int(v) for v in rec["a"]]
    ext = trace.ext(int(i))
    return {
        "api": trace.string(int(rec["a32"])),
        "flags": int(rec["flags"]),
        "stream": int(rec["stream"]),
        "m": a[0] & 0xFFFFFFFF, "n": a[0] >> 32, "k": a[1] & 0xFFFFFFFF, "batch": a[1] >> 32,
        "transa": a[2] & 0xFF, "transb": (a[2] >> 8) & 0xFF, "epilogue": (a[2] >> 16) & 0xFFFF,
        "types": tuple((a[3] >> s) & 0xFF for s in (0, 8, 16, 24)),
        "compute": (a[3] >> 32) & 0xFF, "scale": (a[3] >> 40) & 0xFF,
        "workspace": a[4],
        "ext": ext,
    }


@pytest.fixture(scope="module")
def blas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the script once; the BLAS records in order and the script's pointers."""
    run = run_emulated(SCRIPT, tmp_path_factory.mktemp("blas"))
    assert run.returncode == 0, run.output
    line = next(s for s in run.stdout.splitlines() if s.startswith("BLAS_TEST "))
    trace = read_trace(run.trace_path(0))
    records = [_decode(trace, i) for i in trace.of_kind(Kind.BLAS)]
    unsupported = [trace.string(int(trace.records[i]["a32"])) for i in trace.of_kind(Kind.UNSUPPORTED)]
    return {"records": records, "ptrs": json.loads(line[len("BLAS_TEST "):]),
            "unsupported": unsupported, "output": run.output}


def _find(blas: dict[str, Any], api: str, m: int, n: int, k: int) -> dict[str, Any]:
    hits = [r for r in blas["records"] if r["api"] == api and (r["m"], r["n"], r["k"]) == (m, n, k)]
    seen = [(r["api"], r["m"], r["n"], r["k"]) for r in blas["records"]]
    assert len(hits) == 1, f"{api} {m}x{n}x{k} not recorded once; records: {seen}"
    return hits[0]


def test_linear_bf16_forward_is_lt_matmul_with_bias_epilogue(blas: dict[str, Any]) -> None:
    ptrs = blas["ptrs"]
    # y^T (48 x 16) = W (stored 64 x 48 column-major, transposed) . x^T (64 x 16)
    r = _find(blas, "cublasLtMatmul", 48, 16, 64)
    assert (r["transa"], r["transb"], r["batch"]) == (OP_T, OP_N, 1)
    assert r["epilogue"] == EPILOGUE_BIAS
    assert r["types"] == (CUDA_R_16BF,) * 4
    assert (r["compute"], r["scale"]) == (COMPUTE_32F, CUDA_R_32F)
    ext = r["ext"]
    assert int(ext[BIAS]) == ptrs["bias"]
    assert np.int32(np.uint32(int(ext[BIAS_TYPE]) & 0xFFFFFFFF)) == CUDA_R_16BF
    assert (int(ext[A_PTR]), int(ext[B_PTR]), int(ext[D_PTR])) == (ptrs["weight"], ptrs["x"], ptrs["y"])
    assert (int(ext[LDA]), int(ext[LDB]), int(ext[LDC])) == (64, 64, 48)
    assert r["workspace"] > 0


def test_linear_bf16_backward_is_gemm_ex(blas: dict[str, Any]) -> None:
    grad_input = _find(blas, "cublasGemmEx", 64, 16, 48)   # dY (16x48) . W (48x64)
    grad_weight = _find(blas, "cublasGemmEx", 64, 48, 16)  # dY^T (48x16) . x (16x64)
    for r in (grad_input, grad_weight):
        assert r["types"] == (CUDA_R_16BF,) * 4
        assert (r["compute"], r["scale"]) == (COMPUTE_32F, CUDA_R_32F)
        assert r["epilogue"] == 0 and r["batch"] == 1


def test_fp32_matmul_is_sgemm_and_honours_tf32(blas: dict[str, Any]) -> None:
    plain = _find(blas, "cublasSgemm_v2", 56, 40, 24)  # (40x24) @ (24x56), TF32 off
    tf32 = _find(blas, "cublasSgemm_v2", 88, 72, 8)    # (72x8) @ (8x88), TF32 on
    assert plain["types"] == tf32["types"] == (CUDA_R_32F,) * 4
    assert plain["compute"] == COMPUTE_32F
    assert tf32["compute"] == COMPUTE_32F_FAST_TF32
    assert (plain["transa"], plain["transb"]) == (OP_N, OP_N)


def test_bmm_is_strided_batched(blas: dict[str, Any]) -> None:
    r = _find(blas, "cublasSgemmStridedBatched", 28, 12, 20)  # (5,12,20) @ (5,20,28)
    assert r["batch"] == 5
    ext = r["ext"]
    assert (int(ext[STRIDE_A]), int(ext[STRIDE_B]), int(ext[STRIDE_C])) == (20 * 28, 12 * 20, 12 * 28)
    assert r["compute"] == COMPUTE_32F


def test_every_blas_record_is_well_formed(blas: dict[str, Any]) -> None:
    assert blas["records"], blas["output"]
    for r in blas["records"]:
        assert r["flags"] & Flag.ASYNC
        assert len(r["ext"]) >= EXT_WORDS
        assert _f64(r["ext"][ALPHA]) == 1.0, r["api"]
        assert _f64(r["ext"][BETA]) == 0.0, r["api"]
    assert not [u for u in blas["unsupported"] if u.startswith("cublas")]
