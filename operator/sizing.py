"""Admission-time sizing: the JSONPatch that gives a training job its TrainingPlan's recommended GPU shape.

Pure functions over plain dicts (no kopf, no API calls), for three kinds of job:

- ``batch/v1`` ``Job``: the training container (the first, or the one named by the ``maya.dev/container``
  annotation) gets ``nvidia.com/gpu``; an ``Indexed`` Job gets ``parallelism`` = ``completions`` = nodes.
- ``kubeflow.org/v1`` ``PyTorchJob``: container ``pytorch`` of every replica gets the GPUs; ``Master`` 1 and
  ``Worker`` nodes - 1 replicas; ``spec.nprocPerNode`` (a string) the GPUs per node.
- ``trainer.kubeflow.org/v1alpha1`` ``TrainJob``: ``spec.trainer`` ``numNodes``, ``resourcesPerNode`` and
  ``numProcPerNode``; the node selector goes through a ``spec.runtimePatches`` entry of manager
  ``maya.dev/sizing`` onto the runtime's ``node`` replicated job.

Every kind gets a node selector on the GPU model (GPU Feature Discovery's ``nvidia.com/gpu.product``, values
from the catalog or ``Settings.gpu_products``) and, as the VPA admission controller does, an annotation
``maya.dev/sized`` that records the shape before and after, the plan and its generation.
:func:`memory_verdict` judges the shape a job asks for against the plan's evaluated candidates.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from maya import catalog
from maya.operator.settings import Settings

PLAN_ANNOTATION = "maya.dev/plan"
CONTAINER_ANNOTATION = "maya.dev/container"
SIZED_ANNOTATION = "maya.dev/sized"
# "false": the mutating webhook leaves the job as written (the validating one still judges it).
RESIZE_ANNOTATION = "maya.dev/resize"
GPU_RESOURCE = "nvidia.com/gpu"
# torchrun reads its --nproc-per-node from this variable; a Job that sets it gets it updated.
NPROC_ENV = "PET_NPROC_PER_NODE"
RUNTIME_PATCH_MANAGER = "maya.dev/sizing"
# Kubeflow Trainer's replicated job (and container) of the trainer nodes.
TRAINER_JOB = "node"
PYTORCH_CONTAINER = "pytorch"

KINDS = {
    ("batch/v1", "Job"): "Job",
    ("kubeflow.org/v1", "PyTorchJob"): "PyTorchJob",
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "TrainJob",
}

GIB = 2**30


class SizingError(ValueError):
    """The job (or the recommendation) cannot be sized as it is; the message says why and what to change."""


@dataclass(frozen=True)
class Shape:
    """The GPU shape of a job: ``gpu`` is the catalog name (None when no or an unknown model is selected),
    ``product`` the node-selector value as written; None where the job leaves a number unsaid."""

    gpu: str | None
    product: str | None
    gpus_per_node: int | None
    nodes: int | None
    procs_per_node: int | str | None = None

    @property
    def gpus(self) -> int | None:
        if self.gpus_per_node is None:
            return None
        return self.gpus_per_node * (self.nodes or 1)

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "gpuProduct": self.product, "gpusPerNode": self.gpus_per_node,
                "nodes": self.nodes, "procsPerNode": self.procs_per_node}

    def label(self) -> str:
        model = self.gpu or (f"GPU product {self.product}" if self.product else "any GPU model")
        return f"{self.nodes or 1} node(s) x {self.gpus_per_node} GPU(s) of {model}"


@dataclass(frozen=True)
class Sizing:
    """What :func:`size` did: ``ops`` (RFC 6902, empty when the job already has the shape) turn the job into
    ``sized``."""

    kind: str
    before: Shape
    after: Shape
    ops: list[dict[str, Any]]
    sized: dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    """The validating webhook's answer: ``message`` is the rejection's reason, or a warning when allowed."""

    allowed: bool
    message: str = ""


# -- reading ---------------------------------------------------------------------------------------------------


def job_kind(job: Mapping[str, Any]) -> str:
    key = (job.get("apiVersion"), job.get("kind"))
    if key not in KINDS:
        known = ", ".join(f"{v} {k}" for v, k in KINDS)
        raise SizingError(f"cannot size a {key[0]} {key[1]}: Maya sizes {known}")
    return KINDS[key]


def job_annotations(job: Mapping[str, Any]) -> dict[str, str]:
    return dict((job.get("metadata") or {}).get("annotations") or {})


def gpu_name(product: str | None, settings: Settings) -> str | None:
    """The catalog GPU whose ``nvidia.com/gpu.product`` label is ``product`` (None if no GPU has it)."""
    if not product:
        return None
    for name in catalog.names():
        if settings.gpu_product(name) == product:
            return name
    return None


def _gpu_count(resources: Mapping[str, Any] | None) -> int | None:
    resources = resources or {}
    for part in ("limits", "requests"):
        value = (resources.get(part) or {}).get(GPU_RESOURCE)
        if value is not None:
            try:
                return int(str(value))
            except ValueError:
                raise SizingError(f"{GPU_RESOURCE} {part} {value!r} is not a whole number of GPUs") from None
    return None


def _containers(pod: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    containers = pod.get("containers")
    if not isinstance(containers, list) or not containers:
        raise SizingError(f"{where} has no containers")
    return containers


def _container(pod: Mapping[str, Any], name: str | None, where: str) -> dict[str, Any]:
    containers = _containers(pod, where)
    if name is None:
        return containers[0]
    for c in containers:
        if c.get("name") == name:
            return c
    names = ", ".join(repr(c.get("name")) for c in containers)
    raise SizingError(f"{where} has no container named {name!r} (it has {names})")


def _pod_spec(template: Any, where: str) -> dict[str, Any]:
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise SizingError(f"{where} has no pod template spec")
    spec: dict[str, Any] = template["spec"]
    return spec


def _env(container: Mapping[str, Any], name: str) -> str | None:
    for var in container.get("env") or []:
        if var.get("name") == name:
            value = var.get("value")
            return None if value is None else str(value)
    return None


def _replicas(spec: Mapping[str, Any]) -> dict[str, Any]:
    replicas = spec.get("pytorchReplicaSpecs")
    if not isinstance(replicas, dict) or not replicas:
        raise SizingError("PyTorchJob spec.pytorchReplicaSpecs is empty")
    return replicas


def _trainer_selector(spec: Mapping[str, Any], label: str) -> tuple[str | None, str | None]:
    """(manager, value) of the runtime patch that selects the trainer nodes by ``label``, if one does."""
    for patch in spec.get("runtimePatches") or []:
        rjobs = ((((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {})
                 .get("replicatedJobs") or [])
        for rjob in rjobs:
            if rjob.get("name") != TRAINER_JOB:
                continue
            pod = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            value = (pod.get("nodeSelector") or {}).get(label)
            if value is not None:
                return patch.get("manager"), str(value)
    return None, None


def requested_shape(job: Mapping[str, Any], settings: Settings) -> Shape:
    """The shape ``job`` asks for as written."""
    kind = job_kind(job)
    spec = job.get("spec") or {}
    label = settings.gpu_product_label
    if kind == "Job":
        pod = _pod_spec(spec.get("template"), "Job spec.template")
        c = _container(pod, job_annotations(job).get(CONTAINER_ANNOTATION), "Job spec.template")
        indexed = spec.get("completionMode") == "Indexed"
        nodes = int(spec.get("completions") or spec.get("parallelism") or 1) if indexed else 1
        product = (pod.get("nodeSelector") or {}).get(label)
        procs: int | str | None = _env(c, NPROC_ENV)
        return Shape(gpu_name(product, settings), product, _gpu_count(c.get("resources")), nodes, procs)
    if kind == "PyTorchJob":
        replicas = _replicas(spec)
        first = replicas.get("Master") or next(iter(replicas.values()))
        pod = _pod_spec(first.get("template"), "PyTorchJob replica")
        c = _container(pod, PYTORCH_CONTAINER, "PyTorchJob replica")
        nodes = sum(int(r.get("replicas", 1)) for r in replicas.values())
        product = (pod.get("nodeSelector") or {}).get(label)
        return Shape(gpu_name(product, settings), product, _gpu_count(c.get("resources")), nodes,
                     spec.get("nprocPerNode"))
    trainer = spec.get("trainer") or {}
    _, product = _trainer_selector(spec, label)
    nodes_value = trainer.get("numNodes")
    return Shape(gpu_name(product, settings), product, _gpu_count(trainer.get("resourcesPerNode")),
                 None if nodes_value is None else int(nodes_value), trainer.get("numProcPerNode"))


# -- writing ---------------------------------------------------------------------------------------------------


def _set_gpus(resources: dict[str, Any], n: int) -> None:
    resources.setdefault("limits", {})[GPU_RESOURCE] = str(n)
    requests = resources.get("requests")
    if isinstance(requests, dict) and GPU_RESOURCE in requests:
        requests[GPU_RESOURCE] = str(n)


def _set_env_if_present(container: dict[str, Any], name: str, value: str) -> None:
    for var in container.get("env") or []:
        if var.get("name") == name and "valueFrom" not in var:
            var["value"] = value


def _size_pod(pod: dict[str, Any], container: dict[str, Any], target: Shape, label: str) -> None:
    assert target.gpus_per_node is not None and target.product is not None
    _set_gpus(container.setdefault("resources", {}), target.gpus_per_node)
    pod.setdefault("nodeSelector", {})[label] = target.product


def _apply_job(job: dict[str, Any], target: Shape, label: str) -> None:
    assert target.nodes is not None and target.gpus_per_node is not None
    spec = job["spec"]
    pod = _pod_spec(spec.get("template"), "Job spec.template")
    c = _container(pod, job_annotations(job).get(CONTAINER_ANNOTATION), "Job spec.template")
    if spec.get("completionMode") == "Indexed":
        spec["parallelism"] = spec["completions"] = target.nodes
    elif target.nodes > 1:
        raise SizingError(f"the plan recommends {target.nodes} nodes, but a Job that is not Indexed runs one "
                          "pod: set spec.completionMode: Indexed (one pod per node) for Maya to size it")
    _size_pod(pod, c, target, label)
    _set_env_if_present(c, NPROC_ENV, str(target.gpus_per_node))


def _apply_pytorchjob(job: dict[str, Any], target: Shape, label: str) -> None:
    assert target.nodes is not None and target.gpus_per_node is not None
    spec = job["spec"]
    if spec.get("elasticPolicy"):
        raise SizingError("an elastic PyTorchJob (spec.elasticPolicy) chooses its own replicas: Maya sizes only "
                          "PyTorchJobs of fixed size")
    replicas = _replicas(spec)
    if "Master" in replicas:
        replicas["Master"]["replicas"] = 1
        if target.nodes > 1 and "Worker" not in replicas:
            replicas["Worker"] = copy.deepcopy(replicas["Master"])
        if "Worker" in replicas:
            replicas["Worker"]["replicas"] = target.nodes - 1
    elif "Worker" in replicas:
        replicas["Worker"]["replicas"] = target.nodes
    else:
        raise SizingError(f"PyTorchJob has neither a Master nor a Worker replica (it has {', '.join(replicas)})")
    for kind, replica in replicas.items():
        pod = _pod_spec(replica.get("template"), f"PyTorchJob replica {kind}")
        _size_pod(pod, _container(pod, PYTORCH_CONTAINER, f"PyTorchJob replica {kind}"), target, label)
    spec["nprocPerNode"] = str(target.gpus_per_node)


def _apply_trainjob(job: dict[str, Any], target: Shape, label: str) -> None:
    assert target.nodes is not None and target.gpus_per_node is not None
    spec = job["spec"]
    manager, _ = _trainer_selector(spec, label)
    if manager is not None and manager != RUNTIME_PATCH_MANAGER:
        raise SizingError(f"the runtime patch of manager {manager!r} already selects the trainer nodes by "
                          f"{label}: remove it for Maya to choose the GPU model")
    trainer = spec.setdefault("trainer", {})
    trainer["numNodes"] = target.nodes
    _set_gpus(trainer.setdefault("resourcesPerNode", {}), target.gpus_per_node)
    trainer["numProcPerNode"] = target.gpus_per_node
    selector = {"nodeSelector": {label: target.product}}
    entry = {"manager": RUNTIME_PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": TRAINER_JOB, "template": {"spec": {"template": {"spec": selector}}}}]}}}}
    patches = spec.setdefault("runtimePatches", [])
    for i, patch in enumerate(patches):
        if patch.get("manager") == RUNTIME_PATCH_MANAGER:
            patches[i] = entry
            break
    else:
        patches.append(entry)


_APPLY = {"Job": _apply_job, "PyTorchJob": _apply_pytorchjob, "TrainJob": _apply_trainjob}


def target_shape(recommendation: Mapping[str, Any], settings: Settings) -> Shape:
    """The shape a recommendation asks for, with the node-selector value of its GPU."""
    missing = [k for k in ("gpu", "gpusPerNode", "nodes") if recommendation.get(k) is None]
    if missing:
        raise SizingError(f"the plan's recommendation lacks {', '.join(missing)}")
    gpus_per_node, nodes = int(recommendation["gpusPerNode"]), int(recommendation["nodes"])
    if gpus_per_node < 1 or nodes < 1:
        raise SizingError(f"the plan's recommendation has {gpus_per_node} GPUs per node on {nodes} nodes")
    try:
        name = catalog.lookup(str(recommendation["gpu"])).name
    except catalog.UnknownGPU as e:
        raise SizingError(f"the plan recommends {e}") from None
    return Shape(name, settings.gpu_product(name), gpus_per_node, nodes, gpus_per_node)


def size(job: Mapping[str, Any], recommendation: Mapping[str, Any], *, plan: str, generation: int | None,
         settings: Settings) -> Sizing:
    """The JSONPatch that applies ``recommendation`` (a TrainingPlan's ``status.recommendation``) to ``job``.

    Raises :class:`SizingError` when the job cannot take it as written (the message says what to change).
    """
    kind = job_kind(job)
    if not isinstance(job.get("spec"), dict):
        raise SizingError(f"the {kind} has no spec")
    before = requested_shape(job, settings)
    target = target_shape(recommendation, settings)
    sized = copy.deepcopy(dict(job))
    _APPLY[kind](sized, target, settings.gpu_product_label)
    after = requested_shape(sized, settings)
    ops = json_patch(dict(job), sized)
    if ops:
        record = {"plan": plan, "generation": generation, "before": before.to_json(), "after": after.to_json()}
        sized.setdefault("metadata", {}).setdefault("annotations", {})[SIZED_ANNOTATION] = json.dumps(
            record, sort_keys=True)
        ops = json_patch(dict(job), sized)
    return Sizing(kind, before, after, ops, sized)


# -- JSONPatch -------------------------------------------------------------------------------------------------


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def json_patch(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """RFC 6902 operations that turn ``before`` into ``after``: objects key by key, equal-length lists item by
    item, lists that only grow by appending, anything else replaced whole."""
    if isinstance(before, dict) and isinstance(after, dict):
        ops: list[dict[str, Any]] = [{"op": "remove", "path": f"{path}/{_escape(k)}"} for k in before
                                     if k not in after]
        for key, value in after.items():
            sub = f"{path}/{_escape(key)}"
            if key in before:
                ops += json_patch(before[key], value, sub)
            else:
                ops.append({"op": "add", "path": sub, "value": copy.deepcopy(value)})
        return ops
    if isinstance(before, list) and isinstance(after, list):
        if len(before) == len(after):
            return [op for i, (b, a) in enumerate(zip(before, after, strict=True))
                    for op in json_patch(b, a, f"{path}/{i}")]
        if len(after) > len(before) and after[:len(before)] == before:
            return [{"op": "add", "path": f"{path}/-", "value": copy.deepcopy(v)} for v in after[len(before):]]
    elif type(before) is type(after) and before == after:
        return []
    return [{"op": "replace", "path": path, "value": copy.deepcopy(after)}]


# -- memory ----------------------------------------------------------------------------------------------------


def _over(candidate: Mapping[str, Any]) -> str:
    peak, cap = candidate.get("peakMemoryBytes"), candidate.get("capacityBytes")
    if peak and cap and peak > cap:
        return (f"needs {peak / GIB:.1f} GiB per GPU, {cap / GIB:.1f} GiB usable on {candidate.get('gpu')}: "
                f"{(peak - cap) / GIB:.1f} GiB over")
    return str(candidate.get("reason") or f"runs out of memory on {candidate.get('gpu')}")


def _config(candidate: Mapping[str, Any]) -> str:
    knobs = candidate.get("knobs") or {}
    extra = "".join(f", {k}={v}" for k, v in sorted(knobs.items()))
    return f"micro-batch {candidate.get('microBatch')}{extra}"


def memory_verdict(shape: Shape, candidates: Sequence[Mapping[str, Any]], *, plan: str) -> Verdict:
    """Whether the plan predicts ``shape`` runs out of GPU memory.

    The candidates of the same GPU model, GPUs per node and nodes are judged together (a job's micro-batch and
    knobs are not visible here): the job is rejected only when every one the plan evaluated ran out of memory.
    A shape the plan did not evaluate is allowed with a warning.
    """
    if not shape.gpus_per_node:
        return Verdict(True, f"the job requests no {GPU_RESOURCE}: TrainingPlan {plan} cannot judge its memory")
    if shape.product and shape.gpu is None:
        return Verdict(True, f"the job selects GPU product {shape.product!r}, which no catalog GPU has: "
                             f"TrainingPlan {plan} cannot judge its memory")
    nodes = shape.nodes or 1
    same = [c for c in candidates if c.get("gpusPerNode") == shape.gpus_per_node and c.get("nodes") == nodes
            and (shape.gpu is None or str(c.get("gpu", "")).lower() == shape.gpu.lower())]
    judged = [c for c in same if c.get("status") in ("ok", "oom")]
    if not judged:
        why = "evaluated no candidate of" if not same else "could not evaluate the memory of"
        return Verdict(True, f"TrainingPlan {plan} {why} {shape.label()}: memory not checked")
    oom = [c for c in judged if c.get("status") == "oom"]
    if not oom:
        return Verdict(True)
    closest = min(oom, key=lambda c: c.get("peakMemoryBytes") or float("inf"))
    if len(oom) == len(judged):
        tried = "; ".join(sorted({_config(c) for c in oom}))
        return Verdict(False, f"TrainingPlan {plan} predicts {shape.label()} runs out of GPU memory with every "
                              f"configuration it evaluated ({tried}): {_over(closest)}")
    fits = "; ".join(sorted({f"{_config(c)} on {c.get('gpu')}" for c in judged if c.get("status") == "ok"}))
    return Verdict(True, f"TrainingPlan {plan} predicts {shape.label()} fits only some configurations: "
                         f"{_config(closest)} on {closest.get('gpu')} {_over(closest)}; fits with {fits}")
