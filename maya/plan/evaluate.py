"""What one emulation says about each GPU: a prediction, or out of memory, or the script's failure.

An emulation runs on one GPU of an architecture (the largest of the plan's);
:func:`predict_gpus` re-estimates its trace for every GPU of that
architecture, and :func:`memory_verdict` says where its peak memory is a
verdict on its own and where it comes so close to a smaller GPU's capacity
that only an emulation on that GPU can tell (the caching allocator frees and
retries near its limit).  :func:`predict_gpus` is what an emulation pod's
predictor runs in the cluster, so its output is small JSON.

A step that follows its host a tenth or more moves with one emulating
process's noise (``docs/emulating-machine.md``): :func:`runs_wanted` asks for
up to two more emulations of such a program, as ``maya predict`` does (no
third where the second agrees with the first, :func:`settled`), and
:func:`median_prediction` keeps their median, so candidates are not ranked
on one emulation's noise.  A run whose steady steps, or probe, fell in one of
the emulating CPU's slow phases does not count (:func:`slow_phase_runs`), as
in ``maya predict``, and another is made in its place.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from maya import catalog
from maya.usual_pace import this_node

# Above this share of a GPU's usable memory, an emulation on a larger GPU no longer tells whether it fits.
NEAR_CAPACITY = 0.90
# How many program lines of each kind of device-value read a plan keeps (a custom resource must stay small).
DEVICE_VALUE_LINES = 3


@dataclass
class Outcome:
    """A candidate's verdict; ``prediction`` holds the predictor's small JSON when it ran."""

    status: str  # ok | oom | failed | pruned
    reason: str = ""
    prediction: dict[str, Any] = field(default_factory=dict)
    peak_bytes: int | None = None
    emulation: str = ""
    device_values: dict[str, Any] = field(default_factory=dict)  # the run result's deviceValues



def usable_bytes(gpu: str) -> int:
    g = catalog.lookup(gpu)
    return g.memory_bytes - g.reserved_bytes


def architecture(gpu: str) -> str:
    """GPUs of one compute capability run the same kernels: one trace serves them all."""
    return "sm_" + str(catalog.lookup(gpu).fields["cc"]).replace(".", "")


def run_result(folder: Path, exit_code: int, log_tail: str) -> dict[str, Any]:
    """How an emulation ended, from its ``summary.json``: ``ok``, ``oom`` or ``failed`` with the script's error."""
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        summary = {}
    ranks = summary.get("ranks", [])
    peak_reserved = max((int(r.get("peak_reserved_bytes") or 0) for r in ranks), default=0)
    peak_allocated = max((int(r.get("peak_allocated_bytes") or 0) for r in ranks), default=0)
    # a real run's peak can be this much higher: DDP's first buckets, held by torch's NCCL watchdog (maya.summary)
    held = max((int(r.get("first_buckets_bytes") or 0) for r in ranks), default=0)
    result: dict[str, Any] = {"exitCode": exit_code, "peakReservedBytes": peak_reserved,
                              "peakAllocatedBytes": peak_allocated, "gpu": summary.get("gpu", {}).get("name"),
                              "node": this_node()}
    if held:
        result["firstBucketsBytes"] = held
    if summary.get("out_of_memory"):
        short = max((int(r.get("oom_short_by_bytes") or 0) for r in ranks), default=0)
        request = max((int(r.get("oom_request_bytes") or 0) for r in ranks), default=0)
        result.update(status="oom", shortByBytes=short, requestBytes=request)
    elif exit_code != 0 or not ranks:
        unsupported = summary.get("unsupported_apis") or []
        why = f"unsupported CUDA API(s) {', '.join(unsupported)}; " if unsupported else ""
        result.update(status="failed", error=f"{why}the script exited with code {exit_code}: {_last_error(log_tail)}")
    else:
        result["status"] = "ok"
    values = device_values(ranks)
    if values:
        result["deviceValues"] = values
    return result


def device_values(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Rank 0's data-dependent reads (``summary.json``'s ``device_values``: the expected values given,
    the reads that saw zeros), a few program lines of each; {} when there were none.  Why a plan
    carries them: the prediction holds for that data, and work sized by zeros may be missing."""
    values = (ranks[0].get("device_values") or {}) if ranks else {}
    out = {kind: list(values.get(kind) or [])[:DEVICE_VALUE_LINES] for kind in ("assumed", "unknown")}
    return out if out["assumed"] or out["unknown"] else {}


def _last_error(log: str) -> str:
    """The script's own error: its traceback's last lines, not Maya's summary."""
    lines = [ln for ln in log.strip().splitlines() if ln.strip() and not ln.startswith("maya: ")
             and not ln.startswith("  rank ")]
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback"):
            return "\n".join(lines[i:])[-1500:]
    return "\n".join(lines[-8:])[-1500:] or "(no output)"


def first_buckets(result: dict[str, Any]) -> int:
    """How much higher than emulated a real run's peak can be: DDP's first buckets (``firstBucketsBytes``)."""
    return int(result.get("firstBucketsBytes") or 0)


def memory_verdict(result: dict[str, Any], gpu: str, *, emulated_here: bool = False) -> str:
    """``fits``, ``oom`` or ``near`` (emulate on ``gpu`` itself) for a run emulated on ``gpu`` itself
    (``emulated_here``) or on a GPU at least as large.  A run that completed on ``gpu`` itself fits unless
    the runs that still hold DDP's first buckets (``firstBucketsBytes``) need more than it has."""
    usable = usable_bytes(gpu)
    held = first_buckets(result)
    if result["status"] == "oom" or result["peakAllocatedBytes"] + held > usable:
        return "oom"
    if emulated_here or result["peakReservedBytes"] + held <= NEAR_CAPACITY * usable:
        return "fits"
    return "near"


def peak_bytes(result: dict[str, Any]) -> int | None:
    """The peak a real run can reserve: the emulated one, and DDP's first buckets where the watchdog holds them."""
    peak = int(result.get("peakReservedBytes") or 0)
    return peak + first_buckets(result) if peak else None


def predict_gpus(folder: Path, gpus: Sequence[str], gpus_per_node: int) -> dict[str, dict[str, Any]]:
    """The prediction of the emulation in ``folder`` on each of ``gpus``, as small JSON objects."""
    from maya.predict import PredictError, predict_folder

    out: dict[str, dict[str, Any]] = {}
    for gpu in gpus:
        try:
            p = predict_folder(folder, gpu, gpus_per_node=gpus_per_node)
        except PredictError as e:
            out[gpu] = {"error": str(e)}
            continue
        js = p.to_json()
        out[gpu] = {"stepTimeSeconds": p.step_time_s, "stepTimeSecondsLow": js.get("step_time_low_s"),
                    "stepTimeSecondsHigh": js.get("step_time_high_s"), "steps": list(p.steps_s),
                    "peakMemoryBytes": max(p.peak_memory_high_bytes, default=0), "breakdown": p.breakdown,
                    "hostSensitivity": round(p.sensitivity.get("host", 0.0), 4),
                    "steadyPaceNs": [int(ns) for ns in p.steady_pace_ns], "hostProbeNs": p.host_probe_ns}
    return out


def runs_wanted(predictions: dict[str, dict[str, Any]], repeats: int | None) -> int:
    """Emulations of one program on one GPU at most: ``repeats`` where the plan sets it, else ``maya predict``'s
    rule for the GPU whose step follows its host most (:func:`maya.predict.emulations_wanted`)."""
    from maya.predict import emulations_wanted

    host = max((float(p.get("hostSensitivity") or 0.0) for p in predictions.values() if "error" not in p), default=0.0)
    return emulations_wanted(host, repeats)


def settled(runs: Sequence[dict[str, dict[str, Any]]]) -> bool:
    """Whether two runs' predictions (by GPU) agree within ``AGREE`` on every GPU: the median of a third would
    lie between them, so ``maya predict`` does not run it."""
    from maya.predict import agree

    return len(runs) == 2 and set(runs[0]) == set(runs[1]) and all(
        agree([float(r[gpu].get("stepTimeSeconds") or 0.0) for r in runs if "error" not in r[gpu]]) for gpu in runs[0])


def _predicted(predictions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A run's first prediction without an error (its CPU readings are the same for every GPU); {}: none."""
    return next((v for v in predictions.values() if "error" not in v), {})


def pace_readings(predictions: dict[str, dict[str, Any]]) -> list[int]:
    """A run's per-rank readings of the Python yardstick in its steady steps (``steadyPaceNs``; 0: not read)."""
    return [int(ns) for ns in _predicted(predictions).get("steadyPaceNs") or ()]


def slow_phase_runs(runs: Sequence[tuple[dict[str, Any], dict[str, dict[str, Any]]]],
                    usual: Callable[[str], float | None] | None = None) -> list[bool]:
    """Which of one program's runs (result, predictions by GPU) ran in one of the emulating CPU's slow phases, as
    ``maya predict`` judges them (``SLOW_PHASE`` in ``maya/predict.py``): a rank's Python yardstick in its steady
    steps (``steadyPaceNs``), or its probe (``hostProbeNs``), read that many times the quickest of the runs made
    on the same node; with ``usual`` (a node's usual reading, :mod:`maya.usual_pace`), every run of a node whose
    quickest reading is that many times the usual one.  Runs on other nodes, or on an unknown one, are not
    compared: their CPUs may differ."""
    from maya.predict import SLOW_PHASE

    def readings(predictions: dict[str, dict[str, Any]]) -> tuple[list[float], float]:
        return ([float(ns) for ns in pace_readings(predictions) if ns],
                float(_predicted(predictions).get("hostProbeNs") or 0.0))

    nodes = [str(result.get("node") or "") for result, _ in runs]
    read = [readings(predictions) for _, predictions in runs]
    usual_ns = {n: usual(n) for n in set(nodes) if n} if usual is not None else {}  # one store read a node
    out = []
    for node, (paces, probe) in zip(nodes, read, strict=True):
        same = [r for n, r in zip(nodes, read, strict=True) if n == node]
        quick_pace = min((ns for ps, _ in same for ns in ps), default=0.0)
        quick_probe = min((pr for _, pr in same if pr > 0), default=0.0)
        slow_node = bool((u := usual_ns.get(node)) and quick_pace > SLOW_PHASE * u)
        out.append(bool(node) and (any(ns > SLOW_PHASE * quick_pace for ns in paces)
                                   or (probe > 0 and probe > SLOW_PHASE * quick_probe) or slow_node))
    return out


def median_prediction(runs: Sequence[dict[str, Any]], slow: Sequence[dict[str, Any]] = (),
                      pace_over_usual: float | None = None) -> dict[str, Any]:
    """One GPU's prediction over several emulations of a program: the one of median step time (the lower
    middle for an even count), its interval taking their spread in place of one emulation's noise (as
    ``maya predict`` does), and each one's step time in ``emulationsStepTimeSeconds``; those of the runs set
    aside as made in a slow phase (``slow``) in ``emulationsSlowPhaseStepTimeSeconds``.  ``pace_over_usual``:
    every run read the yardstick that many times its node's usual pace (``paceOverUsual``), and the interval
    reaches down to the host's share at the usual pace, as ``maya predict``'s does."""
    from maya.predict import emulation_noise, slow_throughout_low

    ok = sorted((p for p in runs if "error" not in p and p.get("stepTimeSeconds")), key=lambda p: p["stepTimeSeconds"])
    aside = [float(p["stepTimeSeconds"]) for p in slow if "error" not in p and p.get("stepTimeSeconds")]
    if len(ok) < 2:
        one = dict(ok[0] if ok else runs[0])
        return one | ({"emulationsSlowPhaseStepTimeSeconds": aside} if aside else {})
    best = dict(ok[(len(ok) - 1) // 2])
    step = float(best["stepTimeSeconds"])
    times = [float(p["stepTimeSeconds"]) for p in ok]
    best["emulationsStepTimeSeconds"] = times
    if aside:
        best["emulationsSlowPhaseStepTimeSeconds"] = aside
    if best.get("stepTimeSecondsHigh"):
        single = float(best["stepTimeSecondsHigh"]) / step - 1
        noise = emulation_noise(float(best.get("hostSensitivity") or 0.0))
        half = math.hypot(math.sqrt(max(0.0, single**2 - noise**2)), (max(times) - min(times)) / 2 / step)
        best["stepTimeSecondsLow"], best["stepTimeSecondsHigh"] = step * max(0.0, 1 - half), step * (1 + half)
    if pace_over_usual:
        best["paceOverUsual"] = pace_over_usual
        low = step * max(0.0, slow_throughout_low(float(best.get("hostSensitivity") or 0.0), pace_over_usual))
        best["stepTimeSecondsLow"] = min(float(best.get("stepTimeSecondsLow") or step), low)
    return best
