"""How long a collective takes: NCCL's ring and tree algorithms over NVLink and the network.

A narrow interface (:class:`CollectiveModel`: one collective in, seconds out)
so that a congestion-aware model can replace :class:`AnalyticalNccl`, which
is alpha-beta: every algorithm step pays the link's latency, and the bytes
each GPU must move cross its slowest link at that link's achieved rate.
Where collectives were measured on real GPUs of the job's kind
(``collectives.json`` in ``predictor/``, written by
``python -m benchmarks.calibration.collectives --write``), :class:`MeasuredNccl`
answers from the measurements instead, as the kernel estimators answer
profiled operations exactly: :func:`collective_model` picks.  Measured curves
matter most where NCCL's bandwidth ramps up with the message (a few MiB to
tens of MiB, where DDP's gradient buckets sit), which alpha-beta does not
capture.

- Inside a node GPUs reach each other over NVLink/NVSwitch at
  ``nvlink_gbps / 2`` per direction (the catalog gives both directions).
- Between nodes each GPU has its own NIC (one rail per GPU, as on DGX and
  HGX H100/H200 systems: 8 x 400 Gb/s), so a ring that crosses nodes runs at
  the NIC's rate, and a node's GPUs together cross the network at the rate of
  all its NICs; a tree (used by NCCL across nodes for all-reduce) pays
  log2(nodes) network latencies instead of one per rank.
- Protocols: LL halves the bandwidth for a much lower latency, Simple the
  reverse; the faster of the two is taken, as NCCL's tuner does.
- NVLink SHARP (NVLS) all-reduce is not modelled.

The constants below come from published nccl-tests figures and from the
collectives measured here (``benchmarks/data/nccl_published/figures.json``,
``benchmarks/data/collectives``; ``tests/test_simulator.py`` checks the model
on them); ``docs/collectives.md`` gives the figures and the model's error
against them.  The network's latency per step is nominal: no multi-node
measurement covers it.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from maya.catalog import GPU

MEASURED = Path(__file__).parents[1] / "collectives.json"

NVLINK_EFFICIENCY = 0.82   # achieved / nominal per-direction NVLink bandwidth (nccl-tests ring, 8 x H100)
NET_EFFICIENCY = 0.94      # achieved / nominal NIC bandwidth (47 of 50 GB/s per NDR NIC)
NIC_GBPS = 400.0           # one NIC per GPU, Gb/s (ConnectX-7 on DGX H100/H200)
NVLINK_STEP_S = 2.06e-6    # latency per algorithm step over NVLink (8-byte all-reduce, 8 x H100)
NET_STEP_S = 4.0e-6        # latency per algorithm step over the network (nominal)
LAUNCH_S = 5.0e-6          # a collective kernel's fixed cost (smallest collectives, 2 x H200)
LL_LATENCY_FACTOR = 0.3    # LL protocol: latency per step relative to Simple's
LL_BANDWIDTH_FACTOR = 0.5  # LL protocol: 8 bytes of flags per 8 bytes of data


@dataclass(frozen=True)
class Fabric:
    """The links a job's GPUs talk over: per GPU and per direction, in bytes/s."""

    gpus_per_node: int
    nvlink_bytes_s: float
    net_bytes_s: float
    nvlink_step_s: float = NVLINK_STEP_S
    net_step_s: float = NET_STEP_S

    @classmethod
    def of(cls, gpu: GPU, gpus_per_node: int | None = None) -> Fabric:
        per_node = gpus_per_node or gpu.gpus_per_node
        nvlink = gpu.nvlink_bytes_per_s / 2 * NVLINK_EFFICIENCY if "nvlink_gbps" in gpu.fields else 0.0
        net = NIC_GBPS / 8 * 1e9 * NET_EFFICIENCY
        return cls(per_node, nvlink or net, net)


@dataclass(frozen=True)
class Collective:
    """One collective as a COLL record describes it: ``bytes`` in each rank's send buffer."""

    op: str
    bytes: float
    ranks: int
    nodes: int = 1


class CollectiveModel(Protocol):
    def seconds(self, c: Collective) -> float: ...

    def source(self, c: Collective) -> str:
        """Which model timed ``c``: "measured" or "analytical" (``maya predict`` reports the shares)."""
        ...


@dataclass(frozen=True)
class AnalyticalNccl:
    """Alpha-beta ring and tree times, the faster protocol of LL and Simple."""

    fabric: Fabric

    def source(self, c: Collective) -> str:
        return "analytical"

    def seconds(self, c: Collective) -> float:
        n = max(c.ranks, 1)
        if n == 1:
            return LAUNCH_S
        multi_node = c.nodes > 1
        # Across nodes: one ring channel per rail, a node's NICs side by side.
        rails = self.fabric.net_bytes_s * self.fabric.gpus_per_node
        bw = min(self.fabric.nvlink_bytes_s, rails) if multi_node else self.fabric.nvlink_bytes_s
        step = self.fabric.net_step_s if multi_node else self.fabric.nvlink_step_s
        steps, moved = _ring(c.op, c.bytes, n)
        times = [_protocols(steps * step, moved / bw)]
        if c.op == "all_reduce" and multi_node:  # NCCL's tree: log2(nodes) network hops up and down
            tree_steps = 2 * (math.ceil(math.log2(c.nodes)) * self.fabric.net_step_s
                              + (self.fabric.gpus_per_node - 1) * self.fabric.nvlink_step_s)
            times.append(_protocols(tree_steps, 2 * c.bytes / bw))  # reduced up, broadcast down
        return LAUNCH_S + min(times)


@dataclass(frozen=True)
class MeasuredNccl:
    """Collectives as measured: each (op, ranks) measured inside one node is timed by its measured
    curve, log-log between the measured sizes (the smallest size's time below them, the last
    segment's bandwidth above); any other collective by ``fallback``."""

    curves: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]  # (op, ranks) -> (bytes, seconds), sorted
    fallback: CollectiveModel

    def _covers(self, c: Collective) -> bool:
        return c.nodes == 1 and (c.op, c.ranks) in self.curves

    def source(self, c: Collective) -> str:
        return "measured" if self._covers(c) else self.fallback.source(c)

    def seconds(self, c: Collective) -> float:
        if not self._covers(c):
            return self.fallback.seconds(c)
        b, s = self.curves[(c.op, c.ranks)]
        if c.bytes > b[-1]:
            return float(s[-1] + (c.bytes - b[-1]) * (s[-1] - s[-2]) / (b[-1] - b[-2]))
        return float(np.exp(np.interp(math.log(max(c.bytes, 1.0)), np.log(b), np.log(s))))


def measured_curves(gpu: GPU, path: Path = MEASURED) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """The curves measured on ``gpu`` or on a GPU of the same NVLink (H100 and H200 SXM: 18
    NVLink 4 links, 900 GB/s); empty where none was."""
    return _curves(gpu.name, float(gpu.fields.get("nvlink_gbps") or 0), path)


@functools.cache
def _curves(name: str, nvlink_gbps: float, path: Path) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """Parsed once a process: a replay asks for them every time (the host calibration, hundreds)."""
    tables = json.loads(path.read_text())["tables"]
    table = tables.get(name) or next((t for t in tables.values() if nvlink_gbps and t["nvlink_gbps"] == nvlink_gbps),
                                     None)
    points: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for op, ranks, nbytes, seconds in table["rows"] if table else []:
        points.setdefault((op, ranks), []).append((nbytes, seconds))
    return {k: (np.array([b for b, _ in sorted(v)], dtype=float), np.array([s for _, s in sorted(v)], dtype=float))
            for k, v in points.items()}


def collective_model(gpu: GPU, gpus_per_node: int | None = None) -> CollectiveModel:
    """The model a job on ``gpu`` is timed with: measured curves where they exist, else analytical."""
    analytical = AnalyticalNccl(Fabric.of(gpu, gpus_per_node))
    curves = measured_curves(gpu)
    return MeasuredNccl(curves, analytical) if curves else analytical


def _ring(op: str, nbytes: float, n: int) -> tuple[int, float]:
    """(algorithm steps, bytes each GPU sends) of the ring algorithm."""
    if op == "all_reduce":
        return 2 * (n - 1), 2 * (n - 1) / n * nbytes
    if op == "all_gather":  # bytes: this rank's part
        return n - 1, (n - 1) * nbytes
    if op in ("reduce_scatter", "all_to_all"):  # bytes: the whole buffer
        return n - 1, (n - 1) / n * nbytes
    if op in ("broadcast", "reduce", "gather", "scatter"):
        return n - 1, nbytes
    return 1, nbytes  # send, recv


def _protocols(latency_s: float, transfer_s: float) -> float:
    simple = latency_s + transfer_s
    ll = LL_LATENCY_FACTOR * latency_s + transfer_s / LL_BANDWIDTH_FACTOR
    return min(simple, ll)
