"""A tiny TrainingPlan and the pods of its emulation Jobs, for the operator's tests against kmock and against a
real API server.

No kubelet runs in either: :func:`complete_pods` plays it, giving each Job a pod whose predictor container
ended with the message the predictor would have written (:func:`maya.operator.pod.compact`) for the very
emulations ``maya plan`` ran locally (:func:`local_plan`), so the operator's recommendation must equal the local
one exactly; :func:`fail_pods` gives each Job a pod that cannot pull the training image.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from maya.operator import kube
from maya.operator.jobs import ANNOTATION_REQUEST, request_from_json
from maya.operator.pod import compact
from maya.plan.cache import Cache
from maya.plan.local import PlanRun, plan_locally
from maya.plan.spec import parse

ROOT = Path(__file__).resolve().parents[1]
G, V, P = "maya.dev", "v1alpha1", "trainingplans"
IMAGE = "registry.example.com/team/llm:1.0"


def tiny_plan(name: str = "tiny", **spec: Any) -> dict[str, Any]:
    """Two micro-batches on two Hopper GPUs: two emulations of a one-layer model, a few seconds each."""
    doc = {
        "apiVersion": "maya.dev/v1alpha1", "kind": "TrainingPlan", "metadata": {"name": name},
        "spec": {
            "image": IMAGE,
            "workingDir": str(ROOT / "examples"),
            "command": ["python", "llm.py", "--layers", "1", "--width", "64", "--heads", "2", "--seq", "64",
                        "--vocab", "512", "--steps", "3"],
            "batch": {"global": 8, "microBatchArg": "--batch", "microBatches": [4, 8], "accumulationArg": "--accum"},
            "resources": [{"gpu": "H100-SXM-80GB"}, {"gpu": "H200-SXM-141GB"}],
            "objective": "cost",
        },
    }
    doc["spec"].update(spec)
    return doc


def local_plan(cache_dir: Path) -> PlanRun:
    """``maya plan`` of :func:`tiny_plan` on this machine, its emulations cached in ``cache_dir``."""
    return plan_locally(parse(tiny_plan()), ROOT / "examples", cache=Cache(cache_dir))


def wait(check: Callable[[], Any], timeout: float = 60.0, every: float = 0.2) -> Any:
    """``check()`` once it is truthy; fails the test after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {check}")


def jobs(api: client.ApiClient, ns: str) -> list[dict[str, Any]]:
    return kube.items(client.BatchV1Api(api).list_namespaced_job(ns))


def read_plan(api: client.ApiClient, ns: str, name: str = "tiny") -> dict[str, Any]:
    return dict(client.CustomObjectsApi(api).get_namespaced_custom_object(G, V, ns, P, name))


def phase(api: client.ApiClient, ns: str, name: str = "tiny") -> str | None:
    return read_plan(api, ns, name).get("status", {}).get("phase")


def identity(c: dict[str, Any]) -> tuple[Any, ...]:
    """What a candidate is (its shape, batch and knobs), without what was predicted for it."""
    return (c["gpu"], c["gpusPerNode"], c["nodes"], c["microBatch"], c["gradientAccumulation"], c["knobs"])


def check_emulation_job(api: client.ApiClient, job: dict[str, Any], plan: dict[str, Any]) -> None:
    """The Job runs the plan's image as untrusted code: no service-account token, non-root, no privilege
    escalation, every capability dropped, seccomp RuntimeDefault, requests and limits, no GPU, an active
    deadline, no retry, owned by its plan, and selected by the deny-egress NetworkPolicy of its namespace."""
    meta, spec = job["metadata"], job["spec"]
    pod = spec["template"]["spec"]
    train = next(c for c in pod["containers"] if c["name"] == "train")
    assert train["image"] == plan["spec"]["image"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in pod["containers"] + pod["initContainers"]:
        assert c["securityContext"]["allowPrivilegeEscalation"] is False, c["name"]
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}, c["name"]
        assert c["securityContext"]["runAsNonRoot"] is True, c["name"]
        for kind in ("requests", "limits"):
            assert c["resources"][kind]["cpu"] and c["resources"][kind]["memory"], (c["name"], kind)
            assert "nvidia.com/gpu" not in c["resources"][kind], (c["name"], kind)
    assert spec["activeDeadlineSeconds"] > 0 and spec["backoffLimit"] == 0
    # The predictor says which node ran it: only one node's CPU readings are compared (slow phases).
    predictor = next(c for c in pod["containers"] if c["name"] == "predictor")
    env = {e["name"]: e for e in predictor["env"]}
    assert env["MAYA_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert meta["ownerReferences"] == [{"apiVersion": "maya.dev/v1alpha1", "kind": "TrainingPlan",
                                        "name": plan["metadata"]["name"], "uid": plan["metadata"]["uid"],
                                        "controller": True, "blockOwnerDeletion": True}]
    policy = client.NetworkingV1Api(api).read_namespaced_network_policy("maya-emulation-deny-egress",
                                                                        meta["namespace"])
    assert policy.spec.policy_types == ["Egress", "Ingress"] and not policy.spec.egress and not policy.spec.ingress
    assert policy.spec.pod_selector.match_labels.items() <= spec["template"]["metadata"]["labels"].items()


def _container(name: str, image: str, state: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "image": image, "imageID": "", "ready": False, "restartCount": 0, "state": state}


def _give_pods(api: client.ApiClient, ns: str, status_of: Callable[[dict[str, Any]], dict[str, Any]],
               limit: int | None) -> int:
    """Gives each Job without a pod one with the status ``status_of(job)``; returns how many it gave."""
    core = client.CoreV1Api(api)
    have = {p.metadata.labels.get("job-name") for p in core.list_namespaced_pod(ns).items}
    done = 0
    for job in jobs(api, ns):
        name = job["metadata"]["name"]
        if name in have or (limit is not None and done >= limit):
            continue
        labels = {**job["spec"]["template"]["metadata"]["labels"], "job-name": name}
        pod = {"metadata": {"name": f"{name}-pod", "labels": labels},
               "spec": {"restartPolicy": "Never", "containers": [{"name": "train", "image": IMAGE},
                                                                  {"name": "predictor", "image": "maya"}]}}
        core.create_namespaced_pod(ns, pod)
        core.patch_namespaced_pod_status(f"{name}-pod", ns, {"status": status_of(job)})
        done += 1
    return done


def complete_pods(api: client.ApiClient, ns: str, run: PlanRun, limit: int | None = None) -> int:
    """Gives each Job without a pod one that succeeded with the predictor's message for the same emulation."""

    def succeeded(job: dict[str, Any]) -> dict[str, Any]:
        req = request_from_json(job["metadata"]["annotations"][ANNOTATION_REQUEST])
        key = run.keys[(req.program, req.gpu, req.run)]
        preds = {g: run.cache.prediction(key, g) for g in req.predict_for}
        message = compact(run.cache.result(key), {g: p for g, p in preds.items() if p})
        return {"phase": "Succeeded", "containerStatuses": [
            _container("train", IMAGE, {"terminated": {"exitCode": 0, "reason": "Completed"}}),
            _container("predictor", "maya", {"terminated": {"exitCode": 0, "reason": "Completed",
                                                            "message": message}})]}

    return _give_pods(api, ns, succeeded, limit)


PULL_ERROR = f'failed to pull and unpack image "{IMAGE}": pull access denied, repository does not exist'


def fail_pods(api: client.ApiClient, ns: str) -> int:
    """Gives each Job without a pod one whose training container cannot pull its image."""
    status = {"phase": "Pending", "initContainerStatuses": [
        _container("maya-interposer", "maya", {"terminated": {"exitCode": 0, "reason": "Completed"}})],
        "containerStatuses": [
            _container("train", IMAGE, {"waiting": {"reason": "ErrImagePull", "message": PULL_ERROR}}),
            _container("predictor", "maya", {"running": {}})]}
    return _give_pods(api, ns, lambda _job: status, None)
