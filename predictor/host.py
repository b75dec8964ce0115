"""The GPU server's host, relative to the CPU that emulated the job.

The replay spaces a rank's calls by the host delays measured under
emulation: Python, PyTorch's dispatcher and the caching allocator running on
the emulating CPU, with the CUDA libraries replaced by the interposer's quick
stand-ins.  On the GPU server the same work runs on another CPU, and every
call also pays the real driver's and libraries' host cost.  Measured on the
example models (``benchmarks/host_calibration.py``), the server's host time
per step is a near-constant multiple of the emulated host delays, so one
factor per catalog machine, ``slowdown``, stands for both: host delays are
multiplied by it.  Its residual error is in
``benchmarks/results/host_calibration.json``.

The factor refers to the machine class it was calibrated on (the CI-class
emulating CPU named in ``host_calibration.json``); a GPU with no calibration
keeps the nominal per-call costs of :data:`maya.predictor.simulator.CALL_NS`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

import numpy as np

from maya.predictor.iterations import trace_steps
from maya.predictor.simulator import CALL_NS, DEFAULT_CALL_NS, replay_order
from maya.predictor.trace import Trace

CALIBRATION = Path(__file__).with_name("host_calibration.json")


@dataclass(frozen=True)
class HostModel:
    """How the replay times a rank's host: delays x ``slowdown`` plus ``call_ns`` per call by kind
    (``default_call_ns`` for the other kinds)."""

    slowdown: float = 1.0
    call_ns: Mapping[int, float] = field(default_factory=lambda: dict(CALL_NS))
    default_call_ns: float = DEFAULT_CALL_NS
    source: str = "nominal call costs, no calibration for this GPU"


def host_model(gpu: str, path: Path = CALIBRATION) -> HostModel:
    """The calibrated host of catalog machine ``gpu``, else the nominal one."""
    machines = json.loads(path.read_text()).get("machines", {}) if path.is_file() else {}
    m = machines.get(gpu)
    if not m:
        return HostModel()
    return HostModel(float(m["slowdown"]), {}, 0.0, f"calibrated on {m['configs']} measured configurations")


def step_host_delays_ns(trace: Trace) -> list[float]:
    """Host delay per steady step: the gaps between one call's end and the next call's start, all
    threads of the rank in time order (as the replay takes them), summed over each steady step."""
    steps, records = trace_steps(trace)
    order = replay_order(trace)
    t = trace.records["t_ns"][order].astype(np.float64)
    end = t + trace.records["dur_ns"][order]
    gaps = np.maximum(t[1:] - end[:-1], 0.0)
    bounds = [trace.records["t_ns"][records[s]] for s in steps.starts]
    after = steps.starts[-1] + steps.period
    if after < len(records):
        bounds.append(trace.records["t_ns"][records[after]])
    pos = np.searchsorted(t[1:], bounds, side="left")
    return [float(gaps[a:b].sum()) for a, b in zip(pos[:-1], pos[1:], strict=True)]


def fit_slowdown(measured_s: Sequence[float], emulated_s: Sequence[float]) -> float:
    """The factor from pairs of (server host time, emulated host delay) per step: the median ratio,
    which one configuration stalled by its own noise cannot move far."""
    if not measured_s or len(measured_s) != len(emulated_s):
        raise ValueError("need one emulated host delay per measured host time, at least one pair")
    return median(m / e for m, e in zip(measured_s, emulated_s, strict=True))
