"""The emulated API server keeps the rules that the operator's kmock tests rely on (:mod:`kube_emulator`): the
metadata a create completes, ``generation`` moving with ``spec`` only, ``status`` written only through its
subresource, JSON patches tested against ``resourceVersion``, and a finalizer holding a deleted object."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kmock
import pytest
from kube_emulator import ServedApi
from kubernetes import client

pytestmark = pytest.mark.operator

G, V, P, NS = "maya.dev", "v1alpha1", "trainingplans", "team"
RESOURCES = {
    f"{G}/{V}/{P}": kmock.ResourceInfo(kind="TrainingPlan", singular="trainingplan", namespaced=True,
                                       verbs={"get", "create", "patch", "delete"}, subresources={"status"}),
    "v1/events": kmock.ResourceInfo(kind="Event", singular="event", namespaced=True, verbs={"create"}),
}


@pytest.fixture(scope="module")
def custom() -> Iterator[client.CustomObjectsApi]:
    with ServedApi(RESOURCES) as served:
        api = served.api_client()
        try:
            yield client.CustomObjectsApi(api)
        finally:
            api.close()


def _create(custom: client.CustomObjectsApi, name: str) -> dict[str, Any]:
    body = {"apiVersion": f"{G}/{V}", "kind": "TrainingPlan", "metadata": {"name": name}, "spec": {"x": 1},
            "status": {"phase": "Recommended"}}
    return dict(custom.create_namespaced_custom_object(G, V, NS, P, body))


def test_a_create_completes_the_metadata_and_drops_the_status(custom: client.CustomObjectsApi) -> None:
    made = _create(custom, "made")
    meta = made["metadata"]
    assert (meta["name"], meta["namespace"], meta["generation"]) == ("made", NS, 1)
    assert meta["uid"] and meta["creationTimestamp"] and meta["resourceVersion"]
    assert "status" not in made
    event = client.CoreV1Api(custom.api_client).create_namespaced_event(NS, {
        "metadata": {"generateName": "kopf-event-"}, "involvedObject": {"kind": "TrainingPlan", "name": "made"}})
    assert event.metadata.name.startswith("kopf-event-") and event.metadata.name != "kopf-event-"


def test_generation_moves_with_spec_and_status_only_through_its_subresource(custom: client.CustomObjectsApi) -> None:
    versions = [int(_create(custom, "moves")["metadata"]["resourceVersion"])]
    out = custom.patch_namespaced_custom_object(G, V, NS, P, "moves", {
        "spec": {"x": 2}, "status": {"phase": "Failed"}, "metadata": {"labels": {"a": "b"}}})
    versions.append(int(out["metadata"]["resourceVersion"]))
    assert (out["spec"], out["metadata"]["generation"], out["metadata"]["labels"]) == ({"x": 2}, 2, {"a": "b"})
    assert "status" not in out
    out = custom.patch_namespaced_custom_object(G, V, NS, P, "moves", {"metadata": {"labels": None}})
    versions.append(int(out["metadata"]["resourceVersion"]))
    assert "labels" not in out["metadata"] and out["metadata"]["generation"] == 2
    out = custom.patch_namespaced_custom_object_status(G, V, NS, P, "moves", {
        "status": {"phase": "Emulating"}, "spec": {"x": 3}})
    versions.append(int(out["metadata"]["resourceVersion"]))
    assert (out["status"], out["spec"], out["metadata"]["generation"]) == ({"phase": "Emulating"}, {"x": 2}, 2)
    assert versions == sorted(set(versions))


def test_a_json_patch_applies_to_the_version_it_tests_and_a_finalizer_holds_a_deletion(
        custom: client.CustomObjectsApi) -> None:
    version = _create(custom, "held")["metadata"]["resourceVersion"]
    add = [{"op": "test", "path": "/metadata/resourceVersion", "value": version},
           {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/hold"]}]
    assert custom.patch_namespaced_custom_object(G, V, NS, P, "held", add)["metadata"]["finalizers"] == [
        "example.com/hold"]
    with pytest.raises(client.ApiException) as stale:
        custom.patch_namespaced_custom_object(G, V, NS, P, "held", add)
    assert stale.value.status == 422
    custom.delete_namespaced_custom_object(G, V, NS, P, "held")
    assert custom.get_namespaced_custom_object(G, V, NS, P, "held")["metadata"]["deletionTimestamp"]
    custom.patch_namespaced_custom_object(G, V, NS, P, "held", [{"op": "remove", "path": "/metadata/finalizers"}])
    with pytest.raises(client.ApiException) as gone:
        custom.get_namespaced_custom_object(G, V, NS, P, "held")
    assert gone.value.status == 404
