"""The plan's status object: what ``maya plan --json`` prints and the operator writes into ``status``.

Field names are camelCase as in Kubernetes; conditions follow the API
conventions (``type``, ``status``, ``reason``, ``message``,
``lastTransitionTime``, ``observedGeneration``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from maya.plan.choose import Choice, Row
from maya.plan.evaluate import usable_bytes

# How many candidates the status keeps (the best first): a custom resource must stay small.
STATUS_CANDIDATES = 20


def candidate_json(row: Row) -> dict[str, Any]:
    c, o = row.candidate, row.outcome
    out: dict[str, Any] = {
        "gpu": c.gpu, "gpus": c.shape.gpus, "gpusPerNode": c.shape.gpus_per_node, "nodes": c.shape.nodes, "microBatch": c.micro_batch,
        "gradientAccumulation": c.accumulation, "knobs": dict(c.knobs),
        "fits": None if o.status in ("failed", "pruned") and o.peak_bytes is None else o.status != "oom",
        "stepTimeSeconds": row.step_s, "stepTimeSecondsLow": row.low_s, "stepTimeSecondsHigh": row.high_s,
        "peakMemoryBytes": o.peak_bytes, "capacityBytes": usable_bytes(c.gpu),
        "costPerStepUSD": row.cost_per_step, "meetsDeadline": row.meets_deadline,
        "status": o.status, "reason": o.reason,
    }
    if row.deadline_s is not None and row.cost_per_step is not None and row.step_s:
        out["deadlineSeconds"] = row.deadline_s
        out["deadlineCostUSD"] = row.cost_per_step * row.deadline_s / row.step_s
    if o.emulation:
        out["emulation"] = o.emulation
    if len(times := o.prediction.get("emulationsStepTimeSeconds") or []) > 1:
        out["emulationsStepTimeSeconds"] = times
    if aside := o.prediction.get("emulationsSlowPhaseStepTimeSeconds"):
        out["emulationsSlowPhaseStepTimeSeconds"] = aside
    if over := o.prediction.get("paceOverUsual"):
        out["paceOverUsual"] = over
    if o.device_values:
        out["deviceValues"] = o.device_values
    return out


def condition(type_: str, status: bool | None, reason: str, message: str, generation: int | None = None,
              now: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type_, "status": {True: "True", False: "False", None: "Unknown"}[status],
                           "reason": reason, "message": message,
                           "lastTransitionTime": now or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def _rank(row: Row, choice: Choice) -> tuple[float, float]:
    order = {"ok": 0, "oom": 1, "failed": 2, "pruned": 3}
    if row is choice.recommendation:
        return (-1.0, 0.0)
    return (order.get(row.outcome.status, 4) + (0 if row.eligible else 0.5), row.cost_per_step or float("inf"))


def status(choice: Choice, *, searched: int, emulations: dict[str, int], search: str,
           generation: int | None = None, limit: int | None = STATUS_CANDIDATES) -> dict[str, Any]:
    rows = sorted(choice.rows, key=lambda r: _rank(r, choice))
    failed_all = [r for r in choice.rows if r.outcome.status == "failed"]
    out: dict[str, Any] = {
        "phase": "Recommended" if choice.recommendation else "Failed",
        "recommendation": candidate_json(choice.recommendation) if choice.recommendation else None,
        "runnerUp": candidate_json(choice.runner_up) if choice.runner_up else None,
        "ties": [candidate_json(r) for r in choice.ties],
        "candidates": [candidate_json(r) for r in (rows if limit is None else rows[:limit])],
        "searchedCandidates": searched,
        "search": search,
        "emulations": emulations,
    }
    if generation is not None:
        out["observedGeneration"] = generation
    if choice.recommendation:
        rec = choice.recommendation
        msg = f"{rec.candidate.label()}: {rec.step_s:.4g} s per step, ${rec.cost_per_step:.4g} per step"
        recommended = condition("Recommended", True, "Recommended", msg, generation)
    else:
        reason, message = choice.problem or ("NoCandidates", "nothing to recommend")
        recommended = condition("Recommended", False, reason, message, generation)
    if failed_all:
        first = failed_all[0].outcome.reason
        degraded = condition("Degraded", True, "EmulationFailed",
                             f"{len(failed_all)} candidate(s) failed under emulation: {first}", generation)
    else:
        degraded = condition("Degraded", False, "AllEmulationsSucceeded", "no emulation failed", generation)
    out["conditions"] = [recommended, degraded]
    return out
