"""The operator against a real API server: a TrainingPlan driven to Recommended through emulation Jobs.

Covers: the Jobs it creates (one per emulation, pod security for untrusted
code, owner references, at most the configured number at a time), the
status reaching ``Recommended`` with the recommendation ``maya plan`` gives
for the same file, a restart mid-plan that adopts the Jobs it finds, a
spec change that re-plans and reuses what still applies, and an invalid
plan's ``Failed`` status.  No kubelet runs here: the test completes each
Job's pod itself, with the predictor's message computed from the same
emulations ``maya plan`` ran (so the two must agree exactly).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

os.environ.setdefault("MAYA_POLL_SECONDS", "1")
os.environ.setdefault("MAYA_METRICS_PORT", "0")

from maya.operator import kube  # noqa: E402
from maya.operator.jobs import ANNOTATION_REQUEST, request_from_json  # noqa: E402
from maya.operator.pod import compact  # noqa: E402
from maya.plan.cache import Cache  # noqa: E402
from maya.plan.local import PlanRun, plan_locally  # noqa: E402
from maya.plan.spec import parse  # noqa: E402

pytestmark = pytest.mark.emulation

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "trainingplans.maya.dev.yaml"
G, V, P = "maya.dev", "v1alpha1", "trainingplans"


def tiny_plan(name: str = "tiny", **spec: Any) -> dict[str, Any]:
    doc = {
        "apiVersion": "maya.dev/v1alpha1", "kind": "TrainingPlan", "metadata": {"name": name},
        "spec": {
            "image": "registry.example.com/team/llm:1.0",
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


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> PlanRun:
    """``maya plan`` of the tiny plan on this machine (its emulations feed the fake pods below)."""
    cache = Cache(tmp_path_factory.mktemp("plan-cache"))
    return plan_locally(parse(tiny_plan()), ROOT / "examples", cache=cache)


@pytest.fixture(scope="module")
def operator(kube_apiserver: Any, kube_client: Any):
    import kopf
    from kopf.testing import KopfRunner

    @kopf.on.login()
    def login(**_: Any) -> Any:
        return kube_apiserver.kopf_connection_info()

    ext = client.ApiextensionsV1Api(kube_client)
    body = yaml.safe_load(CRD.read_text())
    try:
        ext.create_custom_resource_definition(body)
    except client.ApiException as e:
        if e.status != 409:
            raise
    _wait(lambda: any(c.type == "Established" and c.status == "True"
                      for c in ext.read_custom_resource_definition(body["metadata"]["name"]).status.conditions or []))
    old = os.environ.get("KUBECONFIG")
    os.environ["KUBECONFIG"] = str(kube_apiserver.kubeconfig)
    kube.use(kube_apiserver.api_client())
    try:
        yield lambda: KopfRunner(["run", "--standalone", "--all-namespaces", "-m", "maya.operator.handlers"])
    finally:
        kube.use(None)
        if old is None:
            os.environ.pop("KUBECONFIG", None)
        else:
            os.environ["KUBECONFIG"] = old


def _wait(check, timeout: float = 60.0, every: float = 0.2) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {check}")


def _jobs(kube_client: Any, ns: str) -> list[dict[str, Any]]:
    return kube.items(client.BatchV1Api(kube_client).list_namespaced_job(ns))


def complete_pods(kube_client: Any, ns: str, run: PlanRun, limit: int | None = None) -> int:
    """Play the kubelet: give each Job without a pod one that finished with the predictor's message."""
    core = client.CoreV1Api(kube_client)
    have = {p.metadata.labels.get("job-name") for p in core.list_namespaced_pod(ns).items}
    done = 0
    for job in _jobs(kube_client, ns):
        name = job["metadata"]["name"]
        if name in have or (limit is not None and done >= limit):
            continue
        req = request_from_json(job["metadata"]["annotations"][ANNOTATION_REQUEST])
        key = run.keys[(req.program, req.gpu)]
        preds = {g: run.cache.prediction(key, g) for g in req.predict_for}
        message = compact(run.cache.result(key), {g: p for g, p in preds.items() if p})
        labels = {**job["spec"]["template"]["metadata"]["labels"], "job-name": name}
        pod = {"metadata": {"name": f"{name}-pod", "labels": labels},
               "spec": {"restartPolicy": "Never", "containers": [{"name": "train", "image": "x"},
                                                                  {"name": "predictor", "image": "y"}]}}
        core.create_namespaced_pod(ns, pod)
        core.patch_namespaced_pod_status(f"{name}-pod", ns, {"status": {"phase": "Succeeded", "containerStatuses": [
            {"name": "train", "image": "x", "imageID": "", "ready": False, "restartCount": 0,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            {"name": "predictor", "image": "y", "imageID": "", "ready": False, "restartCount": 0,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": message}}}]}})
        done += 1
    return done


def _plan(kube_client: Any, ns: str, name: str = "tiny") -> dict[str, Any]:
    return client.CustomObjectsApi(kube_client).get_namespaced_custom_object(G, V, ns, P, name)


def _identity(c: dict[str, Any]) -> tuple[Any, ...]:
    return (c["gpu"], c["gpusPerNode"], c["nodes"], c["microBatch"], c["gradientAccumulation"], c["knobs"])


def test_a_plan_is_recommended_through_emulation_jobs(operator, kube_client, kube_namespace, local_run):
    ns = kube_namespace
    api = client.CustomObjectsApi(kube_client)
    with operator():
        api.create_namespaced_custom_object(G, V, ns, P, tiny_plan())
        jobs = _wait(lambda: _jobs(kube_client, ns))
        job = jobs[0]
        pod = job["spec"]["template"]["spec"]
        train = next(c for c in pod["containers"] if c["name"] == "train")
        assert train["image"] == "registry.example.com/team/llm:1.0"
        assert pod["automountServiceAccountToken"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in pod["containers"] + pod["initContainers"]:
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
            assert "nvidia.com/gpu" not in c["resources"]["limits"]
            assert c["resources"]["limits"]["cpu"] and c["resources"]["requests"]["memory"]
        assert job["spec"]["activeDeadlineSeconds"] > 0 and job["spec"]["backoffLimit"] == 0
        assert job["metadata"]["ownerReferences"][0]["kind"] == "TrainingPlan"
        policy = client.NetworkingV1Api(kube_client).read_namespaced_network_policy("maya-emulation-deny-egress", ns)
        assert policy.spec.policy_types == ["Egress", "Ingress"] and not policy.spec.egress
        _wait(lambda: _plan(kube_client, ns).get("status", {}).get("phase") == "Emulating")
        _wait(lambda: complete_pods(kube_client, ns, local_run) == 0 and
              _plan(kube_client, ns).get("status", {}).get("phase") in ("Recommended", "Failed"), timeout=90)
    status = _plan(kube_client, ns)["status"]
    local = local_run.status()
    assert status["phase"] == "Recommended", status
    assert _identity(status["recommendation"]) == _identity(local["recommendation"])
    assert status["recommendation"]["stepTimeSeconds"] == pytest.approx(local["recommendation"]["stepTimeSeconds"])
    assert status["observedGeneration"] == 1
    assert status["emulations"]["ran"] == local["emulations"]["ran"] == len(_jobs(kube_client, ns))
    assert {c["type"] for c in status["conditions"]} == {"Recommended", "Degraded"}


def test_a_restart_mid_plan_adopts_the_jobs_and_a_spec_change_replans(operator, kube_client, kube_namespace,
                                                                        local_run):
    ns = kube_namespace
    api = client.CustomObjectsApi(kube_client)
    with operator():
        api.create_namespaced_custom_object(G, V, ns, P, tiny_plan())
        # Micro-batch 8 waits for micro-batch 4: if 4 ran out of memory, 8 would not be emulated at all.
        _wait(lambda: len(_jobs(kube_client, ns)) == 1)
        assert complete_pods(kube_client, ns, local_run) == 1
        _wait(lambda: len(_jobs(kube_client, ns)) == 2)
    first = {j["metadata"]["name"] for j in _jobs(kube_client, ns)}
    with operator():  # a new operator process: same Jobs, nothing lost, nothing duplicated
        complete_pods(kube_client, ns, local_run)
        _wait(lambda: _plan(kube_client, ns).get("status", {}).get("phase") == "Recommended", timeout=90)
        assert {j["metadata"]["name"] for j in _jobs(kube_client, ns)} == first
        # Prices change the choice, not the emulations: the same Jobs serve the new generation.
        api.patch_namespaced_custom_object(G, V, ns, P, "tiny", {"spec": {"prices": {"H100-SXM-80GB": 9.0}}})
        _wait(lambda: _plan(kube_client, ns)["status"].get("observedGeneration") == 2
              and _plan(kube_client, ns)["status"]["phase"] == "Recommended", timeout=90)
    status = _plan(kube_client, ns)["status"]
    assert status["recommendation"]["gpu"] == "H200-SXM-141GB"
    assert {j["metadata"]["name"] for j in _jobs(kube_client, ns)} == first
    assert status["emulations"]["reused"] == 2 and status["emulations"]["ran"] == 0


def test_an_invalid_plan_fails_with_the_field_named(operator, kube_client, kube_namespace):
    ns = kube_namespace
    doc = tiny_plan(resources=[{"gpu": "H900"}])
    with operator():
        client.CustomObjectsApi(kube_client).create_namespaced_custom_object(G, V, ns, P, doc)
        _wait(lambda: _plan(kube_client, ns).get("status", {}).get("phase") == "Failed")
    cond = _plan(kube_client, ns)["status"]["conditions"][0]
    assert cond["reason"] == "InvalidPlan" and "unknown GPU 'H900'" in cond["message"]
    assert "spec.resources" in cond["message"]
    assert _jobs(kube_client, ns) == []
