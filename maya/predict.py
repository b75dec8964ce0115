"""``maya predict``: emulate a command, estimate every operation, replay the job, report a step.

The steps: ``maya emulate`` runs the command on virtual GPUs; the kernel-time
estimators of the target GPU (:mod:`maya.predictor.estimate`) give each
device operation a duration; the collective model
(:mod:`maya.predictor.replay.network`) gives each collective one; the replay
(:mod:`maya.predictor.replay.simulator`) puts them on the streams and hosts of
every rank; the steady steps are found in rank 0's trace
(:mod:`maya.predictor.replay.iterations`) and measured (:mod:`maya.predictor.replay.step`).

``oracle=True`` replays a trace recorded on a real GPU (``maya record``)
with its measured device times instead of estimates: what is left of the
error is the replay's own.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from maya import catalog, cpu_sharing
from maya.predictor import estimate
from maya.predictor.estimate.rnn import is_rnn, time_steps
from maya.predictor.replay.host import HostModel, first_gemm_shapes, host_model, quiet_gap_scales
from maya.predictor.replay.iterations import NoIterations, Steps, StepsDiffer, trace_steps
from maya.predictor.replay.network import Collective, collective_model
from maya.predictor.replay.sharing import sharing_factors
from maya.predictor.replay.simulator import RankResult, SimulationError, simulate
from maya.predictor.replay.step import median_step_s, step_time, write_timeline
from maya.predictor.trace import Kind, Trace, read_trace
from maya.predictor.trace import records as R
from maya.predictor.trace.ops import device_ops, measured
from maya.summary import add_counts, approximated_calls, first_buckets_bytes
from maya.usual_pace import UsualPace

_RANK_FILE = re.compile(r"rank(\d+)\.mayatrace$")
NUDGE = 0.1  # the relative change by which the step's sensitivity to its host and its estimates is read
HOST_BOUND = 0.5  # a step that follows its host this much differs between GPU servers' hosts (docs/accuracy.md)
# A step that follows its host this much moves by more than a few percent with one emulating process's
# noise: maya predict emulates it AUTO_REPEAT times and keeps the median (docs/emulating-machine.md).
HOST_SENSITIVE = 0.1
AUTO_REPEAT = 3
# Two emulations whose step times agree this closely settle the median of three: a third lies between them or
# outside, and either way the median stays between the two, so it is not run.
AGREE = 0.01
# An emulation whose samples of the Python yardstick in its steady steps read this many times slower than the
# question's quickest reading ran them in one of the emulating CPU's slow phases (maya/_hook/_maya_pace.py): it
# is set aside and another emulation asked for, SPARE at most beyond those the question wants.
SLOW_PHASE = 1.25
SPARE = 2
SAME_WORK = 0.01  # steps whose device work agrees this closely (relative) do the same work
MIN_SAMPLES = 3  # samples of the yardstick in the steady steps that say how fast they ran


class PredictError(Exception):
    """Nothing to predict from (no traces, no repeating steps...); the message says what to do."""


class FurtherEmulationFailed(Exception):
    """A further emulation of a question did not complete: ``predict_asked``'s ``further`` raises it to stop
    the question (its argument: the exit code, or which emulation)."""


@dataclass(frozen=True)
class Prediction:
    gpu: str
    step_time_s: float
    steps_s: tuple[float, ...]
    breakdown: dict[str, float]
    peak_memory_bytes: list[int]
    capacity_bytes: int
    confidence: dict[str, float]
    emulations_s: tuple[float, ...] = ()  # the step time of each emulation (several: this is their median's)
    # the step's elasticity to its "host" delays, its "estimated" kernels, its cuDNN RNN calls' host ("rnn_host")
    sensitivity: dict[str, float] = field(default_factory=dict)
    collective_models: dict[str, float] = field(default_factory=dict)  # share of collective time by model
    approximated: dict[str, int] = field(default_factory=dict)  # name -> count: emulated or timed only approximately
    # rank 0's data-dependent results given expected values, and its reads of values no kernel computed
    # ({"assumed": [...], "unknown": [...]}, maya/_hook/_maya_device_values.py; {}: not reported)
    device_values: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # per rank, how much higher a real run's peak can be (maya.summary.first_buckets_bytes: DDP's first buckets)
    first_buckets_bytes: list[int] = field(default_factory=list)
    # per rank, the Python yardstick's median in the steady steps, ns (steady_pace; 0: not read)
    steady_pace_ns: tuple[int, ...] = ()
    # per rank, its time waiting for a CPU over its time on one in the steady steps, and the factor its host
    # delays took for what its CPU's other ranks slowed them (maya.cpu_sharing)
    cpu_waiting: tuple[float, ...] = ()
    cpu_delay_factors: tuple[float, ...] = ()
    slow_phase_s: tuple[float, ...] = ()  # the step time of each emulation set aside as run in a slow phase
    # the question's quickest yardstick reading over this machine's usual one (maya.usual_pace; None: not
    # judged): over SLOW_PHASE, every emulation of the question ran in a slow phase of the emulating CPU
    pace_over_usual: float | None = None
    host_probe_ns: float | None = None  # the emulating CPU's probe reading the host delays were scaled by
    steps_work_s: tuple[float, ...] = ()  # per steady step, its device work (StepTime.work): steps of one work

    @property
    def peak_memory_high_bytes(self) -> list[int]:
        """Per rank, the peak a real run can reach: in some runs torch's NCCL watchdog still holds DDP's first
        gradient buckets at the second step's peak."""
        held = [*self.first_buckets_bytes, *[0] * len(self.peak_memory_bytes)]
        return [p + h for p, h in zip(self.peak_memory_bytes, held, strict=False)]

    @property
    def fits(self) -> bool:
        """Whether every rank fits in every run, the runs that still hold DDP's first buckets included."""
        return all(p <= self.capacity_bytes for p in self.peak_memory_high_bytes)

    @property
    def host_bound(self) -> bool:
        """Whether the step follows its host by half or more: the GPU servers' own hosts move it."""
        return self.sensitivity.get("host", 0.0) >= HOST_BOUND

    @property
    def host_sensitive(self) -> bool:
        """Whether one emulation's noise moves the step by more than a few percent (a slow emulating
        process runs every host delay of the job up to twice as long, and makes the step follow its
        host more)."""
        return self.sensitivity.get("host", 0.0) >= HOST_SENSITIVE

    @property
    def interval_s(self) -> tuple[float, float]:
        """A 90% interval of the step time (``predictor/uncertainty.json``, ``docs/accuracy.md``): what the
        method misses on the calibration cases, what a host, kernels and cuDNN RNN calls it was not fitted on
        may add (each source's error on models or sizes left out of its fit, times how much this step
        follows it), how far one emulation's host delays stray from another's, and what this job's steady
        steps and emulations disagree on."""
        spread = own_spread(self.steps_s, self.steps_work_s, self.emulations_s) / 2 / self.step_time_s \
            if self.step_time_s > 0 else 0.0
        u = _uncertainty()
        host_q90 = u["host_q90"].get(self.gpu, max(u["host_q90"].values()))
        host = self.sensitivity.get("host", 0.0)
        emulation = emulation_noise(host) if len(self.emulations_s) <= 1 else 0.0  # several: in their spread
        half = math.hypot(u["method_q90"], spread, host_q90 * host, emulation,
                          u["kernel_q90"] * self.sensitivity.get("estimated", 0.0),
                          u["rnn_host_q90"] * self.sensitivity.get("rnn_host", 0.0))
        low = min(1 - half, slow_throughout_low(host, self.pace_over_usual))
        return self.step_time_s * max(0.0, low), self.step_time_s * (1 + half)

    def to_json(self) -> dict[str, Any]:
        low, high = self.interval_s
        return {"gpu": self.gpu, "step_time_s": self.step_time_s, "steps_s": list(self.steps_s),
                "breakdown": self.breakdown, "peak_memory_bytes": self.peak_memory_bytes,
                "peak_memory_high_bytes": self.peak_memory_high_bytes, "capacity_bytes": self.capacity_bytes, "fits": self.fits, "confidence": self.confidence,
                "step_time_low_s": low, "step_time_high_s": high,
                "emulations_step_time_s": list(self.emulations_s or (self.step_time_s,)),
                "emulations_slow_phase_step_time_s": list(self.slow_phase_s),
                "pace_over_usual": self.pace_over_usual, "cpu_waiting": list(self.cpu_waiting),
                "cpu_delay_factors": list(self.cpu_delay_factors),
                "sensitivity": self.sensitivity,
                "collective_models": self.collective_models, "approximated": self.approximated,
                "device_values": self.device_values}


def own_spread(steps_s: Sequence[float], work_s: Sequence[float], emulations_s: Sequence[float]) -> float:
    """How far a job's own steady steps and emulations disagree (seconds, max - min): of steps that do
    the same work (device work within ``SAME_WORK`` of each other), since a loop whose shapes change from
    step to step (batches bucketed by length) takes its different works' different times, which are
    no uncertainty; where every step does the same work, or each a work of its own, of all its steps."""
    works = work_s if len(work_s) == len(steps_s) else [0.0] * len(steps_s)  # not known: one work
    groups: list[tuple[float, list[float]]] = []  # (the least work, its steps' times)
    for work, step in sorted(zip(works, steps_s, strict=True)):
        if groups and work <= groups[-1][0] * (1 + SAME_WORK):
            groups[-1][1].append(step)
        else:
            groups.append((work, [step]))
    if len(groups) > 1 and any(len(steps) > 1 for _, steps in groups):
        return max(*(_span(steps) for _, steps in groups), _span(emulations_s))
    return _span([*steps_s, *emulations_s])


def _span(values: Sequence[float]) -> float:
    return max(values) - min(values) if values else 0.0


def slow_throughout_low(host_sensitivity: float, pace_over_usual: float | None) -> float:
    """How low (relative to the answer) a step following its host by ``host_sensitivity`` can be when every
    emulation read the yardstick ``pace_over_usual`` times its machine's usual pace (over ``SLOW_PHASE``; else
    1: no bound): the host's share shrunk by the yardstick's whole slowdown, the furthest it can be off, as the
    interpreter slows more than the dispatcher's C code does."""
    if not pace_over_usual or pace_over_usual <= SLOW_PHASE:
        return 1.0
    return 1 - host_sensitivity * (1 - 1 / pace_over_usual)


def emulation_noise(host_sensitivity: float) -> float:
    """The half-width (relative, 90%) that one emulation's host noise adds to a step following its host
    by ``host_sensitivity``; a median of several emulations carries their spread instead."""
    return float(_uncertainty()["emulation_q90"]) * host_sensitivity


def rank_traces(folder: Path) -> list[Trace]:
    """The traces of a run, by rank (a rank's second CUDA process, ``rank<R>.pid<P>``, is left out)."""
    found = sorted((int(m.group(1)), p) for p in folder.glob("rank*.mayatrace") if (m := _RANK_FILE.search(p.name)))
    if not found:
        raise PredictError(f"no rank<R>.mayatrace in {folder}: run 'maya emulate --out {folder} -- ...' first")
    return [read_trace(p) for _, p in found]


def world_size(traces: list[Trace]) -> int:
    """How many ranks the job has, as its traces' headers say (else as many as were traced)."""
    return max(int(traces[0].header.get("world_size") or 0), len(traces))


@dataclass
class Job:
    """The traces of a run, every device operation timed for one GPU: ready to replay on its host."""

    gpu: catalog.GPU
    folder: Path
    traces: list[Trace]
    durations: list[dict[int, float]]
    labels: list[list[str]]  # operation names by record index, for the timeline
    weights: dict[str, float]  # device ns by estimate confidence
    estimated: list[set[int]]  # per rank, the operations timed by an estimate of a shape nobody measured
    gpus_per_node: int
    gap_scale: list[npt.NDArray[np.float64]]  # per rank (maya.predictor.replay.host.quiet_gap_scale)
    summary: dict[str, Any]  # the run's summary.json ({} where there is none)
    sharing: dict[int, float]  # by record kind, work's factor beside a resident collective (maya.predictor.replay.sharing)
    collective_ns: dict[str, float] = field(default_factory=dict)  # by model, "measured" or "analytical" (last replay)
    traced_approximations: dict[str, int] = field(default_factory=dict)  # the traces' APPROXIMATED records, by name
    replay_approximations: dict[str, int] = field(default_factory=dict)  # what the last replay timed approximately
    # per rank, its cuDNN RNN calls: record index -> (name, layers and directions, time steps of all of them)
    rnn_calls: list[dict[int, tuple[str, int, int]]] = field(default_factory=list)
    # per rank, the start-up hook's samples of its CPU (maya/_hook/_maya_pace.py; () where there are none)
    pace_samples: list[Sequence[Sequence[int]]] = field(default_factory=list)
    # per rank, its steady steps (trace_steps; None where it has none)
    found: list[tuple[Steps, list[int]] | None] = field(default_factory=list)
    # per rank, its time waiting for a CPU over its time on one in its steady steps (maya.cpu_sharing)
    cpu_waiting: list[float] = field(default_factory=list)
    ranks_on_cpu: list[int] = field(default_factory=list)  # per rank, the ranks that shared its CPU (with it)
    cpu_delay_factors: list[float] = field(default_factory=list)  # per rank, cpu_sharing.delay_factor of the two

    @property
    def approximated(self) -> dict[str, int]:
        """Everything this job's prediction rests on that was only approximated, by name and count."""
        both = add_counts(dict(self.traced_approximations), self.replay_approximations)
        return dict(sorted(both.items()))

    @cached_property
    def first_shapes(self) -> list[npt.NDArray[np.int8]]:
        """Per rank, its GEMMs of a shape new to it (maya.predictor.replay.host.first_gemm_shapes)."""
        return [first_gemm_shapes(t) for t in self.traces]

    @property
    def host_probe_ns(self) -> float | None:
        """The emulating CPU's speed, as maya.cpu_probe read it before the run (None: not read)."""
        return self.summary.get("host_probe_ns")

    def replay(self, host: HostModel, durations: list[dict[int, float]] | None = None) -> list[RankResult]:
        """Replay on ``host``, its slowdown rescaled to the CPU this job was emulated on (``durations``:
        the device operations' times, default this job's)."""
        host = host.on_cpu(self.host_probe_ns)
        model = collective_model(self.gpu, self.gpus_per_node)
        per_node = self.gpus_per_node

        self.collective_ns.clear()
        self.replay_approximations.clear()

        def collective_ns(op: int, nbytes: float, members: int) -> float:
            if op not in R.NCCL_OPS:  # a newer interposer's collective: timed as the commonest one, and said so
                what = f"NCCL op {op} timed as all_reduce"
                self.replay_approximations[what] = self.replay_approximations.get(what, 0) + 1
            c = Collective(R.NCCL_OPS.get(op, "all_reduce"), nbytes, members, max(1, math.ceil(members / per_node)))
            ns = model.seconds(c) * 1e9
            source = model.source(c)
            self.collective_ns[source] = self.collective_ns.get(source, 0.0) + ns
            return ns

        durations = self.durations if durations is None else durations
        rnn = [host.rnn_costs(self.rnn_calls[r] if self.rnn_calls else {}, len(t.records))
               for r, t in enumerate(self.traces)]
        extra = [host.new_shape_costs(f) + cost for f, (cost, _) in zip(self.first_shapes, rnn, strict=True)]
        try:
            return simulate(self.traces, durations, collective_ns, host_slowdown=host.delay_factor,
                            call_ns=host.priced_calls(), default_call_ns=host.default_call_ns, gap_scale=self.gap_scale,
                            launch_latency_ns=host.launch_latency_ns, launch_gap_ns=host.launch_gap_ns,
                            sharing=self.sharing, call_extra_ns=extra, paced=[p for _, p in rnn])
        except SimulationError as e:
            raise PredictError(str(e)) from None


def prepare(folder: Path, gpu: str, *, gpus_per_node: int | None = None, oracle: bool = False) -> Job:
    """Read the traces in ``folder`` and time their device operations on ``gpu``: with its
    estimators, or (``oracle``, a recorded run) with the measured times."""
    g = catalog.lookup(gpu)
    path = folder / "summary.json"
    summary = json.loads(path.read_text()) if path.is_file() else {}
    if summary.get("exit_code"):  # a run that crashed or ran out of memory has no training step to predict
        why = " (it ran out of memory)" if summary.get("out_of_memory") else ""
        raise PredictError(f"the emulated run in {folder} exited with code {summary['exit_code']}{why}; its output "
                           "says why. Fix the command and emulate again")
    traces = rank_traces(folder)
    per_node = gpus_per_node or int(traces[0].header["gpus_per_node"]) or 8
    durations: list[dict[int, float]] = []
    weights: dict[str, float] = {}
    estimated: list[set[int]] = []
    labels: list[list[str]] = []
    rnn_calls: list[dict[int, tuple[str, int, int]]] = []
    est = None if oracle else _estimators(g.name)
    for t in traces:
        ops = device_ops(t)
        names = [""] * len(t.records)
        for i, op in ops:
            names[i] = op.name
        labels.append(names)
        rnn_calls.append({i: (op.name, *time_steps(op)) for i, op in ops if is_rnn(op)})
        if est is None:
            durations.append({i: float(m.busy_ns) for i, m in measured(t).items()})
            estimated.append(set())
            continue
        work = [(i, op) for i, op in ops if op.kind != int(Kind.COLL)]
        found = est.estimate_many([op for _, op in work])
        durations.append({i: e.ns for (i, _), e in zip(work, found, strict=True)})
        estimated.append({i for (i, _), e in zip(work, found, strict=True) if e.confidence != "measured"})
        for e in found:
            weights[e.confidence] = weights.get(e.confidence, 0.0) + e.ns
    samples = [_pace_samples(folder, t) for t in traces]
    steady = [_steady_steps(t) for t in traces]
    waiting = [cpu_sharing.waiting(s, *_steady_span(t, f)) if f else 0.0
               for s, t, f in zip(samples, traces, steady, strict=True)]
    # Recorded host delays were measured on the server as they are; emulated ones are steadied, and undo
    # what ranks that outnumbered the emulating CPUs did to each other's (a record has neither samples nor
    # emulating CPUs: its factors are 1).
    cpus = int(summary.get("emulating_cpus") or 0)
    sharing = [cpu_sharing.ranks_on_cpu(r, len(traces), cpus) for r in range(len(traces))]
    factors = [cpu_sharing.delay_factor(w, k) for w, k in zip(waiting, sharing, strict=True)]
    scale = [np.ones(len(t.records)) for t in traces] if oracle else quiet_gap_scales(traces, factors)
    # Measured durations already hold what sharing the GPU with NCCL cost them.
    traced: dict[str, int] = {}
    for t in traces:
        add_counts(traced, approximated_calls(t))
    return Job(g, folder, traces, durations, labels, weights, estimated, per_node, scale, summary,
               {} if oracle else sharing_factors(g), traced_approximations=traced, rnn_calls=rnn_calls,
               pace_samples=samples, found=steady, cpu_waiting=waiting, ranks_on_cpu=sharing,
               cpu_delay_factors=factors)


def predict_folder(folder: Path, gpu: str, *, gpus_per_node: int | None = None, oracle: bool = False,
                   timeline: Path | None = None, host: HostModel | None = None,
                   probe_ns: float | None = None) -> Prediction:
    """Predict from the traces in ``folder`` (an emulated run; or, with ``oracle``, a recorded one).

    ``host``: the server's host model (default: the GPU's calibrated one; with ``oracle``, the
    recorded host delays and call durations as they are, which were measured on the server).
    ``probe_ns``: the emulating CPU's probe reading to take in place of the run's own (another run's on the
    same machine: :func:`predict_asked`)."""
    job = prepare(folder, gpu, gpus_per_node=gpus_per_node, oracle=oracle)
    if probe_ns is not None:
        job.summary["host_probe_ns"] = probe_ns
    g, traces = job.gpu, job.traces
    if host is None:
        host = host_model(g.name).as_recorded() if oracle else host_model(g.name, ranks=world_size(traces))
    results = job.replay(host)
    try:
        steps, records = job.found[0] or trace_steps(traces[0])
    except ValueError as e:
        hint = "" if isinstance(e, StepsDiffer) else "; run the training loop for at least 3 steps"
        raise PredictError(f"{e}{hint}") from None
    st = step_time(traces[0], results[0], steps, records)
    collectives = sum(job.collective_ns.values()) or 1.0
    collective_models = {k: v / collectives for k, v in sorted(job.collective_ns.items())}
    approximated = job.approximated

    def elasticity(host: HostModel, durations: list[dict[int, float]] | None = None) -> float:
        """How much the step follows a 10% change (d log step / d log change)."""
        step = median_step_s(job.replay(host, durations)[0], steps, records)
        return max(0.0, math.log(step / st.step_s) / math.log(1 + NUDGE)) if st.step_s > 0 and step > 0 else 0.0

    nudged = [{i: ns * (1 + NUDGE) if i in est else ns for i, ns in d.items()}
              for d, est in zip(job.durations, job.estimated, strict=True)]
    rnn_nudged = {name: (a * (1 + NUDGE), b * (1 + NUDGE), c * (1 + NUDGE)) for name, (a, b, c) in
                  host.rnn_call_ns.items()}
    sensitivity = {"host": elasticity(replace(host, slowdown=host.slowdown * (1 + NUDGE))),
                   "rnn_host": elasticity(replace(host, rnn_call_ns=rnn_nudged))
                   if rnn_nudged and any(job.rnn_calls) else 0.0,
                   "estimated": elasticity(host, nudged) if any(job.estimated) else 0.0}
    if timeline is not None:
        write_timeline(timeline, traces, results, job.labels)
    total = sum(job.weights.values()) or 1.0
    return Prediction(g.name, st.step_s, st.steps, st.breakdown, _peaks(job.summary, traces),
                      g.memory_bytes - g.reserved_bytes, {k: v / total for k, v in sorted(job.weights.items())},
                      collective_models=collective_models, approximated=approximated, sensitivity=sensitivity,
                      device_values=_rank0(job.summary).get("device_values") or {},
                      first_buckets_bytes=_first_buckets(job.summary, traces), steady_pace_ns=tuple(
                          steady_pace(t, s, f) if s and f else 0 for t, s, f in zip(traces, job.pace_samples, job.found, strict=True)),
                      cpu_waiting=tuple(job.cpu_waiting), cpu_delay_factors=tuple(job.cpu_delay_factors),
                      host_probe_ns=job.host_probe_ns, steps_work_s=st.work)


def predict_median(folders: Sequence[Path], gpu: str, *, gpus_per_node: int | None = None,
                   timeline: Path | None = None, host: HostModel | None = None,
                   known: dict[Path, Prediction] | None = None) -> Prediction:
    """The prediction of median step time over several emulations of one job (the lower of the
    two middle ones for an even count; its timeline written), with each one's step time in
    ``emulations_s`` (``known``: folders already predicted).  Why: one emulating process in a few
    runs every host delay of the job 20-90% slow while the probe before it reads as usual
    (docs/emulating-machine.md)."""
    if not folders:
        raise PredictError("no emulation to predict from")
    known = known or {}
    runs = [(known.get(f) or predict_folder(f, gpu, gpus_per_node=gpus_per_node, host=host), f) for f in folders]
    best, folder = sorted(runs, key=lambda run: run[0].step_time_s)[(len(runs) - 1) // 2]
    if timeline is not None:
        best = predict_folder(folder, gpu, gpus_per_node=gpus_per_node, host=host, timeline=timeline,
                              probe_ns=best.host_probe_ns)
    return replace(best, emulations_s=tuple(p.step_time_s for p, _ in runs))


def slow_phase(p: Prediction, quickest: float | None) -> bool:
    """Whether a rank's samples of the Python yardstick in its steady steps read ``SLOW_PHASE`` times slower than
    ``quickest`` (the question's quickest reading): its steady steps ran in one of the CPU's slow phases."""
    return quickest is not None and any(ns > SLOW_PHASE * quickest for ns in p.steady_pace_ns)


def quickest_pace(predictions: Iterable[Prediction]) -> float | None:
    """The quickest steady steps' reading of the Python yardstick in any rank of these emulations; None: none."""
    return min((ns for p in predictions for ns in p.steady_pace_ns if ns > 0), default=None)


def emulations_wanted(host_sensitivity: float, repeat: int | None = None) -> int:
    """How many emulations a question asks for at most: ``repeat`` where given, else ``AUTO_REPEAT`` for a step
    that follows its host ``HOST_SENSITIVE`` or more and one for the others."""
    return repeat or (AUTO_REPEAT if host_sensitivity >= HOST_SENSITIVE else 1)


def agree(step_times: Sequence[float]) -> bool:
    """Whether two emulations' step times agree within ``AGREE``: the median of a third would lie between them."""
    return len(step_times) == 2 and min(step_times) > 0 and max(step_times) <= (1 + AGREE) * min(step_times)


def predict_asked(first: Path, gpu: str, further: Callable[[int], Path], *, repeat: int | None = None,
                  gpus_per_node: int | None = None, timeline: Path | None = None,
                  known: Prediction | None = None, usual: UsualPace | None = None) -> Prediction:
    """``maya predict``'s answer from the emulation in ``first`` (``known``: its prediction, made already):
    from ``repeat`` emulations where given; else from this one where the step follows its host less than
    ``HOST_SENSITIVE``, and otherwise from the median of up to ``AUTO_REPEAT``, stopping at two that agree
    within ``AGREE``.  Without ``repeat``, an emulation that ran in one of the emulating CPU's slow phases
    (:func:`slow_phase`) does not count, and another is made in its place (``SPARE`` at most; where every one
    ran slow, all are kept).  Of several, one whose probe read slow is replayed with the others' middle reading.
    ``usual``: this machine's remembered readings (:mod:`maya.usual_pace`): a host-sensitive question whose
    quickest reading is ``SLOW_PHASE`` times the usual one ran every emulation in a slow phase, and asks for
    its spares too; the question's readings are added to them.
    ``further(k)`` makes the k-th further emulation and returns its folder (it raises to stop the question)."""
    p = known or predict_folder(first, gpu, gpus_per_node=gpus_per_node, timeline=timeline)
    wanted = emulations_wanted(p.sensitivity.get("host", 0.0), repeat)
    runs = {first: p}
    usual_ns = usual.reading() if usual is not None and repeat is None and wanted > 1 else None

    def over_usual() -> float | None:
        quickest = quickest_pace(runs.values())
        return quickest / usual_ns if quickest and usual_ns else None

    def calm() -> list[Path]:
        if repeat is not None:
            return list(runs)
        quickest = quickest_pace(runs.values())
        if quickest and usual_ns and quickest > SLOW_PHASE * usual_ns:  # every one so far ran in a slow phase
            return []
        return [f for f, run in runs.items() if not slow_phase(run, quickest)]

    def steady_probes() -> None:
        """An emulation whose probe read ``SLOW_PHASE`` times the question's quickest reading was probed in a slow
        phase (a probe there reads up to 1.7 times slow, and would shrink its emulation's delays by as much):
        it is replayed with the middle reading of the others, the same machine's minutes apart.  Not one whose
        steady steps ran in a slow phase too: its probe and its delays are slow alike, and their ratio holds."""
        readings = sorted(r.host_probe_ns for r in runs.values() if r.host_probe_ns)
        quick = [ns for ns in readings if ns <= SLOW_PHASE * readings[0]]
        quickest = quickest_pace(runs.values())
        for f, run in runs.items():
            if run.host_probe_ns and run.host_probe_ns > SLOW_PHASE * readings[0] and not slow_phase(run, quickest):
                runs[f] = predict_folder(f, gpu, gpus_per_node=gpus_per_node, probe_ns=quick[(len(quick) - 1) // 2])

    while True:
        steady_probes()
        kept = calm()
        if len(kept) >= wanted or len(runs) >= wanted + SPARE or (repeat is None and agree(
                [runs[f].step_time_s for f in kept])):
            break
        folder = further(len(runs))
        runs[folder] = predict_folder(folder, gpu, gpus_per_node=gpus_per_node)
    if usual is not None:
        usual.remember({f"{f}#{r}": ns for f, run in runs.items() for r, ns in enumerate(run.steady_pace_ns)})
    if len(runs) == 1:
        return replace(p, pace_over_usual=over_usual())
    kept = kept or list(runs)
    slow = tuple(run.step_time_s for f, run in runs.items() if f not in kept)
    return replace(predict_median(kept, gpu, gpus_per_node=gpus_per_node, timeline=timeline, known=runs),
                   slow_phase_s=slow, pace_over_usual=over_usual())


_LOADED: dict[str, estimate.Estimators] = {}


@lru_cache(maxsize=1)
def _uncertainty() -> dict[str, Any]:
    return dict(json.loads(resources.files("maya.predictor").joinpath("uncertainty.json").read_text()))


def _estimators(gpu: str) -> estimate.Estimators:
    """One load per GPU and process (reading the cached fit takes seconds)."""
    if gpu not in _LOADED:
        _LOADED[gpu] = estimate.load(gpu)
    return _LOADED[gpu]


def _rank0(summary: dict[str, Any]) -> dict[str, Any]:
    return next((r for r in summary.get("ranks", []) if r.get("rank") == 0), {})


def _steady_steps(trace: Trace) -> tuple[Steps, list[int]] | None:
    try:
        return trace_steps(trace)
    except ValueError:  # no steady steps (NoIterations), or steps that differ: predict_folder says which
        return None


def _steady_span(trace: Trace, found: tuple[Steps, list[int]]) -> tuple[int, int]:
    """The trace clock's span of the steady steps ``found``."""
    steps, records = found
    t = trace.records["t_ns"]
    return int(t[records[steps.starts[0]]]), int(t[records[steps.end - 1]])


def steady_pace(trace: Trace, samples: Sequence[Sequence[int]],
                found: tuple[Steps, list[int]] | None = None) -> int:
    """The median of the Python yardstick's ``samples`` ([trace clock ns, chunk ns, ...], maya/_hook/_maya_pace.py)
    taken during the rank's steady steps (``found``: :func:`trace_steps` of the trace, where already known).
    Steady steps shorter than ``MIN_SAMPLES`` samples (a small job's few steps: a tenth of a second) take the
    ``MIN_SAMPLES`` taken nearest them, the CPU's phases lasting seconds or more; 0 where there are fewer."""
    try:
        lo, hi = _steady_span(trace, found or trace_steps(trace))
    except NoIterations:
        return 0
    nearest = sorted(samples, key=lambda s: max(lo - int(s[0]), int(s[0]) - hi, 0))
    inside = [int(s[1]) for s in nearest if lo <= s[0] <= hi]
    chosen = sorted(inside if len(inside) >= MIN_SAMPLES else [int(s[1]) for s in nearest[:MIN_SAMPLES]])
    return chosen[len(chosen) // 2] if len(chosen) >= MIN_SAMPLES else 0


def _pace_samples(folder: Path, trace: Trace) -> Sequence[Sequence[int]]:
    """The start-up hook's samples of the rank's CPU, from its torch report (() where there are none)."""
    path = folder / f"rank{int(trace.header['rank'])}.torch.json"
    try:
        return (json.loads(path.read_text()).get("cpu_pace") or {}).get("samples") or ()
    except (OSError, ValueError, AttributeError):
        return ()


def _first_buckets(summary: dict[str, Any], traces: list[Trace]) -> list[int]:
    """Per rank, DDP's first buckets (summary.json, else the traces): how much higher a real run's peak can be."""
    ranks = summary.get("ranks", []) if summary else []
    if ranks and all("first_buckets_bytes" in r for r in ranks):
        return [int(r["first_buckets_bytes"] or 0) for r in ranks]
    return [first_buckets_bytes(t) for t in traces]


def _peaks(summary: dict[str, Any], traces: list[Trace]) -> list[int]:
    """Peak device memory per rank: the caching allocator's reservation (summary.json), else the
    trace's MALLOC records."""
    if summary:
        ranks = summary.get("ranks", [])
        return [int(r.get("peak_reserved_bytes") or 0) for r in ranks]
    peaks = []
    for t in traces:
        sel = t.of_kind(Kind.MALLOC)
        peaks.append(int(np.max(R.MALLOC_IN_USE.of(t.records["a"][sel]))) if len(sel) else 0)
    return peaks
