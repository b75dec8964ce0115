"""The Helm chart installed into a real API server through the Helm library, then upgraded and uninstalled.

Covers what rendering alone cannot: the API server accepts every object the
chart makes (its own validation, the CRD established); `lookup` keeps the
Helm-made webhook certificate across an upgrade and the configurations'
caBundle follows it; RBAC, as the API server judges it, lets the operator's
ServiceAccount do what the operator does and no more; the mutating webhook
fails open when the operator does not answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from control_plane import ControlPlane

helm_python = pytest.importorskip("helm_python")
kubernetes = pytest.importorskip("kubernetes")
from kubernetes.client import (  # noqa: E402
    AdmissionregistrationV1Api,
    ApiextensionsV1Api,
    AppsV1Api,
    AuthorizationV1Api,
    BatchV1Api,
    CoreV1Api,
)

CHART = Path(__file__).resolve().parents[2] / "helm" / "maya"

# (verb, group, resource, subresource) the operator's ServiceAccount must be allowed, in any namespace.
ALLOWED = [
    ("watch", "maya.dev", "trainingplans", ""), ("patch", "maya.dev", "trainingplans", "status"),
    ("create", "batch", "jobs", ""), ("delete", "batch", "jobs", ""), ("list", "", "pods", ""),
    ("get", "", "pods", "log"), ("create", "", "events", ""), ("create", "events.k8s.io", "events", ""),
    ("create", "networking.k8s.io", "networkpolicies", ""),
    ("watch", "apiextensions.k8s.io", "customresourcedefinitions", ""), ("list", "", "namespaces", ""),
]
DENIED = [
    ("get", "", "secrets", ""), ("create", "", "pods", ""), ("delete", "maya.dev", "trainingplans", ""),
    ("create", "apiextensions.k8s.io", "customresourcedefinitions", ""), ("delete", "", "pods", ""),
    ("create", "", "pods", "exec"), ("update", "batch", "jobs", ""), ("create", "rbac.authorization.k8s.io", "roles", ""),
]


@pytest.fixture
def release(kube_apiserver: ControlPlane, kube_namespace: str) -> Iterator[tuple[Any, str, dict[str, Any]]]:
    """The chart installed as a fresh release in a fresh namespace; uninstalled afterwards.

    The mutating webhook only sees namespaces labelled for this test, so that other
    tests of the session never wait on a webhook nobody serves.
    """
    name = f"maya-{uuid.uuid4().hex[:6]}"
    values = {"webhook": {"mutating": {"namespaceSelector": {"matchLabels": {"maya.dev/chart-test": name}}}}}
    config = helm_python.Config(kubeconfig_path=kube_apiserver.kubeconfig, namespace=kube_namespace)
    try:
        config.install(str(CHART), name, values, namespace=kube_namespace, timeout=60)
        yield config, name, values
    finally:
        try:
            config.uninstall(name)
        finally:
            config.close()


def _tls(core: CoreV1Api, namespace: str, name: str) -> dict[str, str]:
    return core.read_namespaced_secret(f"{name}-webhook-tls", namespace).data


def _ca_bundles(admission: AdmissionregistrationV1Api, name: str) -> list[str]:
    hooks = (admission.read_mutating_webhook_configuration(name).webhooks
             + admission.read_validating_webhook_configuration(name).webhooks)
    return [h.client_config.ca_bundle for h in hooks]  # base64, as the client keeps byte fields


def test_install_upgrade_keeps_certificate(release, kube_client, kube_namespace) -> None:
    config, name, values = release
    core, admission = CoreV1Api(kube_client), AdmissionregistrationV1Api(kube_client)
    crd = ApiextensionsV1Api(kube_client).read_custom_resource_definition("trainingplans.maya.dev")
    assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
    first = _tls(core, kube_namespace, name)
    assert set(first) == {"tls.crt", "tls.key", "ca.crt"}
    assert _ca_bundles(admission, name) == [first["ca.crt"]] * 2

    config.upgrade(str(CHART), name, {**values, "emulation": {"maxPods": 6}}, namespace=kube_namespace, timeout=60)
    assert _tls(core, kube_namespace, name) == first
    assert _ca_bundles(admission, name) == [first["ca.crt"]] * 2
    deployment = AppsV1Api(kube_client).read_namespaced_deployment(name, kube_namespace)
    env = {e.name: e.value for e in deployment.spec.template.spec.containers[0].env}
    assert env["MAYA_MAX_EMULATION_PODS"] == "6"
    assert deployment.spec.template.spec.containers[0].security_context.read_only_root_filesystem is True


def _allowed(authz: AuthorizationV1Api, user: str, verb: str, group: str, resource: str, sub: str) -> bool:
    review = authz.create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:serviceaccounts"],
                 "resourceAttributes": {"namespace": "some-team", "verb": verb, "group": group,
                                        "resource": resource, "subresource": sub}}})
    return bool(review.status.allowed)


def test_operator_rbac_as_the_api_server_judges_it(release, kube_client, kube_namespace) -> None:
    _, name, _ = release
    authz = AuthorizationV1Api(kube_client)
    user = f"system:serviceaccount:{kube_namespace}:{name}"
    assert [a for a in ALLOWED if not _allowed(authz, user, *a)] == []
    assert [d for d in DENIED if _allowed(authz, user, *d)] == []


def test_mutating_webhook_fails_open(release, kube_apiserver, kube_client, kube_namespace) -> None:
    """Nobody serves the webhook here: a job that names a plan is still admitted, unchanged.

    The API server picks a new configuration up a moment after it is made, so
    jobs are created until its log shows that it called this release's webhook.
    """
    _, name, _ = release
    CoreV1Api(kube_client).patch_namespace(kube_namespace, {"metadata": {"labels": {"maya.dev/chart-test": name}}})
    log = kube_apiserver.workdir / "kube-apiserver.log"
    called = f"failing open mutate-jobs.maya.dev: failed calling webhook \"mutate-jobs.maya.dev\": " \
             f"failed to call webhook: Post \"https://{name}-webhook.{kube_namespace}.svc:443/mutate-jobs"
    for attempt in range(100):
        job = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": f"train-{attempt}", "annotations": {"maya.dev/plan": "llm"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "train", "image": "trainer:1", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}},
        }
        made = BatchV1Api(kube_client).create_namespaced_job(kube_namespace, job)
        assert made.spec.template.spec.containers[0].resources.limits == {"nvidia.com/gpu": "8"}
        assert made.spec.template.spec.node_selector is None
        if called in log.read_text():
            break
    else:
        pytest.fail(f"the API server never called the chart's mutating webhook; log: {log}")

