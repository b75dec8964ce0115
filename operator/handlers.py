"""The kopf handlers of the TrainingPlan operator: ``kopf run -m maya.operator.handlers``.

A timer per plan reconciles it (:func:`maya.operator.reconcile.reconcile`)
until its status has caught up with its generation: it creates the emulation
Jobs the search asks for (at most ``max_emulation_pods`` at a time), reads
finished ones back, deletes abandoned ones, and writes the status.  A change
of ``spec`` moves the generation, so the same timer plans again.  Nothing is
kept in memory between ticks: a restarted operator picks up where it was.
"""

from __future__ import annotations

import datetime
import logging
import time
from functools import partial
from typing import Any, cast

import kopf
from kubernetes.client.exceptions import ApiException
from prometheus_client import start_http_server

from maya.operator import kube, metrics, webhooks
from maya.operator.jobs import deny_egress_policy
from maya.operator.reconcile import reconcile
from maya.operator.settings import Settings
from maya.plan.spec import PlanError, parse
from maya.plan.status import condition

SETTINGS = Settings.from_env()
GROUP, VERSION, PLURAL = "maya.dev", "v1alpha1", "trainingplans"
TERMINAL = ("Recommended", "Failed")

# The admission webhooks and the plan index they read live in the same operator process, when it has a
# certificate to serve them with (the chart's webhook.enabled).
if SETTINGS.webhook_cert_dir:
    webhooks.register(kopf.get_default_registry(), SETTINGS)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, logger: Any, **_: Any) -> None:
    settings.posting.level = logging.INFO
    if SETTINGS.webhook_cert_dir:
        settings.admission.server = webhooks.webhook_server(SETTINGS)
    if SETTINGS.metrics_port:
        start_http_server(SETTINGS.metrics_port, registry=metrics.REGISTRY)
        logger.info(f"metrics on :{SETTINGS.metrics_port}/metrics")


def _parse(body: kopf.Body) -> Any:
    doc = {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"),
           "metadata": {"name": body.metadata.name, "namespace": body.metadata.namespace},
           "spec": dict(body.spec)}
    plan = parse(doc, default_prices=SETTINGS.prices)
    if not plan.image:
        raise PlanError("spec.image: missing; in the cluster the emulation runs the training image, so name it")
    return plan


@kopf.timer(GROUP, VERSION, PLURAL, interval=SETTINGS.poll_seconds, sharp=True)
def plan_timer(body: kopf.Body, meta: kopf.Meta, status: kopf.Status, patch: kopf.Patch, logger: Any,
               **_: Any) -> None:
    generation = int(meta.get("generation") or 1)
    if status.get("observedGeneration") == generation and status.get("phase") in TERMINAL:
        _set_phase(meta, status["phase"])
        return
    try:
        plan = _parse(body)
    except PlanError as e:
        _settle(body, patch, {"phase": "Failed", "observedGeneration": generation, "conditions": [
            condition("Recommended", False, "InvalidPlan", str(e), generation)]})
        kopf.warn(body, reason="InvalidPlan", message=str(e))
        return
    owner = {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"], "generation": generation}
    batch, core = kube.batch(), kube.core()
    selector = f"maya.dev/plan={meta['name']}"
    jobs = kube.items(batch.list_namespaced_job(meta["namespace"], label_selector=selector))
    pods = kube.items(core.list_namespaced_pod(meta["namespace"], label_selector=selector))
    step = reconcile(plan, owner, jobs, pods, SETTINGS)
    for name in step.delete:
        kube.ignore_missing(partial(batch.delete_namespaced_job, name, meta["namespace"],
                                    propagation_policy="Background"))
        kopf.info(body, reason="EmulationAbandoned", message=f"deleted {name}: the current spec no longer needs it")
    if step.create:
        _ensure_network_policy(meta["namespace"], logger)
    for job in step.create:
        try:
            batch.create_namespaced_job(meta["namespace"], cast(Any, job))
        except ApiException as e:
            if e.status != 409:  # 409: it exists already (adopted on the next tick)
                raise kopf.TemporaryError(f"cannot create {job['metadata']['name']}: {e.reason}", delay=10) from e
        kopf.info(body, reason="Emulating", message=f"started {job['metadata']['name']} on "
                  f"{job['metadata']['annotations']['maya.dev/request']}")
    if step.settled:
        _finish_metrics(meta, step.status, body)
        _settle(body, patch, step.status)
        messages = {c["type"]: c for c in step.status["conditions"]}
        if step.status.get("recommendation"):
            kopf.info(body, reason="Recommended", message=messages["Recommended"]["message"])
        else:
            kopf.warn(body, reason=messages["Recommended"]["reason"], message=messages["Recommended"]["message"][:1000])
        if messages.get("Degraded", {}).get("status") == "True":
            kopf.warn(body, reason="EmulationFailed", message=messages["Degraded"]["message"][:1000])
        return
    _set_phase(meta, step.status["phase"])
    patch.status.update(step.status)
    if not status.get("startedAt") or status.get("observedGeneration") != generation:
        patch.status["startedAt"] = _now()


_PHASES: dict[tuple[str, str], str] = {}


def _set_phase(meta: kopf.Meta, phase: str | None) -> None:
    """Plans by phase, recounted from every plan's last phase (robust to restarts and deletions)."""
    key = (meta["namespace"], meta["name"])
    if phase is None:
        _PHASES.pop(key, None)
    else:
        _PHASES[key] = phase
    for p in ("Pending", "Emulating", "Predicting", "Recommended", "Failed"):
        metrics.PLANS.labels(phase=p).set(sum(1 for v in _PHASES.values() if v == p))


def _settle(body: kopf.Body, patch: kopf.Patch, new: dict[str, Any]) -> None:
    patch.status.update(new)
    _set_phase(body.metadata, new["phase"])


def _finish_metrics(meta: kopf.Meta, status: dict[str, Any], body: kopf.Body) -> None:
    ns, name = meta["namespace"], meta["name"]
    metrics.forget_plan(ns, name)
    em = status.get("emulations") or {}
    metrics.EMULATIONS.labels(result="succeeded").inc(max(0, em.get("ran", 0) - em.get("failed", 0)))
    metrics.EMULATIONS.labels(result="failed").inc(em.get("failed", 0))
    metrics.EMULATIONS.labels(result="reused").inc(em.get("reused", 0))
    started = (body.get("status") or {}).get("startedAt")
    if started:
        begun = datetime.datetime.strptime(started, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
        metrics.PLANNING_SECONDS.observe((datetime.datetime.now(datetime.UTC) - begun).total_seconds())
    rec = status.get("recommendation")
    if rec:
        metrics.RECOMMENDED_GPUS.labels(ns, name, rec["gpu"]).set(rec["gpus"])
        metrics.STEP_SECONDS.labels(ns, name).set(rec["stepTimeSeconds"])
        metrics.HOURLY_COST.labels(ns, name, rec["gpu"]).set(rec["costPerStepUSD"] / rec["stepTimeSeconds"] * 3600)


def _ensure_network_policy(namespace: str, logger: Any) -> None:
    try:
        kube.networking().create_namespaced_network_policy(namespace, cast(Any, deny_egress_policy(namespace)))
    except ApiException as e:
        if e.status not in (409, 403):
            raise
        if e.status == 403:
            logger.warning(f"cannot create the deny-egress NetworkPolicy in {namespace}: forbidden")


@kopf.on.delete(GROUP, VERSION, PLURAL, optional=True)
def plan_deleted(meta: kopf.Meta, **_: Any) -> None:
    """Jobs go with their owner; only the plan's metric series are ours to drop."""
    metrics.forget_plan(meta["namespace"], meta["name"])
    _set_phase(meta, None)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
