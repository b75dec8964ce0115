"""``maya emulate``, ``maya gpus`` and the GPU catalog.

Covers:
- catalog: MAYA_GPU_SPEC string of H100 exactly as config.c expects it,
  case-insensitive lookup, every entry complete, memory totals as drivers report;
- ``maya gpus`` lists the catalog; a bad GPU name lists the valid ones and exits 2;
- the environment a command gets (LD_PRELOAD, LD_LIBRARY_PATH, MAYA_* variables,
  PYTHONPATH hook) and that the hook chains to an existing sitecustomize;
- under the interposer: a crashing script shows its own traceback and exit
  code; summary.json fields; a host->device->host round trip of a small tensor
  returns its data; mem_get_info / max_memory_allocated / memory_reserved;
  allocating more than the GPU holds raises torch.OutOfMemoryError and the
  summary says out of memory; an unsupported API is reported by name;
  shared-memory objects of the run are removed;
- a probe reading given in MAYA_HOST_PROBE_NS stands for the probe's, and a bad one is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from emulated import EmulatedRun, requires_library, run_emulated

from maya import catalog, cli
from maya.emulate import HOOK_DIR, EmulateOptions, build_env
from maya.predictor.trace import Flag, Kind, TraceWriter
from maya.summary import render, summarize

H100_SPEC = (
    "name=H100-SXM-80GB;marketing=NVIDIA H100 80GB HBM3;cc=9.0;sms=132;mem=85520809984;"
    "reserved=536870912;clock_khz=1980000;mem_clock_khz=2619000;bus_width=5120;l2=52428800;"
    "smem_sm=233472;smem_block=49152;smem_optin=232448;regs_sm=65536;regs_block=65536;"
    "threads_sm=2048;blocks_sm=32;pci_id=0x2330"
)
GiB = 2**30


def maya(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "maya.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=60)


# ------------------------------------------------------------------ catalog


def test_spec_string_is_what_the_interposer_parses() -> None:
    assert catalog.spec_string("H100-SXM-80GB") == H100_SPEC
    assert catalog.lookup("h100-sxm-80gb").name == "H100-SXM-80GB"


def test_catalog_entries_are_complete() -> None:
    names = catalog.names()
    for required in ("H100-SXM-80GB", "H200-SXM-141GB", "A100-SXM-80GB", "A100-SXM-40GB", "L40S", "B200"):
        assert required in names
    for gpu in catalog.all_gpus():
        assert gpu.spec_string().startswith(f"name={gpu.name};marketing=")
        assert gpu.memory_bytes > gpu.reserved_bytes > 0
        assert set(gpu.fields["peak_tflops"]) == set(catalog.DTYPES)
        assert gpu.mem_bw_bytes_per_s > 0 and gpu.fields["sources"]
        assert gpu.peak_flops("bf16") > gpu.peak_flops("fp32") > 0
    assert catalog.lookup("H200-SXM-141GB").memory_bytes == 143771 * 2**20
    assert catalog.lookup("H100-SXM-80GB").marketing == "NVIDIA H100 80GB HBM3"
    assert catalog.lookup("H200-SXM-141GB").marketing == "NVIDIA H200"


def test_unknown_gpu_lists_valid_names(tmp_path: Path) -> None:
    r = maya("emulate", "--gpu", "H900", "--out", str(tmp_path / "o"), "--", "true", cwd=tmp_path)
    assert r.returncode == 2
    assert "H900" in r.stderr
    for name in catalog.names():
        assert name in r.stderr
    assert not (tmp_path / "o").exists()


def test_maya_gpus_lists_catalog(tmp_path: Path) -> None:
    r = maya("gpus", cwd=tmp_path)
    assert r.returncode == 0
    for gpu in catalog.all_gpus():
        assert gpu.name in r.stdout and gpu.marketing in r.stdout


# -------------------------------------------------------------- environment


def test_environment_of_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    lib = tmp_path / "build" / "libmaya.so"
    opts = EmulateOptions(gpu="h100-sxm-80gb", out=tmp_path / "out", command=["true"], gpus_per_node=4)
    env = build_env(opts, catalog.lookup(opts.gpu), lib, "abc123")
    assert env["LD_PRELOAD"] == str(lib)
    assert env["LD_LIBRARY_PATH"].split(os.pathsep)[0] == str(lib.parent)
    assert env["MAYA_GPU_SPEC"] == H100_SPEC
    assert env["MAYA_GPUS_PER_NODE"] == "4" and env["MAYA_NUM_GPUS"] == "4"
    assert env["MAYA_TRACE_DIR"] == str((tmp_path / "out").resolve())
    assert env["MAYA_RUN_ID"] == "abc123"
    assert env["PYTHONPATH"] == f"{HOOK_DIR}{os.pathsep}/somewhere"
    env = build_env(EmulateOptions(gpu="L40S", out=tmp_path, command=["true"], gpus=1), catalog.lookup("L40S"),
                    lib, "x")
    assert env["MAYA_NUM_GPUS"] == "1" and env["MAYA_GPUS_PER_NODE"] == "8"


def test_hook_chains_to_existing_sitecustomize(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['CHAINED'] = 'yes'\n")
    env = dict(os.environ, PYTHONPATH=f"{HOOK_DIR}{os.pathsep}{other}")
    code = "import os, sys; print(os.environ.get('CHAINED'), sys.modules['sitecustomize'].__file__)"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    chained, hook_file = r.stdout.split()
    assert chained == "yes" and Path(hook_file).parent == HOOK_DIR


FAKE_TORCH = """
class OutOfMemoryError(RuntimeError):
    pass
class _Cuda:
    def is_initialized(self): return True
    def device_count(self): return 2
    def max_memory_allocated(self, d): return 100 + d
    def max_memory_reserved(self, d): return 200 + d
    def memory_allocated(self, d): return 10
    def memory_reserved(self, d): return 20
cuda = _Cuda()
"""


@pytest.mark.parametrize(
    ("body", "status", "oom"),
    [
        ("pass", 0, False),
        ("import sys; sys.exit(3)", 3, False),
        ("raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 1 GiB')", 1, True),
        ("raise ValueError('x')", 1, False),
    ],
)
def test_hook_report(tmp_path: Path, body: str, status: int, oom: bool) -> None:
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "torch.py").write_text(FAKE_TORCH)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=f"{HOOK_DIR}{os.pathsep}{fake}", MAYA_TRACE_DIR=str(out), RANK="5")
    r = subprocess.run([sys.executable, "-c", f"import torch\n{body}"], env=env, capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == status, r.stderr
    report = json.loads((out / "rank5.torch.json").read_text())
    assert report["rank"] == 5 and report["exit_status"] == status and report["out_of_memory"] is oom
    assert [d["max_memory_allocated"] for d in report["devices"]] == [100, 101]
    assert [d["max_memory_reserved"] for d in report["devices"]] == [200, 201]
    if oom:
        assert "Tried to allocate" in report["oom_message"]


def test_summary_of_hand_built_traces(tmp_path: Path) -> None:
    w = TraceWriter(rank=1, world_size=2, gpu_name="H100-SXM-80GB")
    w.record(Kind.MALLOC, t_ns=1_000, a=[0x1000, 3 * GiB, 3 * GiB])
    w.record(Kind.MALLOC, t_ns=2_000, flags=Flag.FAILED, a=[0, 90 * GiB, 3 * GiB])
    w.record(Kind.KERNEL, t_ns=3_000, a=[1])
    w.record(Kind.KERNEL, t_ns=3_500, flags=Flag.CAPTURED, a=[1])  # captured: did not run
    w.record(Kind.BLAS, t_ns=4_000)
    w.record(Kind.DNN, t_ns=4_500)
    w.record(Kind.COLL, t_ns=5_000)
    w.record(Kind.UNSUPPORTED, t_ns=6_000, a=[w.string("cufftPlanMany")])
    w.record(Kind.UNSUPPORTED, t_ns=6_500, a=[w.string("cufftPlanMany")])
    w.record(Kind.FREE, t_ns=2_000_000_000, dur_ns=1000, a=[0x1000, 3 * GiB, 0])
    w.write(tmp_path / "rank1.mayatrace")
    (tmp_path / "rank1.torch.json").write_text(json.dumps({
        "rank": 1, "exit_status": 1, "out_of_memory": True, "oom_message": "CUDA out of memory",
        "devices": [{"device": 0, "max_memory_allocated": 2 * GiB, "max_memory_reserved": 3 * GiB}]}))
    TraceWriter(rank=0).write(tmp_path / "rank0.mayatrace")
    gpu = {"name": "H100-SXM-80GB", "memory_bytes": catalog.lookup("H100-SXM-80GB").memory_bytes}
    s = summarize(tmp_path, gpu=gpu, exit_code=1, command=["python", "x.py"])
    assert s["num_ranks"] == 2 and s["out_of_memory"] and s["unsupported_apis"] == ["cufftPlanMany"]
    r0, r1 = s["ranks"]
    assert r0["rank"] == 0 and not r0["out_of_memory"] and r0["kernel_launches"] == 0
    assert r1["exit_code"] == 1
    assert (r1["kernel_launches"], r1["library_calls"], r1["collectives"]) == (1, 2, 1)
    assert r1["peak_allocated_bytes"] == 2 * GiB and r1["peak_reserved_bytes"] == 3 * GiB
    assert r1["trace_reserved_peak_bytes"] == 3 * GiB
    assert r1["out_of_memory"] and r1["oom_request_bytes"] == 90 * GiB
    assert r1["unsupported_apis"] == ["cufftPlanMany"]
    assert abs(r1["host_seconds"] - 2.0) < 1e-3
    text = "\n".join(render(s))
    assert "OUT OF MEMORY: tried to allocate 90.00 GiB with a capacity of 79.65 GiB" in text
    assert "cufftPlanMany" in text
    assert "shared" not in text  # no emulating CPUs recorded
    assert "2 ranks shared 1 CPU(s)" in "\n".join(render({**s, "emulating_cpus": 1}))
    assert "shared" not in "\n".join(render({**s, "emulating_cpus": 2}))


@pytest.mark.parametrize("value", ["fast", "0", "-3", "nan"])
def test_a_bad_probe_reading_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str], value: str) -> None:
    monkeypatch.setenv("MAYA_HOST_PROBE_NS", value)
    assert cli.main(["emulate", "--gpu", "H100-SXM-80GB", "--out", str(tmp_path / "o"), "--", "true"]) == 2
    assert f"MAYA_HOST_PROBE_NS={value!r} is not a positive number" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_missing_library_is_reported(tmp_path: Path) -> None:
    env = dict(os.environ, MAYA_LIBRARY=str(tmp_path / "nope.so"))
    r = maya("emulate", "--gpu", "H100-SXM-80GB", "--out", str(tmp_path / "o"), "--", "true", cwd=tmp_path, env=env)
    assert r.returncode == 2 and "not built" in r.stderr


# ------------------------------------------------------- under emulation


@pytest.mark.emulation
@requires_library
def test_crashing_script_shows_its_own_error(tmp_path: Path) -> None:
    r = run_emulated(
        """
        import sys
        import torch
        torch.zeros(4, device="cuda")
        print("to stdout")
        raise RuntimeError("my own failure 1234")
        """,
        tmp_path,
    )
    assert r.returncode == 1, r.output
    assert "to stdout" in r.stdout
    assert "RuntimeError: my own failure 1234" in r.stderr
    assert r.summary["exit_code"] == 1
    assert r.rank0["exit_code"] == 1


@pytest.fixture(scope="module")
def exits_7(tmp_path_factory: pytest.TempPathFactory) -> EmulatedRun:
    """One kernel, then exit code 7: emulated once for the tests that read it."""
    return run_emulated("import sys, torch\ntorch.ones(1, device='cuda')\nsys.exit(7)\n",
                        tmp_path_factory.mktemp("exits-7"))


@pytest.mark.emulation
@requires_library
def test_exit_code_passes_through(exits_7: EmulatedRun) -> None:
    assert exits_7.returncode == 7, exits_7.output
    assert exits_7.summary["exit_code"] == 7
    # The probe reading given (tests/conftest.py) stands for the probe's.
    assert exits_7.summary["host_probe_ns"] == float(os.environ["MAYA_HOST_PROBE_NS"])
    # What other work took of the emulating CPUs meanwhile (maya.other_work): a share, or None for a run
    # too short to say.
    taken = exits_7.summary["other_work_cpu_share"]
    assert taken is None or 0.0 <= taken <= 1.0


@pytest.mark.emulation
@requires_library
def test_summary_fields_and_memory_queries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MAYA_HOST_PROBE_NS")  # the probe runs, as for a user
    r = run_emulated(
        """
        import json
        import torch
        assert torch.cuda.is_available()
        props = torch.cuda.get_device_properties(0)
        free0, total = torch.cuda.mem_get_info()
        x = torch.arange(1000, dtype=torch.float32).cuda()        # host -> device
        back = x.cpu()                                            # device -> host
        assert torch.equal(back, torch.arange(1000, dtype=torch.float32)), back[:10]
        big = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
        free1, _ = torch.cuda.mem_get_info()
        a = torch.randn(512, 512, device="cuda")
        b = a @ a
        torch.cuda.synchronize()
        print(json.dumps({
            "name": props.name, "sms": props.multi_processor_count, "total_memory": props.total_memory,
            "total": total, "free0": free0, "free1": free1,
            "allocated": torch.cuda.memory_allocated(), "max_allocated": torch.cuda.max_memory_allocated(),
            "reserved": torch.cuda.memory_reserved(), "count": torch.cuda.device_count(),
        }))
        """,
        tmp_path,
        gpus=2,
    )
    assert r.returncode == 0, r.output
    info = json.loads(r.stdout.strip().splitlines()[-1])
    gpu = catalog.lookup("H100-SXM-80GB")
    assert info["name"] == "NVIDIA H100 80GB HBM3" and info["sms"] == 132
    assert info["total"] == info["total_memory"] == gpu.memory_bytes
    assert info["count"] == 2
    assert info["free0"] <= gpu.memory_bytes - gpu.reserved_bytes
    assert info["free0"] - info["free1"] >= 256 * 2**20
    assert info["max_allocated"] >= 256 * 2**20 + 1000 * 4
    assert info["reserved"] >= info["allocated"]

    s = r.summary
    assert s["num_ranks"] == 1 and s["exit_code"] == 0 and not s["out_of_memory"]
    assert 1e4 < s["host_probe_ns"] < 1e8  # the emulating CPU's speed (maya.cpu_probe), ns per probe step
    assert s["gpu"]["name"] == "H100-SXM-80GB" and s["gpu"]["memory_bytes"] == gpu.memory_bytes
    rank = r.rank0
    for key in ("exit_code", "kernel_launches", "library_calls", "collectives", "peak_allocated_bytes",
                "peak_reserved_bytes", "out_of_memory", "unsupported_apis", "host_seconds"):
        assert key in rank, key
    assert rank["exit_code"] == 0
    assert rank["kernel_launches"] >= 1
    assert rank["library_calls"] >= 1  # the matmul
    assert rank["collectives"] == 0
    assert rank["peak_allocated_bytes"] == info["max_allocated"]
    assert rank["peak_reserved_bytes"] >= info["reserved"]
    assert rank["trace_reserved_peak_bytes"] >= 256 * 2**20
    assert 0 < rank["host_seconds"] < 120
    assert "rank 0:" in r.stderr and "kernels" in r.stderr


@pytest.mark.emulation
@requires_library
def test_out_of_memory(tmp_path: Path) -> None:
    r = run_emulated(
        """
        import torch
        keep = torch.empty(8 * 2**30, dtype=torch.uint8, device="cuda")
        try:
            torch.empty(100 * 2**30, dtype=torch.uint8, device="cuda")
        except torch.OutOfMemoryError as e:
            print("caught OOM:", str(e).splitlines()[0])
        torch.empty(200 * 2**30, dtype=torch.uint8, device="cuda")   # escapes
        """,
        tmp_path,
    )
    assert r.returncode == 1, r.output
    assert "caught OOM: CUDA out of memory" in r.stdout
    assert "torch.OutOfMemoryError" in r.stderr
    assert r.summary["out_of_memory"] and r.rank0["out_of_memory"] and r.rank0["oom_escaped"]
    assert r.rank0["oom_request_bytes"] >= 100 * GiB
    assert r.rank0["peak_allocated_bytes"] >= 8 * GiB
    assert "OUT OF MEMORY" in r.stderr


@pytest.mark.emulation
@requires_library
def test_unsupported_api_is_reported_by_name(tmp_path: Path) -> None:
    r = run_emulated(
        """
        import torch
        x = torch.randn(64, device="cuda")
        try:
            torch.fft.fft(x)
        except Exception as e:
            print("fft failed:", type(e).__name__)
        """,
        tmp_path,
    )
    assert r.returncode == 0, r.output
    apis = r.rank0["unsupported_apis"]
    assert any(name.startswith("cufft") for name in apis), (apis, r.output)
    assert r.summary["unsupported_apis"] == sorted(set(apis))
    assert "unsupported" in r.stderr and apis[0] in r.stderr


@pytest.mark.emulation
@requires_library
def test_shared_memory_is_removed(exits_7: EmulatedRun) -> None:
    assert exits_7.returncode == 7, exits_7.output
    run_id = exits_7.summary["run_id"]
    assert not list(Path("/dev/shm").glob(f"maya-{run_id}-*"))


@pytest.mark.emulation
@requires_library
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_rank_0_avoids_a_cpu_other_work_keeps_busy(tmp_path: Path) -> None:
    first = min(os.sched_getaffinity(0))
    spin = subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{first}}})\nwhile True:\n"
                             "    pass\n"])
    try:
        r = run_emulated("import os\nprint('cpus', sorted(os.sched_getaffinity(0)))\n", tmp_path)
    finally:
        spin.kill()
        spin.wait()
    assert r.returncode == 0, r.output
    pinned = [line for line in r.stdout.splitlines() if line.startswith("cpus")]
    assert pinned and pinned[0] != f"cpus [{first}]" and pinned[0].count(",") == 0, r.stdout  # one CPU, another
