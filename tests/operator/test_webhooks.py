"""The admission webhooks answer real AdmissionReview (admission.k8s.io/v1) requests over HTTPS.

The operator runs in-process (``kopf.operator``) against kmock, kopf's Kubernetes API emulator, both in one
background event loop; kopf's watch of TrainingPlans fills the ``plans`` index that the webhooks read, and
the tests post reviews to kopf's webhook server over TLS as the API server would. Covers:
- ``/mutate-jobs`` patches a Job, a PyTorchJob and a TrainJob (the base64 JSONPatch applied gives the plan's
  shape, node selector and ``maya.dev/sized`` record); the admission and saving metrics move;
- a job without the annotation is admitted unchanged without a warning; with a missing plan, a plan still
  planning, a stale plan, a job that cannot take the recommendation or a broken recommendation it is admitted
  unchanged with a warning (fail open);
- a plan created after the operator started reaches the webhook through kopf's watch;
- ``/validate-jobs`` rejects (422) each kind of job whose shape the plan predicts runs out of memory, saying by
  how much, and allows a fitting or unevaluated shape (with a warning for the latter);
- plain HTTP is refused: the server speaks only TLS.
"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import jsonpatch
import kmock
import kopf
import pytest
from job_objects import NAMESPACE, candidate, job, plan, pytorchjob, review, trainjob
from loop_thread import LoopThread
from tls_certs import ServingCert

from maya.operator import metrics, webhooks
from maya.operator.settings import Settings

pytestmark = pytest.mark.operator

PLANS = "maya.dev/v1alpha1/trainingplans"
H100, H200 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"
PRICES = {"H100-SXM-80GB": 3.0, "H200-SXM-141GB": 5.0}

# llm: recommended 1 node x 2 H200; 1 x H100 runs out of memory at every micro-batch tried, 2 x H100 fits.
LLM = plan("llm", recommendation=candidate("H200-SXM-141GB", 2, 1, capacity_gib=139.0), prices=PRICES,
           candidates=[candidate("H200-SXM-141GB", 2, 1, capacity_gib=139.0),
                       candidate("H100-SXM-80GB", 2, 1),
                       candidate("H100-SXM-80GB", 1, 1, status="oom", micro_batch=16, peak_gib=85.0),
                       candidate("H100-SXM-80GB", 1, 1, status="oom", micro_batch=32, peak_gib=120.0)])
SEEDED = [
    LLM,
    plan("multi", recommendation=candidate("H100-SXM-80GB", 8, 2), candidates=[candidate("H100-SXM-80GB", 8, 2)]),
    plan("pending", phase="Emulating", observed=None),
    plan("stale", recommendation=candidate("H100-SXM-80GB", 1, 1), generation=2, observed=1),
    plan("broken", recommendation=candidate("H100-SXM-80GB", 1, 1) | {"gpusPerNode": "many"}),
]


def sample(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Operator(LoopThread):
    """kmock and the operator in a thread of their own (see :class:`loop_thread.LoopThread`)."""

    def __init__(self, cert: ServingCert) -> None:
        super().__init__("operator")
        self.cert = cert
        self.port = free_port()
        self.api = ""

    async def main(self) -> None:
        async with kmock.KubernetesEmulator() as api, kmock.Server(api):
            info = kmock.ResourceInfo
            # kopf starts its watches only once it has found the namespaces resource.
            api.resources["v1/namespaces"] = info(kind="Namespace", singular="namespace", namespaced=False,
                                                  verbs={"list", "watch", "get"})
            api.resources[PLANS] = info(kind="TrainingPlan", singular="trainingplan", namespaced=True,
                                        verbs={"list", "watch", "get", "patch"}, subresources={"status"})
            for key, kind in [("batch/v1/jobs", "Job"), ("kubeflow.org/v1/pytorchjobs", "PyTorchJob"),
                              ("trainer.kubeflow.org/v1alpha1/trainjobs", "TrainJob")]:
                api.resources[key] = info(kind=kind, singular=kind.lower(), namespaced=True, verbs={"create", "get"})
            for body in SEEDED:
                api.objects[PLANS, NAMESPACE, body["metadata"]["name"]] = body
            self.api = str(api.url).rstrip("/")

            registry = kopf.OperatorRegistry()

            @kopf.on.login(registry=registry)
            def login(**_: Any) -> kopf.ConnectionInfo:
                return kopf.ConnectionInfo(server=self.api)

            config = Settings(prices={"H100-SXM-80GB": 4.0}, webhook_port=self.port,
                              webhook_cert_dir=str(self.cert.cert_file.parent))
            webhooks.register(registry, config)
            settings = kopf.OperatorSettings()
            settings.admission.server = webhooks.webhook_server(config, addr="127.0.0.1")
            settings.scanning.disabled = True
            settings.posting.enabled = False
            await kopf.operator(registry=registry, settings=settings, clusterwide=True, standalone=True,
                                stop_flag=self.stop_flag, ready_flag=self.ready)

    def __enter__(self) -> Operator:
        self.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the server listens and kopf's watch has listed the plans
            try:
                if "patch" in self.review(job(1, name="probe")):
                    return self
            except (OSError, AssertionError):
                pass
            self.check()
            time.sleep(0.05)
        raise AssertionError("the webhook never sized the probe job")

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def post(self, path: str, body: dict[str, Any], context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=context or self.cert.client_context(),
                                           timeout=10)
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def review(self, obj: dict[str, Any], webhook: str = webhooks.MUTATE_ID) -> dict[str, Any]:
        """POSTs an AdmissionReview for ``obj`` and returns the review's ``response``."""
        sent = review(obj)
        status, data = self.post(f"/{webhook}", sent)
        assert status == 200, data
        answer = json.loads(data)
        assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
        assert answer["response"]["uid"] == sent["request"]["uid"]
        return dict(answer["response"])

    def patched(self, obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The response to ``obj`` and ``obj`` with the response's JSONPatch applied."""
        response = self.review(obj)
        assert response["allowed"] is True
        assert response.get("patchType") == "JSONPatch", response
        ops = json.loads(base64.b64decode(response["patch"]))
        return response, jsonpatch.apply_patch(obj, ops)

    def create_plan(self, body: dict[str, Any]) -> None:
        """Creates a plan through kmock's API, so kopf's watch sees it arrive."""
        url = f"{self.api}/apis/maya.dev/v1alpha1/namespaces/{NAMESPACE}/trainingplans"
        request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as r:
            assert r.status < 300


@pytest.fixture(scope="module")
def operator(serving_cert: ServingCert) -> Iterator[Operator]:
    with Operator(serving_cert) as op:
        yield op


# -- mutate-jobs -----------------------------------------------------------------------------------------------


def test_patches_a_job(operator: Operator) -> None:
    before = sample("maya_admission_requests_total", kind="Job", result="patched")
    response, out = operator.patched(job(8, selector={"nvidia.com/gpu.product": H100}))
    spec = out["spec"]["template"]["spec"]
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": H200}
    record = json.loads(out["metadata"]["annotations"]["maya.dev/sized"])
    assert record["plan"] == "llm" and record["generation"] == 1
    assert (record["before"]["gpusPerNode"], record["after"]["gpusPerNode"]) == (8, 2)
    assert "warnings" not in response
    assert sample("maya_admission_requests_total", kind="Job", result="patched") == before + 1
    # 8 H100 at the plan's 3.0 USD per GPU-hour against 2 H200 at its 5.0.
    assert sample("maya_plan_hourly_saving_dollars", namespace=NAMESPACE, plan="llm") == 8 * 3.0 - 2 * 5.0


def test_patches_a_pytorchjob(operator: Operator) -> None:
    _, out = operator.patched(pytorchjob(8, workers=3, nproc="8"))
    replicas = out["spec"]["pytorchReplicaSpecs"]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 0)
    for replica in replicas.values():
        spec = replica["template"]["spec"]
        assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
        assert spec["nodeSelector"] == {"nvidia.com/gpu.product": H200}
    assert out["spec"]["nprocPerNode"] == "2"
    assert "maya.dev/sized" in out["metadata"]["annotations"]


def test_patches_a_trainjob(operator: Operator) -> None:
    _, out = operator.patched(trainjob(8, nodes=4))
    trainer = out["spec"]["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (1, 2)
    assert trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == "2"
    (patch,) = out["spec"]["runtimePatches"]
    assert patch["manager"] == "maya.dev/sizing"
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert node["name"] == "node"
    assert node["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": H200}


def test_no_annotation_is_not_handled(operator: Operator) -> None:
    before = sum(sample("maya_admission_requests_total", kind="Job", result=r) for r in ("patched", "unchanged"))
    response = operator.review(job(8, plan=None))
    assert response == {"uid": response["uid"], "allowed": True}
    after = sum(sample("maya_admission_requests_total", kind="Job", result=r) for r in ("patched", "unchanged"))
    assert after == before


UNCHANGED = [
    # (id, job, words of the warning, metric result)
    ("missing-plan", job(8, plan="nope"), "TrainingPlan team/nope not found", "unchanged"),
    ("still-planning", pytorchjob(8, plan="pending"), "team/pending is Emulating", "unchanged"),
    ("stale-plan", trainjob(8, plan="stale"), "planning a new generation", "unchanged"),
    ("cannot-take-it", job(8, plan="multi"), "completionMode: Indexed", "unchanged"),
    ("broken-plan", job(8, plan="broken"), "after an error in the sizing webhook", "error"),
]


@pytest.mark.parametrize(("obj", "words", "result"), [c[1:] for c in UNCHANGED], ids=[c[0] for c in UNCHANGED])
def test_unchanged_with_a_warning(operator: Operator, obj: dict[str, Any], words: str, result: str) -> None:
    before = sample("maya_admission_requests_total", kind=obj["kind"], result=result)
    response = operator.review(obj)
    assert response["allowed"] is True
    assert "patch" not in response
    (warning,) = response["warnings"]
    assert words in warning
    assert sample("maya_admission_requests_total", kind=obj["kind"], result=result) == before + 1


def test_plan_created_later_reaches_the_webhook(operator: Operator) -> None:
    later = job(4, plan="later")
    response = operator.review(later)
    assert "not found" in response["warnings"][0]
    body = plan("later", recommendation=candidate("H100-SXM-80GB", 1, 1))
    operator.create_plan(body)
    for _ in range(100):
        response = operator.review(later)
        if "patch" in response:
            break
        time.sleep(0.05)
    _, out = operator.patched(later)
    assert out["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert out["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": H100}


# -- validate-jobs ---------------------------------------------------------------------------------------------

ONE_H100 = {"nvidia.com/gpu.product": H100}


@pytest.mark.parametrize("obj", [
    job(1, selector=ONE_H100, plan="llm"),
    pytorchjob(1, selector=ONE_H100),
    trainjob(1, nodes=1, patches=[{"manager": "example.io/team", "trainingRuntimeSpec": {"template": {"spec": {
        "replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
            "nodeSelector": ONE_H100}}}}}]}}}}]),
], ids=["Job", "PyTorchJob", "TrainJob"])
def test_rejects_what_runs_out_of_memory(operator: Operator, obj: dict[str, Any]) -> None:
    before = sample("maya_admission_requests_total", kind=obj["kind"], result="rejected")
    response = operator.review(obj, webhooks.VALIDATE_ID)
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    message = response["status"]["message"]
    assert "TrainingPlan team/llm predicts 1 node(s) x 1 GPU(s) of H100-SXM-80GB runs out of GPU memory" in message
    assert "micro-batch 16; micro-batch 32" in message
    assert "85.0 GiB per GPU, 79.6 GiB usable on H100-SXM-80GB: 5.4 GiB over" in message
    assert sample("maya_admission_requests_total", kind=obj["kind"], result="rejected") == before + 1


@pytest.mark.parametrize(("obj", "warning"), [
    (job(2, selector=ONE_H100), None),
    (pytorchjob(2), None),
    (trainjob(4, nodes=3), "evaluated no candidate of 3 node(s) x 4 GPU(s) of any GPU model"),
    (job(1, plan="pending"), "team/pending is Emulating"),
], ids=["fits", "fits-any-model", "not-evaluated", "not-planned"])
def test_allows_what_fits_or_is_unknown(operator: Operator, obj: dict[str, Any], warning: str | None) -> None:
    response = operator.review(obj, webhooks.VALIDATE_ID)
    assert response["allowed"] is True and "patch" not in response
    if warning is None:
        assert "warnings" not in response
    else:
        (said,) = response["warnings"]
        assert warning in said


def test_plain_http_is_refused(operator: Operator) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", operator.port, timeout=5)
    try:
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            conn.request("POST", f"/{webhooks.MUTATE_ID}", json.dumps(review(job(8))))
            conn.getresponse().read()
    finally:
        conn.close()
