"""An in-memory index of the TrainingPlans the operator watches, for the admission webhooks.

A webhook must answer within its timeout and should not call the API server on every job: kopf's own watch
keeps this index current (``@kopf.index``), and any handler receives it as the keyword argument ``plans``
(a ``kopf.Index`` keyed by ``(namespace, name)``). Each value is a small snapshot of the plan (metadata,
``spec.prices`` and ``status``), detached from kopf's live body.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import kopf

from maya.operator.crd import GROUP, PLURAL, VERSION

# The index's name: the keyword argument that carries it into handlers.
INDEX = "plans"

PlanKey = tuple[str, str]
PlansIndex = kopf.Index[PlanKey, dict[str, Any]]


def snapshot(body: Mapping[str, Any]) -> dict[str, Any]:
    """What the webhooks read of a plan: its name, namespace and generation, its prices and its status."""
    meta = body.get("metadata") or {}
    return {
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "generation")},
        "spec": {"prices": copy.deepcopy(dict((body.get("spec") or {}).get("prices") or {}))},
        "status": copy.deepcopy(dict(body.get("status") or {})),
    }


def index_plan(namespace: str | None, name: str | None, body: kopf.Body, **_: Any) -> dict[PlanKey, dict[str, Any]]:
    return {(namespace or "", name or ""): snapshot(body)}


def register(registry: kopf.OperatorRegistry) -> None:
    """Adds the ``plans`` index to ``registry``."""
    kopf.index(GROUP, VERSION, PLURAL, id=INDEX, registry=registry)(index_plan)


def lookup(plans: Mapping[PlanKey, Any], namespace: str, name: str) -> dict[str, Any] | None:
    """The snapshot of plan ``namespace/name``, or None when the operator has not seen it."""
    store = plans.get((namespace, name))
    for plan in store or ():
        return dict(plan)
    return None
