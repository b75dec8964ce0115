"""Fidelity tooling: examples/, benchmarks/campaigns/gpu_fidelity_campaign.py, benchmarks/fidelity.py.

Covers:
- the examples' kernel-profile digest (examples/common.py) reads the
  profiler's Chrome trace: kernels only, counts, launch order, device time,
  copies and memsets apart;
- fidelity.emulated_step cuts a hand-built trace into steps at its
  DEVICE_SYNC records and collects one step's kernel names (through FUNC
  records), the kernel names DNN records list, BLAS calls, collectives and copies; extra early syncs are
  tolerated, too few are reported;
- fidelity.match_kernels: matching by name count by count, GEMM kernels
  against BLAS records, NCCL kernels against collectives, cuDNN
  implicit-GEMM kernels never taken by BLAS records, emulated-only names;
- the campaign's --dry-run: every example accepts the campaign's command
  line (through --print-args) and the output folder holds at most 8 files;
- an example run under `maya emulate` (when the interposer is built) yields
  equal kernel counts in its steady steps and the peak memory of its result line.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from emulated import REPO, requires_library

from benchmarks import fidelity
from benchmarks.campaigns import gpu_fidelity_campaign as campaign
from maya.predictor.trace import Kind, TraceWriter


def _example_module(name: str) -> ModuleType:
    """An examples/ module, loaded from its file (the examples are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"examples_{name}", REPO / "examples" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _FakeProfile:
    def __init__(self, events: list[dict]) -> None:
        self.events = events

    def export_chrome_trace(self, path: str) -> None:
        Path(path).write_text(json.dumps({"traceEvents": self.events}))


def test_kernel_profile_digest() -> None:
    pytest.importorskip("torch")
    common = _example_module("common")
    ev = [
        {"ph": "X", "cat": "kernel", "name": "k_b", "ts": 20, "dur": 2.0,
         "args": {"grid": [1, 1, 1], "block": [32, 1, 1], "correlation": 7, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "k_a", "ts": 10, "dur": 1.5,
         "args": {"grid": [2, 1, 1], "block": [64, 1, 1], "correlation": 6, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "k_b", "ts": 30, "dur": 3.0, "args": {"grid": [1, 1, 1], "block": [32, 1, 1]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 5, "dur": 1.0, "args": {"correlation": 6}},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "ts": 8, "dur": 1.0, "args": {"correlation": 7}},
        {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "ts": 40, "dur": 1.0, "args": {"bytes": 64}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "ts": 41, "dur": 1.0,
         "args": {"bytes": 8}},
    ]
    d = common.kernel_profile(_FakeProfile(ev))
    assert d["kernel_launches"] == 3
    assert [k["name"] for k in d["kernels"]] == ["k_a", "k_b"]
    assert [k["count"] for k in d["kernels"]] == [1, 2]
    assert d["kernels"][1]["total_us"] == 5.0
    assert d["kernels"][1]["shapes"] == [[[1, 1, 1], [32, 1, 1], None, None]]
    assert d["sequence"] == [0, 1, 1]
    # Times from the first launch (runtime or driver API: cuBLAS and cuDNN launch through the
    # driver); a kernel whose launch the profiler missed has none.
    assert d["timeline"] == [[0, 0.0, 5.0, 1.5, 7], [1, 3.0, 15.0, 2.0, 7], [1, None, 25.0, 3.0, None]]
    assert {c["name"]: (c["count"], c["bytes"]) for c in d["copies"]} == {
        "Memset (Device)": (1, 64), "Memcpy HtoD (Pinned -> Device)": (1, 8)}


def _trace(path: Path, steps: list[list[tuple]], early_syncs: int = 0) -> None:
    """A trace with `steps` windows separated by DEVICE_SYNC; items are
    ("k", name) kernels, ("blas", api), ("coll", op) or ("memset",)."""
    w = TraceWriter(gpu_name="H100-SXM-80GB")
    ids: dict[str, int] = {}
    t = 0

    def kernel(name: str) -> None:
        nonlocal t
        if name not in ids:
            ids[name] = len(ids) + 1
            sid = w.string(name)
            w.record(Kind.FUNC, t_ns=t, a=[ids[name], sid, sid])
        w.record(Kind.KERNEL, t_ns=t, a=[ids[name], 1, 1, 0, 0])
        t += 1

    kernel("init_kernel")
    for _ in range(early_syncs):
        w.record(Kind.DEVICE_SYNC, t_ns=t)
    w.record(Kind.DEVICE_SYNC, t_ns=t)
    for items in steps:
        for it in items:
            if it[0] == "k":
                kernel(it[1])
            elif it[0] == "blas":
                w.record(Kind.BLAS, t_ns=t, a32=w.string(it[1]))
            elif it[0] == "coll":
                w.record(Kind.COLL, t_ns=t, a=[7, 1024, it[1], 0, 4096])
            elif it[0] == "dnn":
                sids = [w.string(n) for n in it[1]]
                w.record(Kind.DNN, t_ns=t, a32=w.string("conv_fprop"), a=[0, 0, 0, 2 | len(sids) << 16, 0],
                         ext=[11, 12, *sids])
            elif it[0] == "memset":
                w.record(Kind.MEMSET, t_ns=t)
            t += 1
        w.record(Kind.DEVICE_SYNC, t_ns=t)
    w.write(path)


def test_emulated_step_window(tmp_path: Path) -> None:
    step = [("k", "fwd"), ("blas", "cublasLtMatmul"), ("k", "fwd"), ("blas", "cublasGemmEx"),
            ("coll", 1), ("memset",), ("dnn", ["Memset (Device)", "sm90_xmma_fprop"]), ("k", "opt")]
    _trace(tmp_path / "t.mayatrace", [[("k", "warm")] + step, step, step + [("k", "odd")]], early_syncs=2)
    e = fidelity.emulated_step(tmp_path / "t.mayatrace", steps=3, step=2)
    assert e["kernels_per_step"] == [4, 3, 4]
    assert e["kernels"] == {"fwd": 2, "opt": 1, "odd": 1}
    assert e["blas_calls"] == {"cublasLtMatmul": 1, "cublasGemmEx": 1}
    assert e["collectives"] == {"AllReduce": 1}
    assert e["copies"] == {"MEMSET": 1}
    assert e["dnn_kernels"] == {"Memset (Device)": 1, "sm90_xmma_fprop": 1}
    assert e["sequence"] == ["fwd", fidelity.BLAS_SLOT, "fwd", fidelity.BLAS_SLOT, fidelity.NCCL_SLOT,
                             "sm90_xmma_fprop", "opt", "odd"]
    assert any("DEVICE_SYNC" in n for n in e["notes"])  # the two early syncs are noted
    few = fidelity.emulated_step(tmp_path / "t.mayatrace", steps=9, step=2)
    assert "kernels" not in few and few["notes"]


def test_match_kernels() -> None:
    real = {"fwd": 4, "opt": 1, "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_TNT": 2,
            "void cublasLt::splitKreduce_kernel<32, 16, int, float>(float*)": 1,
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64": 1,
            "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc": 2,
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)": 1,
            "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64": 1}
    emu = {"kernels": {"fwd": 3, "opt": 1, "extra": 2, "void k<true>(int)": 1}, "blas_calls": {"cublasLtMatmul": 3},
           "collectives": {"AllReduce": 1},
           "dnn_kernels": {"Memset (Device)": 1,
                           "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64": 1}}
    m = fidelity.match_kernels(real, emu)
    real["void k<false>(int)"] = 1
    m = fidelity.match_kernels(real, emu)
    assert m["real_launches"] == 14
    assert m["matched_by_name"] == 3 + 1 + 1
    assert m["matched_by_blas_records"] == 3        # 4 GEMM launches, 3 records
    assert m["matched_by_coll_records"] == 1
    # the split-K reduction is the second kernel of one of those calls
    assert m["matched_as_parts_of_blas_calls"] == 1
    assert m["matched"] == 10
    assert m["real_blas_class_launches"] == 4
    assert sum(m["unmatched_real"].values()) == 4
    assert m["unmatched_real"]["sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc"] == 2
    assert m["unmatched_real"]["fwd"] == 1
    assert m["emulated_only"] == {"extra": 2, "void k<true>(int)": 1}
    assert m["near_misses"] == [{"real": "void k<false>(int)", "emulated": "void k<true>(int)",
                                 "first_difference": 7}]
    assert abs(m["fraction"] - 10 / 14) < 1e-12
    # without BLAS records, neither GEMM kernels nor their second kernels are matched
    none = fidelity.match_kernels(real, {**emu, "blas_calls": {}})
    assert none["matched_by_blas_records"] == 0 and none["matched_as_parts_of_blas_calls"] == 0
    assert none["unmatched_real"]["void cublasLt::splitKreduce_kernel<32, 16, int, float>(float*)"] == 1


def test_order_similarity() -> None:
    prof = {"kernels": [{"name": "a"}, {"name": "nvjet_sm90_x"}, {"name": "b"}], "sequence": [0, 1, 2, 0]}
    assert fidelity.order_similarity(prof, ["a", fidelity.BLAS_SLOT, "b", "a"]) == 1.0
    assert fidelity.order_similarity(prof, ["b", "a", fidelity.BLAS_SLOT, "a"]) < 1.0
    assert fidelity.order_similarity({"kernels": [], "sequence": []}, ["a"]) is None


def test_compare_memory() -> None:
    runs = [{"max_memory_allocated": 1000, "max_memory_reserved": 2000, "step_max_memory_allocated": [900, 1000]},
            {"max_memory_allocated": 1010, "max_memory_reserved": 2000}]
    m = fidelity.compare_memory({"max_memory_allocated": 1005, "step_max_memory_allocated": [1, 2]}, runs)
    assert m["real"] == 1005 and m["rel_error"] == 0 and abs(m["real_spread"] - 10 / 1005) < 1e-12
    assert fidelity.compare_memory({"max_memory_allocated": 5}, [])["emulated"] == 5


@pytest.mark.slow
def test_campaign_dry_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "campaigns" / "gpu_fidelity_campaign.py"), "--out", str(out),
                        "--dry-run"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and "env.json" in files and "summary.csv" in files
    for name in campaign.EXAMPLES:
        if name in campaign.HELD_OUT or name in campaign.SIZES:  # only with --part held-out or sizes
            assert not (out / f"{name}.json").exists()
            continue
        entry = json.loads((out / f"{name}.json").read_text())
        (run,) = entry["runs"]
        args = run["results"][0]
        assert args["steps"] == campaign.STEPS and args["profile_step"] == campaign.PROFILE_STEP
        assert entry["argv"] == campaign.example_argv(name)


@pytest.mark.emulation
@requires_library
def test_example_under_emulation(tmp_path: Path) -> None:
    """One small example under emulation, then the whole comparison against
    "GPU data" made from that run (a profile with nvjet kernels where the
    trace has BLAS calls): everything matches."""
    argv = ["examples/recommender.py", "--rows", "1000", "--tables", "2", "--batch", "64", "--steps", "3"]
    run = fidelity.run_emulated("recommender", argv, 1, "H100-SXM-80GB", 1, tmp_path / "a", timeout=240)
    assert run["returncode"] == 0, run["stderr_tail"]
    res = run["results"][0]
    assert res["max_memory_allocated"] > 0 and res["max_memory_allocated"] == max(res["step_max_memory_allocated"])
    e = fidelity.emulated_step(tmp_path / "a" / "rank0.mayatrace", steps=3, step=2)
    assert e["notes"] == []
    assert e["kernels_per_step"][1] == e["kernels_per_step"][2] > 0
    assert sum(e["blas_calls"].values()) > 0

    seq = [n if n != fidelity.BLAS_SLOT else "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNN" for n in e["sequence"]]
    names = list(dict.fromkeys(seq))
    profile = {"kernel_launches": len(seq), "sequence": [names.index(n) for n in seq],
               "kernels": [{"name": n, "count": seq.count(n)} for n in names]}
    entry = {"example": "recommender", "argv": argv, "processes": 1, "steps": 3, "profile_step": 2,
             "runs": [{"returncode": 0, "results": [res]}], "profiles": {"0": profile}}
    env = {"gpu": "NVIDIA H100 80GB HBM3", "device_count": 1}
    row = fidelity.evaluate("recommender", entry, env, fidelity.gpu_for(env), tmp_path / "b", timeout=240)
    (rank,) = row["ranks"]
    assert rank["memory"]["rel_error"] == 0
    assert rank["kernels"]["fraction"] == 1.0 and rank["kernels"]["order_similarity"] == 1.0
    assert rank["kernels"]["matched_by_blas_records"] == sum(e["blas_calls"].values())
    report = {"date": "d", "command": "c", "machine": fidelity.machine(), "sources": [], "rows": [row]}
    assert "recommender rank 0" in fidelity.markdown(report)


def test_ranks_printing_on_one_line_still_give_their_result() -> None:
    # Two ranks of a job share its unbuffered stdout: their lines can land on one.
    assert campaign._last_json('noise\n{"rank": 0, "steps": 8}{"rank": 1, "steps": 8}\n\n') == {"rank": 1, "steps": 8}
    assert campaign._last_json('{"rank": 0}\n{"rank": 1, "ste{"rank": 2}\n') == {"rank": 2}
    assert campaign._last_json("no json here\n{not json}\n") is None
