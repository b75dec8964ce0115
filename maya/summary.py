"""Summary of one emulated run: ``DIR/summary.json`` and a few printed lines.

Reads what a run leaves in its output folder: the interposer's traces
(``rank<R>.mayatrace``) and the start-up hook's reports
(``rank<R>.torch.json``), and reduces them to per-rank facts: exit code,
operation counts, peak memory, out-of-memory, unsupported APIs, approximated
calls, host time.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from maya.predictor.trace import Flag, Kind, Trace, TraceError, read_trace
from maya.predictor.trace.records import COLL_BYTES, COLL_OP

_ALL_REDUCE = 1  # COLL_OP of ncclAllReduce

_RANK_FILE = re.compile(r"^rank(-?\d+)(?:\.pid(\d+))?\.(mayatrace|torch\.json)$")


def _gib(n: float) -> str:
    if n < 2**30:
        return f"{n / 2**20:.1f} MiB"
    return f"{n / 2**30:.2f} GiB"


def reserved_peaks(trace: Trace) -> dict[int, int]:
    """Peak device bytes held through MALLOC/FREE records, per device.

    MALLOC and FREE carry the pointer in a0, the size in a1 and the device's
    bytes in use after the call in a2; failed allocations (MF_FAILED) hold
    nothing.  The peak is the larger of the running sum and a2."""
    recs = trace.records
    mask = np.isin(recs["kind"], (Kind.MALLOC, Kind.FREE)) & ((recs["flags"] & Flag.FAILED) == 0)
    sel = recs[mask]
    peaks: dict[int, int] = {}
    if len(sel) == 0:
        return peaks
    sizes = sel["a"][:, 1].astype(np.int64)
    signed = np.where(sel["kind"] == Kind.MALLOC, sizes, -sizes)
    for dev in np.unique(sel["device"]):
        on = sel["device"] == dev
        peaks[int(dev)] = max(0, int(np.cumsum(signed[on]).max()), int(sel["a"][on, 2].max()))
    return peaks


MIN_BUCKET_BYTES = 4096  # smaller all-reduces hold scalars or metrics: no DDP bucket, no peak moved


def first_buckets_bytes(trace: Trace) -> int:
    """Bytes of the all-reduce buffers a rank reduced once, before its buffers began to repeat: DDP's first
    gradient buckets, which it drops when it rebuilds its buckets in the second step (0 where no buffer repeats).

    Why: torch's NCCL watchdog holds a collective's tensors until its next poll, every 100 ms of wall
    time, so on a GPU the dropped buckets are still held at the second step's peak in some runs and not
    in others (the held-out DDP ConvNeXt, 2 x H100 and 2 x H200: 4,690,166,784 bytes, or up to its
    114,356,512 bytes of first bucket more).  Emulation lets the watchdog catch up at the first step's
    end, so its peak is the lower one; this is how much higher a real run's can be.  All-reduces under
    ``MIN_BUCKET_BYTES`` are a loss, a metric or a norm, not gradient buckets (FSDP2's gradient clipping
    all-reduces its per-parameter norms, 588 bytes, every step)."""
    recs = trace.records
    idx = trace.of_kind(Kind.COLL)
    idx = idx[(COLL_OP.of(recs["a"][idx]) == _ALL_REDUCE) & (COLL_BYTES.of(recs["a"][idx]) >= MIN_BUCKET_BYTES)]
    # a buffer is its address and size: a dropped bucket's block is soon split for the new ones
    buffers = [(int(trace.ext(int(i))[1]), int(COLL_BYTES.of(recs["a"][i]))) for i in idx]
    uses = Counter(buffers)
    first_repeat = next((k for k, buffer in enumerate(buffers) if uses[buffer] > 1), 0)
    return sum(buffer[1] for buffer in buffers[:first_repeat] if uses[buffer] == 1)


def failed_allocations(trace: Trace) -> list[dict[str, int]]:
    """MALLOC records flagged MF_FAILED: device, requested bytes and the bytes
    the device already held (a2) when the request failed."""
    recs = trace.records
    idx = np.flatnonzero((recs["kind"] == Kind.MALLOC) & ((recs["flags"] & Flag.FAILED) != 0))
    return [
        {"device": int(recs[i]["device"]), "bytes": int(recs[i]["a"][1]), "in_use_bytes": int(recs[i]["a"][2])}
        for i in idx
    ]


def _left_out(rank: dict[str, Any]) -> str:
    """What the trace clock left out of a rank's host time, as the summary line says it ("" when little)."""
    parts = [f"{rank.get(key, 0):.1f} s {what}" for key, what in
             (("off_cpu_seconds", "off the CPU"), ("gc_seconds", "in garbage collections"),
              ("hook_seconds", "in device-value work"))
             if rank.get(key, 0) >= 0.05]
    return f" ({' and '.join(parts)} left out)" if parts else ""


def device_reads(trace: Trace) -> int:
    """Device-to-host copies that ran: where a program reads values kernels
    would have computed (``.item()``, ``.cpu()``), which are zeros here."""
    recs = trace.records
    d2h = (recs["kind"] == Kind.MEMCPY) & (recs["a32"] == 2) & ((recs["flags"] & Flag.CAPTURED) == 0)
    return int(np.count_nonzero(d2h))


def unsupported_apis(trace: Trace) -> list[str]:
    """Names of the APIs an UNSUPPORTED record reports (a0 = name string id)."""
    names: list[str] = []
    for i in trace.of_kind(Kind.UNSUPPORTED):
        sid = int(trace.records[i]["a"][0])
        name = trace.strings.get(sid, f"<string {sid}>")
        if name not in names:
            names.append(name)
    return names


def approximated_calls(trace: Trace) -> dict[str, int]:
    """What the interposer answered only approximately, by name, with how many times: the
    APPROXIMATED records (a0 = name string id; emulation-image/TRACE_FORMAT.md lists the names)."""
    counts: dict[str, int] = {}
    for i in trace.of_kind(Kind.APPROXIMATED):
        sid = int(trace.records[i]["a"][0])
        name = trace.strings.get(sid, f"<string {sid}>")
        counts[name] = counts.get(name, 0) + 1
    return counts


def add_counts(into: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    """``into`` with ``more``'s counts added, name by name."""
    for name, n in more.items():
        into[name] = into.get(name, 0) + n
    return into


def trace_facts(trace: Trace) -> dict[str, Any]:
    recs = trace.records
    counts = np.bincount(recs["kind"], minlength=256)
    executed = (recs["flags"] & Flag.CAPTURED) == 0  # captured work did not run
    kinds = recs["kind"]

    def count(*k: Kind) -> int:
        return int(np.count_nonzero(np.isin(kinds, k) & executed))

    return {
        "records": len(recs),
        "kernel_launches": count(Kind.KERNEL),
        "library_calls": count(Kind.BLAS, Kind.DNN),
        "blas_calls": count(Kind.BLAS),
        "dnn_calls": count(Kind.DNN),
        "collectives": count(Kind.COLL),
        "memcpys": count(Kind.MEMCPY),
        "graph_launches": int(counts[Kind.GRAPH_LAUNCH]),
        "host_seconds": trace.span_ns / 1e9,
        "off_cpu_seconds": int(trace.header.get("off_cpu_us", 0)) / 1e6,
        "gc_seconds": int(trace.header.get("gc_us", 0)) / 1e6,
        "hook_seconds": int(trace.header.get("hook_us", 0)) / 1e6,
        "trace_reserved_peak_bytes": reserved_peaks(trace),
        "first_buckets_bytes": first_buckets_bytes(trace),
        "failed_allocations": failed_allocations(trace),
        "unsupported_apis": unsupported_apis(trace),
        "approximated": approximated_calls(trace),
        "device_reads": device_reads(trace),
    }


def _rank_files(out: Path) -> dict[int, dict[str, list[Path]]]:
    ranks: dict[int, dict[str, list[Path]]] = {}
    for p in sorted(out.iterdir()):
        m = _RANK_FILE.match(p.name)
        if not m:
            continue
        kind = "trace" if m.group(3) == "mayatrace" else "torch"
        ranks.setdefault(int(m.group(1)), {"trace": [], "torch": []})[kind].append(p)
    return ranks


def summarize(out: Path, *, gpu: dict[str, Any], exit_code: int | None, command: list[str]) -> dict[str, Any]:
    """Build the summary of the run whose files are in ``out``.

    ``gpu`` carries ``name`` and ``memory_bytes`` (capacity per device)."""
    ranks: list[dict[str, Any]] = []
    for rank, files in sorted(_rank_files(out).items()):
        entry: dict[str, Any] = {
            "rank": rank,
            "exit_code": None,
            "kernel_launches": 0,
            "library_calls": 0,
            "collectives": 0,
            "peak_allocated_bytes": None,
            "peak_reserved_bytes": None,
            "first_buckets_bytes": 0,  # a real run's peak can be this much higher (first_buckets_bytes())
            "out_of_memory": False,
            "oom_escaped": False,  # a torch.OutOfMemoryError ended the program
            "oom_request_bytes": None,
            "unsupported_apis": [],
            "approximated": {},  # name -> count: calls answered only approximately (TRACE_FORMAT.md)
            "device_reads": 0,
            "host_seconds": 0.0,
            "off_cpu_seconds": 0.0,  # left out of the trace clock: the process was off the CPU between calls
            "gc_seconds": 0.0,  # left out of the trace clock: Python's garbage collections
            "hook_seconds": 0.0,  # ...and maya/_hook's device-value work
            "trace_files": [p.name for p in files["trace"]],
            "errors": [],
        }
        reserved = 0
        for path in files["trace"]:
            try:
                facts = trace_facts(read_trace(path))
            except (TraceError, OSError) as e:
                entry["errors"].append(f"{path.name}: {e}")
                continue
            for key in ("kernel_launches", "library_calls", "collectives", "device_reads"):
                entry[key] += facts[key]
            entry.setdefault("blas_calls", 0)
            entry.setdefault("dnn_calls", 0)
            entry["blas_calls"] += facts["blas_calls"]
            entry["dnn_calls"] += facts["dnn_calls"]
            entry["host_seconds"] = max(entry["host_seconds"], facts["host_seconds"])
            entry["off_cpu_seconds"] = max(entry["off_cpu_seconds"], facts["off_cpu_seconds"])
            entry["gc_seconds"] = max(entry["gc_seconds"], facts["gc_seconds"])
            entry["hook_seconds"] = max(entry["hook_seconds"], facts["hook_seconds"])
            reserved = max([reserved, *facts["trace_reserved_peak_bytes"].values()])
            entry["first_buckets_bytes"] = max(entry["first_buckets_bytes"], facts["first_buckets_bytes"])
            if facts["failed_allocations"]:
                entry["out_of_memory"] = True
                worst = max(facts["failed_allocations"], key=lambda f: f["bytes"] + f["in_use_bytes"])
                entry["oom_request_bytes"] = worst["bytes"]
                usable = gpu.get("usable_bytes") or gpu.get("memory_bytes") or 0
                if usable:
                    entry["oom_short_by_bytes"] = max(0, worst["bytes"] + worst["in_use_bytes"] - int(usable))
            for name in facts["unsupported_apis"]:
                if name not in entry["unsupported_apis"]:
                    entry["unsupported_apis"].append(name)
            add_counts(entry["approximated"], facts["approximated"])
        entry["trace_reserved_peak_bytes"] = reserved if files["trace"] else None
        for path in files["torch"]:
            try:
                report = json.loads(path.read_text())
            except (OSError, ValueError) as e:
                entry["errors"].append(f"{path.name}: {e}")
                continue
            devices = report.get("devices", [])
            alloc = max((d["max_memory_allocated"] for d in devices), default=0)
            resv = max((d["max_memory_reserved"] for d in devices), default=0)
            entry["peak_allocated_bytes"] = max(entry["peak_allocated_bytes"] or 0, alloc)
            entry["peak_reserved_bytes"] = max(entry["peak_reserved_bytes"] or 0, resv)
            entry["torch_devices"] = devices
            if report.get("out_of_memory"):
                entry["out_of_memory"] = True
                entry["oom_escaped"] = True
                entry["oom_message"] = report.get("oom_message")
            if entry["exit_code"] is None:
                entry["exit_code"] = report.get("exit_status")
            if report.get("exception"):
                entry["exception"] = report["exception"]
            if report.get("device_values") is not None:  # the start-up hook's (maya/_hook/_maya_device_values.py)
                entry["device_values"] = report["device_values"]
            if report.get("cpu_pace"):  # the Python yardstick, sampled (maya/_hook/_maya_pace.py)
                entry["cpu_pace_samples"] = len(report["cpu_pace"].get("samples") or ())
        if entry["peak_reserved_bytes"] is None and files["trace"]:
            entry["peak_reserved_bytes"] = reserved
        else:
            entry["peak_reserved_bytes"] = max(entry["peak_reserved_bytes"] or 0, reserved)
        ranks.append(entry)
    # A single process is the command itself: its exit code is known exactly.
    if len(ranks) == 1 and exit_code is not None:
        ranks[0]["exit_code"] = exit_code
    approximated: dict[str, int] = {}
    for r in ranks:
        add_counts(approximated, r["approximated"])
    return {
        "version": 1,
        "gpu": gpu,
        "command": command,
        "exit_code": exit_code,
        "num_ranks": len(ranks),
        "out_of_memory": any(r["out_of_memory"] for r in ranks),
        "unsupported_apis": sorted({n for r in ranks for n in r["unsupported_apis"]}),
        "approximated": dict(sorted(approximated.items())),
        "ranks": ranks,
    }


# Device values a router's choice or counts come from (maya/_hook/_maya_device_values.py's kinds).
_ROUTING = frozenset({"bincount", "histc", "topk", "argmax", "nonzero"})


def device_value_lines(values: dict[str, Any] | None, device_reads: int = 0) -> list[str]:
    """What a rank read of device values, where no kernel ran: the expected values it was given, and the
    reads that saw zeros (by program line; ``values`` is its ``device_values``), and, where a router's counts
    were given, what their GEMMs' changing shapes cost the host and how a real router may differ.  Without the
    start-up hook's report (None), the bare count of reads."""
    if values is None:
        if not device_reads:
            return []
        return [f"read device memory back {device_reads} time(s) (.item(), .cpu(), ...): kernels do not "
                "run here, so computed values read as zeros and code that branches on them may take another path "
                "than on a real GPU"]
    lines = []
    if values["assumed"]:
        lines.append("data-dependent results given expected values: " + "; ".join(
            f"{a['operation']} at {a['where']} (x{a['count']}): {a['as']}" for a in values["assumed"][:5]))
    if values["unknown"]:
        lines.append("read integer device values no kernel computed here (zeros): " + ", ".join(
            f"{u['operation']} at {u['where']} (x{u['count']})" for u in values["unknown"][:5])
            + ": work sized or chosen by them may differ from a real GPU's")
    if any(a["operation"] in _ROUTING for a in values["assumed"]):
        lines.append("a router's choice or counts were drawn as a balanced router's (seeded, the same in every "
                     "emulation), so the GEMMs they size take shapes the process has not run in some steps, each "
                     "charged the GPU server's host search for a kernel (0.15 ms in bf16); a real router that favours "
                     "some experts, or drifts, takes more new shapes (up to 55 ms a step in the mixtures of experts "
                     "measured: docs/accuracy.md)")
    return lines


def render(summary: dict[str, Any]) -> list[str]:
    """A few human lines about the run."""
    gpu = summary["gpu"]
    capacity = int(gpu.get("memory_bytes") or 0)
    lines = [
        f"maya: emulated {gpu['name']} ({summary['num_ranks']} rank(s) traced), "
        f"command exit code {summary['exit_code']}"
    ]
    if not summary["ranks"]:
        lines.append("maya: no process initialised CUDA, so nothing was traced")
    for r in summary["ranks"]:
        peak = r["peak_allocated_bytes"]
        mem = f"peak allocated {_gib(peak)}" if peak is not None else "peak allocated unknown"
        if r["peak_reserved_bytes"] is not None:
            mem += f", reserved {_gib(r['peak_reserved_bytes'])}"
        if capacity:
            mem += f" of {_gib(capacity)}"
        lines.append(
            f"  rank {r['rank']}: {r['kernel_launches']} kernels, {r['library_calls']} library calls, "
            f"{r['collectives']} collectives, {mem}, {r['host_seconds']:.1f} s host time"
            + _left_out(r)
        )
        if r["out_of_memory"]:
            req = r.get("oom_request_bytes")
            tried = f"tried to allocate {_gib(req)} " if req else ""
            short = r.get("oom_short_by_bytes")
            by = f" (short by {_gib(short)})" if short else ""
            how = "; torch.OutOfMemoryError ended the program" if r.get("oom_escaped") else ""
            lines.append(
                f"  rank {r['rank']}: OUT OF MEMORY: {tried}with a capacity of {_gib(capacity)} per GPU{by}{how}"
            )
        if r["unsupported_apis"]:
            lines.append(
                f"  rank {r['rank']}: hit {len(r['unsupported_apis'])} unsupported API(s): "
                + ", ".join(r["unsupported_apis"][:10])
                + (" ..." if len(r["unsupported_apis"]) > 10 else "")
            )
        if r.get("approximated"):
            lines.append(f"  rank {r['rank']}: {approximated_line(r['approximated'])}")
        lines += [f"  rank {r['rank']}: {line}"
                  for line in device_value_lines(r.get("device_values"), r.get("device_reads", 0))]
        for err in r["errors"]:
            lines.append(f"  rank {r['rank']}: could not read {err}")
    held = max((r.get("first_buckets_bytes") or 0 for r in summary["ranks"]), default=0)
    if held:
        lines.append(
            f"maya: on GPUs the peaks can be up to {_gib(held)} higher in some runs: DDP drops its first gradient "
            "buckets when it rebuilds them in the second step, and torch's NCCL watchdog, polling every 100 ms, may "
            "still hold them there"
        )
    cpus = summary.get("emulating_cpus")
    if cpus and summary["num_ranks"] > cpus:
        lines.append(
            f"maya: {summary['num_ranks']} ranks shared {cpus} CPU(s): a rank sharing its CPU runs its host work "
            "slower (1.2x at 2 ranks a CPU, 1.8x at 8, measured); maya predict reads how long each waited for its "
            "CPU and undoes it, to within a few percent up to 8 ranks a CPU (docs/emulating-machine.md); for a "
            "host-bound job, a CPU per rank is surer"
        )
    return lines


def approximated_line(counts: dict[str, int]) -> str:
    """One line naming the approximated calls, most frequent first."""
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = "; ".join(f"{name} (x{n})" for name, n in top[:5]) + (" ..." if len(top) > 5 else "")
    return f"approximated {sum(counts.values())} call(s) (emulation-image/TRACE_FORMAT.md): {shown}"
