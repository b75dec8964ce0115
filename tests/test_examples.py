"""The example training scripts run to completion under emulation.

Covers: every script in examples/ (GPT with cuDNN attention and fused AdamW,
CNN with cuDNN convolutions and batch norm, BERT in fp16 with GradScaler,
the embedding-heavy recommender, and 2-rank DDP under torchrun) exits 0
under `maya emulate`, writes a trace per rank with the work its model
implies (kernels, library calls, collectives), reports no unsupported API,
and prints the peak memory the script itself observed; and the same script
emulated twice gives the same sequence of device operations (the GPT run is
shared by both checks).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from maya.predictor.trace import Kind, read_trace

pytestmark = pytest.mark.emulation  # every test here runs an emulation

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "emulation-image" / "build" / "libmaya.so"

# Small sizes: the tests check plumbing, the fidelity benchmark runs the defaults.
SMALL = {
    "gpt": ["--n-layer", "2", "--n-embd", "256", "--n-head", "4", "--seq-len", "256", "--batch", "4", "--vocab", "4096"],
    "cnn": ["--batch", "8", "--image-size", "64", "--blocks", "1,1,1,1"],
    "bert": ["--n-layer", "2", "--hidden", "256", "--heads", "4", "--seq-len", "128", "--batch", "4", "--vocab", "4096"],
    "recommender": ["--tables", "2", "--rows", "10000", "--batch", "256"],
    "ddp": ["--n-layer", "2", "--n-embd", "256", "--n-head", "4", "--seq-len", "128", "--batch", "4", "--vocab", "4096"],
}


def emulate(name: str, out: Path, steps: int = 2, extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    if not LIBRARY.is_file():
        pytest.skip("interposer not built; run 'make'")
    script = str(ROOT / "examples" / f"{name}.py")
    if name == "ddp":
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", script]
    else:
        command = [sys.executable, script]
    command += [*SMALL[name], *extra, "--steps", str(steps)]
    cli = [sys.executable, "-m", "maya.cli", "emulate", "--gpu", "H100-SXM-80GB", "--out", str(out), "--", *command]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(cli, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)


def result_line(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("{") and "max_memory_allocated" in line]
    assert lines, stdout
    return json.loads(lines[-1])


@pytest.fixture(scope="module")
def gpt(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The GPT example emulated once for the module (its output folder beside the result): checked
    as every example is, and against a second run."""
    out = tmp_path_factory.mktemp("gpt") / "out"
    return emulate("gpt", out), out


@pytest.mark.parametrize("name", ["gpt", "cnn", "bert", "recommender", "ddp"])
def test_example_completes(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if name == "gpt":
        proc, out = request.getfixturevalue("gpt")
    else:
        out = tmp_path / "out"
        proc = emulate(name, out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "not supported by the emulator" not in proc.stderr
    ranks = 2 if name == "ddp" else 1
    for rank in range(ranks):
        trace = read_trace(out / f"rank{rank}.mayatrace")
        counts = trace.kind_counts()
        assert counts.get("KERNEL", 0) > 50
        assert counts.get("BLAS", 0) > 0
        if name in ("gpt", "cnn", "ddp"):
            assert counts.get("DNN", 0) > 0  # cuDNN attention / convolutions
        if name == "ddp":
            assert counts.get("COLL", 0) > 0
        assert counts.get("UNSUPPORTED", 0) == 0
    assert result_line(proc.stdout)["max_memory_allocated"] > 0


def operation_sequence(path: Path) -> list[tuple]:
    """What the device was asked to do, without addresses or times."""
    trace = read_trace(path)
    names = {}
    for i in trace.of_kind(Kind.FUNC):
        names[int(trace.records["a"][i][0])] = trace.string(int(trace.records["a"][i][2]))
    seq = []
    for r in trace.records:
        kind = int(r["kind"])
        a = r["a"]
        if kind == Kind.KERNEL:
            seq.append((kind, int(r["stream"]), names[int(a[0])], int(a[1]), int(a[2]), int(a[3])))
        elif kind in (Kind.BLAS, Kind.DNN):
            seq.append((kind, int(r["stream"]), trace.string(int(r["a32"])), *map(int, a[:4])))
        elif kind in (Kind.MEMCPY, Kind.MEMSET):
            seq.append((kind, int(r["stream"]), int(r["a32"]), int(a[2] if kind == Kind.MEMCPY else a[1])))
        elif kind in (Kind.MALLOC, Kind.FREE):
            seq.append((kind, int(a[1])))
        elif kind not in (Kind.STRING, Kind.FUNC, Kind.THREAD):
            seq.append((kind, int(r["stream"])))
    return seq


def test_emulation_is_deterministic(tmp_path: Path, gpt: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    first, first_out = gpt
    second = emulate("gpt", tmp_path / "b")
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    a = operation_sequence(first_out / "rank0.mayatrace")
    b = operation_sequence(tmp_path / "b" / "rank0.mayatrace")
    assert len(a) > 100
    mismatch = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    assert mismatch is None and len(a) == len(b), f"first difference at {mismatch}: {a[mismatch] if mismatch is not None else ''}"
    assert np.array_equal(np.array([k[0] for k in a]), np.array([k[0] for k in b]))


def kernel_names(path: Path) -> list[str]:
    trace = read_trace(path)
    names = {int(trace.records["a"][i][0]): trace.string(int(trace.records["a"][i][2])) for i in trace.of_kind(Kind.FUNC)}
    return [names[int(trace.records["a"][i][0])] for i in trace.of_kind(Kind.KERNEL)]


def test_gpt_foreach_optimizer_with_clipping(tmp_path: Path, gpt: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    """The calibration's optimizer-heavy GPT sizes (``--optimizer foreach --clip-grad``) run AdamW as lists of
    per-tensor kernels and clip the gradients' total norm every step; the default runs fused AdamW."""
    proc = emulate("gpt", tmp_path / "out", extra=("--optimizer", "foreach", "--clip-grad", "1.0"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    args = result_line(proc.stdout)["args"]
    assert (args["optimizer"], args["clip_grad"]) == ("foreach", 1.0)
    foreach, fused = kernel_names(tmp_path / "out" / "rank0.mayatrace"), kernel_names(gpt[1] / "rank0.mayatrace")
    assert any("FusedAdamMathFunctor" in n for n in fused) and not any("FusedAdamMathFunctor" in n for n in foreach)
    assert sum("multi_tensor_apply_kernel" in n for n in foreach) > 3 * sum("multi_tensor_apply_kernel" in n for n in fused)
    assert any("LpNormFunctor" in n for n in foreach) and not any("LpNormFunctor" in n for n in fused)  # the clipping
