"""The GPU server's host, relative to the CPU that emulated the job.

The replay spaces a rank's calls by the host delays measured under
emulation: Python, PyTorch's dispatcher and the caching allocator running on
the emulating CPU, with the CUDA libraries replaced by the interposer's quick
stand-ins.  On the GPU server the same work runs on another CPU, and every
call also pays the real driver's and libraries' host cost.  So the server's
host is, per catalog machine: ``call_ns``, the host time of each kind of CUDA
call, measured on servers of that kind
(``benchmarks/campaigns/server_call_cost.sh``), and two factors fitted on the
example models (``python -m benchmarks.calibration.host``): ``slowdown`` on
the emulated host delays and ``call_scale`` on the call costs, because a call
inside a training step costs more than in a tight loop, and models that
launch many kernels per line of Python (the recommender's embedding
backward) need both factors to come out right.  The factors are fitted
through the replay itself: the examples' measured host time per step
includes the host's waits for the device inside the step (``.item()``, a
copy to the host), which the replay reproduces, so a raw ratio of host times
would mistake those waits for a slow host.

A job of several ranks runs on a machine of several GPUs, not on the
single-GPU servers the factors were fitted on: its calls are priced as
measured on such machines where they were (``node_call_ns``), and its delays
are charged that machine's pace over the single-GPU servers' where the
calibration's jobs of several ranks fit one (``node_slowdown``, fitted
through the replay on their step times:
``python -m benchmarks.calibration.node_host``).  And its ranks wait for
each other: on a server each rank's host work varies from step to step (and
rank to rank), and a data-parallel step goes at its slowest rank's pace,
while the replay steadies every rank alike.  Where the
calibration measured that noise (``rank_jitter``, the relative spread of a
rank's host time about the ranks' mean, from records of a calibration size on
every GPU of several-GPU servers: ``python -m benchmarks.calibration.rank_wait``),
the delays of a job of ``n`` ranks are charged the expected slowest of ``n``
such ranks over their mean (:func:`rank_wait`).

The slowdown refers to the CPU it was calibrated on, as :mod:`maya.cpu_probe`
read it (``reference_probe_ns``); delays emulated on another CPU, or on the
same one under load, are rescaled by the two probes (:meth:`HostModel.on_cpu`).
A GPU with no calibration keeps the nominal per-call costs of
:data:`maya.predictor.replay.simulator.CALL_NS` and launch times.  The
measurements behind the model are in ``docs/host-model.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from maya.predictor.replay.iterations import trace_steps
from maya.predictor.replay.simulator import (
    CALL_NS,
    DEFAULT_CALL_NS,
    LAUNCH_GAP_NS,
    LAUNCH_LATENCY_NS,
    RankResult,
    replay_order,
)
from maya.predictor.trace.format import Kind
from maya.predictor.trace.reader import Trace
from maya.predictor.trace.records import BLAS_A_TYPE

CALIBRATION = Path(__file__).parents[1] / "host_calibration.json"
SLOWDOWNS = np.round(np.arange(1.0, 6.0 + 1e-9, 0.05), 2)  # the delay factors a calibration tries
CALL_SCALES = np.round(np.arange(0.5, 3.0 + 1e-9, 0.1), 2)  # and the factors on the measured call costs


@dataclass(frozen=True)
class HostModel:
    """How the replay times a rank's host: delays x ``slowdown`` plus ``call_ns`` x ``call_scale``
    per call by kind (``default_call_ns`` for the other kinds; None: each call's recorded duration,
    for a trace recorded on the GPU server); and the server's launches (measured by
    ``benchmarks/campaigns/launch_gap.py``): work starts ``launch_latency_ns`` after its call returns, and
    ``launch_gap_ns`` after the work queued before it on its stream ends."""

    slowdown: float = 1.0
    call_ns: Mapping[int, float] | None = field(default_factory=lambda: dict(CALL_NS))
    default_call_ns: float = DEFAULT_CALL_NS
    source: str = "nominal call costs, no calibration for this GPU"
    reference_probe_ns: float | None = None  # maya.cpu_probe on the machine that calibrated slowdown
    call_scale: float = 1.0  # fitted: a call inside a training step costs more than in a tight loop
    launch_latency_ns: float = LAUNCH_LATENCY_NS  # from a launch call's return to its work starting on an idle device
    launch_gap_ns: float = LAUNCH_GAP_NS  # from the end of one operation to the start of the next queued behind it
    node_slowdown: float = 1.0  # on the delays of a job of several ranks: its machine's host against the single-GPU servers'
    rank_wait: float = 1.0  # on the delays of a job of several ranks: its slowest rank over their mean (rank_wait())
    # host ns a GEMM of a shape the process has not run before costs over a seen one, by its inputs' precision
    # (NEW_SHAPE_PRECISIONS); empty: not charged
    new_gemm_shape_ns: Mapping[str, float] = field(default_factory=dict)
    # host ns of a cuDNN RNN call on the server, by record name: (per call, per layer and direction, per time
    # step of each), fitted on benchmarks/data/rnn_sweep (benchmarks/calibration/rnn_host.py); a call so priced
    # launches its work as it goes (paced).  Empty: priced as any cuDNN call, its work launched at its end
    rnn_call_ns: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)

    @property
    def delay_factor(self) -> float:
        """What the replay multiplies the emulated host delays by."""
        return self.slowdown * self.node_slowdown * self.rank_wait

    def priced_calls(self) -> dict[int, float] | None:
        """Host ns per call by record kind, as the replay charges them (None: as recorded)."""
        return None if self.call_ns is None else {k: v * self.call_scale for k, v in self.call_ns.items()}

    def as_recorded(self) -> HostModel:
        """This server's host as a trace recorded on it has it: its own delays and call durations."""
        return HostModel(1.0, None, 0.0, "the host as recorded on the GPU server",
                         launch_latency_ns=self.launch_latency_ns, launch_gap_ns=self.launch_gap_ns)

    def new_shape_costs(self, first: npt.NDArray[np.int8]) -> npt.NDArray[np.float64]:
        """Host ns each record costs over its kind's price because it is a GEMM of a shape the rank has not
        run before, by record index (``first``: :func:`first_gemm_shapes` of the rank's trace)."""
        extra = np.zeros(len(first))
        for precision, ns in self.new_gemm_shape_ns.items():
            extra[first == NEW_SHAPE_PRECISIONS.index(precision) + 1] = ns
        return extra

    def rnn_costs(self, calls: Mapping[int, tuple[str, int, int]], records: int) -> tuple[npt.NDArray[np.float64],
                                                                                           npt.NDArray[np.bool_]]:
        """Host ns each record costs over its kind's price because it is a cuDNN RNN call, and which records'
        work is paced by their call, by record index (``calls``: record index -> (name, layers and directions,
        time steps of all of them), :func:`maya.predictor.estimate.rnn.time_steps`).

        Why: cuDNN launches an RNN's per-step kernels from the calling thread, three or so per step of each
        layer, 20-30 us of the server's host a step, where the emulated library returns at once; so the
        call holds the host for milliseconds, and a device that is not already behind runs its kernels at
        the host's pace (docs/prediction.md)."""
        extra, paced = np.zeros(records), np.zeros(records, bool)
        priced = (self.call_ns or {}).get(int(Kind.DNN), self.default_call_ns) * self.call_scale
        for i, (name, layers, steps) in calls.items():
            if name in self.rnn_call_ns:
                per_call, per_layer, per_step = self.rnn_call_ns[name]
                extra[i] = max(per_call + per_layer * layers + per_step * steps - priced, 0.0)
                paced[i] = True
        return extra, paced

    def on_cpu(self, probe_ns: float | None) -> HostModel:
        """This host for delays emulated on a CPU whose probe read ``probe_ns``: the slowdown
        scaled by the calibrating CPU's probe over this one (unchanged where either is unknown)."""
        if not probe_ns or not self.reference_probe_ns:
            return self
        return replace(self, slowdown=self.slowdown * self.reference_probe_ns / probe_ns)


# The call kinds measured on the server, and the record kind each one prices.  "dnn" is a cuDNN
# convolution as PyTorch makes it (set the stream, build a variant pack, execute, destroy the pack:
# benchmarks/campaigns/server_dnn_cost.c); where it was not measured, a cuDNN call is priced as a cuBLAS one
# (the two cost about the same on the H100 servers, docs/host-model.md).
CALL_KINDS = {"kernel": Kind.KERNEL, "memset": Kind.MEMSET, "memcpy": Kind.MEMCPY, "blas": Kind.BLAS, "dnn": Kind.DNN}


def server_call_ns(measured: Mapping[str, float]) -> dict[int, float]:
    """Host ns per call by record kind, from the costs measured on a server (by CALL_KINDS name);
    the other calls (events, allocations) cost nothing beyond their emulated delays."""
    if "dnn" not in measured and "blas" in measured:
        measured = {**measured, "dnn": measured["blas"]}
    return {int(kind): float(measured[name]) for name, kind in CALL_KINDS.items() if name in measured}


@lru_cache(maxsize=64)
def expected_max_normal(n: int) -> float:
    """The expected largest of ``n`` independent standard normal draws (0 for one); kept per ``n``:
    every prediction of a job of several ranks asks for it."""
    if n <= 1:
        return 0.0
    x = np.linspace(-9.0, 9.0, 3601)
    cdf = 0.5 * (1.0 + np.array([math.erf(v / math.sqrt(2.0)) for v in x]))
    pdf = np.exp(-x * x / 2.0) / math.sqrt(2.0 * math.pi)
    return float(np.sum(x * n * pdf * cdf ** (n - 1)) * (x[1] - x[0]))


def rank_wait(jitter: float, ranks: int) -> float:
    """The pace of ``ranks`` ranks whose host time spreads by ``jitter`` (relative standard deviation)
    about their mean, over that mean: the step waits for the slowest."""
    return 1.0 + jitter * expected_max_normal(ranks)


# The precisions a new GEMM shape is priced by (benchmarks/data/gemm_first_shape/: cuBLAS's search for a
# bf16 kernel costs the host 0.1-0.2 ms, an fp32 one's a tenth of that): 16-bit and narrower inputs, and wider.
NEW_SHAPE_PRECISIONS = ("16-bit", "32-bit")
_NARROW_TYPES = (2, 6, 14, 15, 3, 7, 8, 9, 28, 29)  # cudaDataType: R/C 16F, R/C 16BF, R/C 8I, R/C 8U, R 8F E4M3/E5M2


def first_gemm_shapes(trace: Trace) -> npt.NDArray[np.int8]:
    """By record index: 0, or for a BLAS call whose signature (routine, sizes, layout, types) the rank has
    not called before, 1 + its precision's index in ``NEW_SHAPE_PRECISIONS``.

    Why: cuBLAS picks a kernel for each new shape and caches the choice, so a job whose GEMM sizes follow
    its data (a mixture of experts sizing each expert's GEMMs by its token count, which changes every step)
    pays that search in its steady steps, where a job of fixed sizes pays it in its first step only.  The
    emulated libraries search nothing, so the replay charges it."""
    recs = trace.records
    out = np.zeros(len(recs), np.int8)
    idx = np.flatnonzero(recs["kind"] == int(Kind.BLAS))
    if not len(idx):
        return out
    a = recs["a"][idx]
    words = np.column_stack([recs["a32"][idx].astype(np.uint64), a[:, :4]])
    _, first = np.unique(words, axis=0, return_index=True)
    narrow = np.isin(BLAS_A_TYPE.of(a[first]), _NARROW_TYPES)
    out[idx[first]] = np.where(narrow, 1, 2)
    return out


def host_model(gpu: str, path: Path = CALIBRATION, *, ranks: int = 1) -> HostModel:
    """The calibrated host of catalog machine ``gpu``, else the nominal one, for a job of ``ranks``
    ranks.  Several ranks run on a machine of several such GPUs, not on the single-GPU servers the
    factors were fitted on: their calls are priced as measured on such machines where they were
    (``node_call_ns``), their delays run at that machine's pace where the calibration's jobs of
    several ranks fitted it (``node_slowdown``), and they wait for the slowest of them where the
    calibration measured the ranks' spread (``rank_jitter``)."""
    calibration = json.loads(path.read_text()) if path.is_file() else {}
    m = calibration.get("machines", {}).get(gpu)
    if not m:
        return HostModel()
    if ranks > 1 and m.get("node_call_ns"):
        m = {**m, "call_ns": m["node_call_ns"]}
    host = calibrated_host(m, calibration.get("emulating_cpu", {}).get("host_probe_ns"))
    if ranks <= 1:
        return host
    return replace(host, node_slowdown=float(m.get("node_slowdown", 1.0)),
                   rank_wait=rank_wait(float(m.get("rank_jitter", 0.0)), ranks))


def calibrated_host(machine: Mapping[str, Any], reference_probe_ns: float | None) -> HostModel:
    """The host of one ``machines`` entry of a calibration (call costs, factors, launch times
    where measured, else the nominal ones) for delays emulated on a CPU whose probe read
    ``reference_probe_ns``."""
    launch = machine.get("launch", {})
    return HostModel(float(machine.get("slowdown", 1.0)), server_call_ns(machine.get("call_ns", {})), 0.0,
                     f"calibrated on {machine.get('configs', 0)} measured configurations", reference_probe_ns,
                     float(machine.get("call_scale", 1.0)), float(launch.get("latency_ns", LAUNCH_LATENCY_NS)),
                     float(launch.get("gap_ns", LAUNCH_GAP_NS)),
                     new_gemm_shape_ns={k: float(v) for k, v in machine.get("new_gemm_shape_ns", {}).items()},
                     rnn_call_ns={k: (float(v[0]), float(v[1]), float(v[2]))
                                  for k, v in machine.get("rnn_call_ns", {}).items()})


def step_host_times_ns(trace: Trace, result: RankResult, steps: int) -> list[float]:
    """Replayed host time of each of the last ``steps`` steps of a loop that ends every step with a
    device synchronisation, as the examples do and as their measured ``host_times_s`` count it:
    from when the previous synchronisation let the host go on to when the host reached the next
    (so it includes the host's waits for the device inside the step)."""
    syncs = trace.of_kind(Kind.DEVICE_SYNC)
    if len(syncs) < steps + 1:
        raise ValueError(f"{len(syncs)} device synchronisations, {steps + 1} needed for {steps} steps")
    syncs = syncs[-(steps + 1):]
    return [float(result.issue[b] - result.released[a]) for a, b in zip(syncs[:-1], syncs[1:], strict=True)]


def steady_step_delays(trace: Trace) -> tuple[npt.NDArray[np.int64], list[tuple[int, int]], list[float]]:
    """The emulated host delays of each steady step: (the records in replay order, each steady
    step's span of that order, the sum of the host delays inside it, ns).  No steady steps found:
    empty spans."""
    order = replay_order(trace)
    try:
        steps, records = trace_steps(trace)
    except ValueError:
        return order, [], []
    t = trace.records["t_ns"][order].astype(np.float64)
    gaps = np.zeros(len(order))
    gaps[1:] = np.maximum(t[1:] - (t[:-1] + trace.records["dur_ns"][order][:-1]), 0.0)
    ends = [*steps.starts[1:], steps.end]
    cuts = [(float(trace.records["t_ns"][records[a]]), float(trace.records["t_ns"][records[b]]))
            for a, b in zip(steps.starts, ends, strict=True) if b < len(records)]
    spans = [(int(np.searchsorted(t, lo)), int(np.searchsorted(t, hi))) for lo, hi in cuts]
    return order, spans, [float(gaps[a:b].sum()) for a, b in spans]


def quiet_gap_scales(traces: Sequence[Trace], factors: Sequence[float] | None = None) -> list[npt.NDArray[np.float64]]:
    """Per rank, a factor on the host delay before each record (by record index): each steady
    step's delays are scaled to add up to those of the quickest steady step of any rank whose
    steps repeat the same operations, per record of the step (1 outside the steady steps).
    ``factors``: per rank, a factor on its delays before the quickest is chosen (the other ranks on
    its emulating CPU slowed them: ``maya.cpu_sharing``; default 1).

    Why: a burst of interference on the emulating machine (another process, the hypervisor) can
    slow several consecutive steps of an emulation twofold, while the steps themselves repeat the
    same host work; the quickest step is the one it spared most.  The slowdown is often the whole
    process's, so one rank of a data-parallel job can run all its steps twice as slow as another
    doing the same work: on the GPU server each rank has CPUs of its own, and the slowest rank
    would set the replayed step."""
    found = [steady_step_delays(t) for t in traces]
    factors = list(factors) if factors is not None else [1.0] * len(traces)
    # A step's work: how many records of each kind (the order of two host threads' records may differ).
    work = [np.bincount(t.records["kind"][order[spans[0][0]:spans[0][1]]], minlength=256).tobytes() if spans else b""
            for t, (order, spans, _) in zip(traces, found, strict=True)]
    quickest: dict[bytes, float] = {}
    # Per record of the step: steps that differ in their operations (a packed batch's copy per length)
    # differ in their host work by as much.
    for key, f, (_, spans, totals) in zip(work, factors, found, strict=True):
        if totals:
            quickest[key] = min(quickest.get(key, np.inf), *(f * t / (b - a) for (a, b), t in zip(spans, totals,
                                                                                                 strict=True)))
    scales = []
    for t, key, (order, spans, totals) in zip(traces, work, found, strict=True):
        scale = np.ones(len(t.records))
        for (a, b), total in zip(spans, totals, strict=True):
            if total > 0:
                scale[order[a:b]] = quickest[key] * (b - a) / total
        scales.append(scale)
    return scales


NODE_SLOWDOWNS = np.round(np.arange(0.8, 1.6 + 1e-9, 0.025), 3)  # the node factors a calibration tries


def fit_node_slowdown(step_s: npt.NDArray[np.float64], measured_s: Sequence[float]) -> float:
    """The factor on a job of several ranks' delays whose replayed steps come closest to the measured ones.

    ``step_s[c, i]``: configuration c's predicted step time with ``NODE_SLOWDOWNS[i]`` (the product's
    prediction: the median over its emulations).  The step times, not the host's: a data-parallel
    step's host waits for the other ranks at every gradient all-reduce, which its own host time
    counts.  Minimised: the mean over configurations of |log(predicted / measured)|, each weighted by
    how much its step follows the factor (its elasticity over the grid): a device-bound configuration
    says next to nothing about its host's pace, and, weighted as much as a host-bound one, its
    emulations' noise chose the factor (the H200's of 2026-11-28: 0.825 where the host-bound sizes
    disagreed by a third).  With equal weights this is the median configuration's factor, as for the
    single-GPU factors (:func:`fit_host`); a tie goes to the factor nearest 1."""
    if len(measured_s) == 0 or step_s.shape != (len(measured_s), len(NODE_SLOWDOWNS)):
        raise ValueError("need a row of predicted step times (one per node factor) per measured configuration")
    logs = np.log(step_s)
    follows = np.maximum((logs[:, -1] - logs[:, 0]) / math.log(NODE_SLOWDOWNS[-1] / NODE_SLOWDOWNS[0]), 0.0)
    weights = follows if follows.sum() > 0 else np.ones(len(measured_s))
    err = weights @ np.abs(logs - np.log(np.asarray(measured_s, np.float64))[:, None]) / weights.sum()
    best = np.flatnonzero(err <= err.min() + 1e-12)
    return float(NODE_SLOWDOWNS[best[np.argmin(np.abs(NODE_SLOWDOWNS[best] - 1.0))]])


def fit_host(host_s: npt.NDArray[np.float64], measured_s: Sequence[float]) -> tuple[float, float]:
    """The slowdown and call scale whose replayed host times come closest to the measured ones.

    ``host_s[c, i, j]``: configuration c's replayed host time per step with slowdown
    ``SLOWDOWNS[i]`` and the measured call costs times ``CALL_SCALES[j]``.  Two factors, because
    the calls cost more inside a training step than in the benchmark's tight loop (cold caches,
    the runtime's bookkeeping around each launch), and the examples mix calls and Python in
    different proportions: one factor for both cannot fit the recommender (many launches per
    line of Python) and the CNN at once (docs/host-model.md).  The median over configurations of
    |log(replayed / measured)| is minimised: one configuration's noise cannot move it far, and a
    configuration whose host mostly waits for the device does not pull it."""
    if len(measured_s) == 0 or host_s.shape != (len(measured_s), len(SLOWDOWNS), len(CALL_SCALES)):
        raise ValueError("need a grid of replayed host times (slowdown x call scale) per measured configuration")
    err = np.median(np.abs(np.log(host_s / np.asarray(measured_s, np.float64)[:, None, None])), axis=0)
    i, j = np.unravel_index(int(np.argmin(err)), err.shape)
    return float(SLOWDOWNS[i]), float(CALL_SCALES[j])
