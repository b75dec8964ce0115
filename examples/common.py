"""Training loop shared by the example scripts (plain PyTorch, nothing else).

Each example builds a model and a `step(i)` function; `train()` runs the
steps and prints one JSON line at the end with the peak memory, per-step
wall times, the host's time to issue each step (until `step(i)` returns,
before the synchronisation: a host-bound step's cost) and the peak memory
after each step (cumulative: the peak
statistics are never reset, so `maya emulate`'s own summary agrees).  Steps are separated by
`torch.cuda.synchronize()` (a device-wide synchronisation: exact step times,
and exact windows for the profiler).  With `--profile-step K`, step K runs
inside `torch.profiler.profile(activities=[CUDA])` and the CUDA kernels of
that one step are reported by name (exactly as the profiler names them),
with counts, in launch order and with their total device time, and as a
timeline (each kernel's launch by the host, start and duration on the device,
and stream: where the device waited for the host, or for another stream).
"""
import argparse
import collections
import json
import os
import sys
import tempfile
import time

import torch


def add_common_args(p: argparse.ArgumentParser, steps: int = 4) -> None:
    p.add_argument("--steps", type=int, default=steps, help="training steps (default %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile-step", type=int, default=None, metavar="K",
                   help="profile step K (0-based) and report its CUDA kernels")
    p.add_argument("--profile-out", default=None, metavar="PATH",
                   help="write the kernel profile there (JSON) instead of into the result line; "
                        "'{rank}' in PATH is replaced by the rank")
    p.add_argument("--result-out", default=None, metavar="PATH",
                   help="also write the result JSON there; '{rank}' is replaced by the rank")
    p.add_argument("--print-args", action="store_true",
                   help="print the parsed arguments as JSON and exit (checks a command line)")


def parse_args(p: argparse.ArgumentParser) -> argparse.Namespace:
    args = p.parse_args()
    if args.print_args:
        sys.stdout.write(json.dumps(vars(args)) + "\n")  # one write: ranks sharing stdout do not split it
        sys.exit(0)
    return args


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def _path_for_rank(path: str) -> str:
    if "{rank}" in path:
        return path.replace("{rank}", str(_rank()))
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        root, ext = os.path.splitext(path)
        return f"{root}.rank{_rank()}{ext}"
    return path


def kernel_profile(prof) -> dict:
    """CUDA kernels, copies and memsets of one profiled window, from the
    profiler's own trace (the names are the profiler's)."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    finally:
        os.unlink(path)
    kernels = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"),
                     key=lambda e: e.get("ts", 0))
    names: list[str] = []
    index: dict[str, int] = {}
    count = collections.Counter()
    dur = collections.Counter()
    shapes: dict[str, list] = {}
    sequence = []
    for e in kernels:
        name = e.get("name", "?")
        if name not in index:
            index[name] = len(names)
            names.append(name)
            shapes[name] = []
        sequence.append(index[name])
        count[name] += 1
        dur[name] += float(e.get("dur", 0.0))
        args = e.get("args", {})
        shape = [args.get("grid"), args.get("block"), args.get("shared memory"),
                 args.get("registers per thread")]
        if shape not in shapes[name] and len(shapes[name]) < 8:
            shapes[name].append(shape)
    other = collections.Counter()
    other_bytes = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("gpu_memcpy", "gpu_memset"):
            other[e.get("name", "?")] += 1
            other_bytes[e.get("name", "?")] += int(e.get("args", {}).get("bytes", 0) or 0)
    launches = {e["args"]["correlation"]: float(e["ts"]) for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    t0 = min([float(kernels[0]["ts"])] + list(launches.values())) if kernels else 0.0
    timeline = []
    for i, e in zip(sequence, kernels):
        launch = launches.get(e.get("args", {}).get("correlation"))
        timeline.append([i, None if launch is None else round(launch - t0, 3), round(float(e["ts"]) - t0, 3),
                         round(float(e.get("dur", 0.0)), 3), e.get("args", {}).get("stream")])
    return {
        "kernel_launches": len(kernels),
        "timeline_columns": ["kernel", "launch_us", "start_us", "dur_us", "stream"],
        "timeline": timeline,
        "kernels": [{"name": n, "count": count[n], "total_us": round(dur[n], 3),
                     "shapes": shapes[n]} for n in names],
        "sequence": sequence,
        "copies": [{"name": n, "count": c, "bytes": other_bytes[n]} for n, c in other.items()],
    }


def train(name: str, args: argparse.Namespace, step, extra: dict | None = None) -> dict:
    """Run args.steps steps of `step(i)`; print and return the result."""
    dev = torch.cuda.current_device()
    torch.cuda.synchronize()
    setup_peak = torch.cuda.max_memory_allocated()
    times, host_times, peaks, peaks_reserved, ends = [], [], [], [], []
    profile = None
    for i in range(args.steps):
        prof = None
        if i == args.profile_step:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
            prof.__enter__()
        t0 = time.perf_counter()
        step(i)
        issued = time.perf_counter()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        host_times.append(issued - t0)
        if prof is not None:
            prof.__exit__(None, None, None)
            profile = kernel_profile(prof)
            profile["step"] = i
        # Peaks are cumulative (never reset), as a plain script would see them.
        peaks.append(torch.cuda.max_memory_allocated())
        peaks_reserved.append(torch.cuda.max_memory_reserved())
        ends.append(torch.cuda.memory_allocated())
    free, total = torch.cuda.mem_get_info()
    result = {
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "example": name,
        "steps": args.steps,
        "setup_peak_allocated": setup_peak,
        "step_max_memory_allocated": peaks,
        "step_max_memory_reserved": peaks_reserved,
        "step_end_memory_allocated": ends,
        "mem_get_info_end": [free, total],
        "step_times_s": [round(t, 6) for t in times],
        "host_times_s": [round(t, 6) for t in host_times],
        "device": torch.cuda.get_device_name(dev),
        "rank": _rank(),
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
        "torch": torch.__version__,
        "args": {k: v for k, v in vars(args).items() if k not in ("profile_out", "result_out", "print_args")},
    }
    if extra:
        result.update(extra)
    if profile is not None:
        if args.profile_out:
            with open(_path_for_rank(args.profile_out), "w") as f:
                json.dump(profile, f)
        else:
            result["profile"] = profile
    line = json.dumps(result)
    if args.result_out:
        with open(_path_for_rank(args.result_out), "w") as f:
            f.write(line + "\n")
    # One write: the ranks of a job share stdout, and print() writes the text and its newline apart,
    # so two ranks' lines could interleave (a write of under PIPE_BUF bytes to a pipe is atomic).
    sys.stdout.flush()
    data = (line + "\n").encode()
    while data:
        data = data[os.write(sys.stdout.fileno(), data):]
    return result
