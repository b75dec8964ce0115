"""The sizing webhooks, called by the real API server.

The operator's webhooks (``maya.operator.webhooks``) are served by kopf over TLS on loopback and registered by
``url`` and ``caBundle``; kopf logs in to the API server and its watch fills the plans index. Covers:
- a ``batch/v1`` Job, a PyTorchJob and a TrainJob annotated with a Recommended TrainingPlan are stored with
  the plan's GPUs, nodes, processes per node, node selector and ``maya.dev/sized`` record, patched by the API
  server from the webhook's answer (the Kubeflow kinds through minimal CRDs whose spec keeps unknown fields);
- the validating webhook makes the API server refuse a Job whose GPUs the plan predicts run out of memory,
  with the reason, and a job without the annotation is stored as written.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from control_plane import ControlPlane
from kubernetes.client.rest import ApiException
from pki import CertificateAuthority

from maya.operator import webhooks
from maya.operator.crd import crd as trainingplan_crd
from maya.operator.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30
H100, H200 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"
KUBEFLOW = {  # (group, version, plural, kind)
    "pytorchjobs": ("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"),
    "trainjobs": ("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob"),
}


def _minimal_crd(group: str, version: str, plural: str, kind: str) -> dict[str, Any]:
    """A stand-in for a Kubeflow CRD: the real ones are large; the webhooks need only the kind to be served."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                 "versions": [{"name": version, "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                   "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}}]},
    }


def _established(plane: ControlPlane, body: dict[str, Any]) -> None:
    status, text = plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                 json.dumps(body).encode())
    assert status in (201, 409), text
    spec = body["spec"]
    served = f"/apis/{spec['group']}/{spec['versions'][0]['name']}/{spec['names']['plural']}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, _ = plane.request("GET", served)
        if status == 200:
            return
        time.sleep(0.2)
    raise AssertionError(f"CRD {body['metadata']['name']} not served within 60 s")


@pytest.fixture(scope="module")
def job_crds(kube_apiserver: ControlPlane) -> None:
    """The TrainingPlan CRD and minimal PyTorchJob and TrainJob CRDs, served."""
    _established(kube_apiserver, trainingplan_crd())
    for group, version, plural, kind in KUBEFLOW.values():
        _established(kube_apiserver, _minimal_crd(group, version, plural, kind))


def _candidate(gpu: str, gpus_per_node: int, nodes: int, status: str = "ok", peak_gib: float = 60.0,
               micro_batch: int = 16) -> dict[str, Any]:
    usable = {"H100-SXM-80GB": 79.6, "H200-SXM-141GB": 139.0}[gpu]
    return {"gpu": gpu, "gpus": gpus_per_node * nodes, "gpusPerNode": gpus_per_node, "nodes": nodes,
            "microBatch": micro_batch, "gradientAccumulation": 1, "knobs": {}, "fits": status == "ok",
            "stepTimeSeconds": 0.4 if status == "ok" else None, "costPerStepUSD": 0.001 if status == "ok" else None,
            "peakMemoryBytes": int(peak_gib * GIB), "capacityBytes": int(usable * GIB), "status": status,
            "reason": ""}


def _plan(custom: Any, namespace: str) -> None:
    """The example plan, Recommended: 2 nodes x 2 H200; 1 x H100 runs out of memory."""
    doc = yaml.safe_load((ROOT / "examples" / "plan.yaml").read_text())
    made = custom.create_namespaced_custom_object("maya.dev", "v1alpha1", namespace, "trainingplans", doc)
    recommended = _candidate("H200-SXM-141GB", 2, 2)
    status = {"phase": "Recommended", "observedGeneration": made["metadata"]["generation"],
              "recommendation": recommended,
              "candidates": [recommended, _candidate("H100-SXM-80GB", 1, 1, status="oom", peak_gib=91.0)]}
    custom.patch_namespaced_custom_object_status("maya.dev", "v1alpha1", namespace, "trainingplans",
                                                 doc["metadata"]["name"], {"status": status})


class Operator:
    """The webhooks' kopf operator in a thread of its own, logged in to the API server, serving on loopback."""

    def __init__(self, plane: ControlPlane, namespace: str, certs: Path) -> None:
        ca = CertificateAuthority(certs, "webhook")
        ca.issue("tls", "maya-webhook", hosts=("127.0.0.1",))  # tls.crt and tls.key, as the chart mounts them
        self.ca_bundle = base64.b64encode(ca.cert_pem).decode()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.settings = Settings(webhook_port=self.port, webhook_cert_dir=str(certs))
        self.plane, self.namespace = plane, namespace
        self._stop, self._ready = threading.Event(), threading.Event()
        self.failure: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="maya-operator", daemon=True)

    def url(self, webhook: str) -> str:
        return f"https://127.0.0.1:{self.port}/{webhook}"

    def _run(self) -> None:
        import kopf

        registry = kopf.OperatorRegistry()

        @kopf.on.login(registry=registry)
        def login(**_: Any) -> Any:
            return self.plane.kopf_connection_info()

        webhooks.register(registry, self.settings)
        settings = kopf.OperatorSettings()
        settings.admission.server = webhooks.webhook_server(self.settings, addr="127.0.0.1")
        settings.posting.enabled = False
        try:
            asyncio.run(kopf.operator(registry=registry, settings=settings, namespaces=[self.namespace],
                                      standalone=True, stop_flag=self._stop, ready_flag=self._ready))
        except BaseException as error:  # noqa: B036 (reported to the test thread)
            self.failure.append(error)
            self._ready.set()

    def __enter__(self) -> Operator:
        self._thread.start()
        assert self._ready.wait(60) and not self.failure, f"kopf did not start: {self.failure}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


@pytest.fixture
def registered(kube_client: Any) -> Iterator[Any]:
    """Registers the mutating and validating configurations for one namespace; deletes them afterwards."""
    admission = kubernetes.client.AdmissionregistrationV1Api(kube_client)
    names: list[tuple[str, str]] = []

    def register(operator: Operator) -> None:
        rules = [{"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs"]}] + [
            {"apiGroups": [g], "apiVersions": [v], "resources": [p]} for g, v, p, _ in KUBEFLOW.values()]
        for rule in rules:
            rule.update(operations=["CREATE"], scope="Namespaced")
        name = f"maya-{operator.namespace}"
        for kind, webhook in (("mutating", webhooks.MUTATE_ID), ("validating", webhooks.VALIDATE_ID)):
            body = {"metadata": {"name": name}, "webhooks": [{
                "name": f"{webhook}.maya.dev",
                "clientConfig": {"url": operator.url(webhook), "caBundle": operator.ca_bundle},
                "rules": rules,
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": operator.namespace}},
                # Fail closed here (the chart fails open): a webhook the API server cannot call fails the test.
                "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10}]}
            if kind == "mutating":
                admission.create_mutating_webhook_configuration(body)
            else:
                admission.create_validating_webhook_configuration(body)
            names.append((kind, name))

    yield register
    for kind, name in names:
        if kind == "mutating":
            admission.delete_mutating_webhook_configuration(name)
        else:
            admission.delete_validating_webhook_configuration(name)


def _job(name: str, gpus: int, *, plan: str | None = "llm-demo", selector: dict[str, str] | None = None,
         resize: bool = True) -> dict[str, Any]:
    notes = {"maya.dev/plan": plan} if plan else {}
    if not resize:
        notes["maya.dev/resize"] = "false"
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [
        {"name": "train", "image": "train:1", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if selector:
        pod["nodeSelector"] = selector
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "annotations": notes},
            "spec": {"completionMode": "Indexed", "completions": 1, "parallelism": 1, "backoffLimit": 0,
                     "template": {"spec": pod}}}


def test_apiserver_applies_the_sizing_webhooks(
    kube_apiserver: ControlPlane, kube_client: Any, kube_namespace: str, job_crds: None, registered: Any,
    tmp_path: Path,
) -> None:
    custom = kubernetes.client.CustomObjectsApi(kube_client)
    batch = kubernetes.client.BatchV1Api(kube_client)
    _plan(custom, kube_namespace)
    with Operator(kube_apiserver, kube_namespace, tmp_path) as operator:
        registered(operator)
        # The API server picks the configurations up from its informer and kopf's watch lists the plan:
        # probe until a Job comes back sized.
        deadline, stored = time.monotonic() + 60, None
        while time.monotonic() < deadline and not operator.failure:
            try:
                probe = batch.create_namespaced_job(kube_namespace, _job(f"probe-{uuid.uuid4().hex[:6]}", 1))
            except ApiException:
                probe = None
            if probe is not None and "maya.dev/sized" in (probe.metadata.annotations or {}):
                stored = probe
                break
            time.sleep(0.2)
        assert stored is not None, f"no Job came back sized (operator: {operator.failure})"

        made = batch.create_namespaced_job(kube_namespace, _job("train", 8, selector={"nvidia.com/gpu.product": H100}))
        job = batch.read_namespaced_job("train", kube_namespace)
        assert made.metadata.uid == job.metadata.uid
        pod = job.spec.template.spec
        assert pod.containers[0].resources.limits == {"nvidia.com/gpu": "2"}
        assert pod.node_selector == {"nvidia.com/gpu.product": H200}
        assert (job.spec.parallelism, job.spec.completions) == (2, 2)
        record = json.loads(job.metadata.annotations["maya.dev/sized"])
        assert record["plan"] == "llm-demo" and record["generation"] == 1
        assert record["before"]["gpu"] == "H100-SXM-80GB" and record["before"]["gpusPerNode"] == 8
        assert record["after"] == {"gpu": "H200-SXM-141GB", "gpuProduct": H200, "gpusPerNode": 2, "nodes": 2,
                                   "procsPerNode": None}

        group, version, plural, kind = KUBEFLOW["pytorchjobs"]
        replica = {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "pytorch", "image": "train:1", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}
        custom.create_namespaced_custom_object(group, version, kube_namespace, plural, {
            "apiVersion": f"{group}/{version}", "kind": kind,
            "metadata": {"name": "ddp", "annotations": {"maya.dev/plan": "llm-demo"}},
            "spec": {"pytorchReplicaSpecs": {"Master": replica}}})
        ddp = custom.get_namespaced_custom_object(group, version, kube_namespace, plural, "ddp")
        replicas = ddp["spec"]["pytorchReplicaSpecs"]
        assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 1)
        for spec in replicas.values():
            assert spec["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}
            assert spec["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": H200}
        assert ddp["spec"]["nprocPerNode"] == "2"

        group, version, plural, kind = KUBEFLOW["trainjobs"]
        custom.create_namespaced_custom_object(group, version, kube_namespace, plural, {
            "apiVersion": f"{group}/{version}", "kind": kind,
            "metadata": {"name": "tj", "annotations": {"maya.dev/plan": "llm-demo"}},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"image": "train:1", "numNodes": 4}}})
        trainer = custom.get_namespaced_custom_object(group, version, kube_namespace, plural, "tj")["spec"]
        assert (trainer["trainer"]["numNodes"], trainer["trainer"]["numProcPerNode"]) == (2, 2)
        assert trainer["trainer"]["resourcesPerNode"] == {"limits": {"nvidia.com/gpu": "2"}}
        (patch,) = trainer["runtimePatches"]
        node = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        assert patch["manager"] == "maya.dev/sizing" and node["name"] == "node"
        assert node["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": H200}

        plain = batch.create_namespaced_job(kube_namespace, _job("plain", 8, plan=None))
        assert plain.spec.template.spec.containers[0].resources.limits == {"nvidia.com/gpu": "8"}
        assert "maya.dev/sized" not in (plain.metadata.annotations or {})

        with pytest.raises(ApiException) as refused:
            batch.create_namespaced_job(kube_namespace, _job("too-small", 1, selector={"nvidia.com/gpu.product": H100},
                                                             resize=False))
        assert refused.value.status == 422
        message = json.loads(refused.value.body)["message"]
        assert "validate-jobs.maya.dev" in message and "denied the request" in message
        assert "1 node(s) x 1 GPU(s) of H100-SXM-80GB runs out of GPU memory" in message
        assert "91.0 GiB per GPU, 79.6 GiB usable on H100-SXM-80GB: 11.4 GiB over" in message
        with pytest.raises(ApiException) as gone:
            batch.read_namespaced_job("too-small", kube_namespace)
        assert gone.value.status == 404
    assert not operator.failure, operator.failure
