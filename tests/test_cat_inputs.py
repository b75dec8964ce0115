"""torch.cat's kernels: the interposer reads what their inputs hold, and the estimators price it.

A cat kernel launches a few blocks per SM whatever it copies; under emulation
the interposer reads its inputs' element counts from the metadata it takes by
value (``emulation-image/src/kernel_args.c``), and the estimators price the
launch as a device-to-device copy of those bytes, or, for the forms that copy
element by element, at least at the rate such a form was measured to copy
(``benchmarks/data/cat_kernels/``).
"""

from __future__ import annotations

import json

import pytest
from emulated import requires_library, run_emulated

from maya.catalog import lookup
from maya.predictor.estimate import load
from maya.predictor.estimate import work as W
from maya.predictor.trace import Kind, read_trace
from maya.predictor.trace.ops import Op, device_ops

SHAPE = "_ZN2at6native40_GLOBAL__N__0f1a8107_8_Shape_cu_49f7391c"
VECTORIZED = (SHAPE + "30CatArrayBatchedCopy_vectorizedINS1_10OpaqueTypeILj4EEEjLi1ELi128ELi1ELi16ELi4EEEvPcNS1_25CatArr"
              "InputTensorMetadataIT_T0_XT2_EXT3_EEENS1_16TensorSizeStrideIS8_Lj4EEEiS8_")
STRIDED = (SHAPE + "19CatArrayBatchedCopyINS1_10OpaqueTypeILj4EEEjLi2ELi64ELi64EEEvPT_NS1_25CatArrInputTensorMetadataIS5_"
           "T0_XT2_EXT3_EEENS1_16TensorSizeStrideIS8_Lj4EEEiS8_")

SCRIPT = """
import json, torch
a, b = torch.randn(1000, 64, device="cuda"), torch.randn(24, 64, device="cuda")
torch.cat([a, b])                                                   # rows: 1024 x 64 fp32
h = [torch.randn(8, 128, 32, 32, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
torch.cat(h, dim=1)                                                 # channels: 2 x 1 M bf16
t = [torch.randn(64, 256, device="cuda").t() for _ in range(3)]
torch.cat(t, dim=1)                                                 # transposed inputs: the strided form
torch.cat([torch.randn(100, device="cuda") for _ in range(200)])    # more inputs than one launch takes
torch.cuda.synchronize()
"""


@requires_library
def test_a_cat_launch_records_what_its_inputs_hold(tmp_path) -> None:
    r = run_emulated(SCRIPT, tmp_path)
    assert r.returncode == 0, r.output
    trace = read_trace(r.trace_path())
    cats = [op for _, op in device_ops(trace) if op.kind == int(Kind.KERNEL) and "CatArrayBatchedCopy" in op.name]
    assert [op.params for op in cats] == [(1024 * 64, 2, 4), (2 * 8 * 128 * 32 * 32, 2, 2), (3 * 64 * 256, 3, 4),
                                          (128 * 100, 128, 4), (72 * 100, 72, 4)]
    assert W.cat_form(cats[2]) == "strided" and W.cat_form(cats[0]) == "vectorized"
    assert json.loads((r.out_dir / "summary.json").read_text())["ranks"][0]["kernel_launches"] >= 5


def cat_op(name: str, params: tuple[int, ...]) -> Op:
    return Op(int(Kind.KERNEL), name, 0, (0, 264 | 2 << 32 | 1 << 48, 128 | 1 << 16 | 1 << 32, 0, len(params)), params)


@pytest.mark.usefixtures("fitted_cache")
def test_a_cat_is_priced_as_a_copy_of_its_bytes_or_at_its_forms_rate() -> None:
    est = load("H100-SXM-80GB")
    big = cat_op(VECTORIZED, (1 << 26, 2, 4))  # 256 MB read and written
    assert W.work(big).bytes == 2 * (1 << 26) * 4
    e = est.estimate(big)
    assert (e.confidence, e.estimator, e.family) == ("derived", "cat:vectorized", "memory")
    assert e.ns == pytest.approx(est._calibrated_roofline("copy", W.work(big)))
    assert (1 << 29) / lookup("H100-SXM-80GB").mem_bw_bytes_per_s * 1e9 < e.ns  # no faster than memory allows
    # the strided form copies element by element: at most its measured elements a second
    strided = est.estimate(cat_op(STRIDED, (1 << 26, 2, 4)))
    assert strided.estimator == "cat:strided" and strided.ns == pytest.approx(1e9 * (1 << 26) / W.CAT_ELEMENTS_PER_S["strided"])
    # a launch whose metadata was not read (a recorded trace: its two integer arguments) is the family model's
    recorded = est.estimate(cat_op(VECTORIZED, (0, 4096)))
    assert recorded.confidence != "derived"
