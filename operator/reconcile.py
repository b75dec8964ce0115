"""One reconciliation of a TrainingPlan: from the Jobs and pods that exist to the Jobs to create and the status.

It is a pure function of what it is given (the plan, its Jobs, their pods),
so an operator restarted mid-plan computes the same thing again and adopts
the Jobs it finds: Jobs are named after the emulation they run
(:func:`maya.operator.jobs.request_id`), a finished Job's result is read back
from its pod, and a Job the current spec no longer needs (the spec changed)
is abandoned.  A Job of an earlier generation whose emulation is still
needed counts as reused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from maya.operator.jobs import (
    ANNOTATION_GENERATION,
    ANNOTATION_REQUEST,
    LABEL_PLAN,
    emulation_job,
    pod_result,
    request_from_json,
    request_id,
)
from maya.operator.settings import Settings
from maya.plan.choose import choose
from maya.plan.search import Request, Search, skipped_outcomes
from maya.plan.spec import Plan
from maya.plan.status import condition, status


@dataclass
class Step:
    """What one reconciliation decided."""

    status: dict[str, Any]
    create: list[dict[str, Any]] = field(default_factory=list)  # Job manifests
    delete: list[str] = field(default_factory=list)  # Job names (abandoned work)
    finished: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (Job name, result) newly read
    settled: bool = False


def _pods_by_job(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        job = labels.get("job-name") or labels.get("batch.kubernetes.io/job-name")
        if job:
            out.setdefault(job, []).append(pod)
    return out


def reconcile(plan: Plan, meta: dict[str, Any], jobs: list[dict[str, Any]], pods: list[dict[str, Any]],
              settings: Settings) -> Step:
    """``meta``: the plan's metadata (name, namespace, uid, generation); ``jobs`` and ``pods``: those labelled
    with the plan (others are ignored)."""
    generation = int(meta.get("generation") or 1)
    search = Search(plan)
    mine = [j for j in jobs if ((j.get("metadata") or {}).get("labels") or {}).get(LABEL_PLAN) == meta["name"]]
    mine.sort(key=lambda j: (j["metadata"].get("creationTimestamp") or "", j["metadata"]["name"]))
    by_job = _pods_by_job(pods)
    step = Step(status={})
    wanted_ids: dict[str, Request] = {}
    running = 0
    waiting_on_predictor = False
    for job in mine:
        name = job["metadata"]["name"]
        try:
            req = request_from_json(job["metadata"]["annotations"][ANNOTATION_REQUEST])
        except (KeyError, ValueError, TypeError):
            step.delete.append(name)
            continue
        if (req.program, req.gpu) not in _possible(search) or job_gone(job):
            step.delete.append(name)
            continue
        wanted_ids[request_id(plan, req)] = req
        result = next((r for pod in by_job.get(name, []) if (r := pod_result(pod)) is not None), None)
        if result is None:
            search.running(req)
            running += 1
            waiting_on_predictor |= any(_train_done(p) for p in by_job.get(name, []))
            continue
        earlier = job["metadata"].get("annotations", {}).get(ANNOTATION_GENERATION) != str(generation)
        search.record(req, result["result"], result.get("predictions") or {}, key=name, reused=earlier)
        step.finished.append((name, result))
    if running < settings.max_emulation_pods:
        for req in search.next(settings.max_emulation_pods - running):
            step.create.append(emulation_job(plan, meta, generation, req, settings))
            running += 1
    if search.finished() and not step.create and running == 0:
        choice = choose(plan, search.outcomes() + skipped_outcomes(search.skipped))
        step.status = status(choice, searched=len(search.candidates) + len(search.skipped),
                             emulations={**search.emulations, "needed": search.needed()}, search=search.method,
                             generation=generation)
        step.settled = True
        return step
    phase = "Predicting" if waiting_on_predictor else ("Emulating" if running else "Pending")
    done = search.completed()
    step.status = {
        "phase": phase, "observedGeneration": generation, "search": search.method,
        "searchedCandidates": len(search.candidates) + len(search.skipped),
        "emulations": {**search.emulations, "needed": search.needed(), "running": running},
        "conditions": [condition("Recommended", None, phase, f"{done} of {search.needed()} emulation(s) done, "
                                 f"{running} running", generation)],
    }
    return step


def _possible(search: Search) -> set[tuple[Any, str]]:
    """Every (program, GPU) this plan's search could ask for: a Job outside it belongs to an older spec."""
    return {(search.program[c], c.gpu) for c in search.candidates}


def _train_done(pod: dict[str, Any]) -> bool:
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if c.get("name") == "train" and "terminated" in (c.get("state") or {}):
            return True
    return False


def job_gone(job: dict[str, Any]) -> bool:
    return bool((job.get("metadata") or {}).get("deletionTimestamp"))
