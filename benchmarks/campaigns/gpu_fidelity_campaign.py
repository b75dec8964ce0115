#!/usr/bin/env python3
"""GPU fidelity campaign: the ground truth that benchmarks/fidelity.py compares emulation with.

Runs on a GPU machine in one call (about 3-6 minutes), with nothing but the
machine's own python3 and torch and a copy of this repository:

    python3 benchmarks/campaigns/gpu_fidelity_campaign.py --out "$OUT"

For each example in examples/ (fresh process each time) it runs a few
training steps, the first run with `--profile-step` (the CUDA kernels of one
steady step, by name, as torch.profiler names them), and further runs while
the time budget allows (step times, run-to-run spread, memory determinism).
The 2-rank DDP example runs under torchrun when the machine has 2 GPUs.
A probe records the GPU, driver, CUDA, cuDNN, cuBLAS, NCCL and torch
versions, the device properties, and `torch.cuda.mem_get_info()` right after
CUDA initialisation and after a small warm-up.

Output (flat, at most 8 small files): env.json, <example>.json for each
example (the exact command, every run's result line and the profile),
summary.csv and campaign.log.  Commit the folder as
benchmarks/data/gpu_fidelity/<gpu>/ for benchmarks/fidelity.py.

`--dry-run` checks the plan without a GPU: every example parses its command
line (`--print-args`) and the probe runs as far as the host allows.  Under
`maya emulate ... -- python3 benchmarks/campaigns/gpu_fidelity_campaign.py` the whole
campaign runs against the emulated GPU, which tests its plumbing end to end.
"""
import argparse
import csv
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STEPS = 4
PROFILE_STEP = 2   # step 0 warms up (cuDNN benchmark, optimizer state), step 2 is steady

# name -> (script, extra arguments, processes).  The examples' defaults are the sizes.
EXAMPLES = {
    "gpt": ("examples/gpt.py", [], 1),
    "cnn": ("examples/cnn.py", [], 1),
    "bert": ("examples/bert.py", [], 1),
    "recommender": ("examples/recommender.py", [], 1),
    "ddp": ("examples/ddp.py", [], 2),
}
# Held-out sizes (--part held-out): shapes no table in the emulation was built
# from (the cuDNN convolution table comes from the default cnn), so their
# fidelity says how well the emulation generalises.
HELD_OUT = {
    "gpt-d128": ("examples/gpt.py", ["--n-layer", "6", "--n-embd", "1024", "--n-head", "8", "--seq-len", "2048",
                                     "--batch", "4"], 1),
    "bert-large": ("examples/bert.py", ["--n-layer", "8", "--hidden", "1024", "--heads", "16", "--seq-len", "256",
                                        "--batch", "32"], 1),
    "cnn-wide": ("examples/cnn.py", ["--batch", "32", "--width", "96", "--image-size", "192"], 1),
    "recommender-wide": ("examples/recommender.py", ["--dim", "256", "--batch", "8192"], 1),
}
EXAMPLES.update(HELD_OUT)
# More sizes (--part sizes): batch, sequence length, width and depth varied
# three ways per example, for the step-time benchmark (step_accuracy.py).
SIZES = {
    "gpt-b4": ("examples/gpt.py", ["--batch", "4"], 1),
    "gpt-s512": ("examples/gpt.py", ["--seq-len", "512", "--batch", "8"], 1),
    "gpt-w512": ("examples/gpt.py", ["--n-layer", "8", "--n-embd", "512", "--n-head", "8"], 1),
    # Long host-only stretches: AdamW's and clip_grad_norm_'s per-parameter Python (foreach AdamW, clipping).
    "gpt-clip": ("examples/gpt.py", ["--optimizer", "foreach", "--clip-grad", "1.0"], 1),
    "gpt-clip-l24": ("examples/gpt.py", ["--n-layer", "24", "--n-embd", "512", "--n-head", "8", "--seq-len", "512",
                                         "--batch", "8", "--optimizer", "foreach", "--clip-grad", "1.0"], 1),
    "bert-b8": ("examples/bert.py", ["--batch", "8"], 1),
    "bert-s128": ("examples/bert.py", ["--seq-len", "128", "--batch", "32"], 1),
    "bert-w512": ("examples/bert.py", ["--hidden", "512", "--heads", "8", "--n-layer", "8"], 1),
    "cnn-b128": ("examples/cnn.py", ["--batch", "128"], 1),
    "cnn-i128": ("examples/cnn.py", ["--image-size", "128"], 1),
    "cnn-w32": ("examples/cnn.py", ["--width", "32", "--batch", "32"], 1),
    "recommender-b1024": ("examples/recommender.py", ["--batch", "1024"], 1),
    "recommender-d64": ("examples/recommender.py", ["--dim", "64"], 1),
    "recommender-t16": ("examples/recommender.py", ["--tables", "16", "--rows", "500000"], 1),
    "ddp-b4": ("examples/ddp.py", ["--batch", "4"], 2),
    "ddp-s1024": ("examples/ddp.py", ["--seq-len", "1024"], 2),
    "ddp-w768": ("examples/ddp.py", ["--n-embd", "768", "--n-head", "12"], 2),
    # The same per-parameter Python in data parallelism, on the machines of several GPUs that run it.
    "ddp-clip": ("examples/ddp.py", ["--optimizer", "foreach", "--clip-grad", "1.0"], 2),
    "ddp-clip-l24": ("examples/ddp.py", ["--n-layer", "24", "--optimizer", "foreach", "--clip-grad", "1.0"], 2),
}
EXAMPLES.update(SIZES)

# NVLink multicast must stay off on the shared multi-GPU hosts.
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def example_argv(name: str) -> list[str]:
    """The example's command line, the same here and in fidelity.py (without output paths)."""
    script, extra, _ = EXAMPLES[name]
    return [script, *extra, "--steps", str(STEPS)]


def launcher(name: str, python: str) -> list[str]:
    nproc = EXAMPLES[name][2]
    if nproc == 1:
        return [python]
    return [python, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]


# ------------------------------------------------------------------ probe

def probe(warmup: bool = True) -> dict:
    """Versions, device properties and device memory, in this (fresh) process."""
    import importlib.metadata as md
    import platform

    info: dict = {"python": platform.python_version(), "host": platform.node(),
                  "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    # The host's CPU: host-bound step times follow it (same GPU kind, another server, another speed).
    info["cpu"] = {"model": cpu_model(), "cpus": os.cpu_count()}
    info["env"] = {k: v for k, v in os.environ.items()
                   if k.startswith(("NCCL_", "CUDA_", "CUBLAS", "CUDNN", "TORCH_", "PYTORCH_", "NVIDIA_"))}
    pkgs = {}
    for dist in md.distributions():
        n = (dist.metadata["Name"] or "").lower()
        if n.startswith("nvidia-") or n in ("torch", "triton", "numpy"):
            pkgs[n] = dist.version
    info["packages"] = dict(sorted(pkgs.items()))
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,"
                              "clocks.max.sm,clocks.max.mem,power.limit,pci.device_id",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        info["nvidia_smi"] = out.stdout.strip().splitlines() or out.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        info["nvidia_smi"] = f"unavailable: {e}"

    import torch
    info["torch"] = torch.__version__
    info["torch_cuda"] = torch.version.cuda
    if not torch.cuda.is_available():
        info["error"] = "torch.cuda.is_available() is False"
        return info
    t0 = time.perf_counter()
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()     # creates the primary context
    info["mem_get_info_after_init"] = [free, total]
    info["cuda_init_s"] = round(time.perf_counter() - t0, 3)
    info["device_count"] = torch.cuda.device_count()
    props = torch.cuda.get_device_properties(0)
    info["device_properties"] = {k: _plain(getattr(props, k)) for k in dir(props)
                                 if not k.startswith("_") and not callable(getattr(props, k))}
    info["gpu"] = props.name
    info["cudnn"] = torch.backends.cudnn.version()
    try:
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception as e:  # noqa: BLE001 - report, never fail the probe
        info["nccl"] = f"unavailable: {e}"
    info["driver_api_version"] = _c_int_query("libcuda.so.1", "cuDriverGetVersion")
    info["cudart_version"] = _c_int_query("libcudart.so.13", "cudaRuntimeGetVersion")
    info["driver"] = _nvml_driver()
    info["sdp"] = {k: getattr(torch.backends.cuda, k)() for k in
                   ("cudnn_sdp_enabled", "flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled")
                   if hasattr(torch.backends.cuda, k)}
    if warmup:
        # A bf16 GEMM (cuBLASLt) and its backward (cuBLAS), a convolution (cuDNN)
        # and attention (cuDNN SDPA): the libraries' handles and workspaces.
        info["warmup_errors"] = {}
        for part, fn in (("gemm", _warm_gemm), ("conv", _warm_conv), ("sdpa", _warm_sdpa)):
            try:
                fn(torch)
            except Exception as e:  # noqa: BLE001 - recorded; the rest still runs
                info["warmup_errors"][part] = repr(e)[:500]
        torch.cuda.synchronize()
        info["mem_get_info_after_warmup"] = list(torch.cuda.mem_get_info())
        info["warmup_memory_allocated"] = torch.cuda.memory_allocated()
        info["warmup_memory_reserved"] = torch.cuda.memory_reserved()
        info["warmup_max_memory_allocated"] = torch.cuda.max_memory_allocated()
    info["cublas_version"] = ".".join(str(_c_int_query("libcublas.so.13", "cublasGetProperty", prop=k))
                                      for k in range(3))   # MAJOR, MINOR, PATCH
    info["cublaslt_version"] = _c_ret_query("libcublasLt.so.13", "cublasLtGetVersion")
    info["cudnn_runtime_version"] = _c_ret_query("libcudnn.so.9", "cudnnGetVersion")
    return info


def _warm_gemm(torch) -> None:
    a = torch.randn(1024, 1024, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = torch.nn.functional.linear(a, a, a[0])
    y.float().sum().backward()


def _warm_conv(torch) -> None:
    x = torch.randn(8, 64, 32, 32, device="cuda").to(memory_format=torch.channels_last)
    w = torch.randn(64, 64, 3, 3, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = torch.nn.functional.conv2d(x, w, padding=1)
    y.float().sum().backward()


def _warm_sdpa(torch) -> None:
    q = torch.randn(2, 4, 256, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    y.float().sum().backward()


def cpu_model() -> str:
    """This machine's CPU model name."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _plain(v):
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)


def _c_int_query(lib: str, fn: str, prop: int | None = None):
    """Status-returning `fn(int *out)` (or `fn(prop, int *out)`) from an already loaded library."""
    import ctypes
    try:
        f = getattr(ctypes.CDLL(lib), fn)
        v = ctypes.c_int(0)
        rc = f(prop, ctypes.byref(v)) if prop is not None else f(ctypes.byref(v))
        return v.value if rc == 0 else f"{fn} returned {rc}"
    except (OSError, AttributeError) as e:
        return f"unavailable: {e}"


def _c_ret_query(lib: str, fn: str):
    import ctypes
    try:
        f = getattr(ctypes.CDLL(lib), fn)
        f.restype = ctypes.c_size_t
        return int(f())
    except (OSError, AttributeError) as e:
        return f"unavailable: {e}"


def _nvml_driver():
    import ctypes
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return "nvmlInit failed"
        buf = ctypes.create_string_buffer(96)
        rc = nvml.nvmlSystemGetDriverVersion(buf, 96)
        return buf.value.decode() if rc == 0 else f"nvmlSystemGetDriverVersion returned {rc}"
    except (OSError, AttributeError) as e:
        return f"unavailable: {e}"


# --------------------------------------------------------------- campaign

class Campaign:
    def __init__(self, out: str, python: str, budget_s: float, repeats: int, dry_run: bool):
        self.out, self.python, self.budget_s = out, python, budget_s
        self.repeats, self.dry_run = repeats, dry_run
        self.t0 = time.monotonic()
        self.tmp = tempfile.mkdtemp(prefix="maya-campaign-")
        self.log_f = open(os.path.join(out, "campaign.log"), "a")
        self.data: dict[str, dict] = {}

    def log(self, msg: str) -> None:
        line = f"[{time.monotonic() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        self.log_f.write(line + "\n")
        self.log_f.flush()

    def left(self) -> float:
        return self.budget_s - (time.monotonic() - self.t0)

    def env(self) -> dict:
        env = dict(os.environ)
        env.update(SAFE_ENV)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def run_probe(self) -> dict:
        cmd = [self.python, os.path.abspath(__file__), "--probe"]
        if self.dry_run:
            cmd.append("--probe-no-warmup")
        self.log("probe: " + shlex.join(cmd))
        try:
            p = subprocess.run(cmd, cwd=ROOT, env=self.env(), capture_output=True, text=True,
                               timeout=max(30.0, min(120.0, self.left())))
            info = _last_json(p.stdout) or {"error": "probe printed no JSON"}
            if p.returncode != 0:
                info["probe_returncode"] = p.returncode
                info["probe_stderr_tail"] = p.stderr[-4000:]
        except subprocess.TimeoutExpired:
            info = {"error": "probe timed out"}
        info["command"] = shlex.join(sys.argv)
        _write_json(os.path.join(self.out, "env.json"), info)
        self.log(f"probe: gpu={info.get('gpu')} driver={info.get('driver')} "
                 f"cudnn={info.get('cudnn')} nccl={info.get('nccl')} torch={info.get('torch')}")
        return info

    def run_example(self, name: str, profile: bool) -> dict:
        argv = example_argv(name)
        nproc = EXAMPLES[name][2]
        run_no = len(self.data.get(name, {}).get("runs", []))
        res_path = os.path.join(self.tmp, f"{name}-{run_no}-result.json")
        prof_path = os.path.join(self.tmp, f"{name}-{run_no}-profile.json")
        extra = ["--result-out", res_path]
        if profile:
            extra += ["--profile-step", str(PROFILE_STEP), "--profile-out", prof_path]
        if self.dry_run:
            extra.append("--print-args")
        cmd = launcher(name, self.python) + argv + extra
        self.log(f"{name} run {run_no}: {shlex.join(cmd)}")
        t = time.monotonic()
        try:
            p = subprocess.run(cmd, cwd=ROOT, env=self.env(), capture_output=True, text=True,
                               timeout=max(20.0, min(240.0, self.left())))
            rc, stdout, stderr = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, stdout, stderr = "timeout", _text(e.stdout), _text(e.stderr)
        wall = time.monotonic() - t
        results = []
        for r in range(nproc):
            path = _rank_path(res_path, r, nproc)
            if os.path.exists(path):
                with open(path) as f:
                    results.append(json.loads(f.read()))
        if not results and not self.dry_run:
            line = _last_json(stdout)
            if line:
                results.append(line)
        if self.dry_run:
            results = [_last_json(stdout) or {}]
        run = {"run": run_no, "profiled": profile, "returncode": rc, "wall_s": round(wall, 3),
               "results": results, "stderr_tail": stderr[-3000:] if (rc != 0 or not results) else ""}
        entry = self.data.setdefault(name, {
            "example": name, "argv": argv, "processes": nproc, "steps": STEPS,
            "profile_step": PROFILE_STEP, "runs": [], "profiles": {}})
        entry["runs"].append(run)
        if profile:
            for r in range(nproc):
                path = _rank_path(prof_path, r, nproc)
                if os.path.exists(path):
                    with open(path) as f:
                        entry["profiles"][str(r)] = json.load(f)
        mem = [x.get("max_memory_allocated") for x in results]
        self.log(f"{name} run {run_no}: rc={rc} wall={wall:.1f}s max_memory_allocated={mem} "
                 f"kernels={[p.get('kernel_launches') for p in entry['profiles'].values()] if profile else '-'}")
        _write_json(os.path.join(self.out, f"{name}.json"), entry)
        return run

    def summary(self, info: dict) -> None:
        with open(os.path.join(self.out, "summary.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["gpu", "example", "run", "profiled", "rank", "returncode", "wall_s",
                        "max_memory_allocated", "max_memory_reserved", "median_step_s",
                        "profiled_kernel_launches"])
            for name, entry in self.data.items():
                for run in entry["runs"]:
                    for res in run["results"] or [{}]:
                        times = res.get("step_times_s") or []
                        steady = times[1:] or times
                        rank = res.get("rank", 0)
                        prof = entry["profiles"].get(str(rank), {}) if run["profiled"] else {}
                        w.writerow([info.get("gpu"), name, run["run"], int(run["profiled"]), rank,
                                    run["returncode"], run["wall_s"], res.get("max_memory_allocated"),
                                    res.get("max_memory_reserved"),
                                    round(statistics.median(steady), 6) if steady else None,
                                    prof.get("kernel_launches")])


def _rank_path(path: str, rank: int, nproc: int) -> str:
    if nproc == 1:
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.rank{rank}{ext}"


def _text(b) -> str:
    if b is None:
        return ""
    return b.decode(errors="replace") if isinstance(b, bytes) else b


def _last_json(text: str):
    """The last JSON object printed.  The ranks of a job share its stdout, unbuffered: two ranks' lines can
    land on one line ('{...}{...}'), so a line yields the last object that decodes in it."""
    decoder = json.JSONDecoder()
    for line in reversed((text or "").splitlines()):
        found, i = None, line.find("{")
        while i >= 0:
            try:
                found, end = decoder.raw_decode(line, i)
                i = line.find("{", end)
            except json.JSONDecodeError:
                i = line.find("{", i + 1)
        if isinstance(found, dict):
            return found
    return None


def _write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def main() -> int:
    global STEPS, PROFILE_STEP
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT"), help="output folder (default $OUT)")
    p.add_argument("--part", choices=["auto", "single", "ddp", "all", "held-out", "sizes"], default="auto",
                   help="single-GPU examples, the DDP example, or both; auto = both when 2 GPUs are seen; "
                        "held-out = the held-out sizes; sizes = three more sizes of each example")
    p.add_argument("--steps", type=int, default=STEPS, help="training steps per run (default %(default)s)")
    p.add_argument("--no-profile", action="store_true", help="no profiled first run (step times only)")
    p.add_argument("--profile-step", type=int, default=PROFILE_STEP,
                   help="the step the profiled run profiles (default %(default)s; later for DDP, whose buckets "
                        "are rebuilt after the first step)")
    p.add_argument("--only", default=None, help="comma-separated example names")
    p.add_argument("--repeats", type=int, default=3, help="runs per example, budget allowing")
    p.add_argument("--budget-s", type=float, default=420.0, help="stop starting runs after this")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--dry-run", action="store_true", help="check command lines, no GPU needed")
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--probe-no-warmup", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    STEPS, PROFILE_STEP = a.steps, a.profile_step
    if a.probe:
        info = probe(warmup=not a.probe_no_warmup)
        print(json.dumps(info), flush=True)
        return 0
    if not a.out:
        p.error("--out is required when $OUT is not set")
    os.makedirs(a.out, exist_ok=True)
    c = Campaign(a.out, a.python, a.budget_s, 1 if a.dry_run else a.repeats, a.dry_run)
    c.log(f"campaign in {ROOT}: {shlex.join(sys.argv)}")
    info = c.run_probe()
    gpus = info.get("device_count", 0) or 0
    names = [n for n in EXAMPLES if EXAMPLES[n][2] == 1 and n not in HELD_OUT and n not in SIZES]
    if a.part in ("ddp", "all") or (a.part == "auto" and (gpus >= 2 or a.dry_run)):
        names.append("ddp")
    if a.part == "ddp":
        names = ["ddp"]
    if a.part == "held-out":
        names = list(HELD_OUT)
    if a.part == "sizes":
        names = list(SIZES)
    if a.only:
        names = [n for n in a.only.split(",") if n in EXAMPLES]
    for n in names:
        if EXAMPLES[n][2] > max(gpus, 1) and not a.dry_run:
            c.log(f"{n}: skipped, needs {EXAMPLES[n][2]} GPUs and {gpus} are visible")
    names = [n for n in names if a.dry_run or EXAMPLES[n][2] <= max(gpus, 1)]
    # First every example once with the profiler, then repeats while the budget lasts.
    for rep in range(max(1, c.repeats)):
        for n in names:
            runs = c.data.get(n, {}).get("runs", [])
            need = max((r["wall_s"] for r in runs), default=30.0) * 1.2
            if rep > 0 and (c.left() < need or not runs or runs[0]["returncode"] != 0):
                continue
            if rep == 0 and c.left() < 10:
                c.log(f"{n}: skipped, budget spent")
                continue
            c.run_example(n, profile=(rep == 0 and not a.no_profile))
    c.summary(info)
    shutil.rmtree(c.tmp, ignore_errors=True)
    failed = [n for n, e in c.data.items() if any(r["returncode"] != 0 for r in e["runs"])]
    c.log(f"done in {time.monotonic() - c.t0:.0f}s; files: {sorted(os.listdir(a.out))}; failed: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
