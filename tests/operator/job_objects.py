"""Small builders of the objects the admission tests feed the webhooks: jobs of the three kinds, plans and
their candidates, and AdmissionReview requests."""

from __future__ import annotations

import copy
import uuid
from typing import Any

NAMESPACE = "team"
PLAN = "llm"


def container(name: str = "train", gpus: int | None = None, *, requests: bool = False,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "registry.example.com/train:1", "resources": {}}
    if gpus is not None:
        c["resources"]["limits"] = {"cpu": "4", "nvidia.com/gpu": str(gpus)}
        if requests:
            c["resources"]["requests"] = {"cpu": "2", "nvidia.com/gpu": str(gpus)}
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return c


def _meta(name: str, plan: str | None, annotations: dict[str, str] | None) -> dict[str, Any]:
    notes = dict(annotations or {})
    if plan:
        notes["maya.dev/plan"] = plan
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if notes:
        meta["annotations"] = notes
    return meta


def pod(containers: list[dict[str, Any]], selector: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": containers}
    if selector:
        spec["nodeSelector"] = dict(selector)
    return {"spec": spec}


def job(gpus: int | None = None, *, indexed: bool = False, completions: int | None = None,
        selector: dict[str, str] | None = None, containers: list[dict[str, Any]] | None = None,
        plan: str | None = PLAN, annotations: dict[str, str] | None = None, name: str = "train") -> dict[str, Any]:
    spec: dict[str, Any] = {"backoffLimit": 0, "template": pod(containers or [container(gpus=gpus)], selector)}
    if indexed:
        spec["completionMode"] = "Indexed"
        spec["completions"] = spec["parallelism"] = completions or 1
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(name, plan, annotations), "spec": spec}


def pytorchjob(gpus: int | None = None, *, master: bool = True, workers: int | None = None,
               nproc: str | None = None, selector: dict[str, str] | None = None, plan: str | None = PLAN,
               name: str = "ddp") -> dict[str, Any]:
    def replica(n: int) -> dict[str, Any]:
        return {"replicas": n, "restartPolicy": "OnFailure",
                "template": pod([container("pytorch", gpus)], selector)}

    replicas: dict[str, Any] = {}
    if master:
        replicas["Master"] = replica(1)
    if workers is not None:
        replicas["Worker"] = replica(workers)
    spec: dict[str, Any] = {"pytorchReplicaSpecs": replicas}
    if nproc is not None:
        spec["nprocPerNode"] = nproc
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": _meta(name, plan, None), "spec": spec}


def runtime_patch(manager: str, selector: dict[str, str] | None = None,
                  labels: dict[str, str] | None = None) -> dict[str, Any]:
    template: dict[str, Any] = {}
    if labels:
        template["metadata"] = {"labels": labels}
    if selector:
        template["spec"] = {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
            "spec": {"nodeSelector": selector}}}}}]}
    return {"manager": manager, "trainingRuntimeSpec": {"template": template}}


def trainjob(gpus: int | None = None, *, nodes: int | None = None, nproc: int | None = None,
             patches: list[dict[str, Any]] | None = None, plan: str | None = PLAN,
             name: str = "tj") -> dict[str, Any]:
    trainer: dict[str, Any] = {"image": "registry.example.com/train:1", "command": ["torchrun", "train.py"]}
    if nodes is not None:
        trainer["numNodes"] = nodes
    if gpus is not None:
        trainer["resourcesPerNode"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    if nproc is not None:
        trainer["numProcPerNode"] = nproc
    spec: dict[str, Any] = {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer}
    if patches:
        spec["runtimePatches"] = copy.deepcopy(patches)
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": _meta(name, plan, None),
            "spec": spec}


GIB = 2**30


def candidate(gpu: str = "H100-SXM-80GB", gpus_per_node: int = 4, nodes: int = 1, *, status: str = "ok",
              micro_batch: int = 16, peak_gib: float | None = 60.0, capacity_gib: float = 79.6,
              reason: str = "", knobs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"gpu": gpu, "gpus": gpus_per_node * nodes, "gpusPerNode": gpus_per_node, "nodes": nodes,
            "microBatch": micro_batch, "gradientAccumulation": 1, "knobs": dict(knobs or {}),
            "fits": status != "oom", "stepTimeSeconds": 0.5 if status == "ok" else None,
            "costPerStepUSD": 0.001 if status == "ok" else None,
            "peakMemoryBytes": None if peak_gib is None else int(peak_gib * GIB),
            "capacityBytes": int(capacity_gib * GIB), "status": status, "reason": reason}


def plan(name: str = PLAN, *, phase: str = "Recommended", recommendation: dict[str, Any] | None = None,
         candidates: list[dict[str, Any]] | None = None, generation: int = 1, observed: int | None = 1,
         prices: dict[str, float] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if observed is not None:
        status["observedGeneration"] = observed
    if recommendation is not None:
        status["recommendation"] = recommendation
    if candidates is not None:
        status["candidates"] = candidates
    spec: dict[str, Any] = {"image": "registry.example.com/train:1", "command": ["python", "train.py"],
                            "resources": [{"gpu": "H100-SXM-80GB", "gpusPerNode": 1, "nodes": 1}]}
    if prices:
        spec["prices"] = prices
    return {"apiVersion": "maya.dev/v1alpha1", "kind": "TrainingPlan",
            "metadata": {"name": name, "namespace": NAMESPACE, "generation": generation, "uid": str(uuid.uuid4())},
            "spec": spec, "status": status}


RESOURCES = {
    "Job": ("batch", "v1", "jobs"),
    "PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs"),
    "TrainJob": ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
}


def review(obj: dict[str, Any], *, operation: str = "CREATE", dry_run: bool = False) -> dict[str, Any]:
    """An admission.k8s.io/v1 AdmissionReview request for ``obj``, as the API server sends it."""
    group, version, plural = RESOURCES[obj["kind"]]
    gvk = {"group": group, "version": version, "kind": obj["kind"]}
    gvr = {"group": group, "version": version, "resource": plural}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": obj["metadata"].get("name"), "namespace": obj["metadata"].get("namespace"),
        "operation": operation, "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": obj, "oldObject": None, "dryRun": dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}}
