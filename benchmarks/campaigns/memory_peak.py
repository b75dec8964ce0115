#!/usr/bin/env python3
"""What is live at a training script's peak of allocated device memory, and where each block was allocated.

Runs a script unchanged, on a GPU or under emulation, with PyTorch's allocator
history on (Python stacks), and at exit writes what was live at the peak,
grouped by allocation site, and the allocator's reservations in order, so
that an emulated peak that differs from the real one can be traced to the
allocations that differ:

    python3 benchmarks/campaigns/memory_peak.py OUT.json -- SCRIPT [ARGS...]
    maya emulate --out DIR -- python benchmarks/campaigns/memory_peak.py OUT.json -- SCRIPT [ARGS...]

Under ``torch.distributed.run`` each rank writes ``OUT.rank<R>.json``.  The
peak is replayed from the allocator's events (a block counts from its
``alloc`` to its ``free_completed``, as ``max_memory_allocated`` counts it)
and set beside ``torch.cuda.max_memory_allocated()``.
"""
from __future__ import annotations

import atexit
import collections
import json
import os
import runpy
import sys

import torch

HISTORY = 3_000_000  # allocator events kept: a few steps of a large model
SITES = 40  # allocation sites written, the largest first
SEGMENTS = 4000  # reservations written, the first
LARGEST = 24  # live blocks at the peak written one by one, the largest first


def site(frames: list[dict], script: str) -> str:
    """The allocation's place in the user's code (its innermost frame in the script) and the
    innermost library frame under it: where two runs' blocks can be matched."""
    here = [f for f in frames if os.path.basename(f.get("filename", "")) == script]
    lib = [f for f in frames if "/torch/" in f.get("filename", "")]
    parts = []
    if here:
        parts.append(f"{script}:{here[0]['line']} {here[0]['name']}")
    if lib:
        f = lib[0]
        parts.append(f"{f['filename'].split('/torch/')[-1]}:{f['line']} {f['name']}")
    return " | ".join(parts) or "?"


def live_at_peak(events: list[dict], script: str) -> dict:
    """Replay the allocator's events; at the highest allocated total, group the live blocks by site."""
    live: dict[int, dict] = {}
    now = peak = 0
    peak_at = -1
    for i, e in enumerate(events):
        if e["action"] == "alloc":
            live[e["addr"]] = e
            now += e["size"]
            if now > peak:
                peak, peak_at = now, i
        elif e["action"] == "free_completed" and e["addr"] in live:
            now -= live.pop(e["addr"])["size"]
    # the live set at the peak, again (cheaper than copying it at every new peak)
    at: dict[int, int] = {}  # a live block's address -> its alloc event's index
    for i, e in enumerate(events[: peak_at + 1]):
        if e["action"] == "alloc":
            at[e["addr"]] = i
        elif e["action"] == "free_completed":
            at.pop(e["addr"], None)
    live = {addr: events[i] for addr, i in at.items()}
    groups: dict[str, list[int]] = collections.defaultdict(list)
    for e in live.values():
        groups[site(e.get("frames", []), script)].append(e["size"])
    top = sorted(groups.items(), key=lambda kv: -sum(kv[1]))[:SITES]
    largest = sorted(at.values(), key=lambda i: -events[i]["size"])[:LARGEST]
    last = events[peak_at] if peak_at >= 0 else {}
    return {"peak_bytes": peak, "peak_event": peak_at, "events": len(events),
            "peak_allocation": {"size": last.get("size"), "site": site(last.get("frames", []), script)},
            "live_blocks": len(live),
            "sites": [{"site": s, "bytes": sum(v), "blocks": len(v),
                       "sizes": [sz for sz, _ in collections.Counter(v).most_common(6)]} for s, v in top],
            "largest": [{"size": events[i]["size"], "event": i, "site": site(events[i].get("frames", []), script)}
                        for i in largest]}


def reservations(events: list[dict], script: str) -> dict:
    """The allocator's reservations in order, each with the total reserved after it: what sets the
    reserved peak, which a different workspace early in a run can move."""
    segments, reserved, reserved_peak = [], 0, 0
    for i, e in enumerate(events):
        if e["action"] in ("segment_alloc", "segment_free"):
            reserved += e["size"] if e["action"] == "segment_alloc" else -e["size"]
            reserved_peak = max(reserved_peak, reserved)
            segments.append({"event": i, "action": e["action"], "size": e["size"], "reserved": reserved,
                             "site": site(e.get("frames", []), script)})
    return {"reserved_peak_bytes": reserved_peak, "segments": segments[:SEGMENTS]}


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: memory_peak.py OUT.json -- SCRIPT [ARGS...]")
    out, argv = sys.argv[1], sys.argv[3:]
    rank = os.environ.get("RANK")
    if rank is not None:
        out = f"{out.removesuffix('.json')}.rank{rank}.json"
    script = os.path.basename(argv[0])
    torch.cuda.memory._record_memory_history(max_entries=HISTORY, context="alloc", stacks="python")

    def dump() -> None:
        device = torch.cuda.current_device()
        snap = torch.cuda.memory._snapshot()
        events = snap["device_traces"][device]
        doc = {"argv": argv, "device": torch.cuda.get_device_name(device),
               "max_memory_allocated": torch.cuda.max_memory_allocated(device),
               "max_memory_reserved": torch.cuda.max_memory_reserved(device),
               "history_full": len(events) >= HISTORY, **live_at_peak(events, script),
               **reservations(events, script)}
        with open(out, "w") as f:
            json.dump(doc, f, indent=1)

    atexit.register(dump)
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
    runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
