"""The TrainingPlan CRD on a real API server: established, the example plan accepted, bad plans rejected
by the server's own schema validation, status written only through its subresource."""

from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "crds" / "trainingplans.maya.dev.yaml"


@pytest.fixture(scope="module")
def crd_installed(kube_client):
    ext = client.ApiextensionsV1Api(kube_client)
    body = yaml.safe_load(CRD.read_text())
    try:
        ext.create_custom_resource_definition(body)
    except ApiException as e:
        if e.status != 409:
            raise
    import time

    for _ in range(100):
        got = ext.read_custom_resource_definition(body["metadata"]["name"])
        if any(c.type == "Established" and c.status == "True" for c in (got.status.conditions or [])):
            return got
        time.sleep(0.1)
    pytest.fail("the TrainingPlan CRD was not established")


def _plan(**spec_changes):
    doc = yaml.safe_load((ROOT / "examples" / "plan.yaml").read_text())
    doc["spec"].update(spec_changes)
    return doc


def test_example_plan_is_accepted_and_status_is_a_subresource(crd_installed, kube_client, kube_namespace):
    api = client.CustomObjectsApi(kube_client)
    doc = _plan()
    doc["status"] = {"phase": "Recommended"}
    made = api.create_namespaced_custom_object("maya.dev", "v1alpha1", kube_namespace, "trainingplans", doc)
    assert "status" not in made  # dropped on create: status has its own subresource
    assert made["spec"]["batch"]["microBatches"] == [16, 32, 64]
    assert made["spec"]["resources"][2] == {"gpu": "H200-SXM-141GB", "gpusPerNode": 2, "nodes": 1}
    name = made["metadata"]["name"]
    api.patch_namespaced_custom_object_status("maya.dev", "v1alpha1", kube_namespace, "trainingplans", name,
                                              {"status": {"phase": "Emulating", "emulations": {"ran": 1}}})
    got = api.get_namespaced_custom_object("maya.dev", "v1alpha1", kube_namespace, "trainingplans", name)
    assert got["status"]["phase"] == "Emulating"
    assert got["metadata"]["generation"] == 1


@pytest.mark.parametrize("change, field", [
    ({"objective": "fastest"}, "spec.objective"),
    ({"batch": {"global": 0, "microBatchArg": "--batch", "microBatches": [1]}}, "spec.batch.global"),
    ({"batch": {"global": 8, "microBatches": [1]}}, "spec.batch.microBatchArg"),
    ({"deadline": {"steps": 10, "duration": "soon"}}, "spec.deadline.duration"),
    ({"knobs": [{"name": "x", "flag": "--x", "arg": "--y", "values": [1]}]}, "spec.knobs[0]"),
    ({"command": []}, "spec.command"),
])
def test_the_api_server_rejects_malformed_plans(crd_installed, kube_client, kube_namespace, change, field):
    api = client.CustomObjectsApi(kube_client)
    with pytest.raises(ApiException) as info:
        api.create_namespaced_custom_object("maya.dev", "v1alpha1", kube_namespace, "trainingplans", _plan(**change))
    assert info.value.status == 422
    assert field in info.value.body
