"""What the real-API-server tier proves, against kube-apiserver itself.

Covers:
- the server is up and reports the pinned version; the admin logs in by token and by
  the kubeconfig; a bad token gets 401; RBAC judges another user by its bindings;
- namespaces and ConfigMaps round-trip through the typed ``kubernetes`` client;
- a CRD with an openAPIV3Schema becomes Established, and its schema rejects bad
  objects (minimum, enum, required) with the field named;
- the status subresource: status is dropped on create and through the main
  resource, written only through ``/status``; ``metadata.generation`` moves with
  spec only;
- a MutatingWebhookConfiguration registered by ``url`` and ``caBundle`` is called
  by the API server for a ConfigMap and a ``batch/v1`` Job, and its JSONPatch lands;
- kopf logs in with ``ControlPlane.kopf_connection_info()``, watches the CRD in one
  namespace, and its create handler's status patch reaches ``/status``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes.client
import pytest
from admission import WebhookServer
from control_plane import ADMIN_USER, ControlPlane
from kubernetes.client.rest import ApiException
from pki import CertificateAuthority

GROUP = "smoke.maya.dev"
PLURAL = "widgets"

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget", "shortNames": ["wg"]},
        "versions": [{
            "name": "v1",
            "served": True,
            "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "required": ["spec"],
                "properties": {
                    "spec": {
                        "type": "object",
                        "required": ["size"],
                        "properties": {
                            "size": {"type": "integer", "minimum": 1},
                            "color": {"type": "string", "enum": ["red", "blue"]},
                        },
                    },
                    "status": {
                        "type": "object",
                        "properties": {
                            "phase": {"type": "string"},
                            "observedGeneration": {"type": "integer"},
                        },
                    },
                },
            }},
        }],
    },
}


def test_ready_and_version(kube_apiserver: ControlPlane) -> None:
    status, body = kube_apiserver.request("GET", "/version")
    assert status == 200
    assert json.loads(body)["gitVersion"] == kube_apiserver.version
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    status, body = kube_apiserver.request(
        "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", json.dumps(review).encode()
    )
    assert status == 201, body
    user = json.loads(body)["status"]["userInfo"]
    assert user["username"] == ADMIN_USER
    assert "system:masters" in user["groups"]


def test_kubeconfig_logs_in(kube_apiserver: ControlPlane) -> None:
    import kubernetes.config

    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(str(kube_apiserver.kubeconfig), client_configuration=config)
    with kubernetes.client.ApiClient(config) as client:
        names = {ns.metadata.name for ns in kubernetes.client.CoreV1Api(client).list_namespace().items}
    assert {"default", "kube-system"} <= names


def test_unauthenticated_request_is_refused(kube_apiserver: ControlPlane) -> None:
    status, _ = dataclasses.replace(kube_apiserver, token="not-a-token").request("GET", "/api/v1/namespaces")
    assert status == 401


def test_rbac_judges_other_users(kube_apiserver: ControlPlane, kube_client: Any, kube_namespace: str) -> None:
    user = f"system:serviceaccount:{kube_namespace}:reader"
    with kube_apiserver.api_client(user, ("system:serviceaccounts",)) as client:
        core = kubernetes.client.CoreV1Api(client)
        with pytest.raises(ApiException) as forbidden:
            core.list_namespaced_config_map(kube_namespace)
        assert forbidden.value.status == 403
        rbac = kubernetes.client.RbacAuthorizationV1Api(kube_client)
        rbac.create_namespaced_role(kube_namespace, {
            "metadata": {"name": "read-configmaps"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
        })
        rbac.create_namespaced_role_binding(kube_namespace, {
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": kube_namespace}],
        })
        deadline = time.monotonic() + 30
        while True:  # the authorizer's informer sees the new binding a moment later
            try:
                assert core.list_namespaced_config_map(kube_namespace).items is not None
                break
            except ApiException as error:
                if error.status != 403 or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with pytest.raises(ApiException) as still_forbidden:
            core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "x"}})
        assert still_forbidden.value.status == 403


def test_namespace_and_configmap(kube_client: Any, kube_namespace: str) -> None:
    core = kubernetes.client.CoreV1Api(kube_client)
    assert core.read_namespace(kube_namespace).status.phase == "Active"
    core.create_namespaced_config_map(
        kube_namespace, {"metadata": {"name": "settings"}, "data": {"gpus": "8", "model": "H100"}}
    )
    read = core.read_namespaced_config_map("settings", kube_namespace)
    assert read.data == {"gpus": "8", "model": "H100"}
    with pytest.raises(ApiException) as conflict:
        core.create_namespaced_config_map(kube_namespace, {"metadata": {"name": "settings"}})
    assert conflict.value.status == 409


@pytest.fixture(scope="module")
def widget_crd(kube_apiserver: ControlPlane) -> str:
    """The Widget CRD, applied and Established."""
    status, body = kube_apiserver.request(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json.dumps(WIDGET_CRD).encode()
    )
    assert status in (201, 409), body
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{PLURAL}.{GROUP}"
    deadline = time.monotonic() + 60
    conditions: dict[str, str] = {}
    while time.monotonic() < deadline:
        status, body = kube_apiserver.request("GET", path)
        assert status == 200, body
        # a CRD just created may show "status": {"conditions": null} until the controller fills it
        crd_status = json.loads(body).get("status") or {}
        conditions = {c["type"]: c["status"] for c in crd_status.get("conditions") or []}
        if conditions.get("Established") == "True":
            # Established means served; the discovery of the new group may lag a little.
            status, _ = kube_apiserver.request("GET", f"/apis/{GROUP}/v1/{PLURAL}")
            if status == 200:
                return f"{PLURAL}.{GROUP}"
        time.sleep(0.2)
    raise AssertionError(f"CRD {PLURAL}.{GROUP} not Established within 60 s: conditions {conditions}")


def _widget(name: str, spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}
    if status is not None:
        body["status"] = status
    return body


@pytest.mark.parametrize(
    ("spec", "field", "words"),
    [
        ({"size": 0}, "spec.size", "greater than or equal to 1"),
        ({"size": 2, "color": "green"}, "spec.color", "Unsupported value"),
        ({"color": "red"}, "spec.size", "Required value"),
        ({"size": "two"}, "spec.size", "must be of type integer"),
    ],
)
def test_schema_rejects_invalid_widget(
    kube_client: Any, kube_namespace: str, widget_crd: str, spec: dict[str, Any], field: str, words: str
) -> None:
    custom = kubernetes.client.CustomObjectsApi(kube_client)
    with pytest.raises(ApiException) as rejected:
        custom.create_namespaced_custom_object(GROUP, "v1", kube_namespace, PLURAL, _widget("bad", spec))
    assert rejected.value.status == 422
    message = json.loads(rejected.value.body)["message"]
    assert field in message and words in message, message
    assert custom.list_namespaced_custom_object(GROUP, "v1", kube_namespace, PLURAL)["items"] == []


def test_status_subresource_and_generation(kube_client: Any, kube_namespace: str, widget_crd: str) -> None:
    custom = kubernetes.client.CustomObjectsApi(kube_client)
    args = (GROUP, "v1", kube_namespace, PLURAL, "w")

    created = custom.create_namespaced_custom_object(
        GROUP, "v1", kube_namespace, PLURAL, _widget("w", {"size": 2}, status={"phase": "Forged"})
    )
    assert "status" not in created, "status must be dropped on create when the status subresource is on"
    assert created["metadata"]["generation"] == 1

    through_main = custom.patch_namespaced_custom_object(*args, {"status": {"phase": "Forged"}})
    assert "status" not in through_main
    assert through_main["metadata"]["generation"] == 1

    written = custom.patch_namespaced_custom_object_status(
        *args, {"status": {"phase": "Ready", "observedGeneration": 1}}
    )
    assert written["status"] == {"phase": "Ready", "observedGeneration": 1}
    assert written["metadata"]["generation"] == 1, "a status write must not move generation"

    spec_changed = custom.patch_namespaced_custom_object(*args, {"spec": {"size": 3}})
    assert spec_changed["metadata"]["generation"] == 2
    assert spec_changed["status"]["phase"] == "Ready", "a spec write must keep status"

    spec_through_status = custom.patch_namespaced_custom_object_status(
        *args, {"spec": {"size": 9}, "status": {"observedGeneration": 2}}
    )
    assert spec_through_status["spec"] == {"size": 3}, "/status must ignore spec"
    assert spec_through_status["status"]["observedGeneration"] == 2
    assert spec_through_status["metadata"]["generation"] == 2

    relabelled = custom.patch_namespaced_custom_object(*args, {"metadata": {"labels": {"team": "ml"}}})
    assert relabelled["metadata"]["generation"] == 2, "metadata writes must not move generation"

    with pytest.raises(ApiException) as rejected:
        custom.patch_namespaced_custom_object(*args, {"spec": {"size": -1}})
    assert rejected.value.status == 422
    final = custom.get_namespaced_custom_object(*args)
    assert final["spec"] == {"size": 3}
    assert final["metadata"]["generation"] == 2


def _job(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "train", "image": "train:latest", "resources": {"limits": {"cpu": "1"}}}],
        }}},
    }


def test_mutating_webhook_called_by_apiserver(
    kube_client: Any, kube_namespace: str, webhook_server: Any, register_webhook: Any
) -> None:
    register_webhook(kube_namespace)
    core = kubernetes.client.CoreV1Api(kube_client)
    # The API server picks new webhook configurations up from its own informer:
    # probe until the first object comes back mutated.
    deadline = time.monotonic() + 30
    data: dict[str, str] = {}
    while time.monotonic() < deadline:
        probe = core.create_namespaced_config_map(
            kube_namespace, {"metadata": {"name": f"probe-{uuid.uuid4().hex[:6]}"}, "data": {"a": "1"}}
        )
        data = probe.data
        if "mutated-by" in data:
            break
        time.sleep(0.2)
    assert data == {"a": "1", "mutated-by": "maya-test-webhook"}
    stored = core.read_namespaced_config_map(probe.metadata.name, kube_namespace)
    assert stored.data["mutated-by"] == "maya-test-webhook"

    job = kubernetes.client.BatchV1Api(kube_client).create_namespaced_job(kube_namespace, _job("train"))
    pod = job.spec.template.spec
    assert pod.containers[0].resources.limits == {"cpu": "1", "nvidia.com/gpu": "2"}
    assert pod.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}

    seen = [r for r in webhook_server.requests if r["namespace"] == kube_namespace]
    kinds = {(r["kind"], r["operation"]) for r in seen}
    assert ("ConfigMap", "CREATE") in kinds and ("Job", "CREATE") in kinds
    assert all(r["user"] == ADMIN_USER for r in seen)


def _mutate(request: dict[str, Any]) -> list[dict[str, Any]]:
    """Mark ConfigMaps; give Jobs two GPUs and an H100 node selector, as a sizing webhook would."""
    obj = request["object"]
    if request["kind"]["kind"] == "ConfigMap":
        if obj.get("data"):
            return [{"op": "add", "path": "/data/mutated-by", "value": "maya-test-webhook"}]
        return [{"op": "add", "path": "/data", "value": {"mutated-by": "maya-test-webhook"}}]
    if request["kind"]["kind"] == "Job":
        return [
            {"op": "add", "path": "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": "2"},
            {"op": "add", "path": "/spec/template/spec/nodeSelector",
             "value": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        ]
    return []


@pytest.fixture(scope="module")
def webhook_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    # A CA of its own, so only the caBundle in the configuration can make the API server trust it.
    ca = CertificateAuthority(tmp_path_factory.mktemp("webhook-pki"), "webhook")
    with WebhookServer(ca, _mutate) as server:
        yield server


@pytest.fixture
def register_webhook(kube_client: Any, webhook_server: WebhookServer) -> Iterator[Callable[[str], None]]:
    """Registers the webhook for ConfigMaps and Jobs of one namespace; deletes it afterwards."""
    admission = kubernetes.client.AdmissionregistrationV1Api(kube_client)
    names: list[str] = []

    def register(namespace: str) -> None:
        name = f"maya-smoke-{namespace}"
        admission.create_mutating_webhook_configuration({
            "metadata": {"name": name},
            "webhooks": [{
                "name": "smoke.maya.dev",
                "clientConfig": {"url": webhook_server.url(), "caBundle": webhook_server.ca_bundle},
                "rules": [{
                    "apiGroups": ["", "batch"], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["configmaps", "jobs"], "scope": "Namespaced",
                }],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                # Fail closed here: a webhook the API server cannot reach must fail the test.
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 5,
            }],
        })
        names.append(name)

    yield register
    for name in names:
        admission.delete_mutating_webhook_configuration(name)



def test_kopf_operator_patches_status(
    kube_apiserver: ControlPlane, kube_client: Any, kube_namespace: str, widget_crd: str
) -> None:
    kopf = pytest.importorskip("kopf")
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> Any:
        return kube_apiserver.kopf_connection_info()

    @kopf.on.create(GROUP, "v1", PLURAL, registry=registry)
    def created(spec: Any, patch: Any, **_: Any) -> None:
        patch.status["phase"] = f"sized-{spec['size']}"

    settings = kopf.OperatorSettings()
    settings.peering.standalone = True
    stop = threading.Event()
    ready = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(kopf.operator(
                registry=registry, settings=settings, namespaces=[kube_namespace], standalone=True,
                stop_flag=stop, ready_flag=ready,
            ))
        except BaseException as error:  # noqa: B036 (reported to the test thread)
            failure.append(error)

    thread = threading.Thread(target=run, name="kopf", daemon=True)
    thread.start()
    custom = kubernetes.client.CustomObjectsApi(kube_client)
    try:
        assert ready.wait(60), f"kopf did not start: {failure}"
        custom.create_namespaced_custom_object(GROUP, "v1", kube_namespace, PLURAL, {
            "apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": "k"}, "spec": {"size": 4},
        })
        deadline = time.monotonic() + 60
        status: dict[str, Any] = {}
        while time.monotonic() < deadline and not failure:
            status = custom.get_namespaced_custom_object(GROUP, "v1", kube_namespace, PLURAL, "k").get("status", {})
            if status.get("phase"):
                break
            time.sleep(0.2)
        assert not failure, failure
        assert status.get("phase") == "sized-4", status
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive(), "kopf did not stop"
