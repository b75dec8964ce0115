"""The admission webhooks: ``mutate-jobs`` sizes a training job from its TrainingPlan, ``validate-jobs``
rejects one whose GPUs the plan predicts run out of memory.

A job opts in with the annotation ``maya.dev/plan: <name>`` (a plan of its namespace); jobs without it are
not handled. kopf serves each handler at ``POST /<handler id>``, so the webhook configurations point at
``/mutate-jobs`` and ``/validate-jobs``; one handler per webhook covers ``batch/v1`` Jobs, ``kubeflow.org/v1``
PyTorchJobs and ``trainer.kubeflow.org/v1alpha1`` TrainJobs through a resource-matching callable (a resource
must be served by the API server for kopf to accept its reviews).

Both fail open, as the VPA admission controller does: a missing plan, a plan not yet recommended, a job that
cannot take the recommendation or any error admits the job unchanged with a warning that ``kubectl`` shows.
Only the validating webhook's memory verdict denies (HTTP 422).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kopf

from maya import catalog
from maya.operator import index
from maya.operator.metrics import ADMISSIONS, HOURLY_SAVING
from maya.operator.settings import Settings
from maya.operator.sizing import (
    PLAN_ANNOTATION,
    RESIZE_ANNOTATION,
    Sizing,
    SizingError,
    job_annotations,
    memory_verdict,
    requested_shape,
    size,
)

MUTATE_ID = "mutate-jobs"
VALIDATE_ID = "validate-jobs"
# HTTP status of a rejection: the job's content cannot work as written.
REJECT_CODE = 422

RESOURCES = {
    ("batch", "v1", "jobs"): "Job",
    ("kubeflow.org", "v1", "pytorchjobs"): "PyTorchJob",
    ("trainer.kubeflow.org", "v1alpha1", "trainjobs"): "TrainJob",
}


def is_job_resource(resource: kopf.Resource) -> bool:
    return (resource.group, resource.version, resource.plural) in RESOURCES


def _kind(resource: kopf.Resource | None) -> str:
    return RESOURCES.get((resource.group, resource.version, resource.plural), "other") if resource else "other"


@dataclass(frozen=True)
class Admission:
    """One decision: ``result`` is the metric's label (patched, unchanged, allowed, rejected); ``warning`` goes
    back to the client; ``message`` is a rejection's reason; ``saving`` is USD per hour."""

    result: str
    warning: str = ""
    message: str = ""
    sizing: Sizing | None = None
    saving: float | None = None
    plan: str = ""


def price(gpu: str, plan: Mapping[str, Any], settings: Settings) -> float:
    """USD per GPU-hour: the plan's ``spec.prices``, else the operator's, else the catalog's default."""
    name = catalog.lookup(gpu).name
    for table in ((plan.get("spec") or {}).get("prices") or {}, settings.prices):
        if name in table:
            return float(table[name])
    return catalog.lookup(name).price_usd_per_hour


def _plan(job: Mapping[str, Any], plans: Mapping[index.PlanKey, Any]) -> tuple[str, str, dict[str, Any] | None]:
    namespace = str((job.get("metadata") or {}).get("namespace") or "")
    name = job_annotations(job).get(PLAN_ANNOTATION, "")
    return namespace, name, index.lookup(plans, namespace, name) if name else None


def _stale(plan: Mapping[str, Any]) -> bool:
    """The plan's spec moved on since its status was written (a new plan is under way)."""
    status, meta = plan.get("status") or {}, plan.get("metadata") or {}
    observed, generation = status.get("observedGeneration"), meta.get("generation")
    return observed is not None and generation is not None and observed != generation


def mutation(job: Mapping[str, Any], plans: Mapping[index.PlanKey, Any], settings: Settings) -> Admission:
    """What the mutating webhook does with ``job`` (an admission request's object)."""
    namespace, name, plan = _plan(job, plans)
    kind = str(job.get("kind"))
    ref = f"{namespace}/{name}"
    if not name or job_annotations(job).get(RESIZE_ANNOTATION, "").lower() == "false":
        return Admission("unchanged", plan=name)
    if plan is None:
        return Admission("unchanged", f"maya: TrainingPlan {ref} not found; the {kind} is admitted unchanged",
                         plan=name)
    status = plan.get("status") or {}
    recommendation = status.get("recommendation")
    if status.get("phase") != "Recommended" or not recommendation or _stale(plan):
        state = "planning a new generation" if _stale(plan) else (status.get("phase") or "not planned yet")
        return Admission("unchanged", f"maya: TrainingPlan {ref} is {state}, with no recommendation to apply; "
                                      f"the {kind} is admitted unchanged", plan=name)
    generation = status.get("observedGeneration", (plan.get("metadata") or {}).get("generation"))
    try:
        sizing = size(job, recommendation, plan=name, generation=generation, settings=settings)
    except SizingError as e:
        return Admission("unchanged", f"maya: the {kind} is admitted unchanged, not sized from TrainingPlan "
                                      f"{ref}: {e}", plan=name)
    if not sizing.ops:
        return Admission("unchanged", sizing=sizing, plan=name)
    before, after = sizing.before, sizing.after
    saving = None
    if before.gpus and after.gpu and after.gpus:
        asked = before.gpu or after.gpu
        saving = before.gpus * price(asked, plan, settings) - after.gpus * price(after.gpu, plan, settings)
    return Admission("patched", sizing=sizing, saving=saving, plan=name)


def validation(job: Mapping[str, Any], plans: Mapping[index.PlanKey, Any], settings: Settings) -> Admission:
    """What the validating webhook says of ``job``: rejected when the plan predicts its GPUs run out of memory."""
    namespace, name, plan = _plan(job, plans)
    kind = str(job.get("kind"))
    ref = f"{namespace}/{name}"
    if not name:
        return Admission("allowed")
    if plan is None:
        return Admission("allowed", f"maya: TrainingPlan {ref} not found; the {kind}'s memory is not checked",
                         plan=name)
    status = plan.get("status") or {}
    if not status.get("candidates") or _stale(plan):
        state = "planning a new generation" if _stale(plan) else (status.get("phase") or "not planned yet")
        return Admission("allowed", f"maya: TrainingPlan {ref} is {state}; the {kind}'s memory is not checked",
                         plan=name)
    try:
        shape = requested_shape(job, settings)
    except SizingError as e:
        return Admission("allowed", f"maya: the {kind}'s memory is not checked: {e}", plan=name)
    verdict = memory_verdict(shape, status["candidates"], plan=ref)
    if not verdict.allowed:
        return Admission("rejected", message=verdict.message, plan=name)
    return Admission("allowed", f"maya: {verdict.message}" if verdict.message else "", plan=name)


def _become(target: Mapping[str, Any], body: dict[str, Any]) -> None:
    """kopf patch transformation: the body becomes ``target`` (kopf diffs the two into the JSONPatch)."""
    body.clear()
    body.update(copy.deepcopy(dict(target)))


def register(registry: kopf.OperatorRegistry, settings: Settings | None = None) -> None:
    """Adds both webhooks, and the ``plans`` index they read, to ``registry``."""
    config = settings if settings is not None else Settings.from_env()
    index.register(registry)

    async def mutate_jobs(body: kopf.Body, resource: kopf.Resource, patch: kopf.Patch, warnings: list[str],
                          dryrun: bool, logger: kopf.Logger, **kwargs: Any) -> None:
        kind = _kind(resource)
        try:
            outcome = mutation(body, kwargs.get(index.INDEX) or {}, config)
        except Exception as e:  # fail open: any error admits the job as it is
            logger.exception("sizing failed; the job is admitted unchanged")
            warnings.append(f"maya: the {kind} is admitted unchanged after an error in the sizing webhook: {e}")
            ADMISSIONS.labels(kind=kind, result="error").inc()
            return
        ADMISSIONS.labels(kind=kind, result=outcome.result).inc()
        if outcome.warning:
            warnings.append(outcome.warning)
        if outcome.result == "patched" and outcome.sizing is not None:
            patch.fns.append(functools.partial(_become, outcome.sizing.sized))
            logger.info(f"sized from TrainingPlan {outcome.plan}: {outcome.sizing.before.label()} -> "
                        f"{outcome.sizing.after.label()}")
            if outcome.saving is not None and not dryrun:
                namespace = str(body.get("metadata", {}).get("namespace") or "")
                HOURLY_SAVING.labels(namespace=namespace, plan=outcome.plan).set(outcome.saving)

    async def validate_jobs(body: kopf.Body, resource: kopf.Resource, warnings: list[str], logger: kopf.Logger,
                            **kwargs: Any) -> None:
        kind = _kind(resource)
        try:
            outcome = validation(body, kwargs.get(index.INDEX) or {}, config)
        except Exception as e:  # fail open
            logger.exception("validation failed; the job is admitted")
            warnings.append(f"maya: the {kind}'s memory is not checked after an error in the webhook: {e}")
            ADMISSIONS.labels(kind=kind, result="error").inc()
            return
        ADMISSIONS.labels(kind=kind, result=outcome.result).inc()
        if outcome.result == "rejected":
            raise kopf.AdmissionError(outcome.message, code=REJECT_CODE)
        if outcome.warning:
            warnings.append(outcome.warning)

    opt_in = {PLAN_ANNOTATION: kopf.PRESENT}
    kopf.on.mutate(is_job_resource, id=MUTATE_ID, operations=["CREATE"], ignore_failures=True,
                   annotations=opt_in, registry=registry)(mutate_jobs)
    kopf.on.validate(is_job_resource, id=VALIDATE_ID, operations=["CREATE"], ignore_failures=True,
                     annotations=opt_in, registry=registry)(validate_jobs)


def webhook_server(settings: Settings, *, addr: str | None = None) -> kopf.WebhookServer:
    """The HTTPS server for ``settings.admission.server``: port and certificate from the operator's settings
    (``tls.crt`` and ``tls.key`` in ``MAYA_WEBHOOK_CERT_DIR``, as cert-manager or the chart's secret mounts them)."""
    if not settings.webhook_cert_dir:
        raise ValueError("MAYA_WEBHOOK_CERT_DIR is not set: point it at a folder with tls.crt and tls.key "
                         "(the webhook certificate's secret) to serve the admission webhooks")
    folder = Path(settings.webhook_cert_dir)
    missing = [f for f in ("tls.crt", "tls.key") if not (folder / f).is_file()]
    if missing:
        raise ValueError(f"MAYA_WEBHOOK_CERT_DIR {folder} lacks {', '.join(missing)}")
    return kopf.WebhookServer(addr=addr, port=settings.webhook_port, certfile=folder / "tls.crt",
                              pkeyfile=folder / "tls.key")
