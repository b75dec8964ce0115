"""torch.compile under emulation: Triton kernels go through the driver API.

Covers: Inductor compiles a fused elementwise+reduction function (ptxas runs
on the CPU), loads the cubin through cuModuleLoad/cuModuleGetFunction, and
its launches (autotuning benchmark runs included) are recorded as KERNEL
records from the driver path (a32 = 1) under the Triton kernel's name, each
carrying what its source says it moves (the start-up hook's facts: sizes,
bytes loaded and stored), which the estimators price it by.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated import requires_library, run_emulated

from maya.predictor.estimate.work import work
from maya.predictor.trace import Kind, read_trace
from maya.predictor.trace.ops import device_ops
from maya.predictor.trace.records import TritonFacts

pytestmark = pytest.mark.emulation  # every test here runs an emulation

SCRIPT = """
import torch

@torch.compile
def f(x, y):
    return torch.nn.functional.gelu(x * 2 + y).sum(dim=-1)

x = torch.randn(64, 128, device="cuda")
y = torch.randn(64, 128, device="cuda")
print("shape", tuple(f(x, y).shape))
"""


@requires_library
def test_compiled_function_launches_triton_kernels(tmp_path: Path) -> None:
    run = run_emulated(SCRIPT, tmp_path, timeout=300)
    assert run.returncode == 0, run.output[-4000:]
    assert "shape (64,)" in run.stdout
    trace = read_trace(run.trace_path())
    names = {int(trace.records["a"][i][0]): trace.string(int(trace.records["a"][i][1])) for i in trace.of_kind(Kind.FUNC)}
    driver = [names[int(r["a"][0])] for r in trace.records[trace.of_kind(Kind.KERNEL)] if int(r["a32"]) == 1]
    assert driver and all(n.startswith("triton_") for n in driver), set(driver)
    assert run.rank0["unsupported_apis"] == []
    # One fused kernel: rows of 128 (x * 2 + y, gelu, sum), 64 rows; two fp32 inputs read, one row sum written.
    ops = {op.name: op for _, op in device_ops(trace) if op.name.startswith("triton_")}
    assert len(ops) == 1, ops
    op = next(iter(ops.values()))
    assert TritonFacts.of(op.params) == TritonFacts(64, 128, 2 * 64 * 128 * 4, 64 * 4, 2, 1)
    assert work(op).bytes == 2 * 64 * 128 * 4 + 64 * 4
