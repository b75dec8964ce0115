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
from typing import Any

import pytest
import yaml
from kubernetes import client

os.environ.setdefault("MAYA_POLL_SECONDS", "1")
os.environ.setdefault("MAYA_METRICS_PORT", "0")

from maya.operator import kube  # noqa: E402
from maya.plan.local import PlanRun  # noqa: E402
from tests.plan_pods import (  # noqa: E402
    ROOT,
    G,
    P,
    V,
    check_emulation_job,
    complete_pods,
    identity,
    jobs,
    local_plan,
    read_plan,
    tiny_plan,
    wait,
)

pytestmark = pytest.mark.emulation

CRD = ROOT / "crds" / "trainingplans.maya.dev.yaml"


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> PlanRun:
    """``maya plan`` of the tiny plan on this machine (its emulations feed the fake pods below)."""
    return local_plan(tmp_path_factory.mktemp("plan-cache"))


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
    wait(lambda: any(c.type == "Established" and c.status == "True"
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


def test_a_plan_is_recommended_through_emulation_jobs(operator, kube_client, kube_namespace, local_run):
    ns = kube_namespace
    api = client.CustomObjectsApi(kube_client)
    with operator():
        api.create_namespaced_custom_object(G, V, ns, P, tiny_plan())
        job = wait(lambda: jobs(kube_client, ns))[0]
        check_emulation_job(kube_client, job, read_plan(kube_client, ns))
        wait(lambda: read_plan(kube_client, ns).get("status", {}).get("phase") == "Emulating")
        wait(lambda: complete_pods(kube_client, ns, local_run) == 0 and
              read_plan(kube_client, ns).get("status", {}).get("phase") in ("Recommended", "Failed"), timeout=90)
    status = read_plan(kube_client, ns)["status"]
    local = local_run.status()
    assert status["phase"] == "Recommended", status
    assert identity(status["recommendation"]) == identity(local["recommendation"])
    assert status["recommendation"]["stepTimeSeconds"] == pytest.approx(local["recommendation"]["stepTimeSeconds"])
    assert status["observedGeneration"] == 1
    assert status["emulations"]["ran"] == local["emulations"]["ran"] == len(jobs(kube_client, ns))
    assert {c["type"] for c in status["conditions"]} == {"Recommended", "Degraded"}
    # The median of the host-bound program's runs, each one's figure kept by the CRD's status schema (on a
    # busy machine every run may be set aside as run in a slow phase of its CPU, and only those are listed).
    rec = status["recommendation"]
    for key in ("emulationsStepTimeSeconds", "emulationsSlowPhaseStepTimeSeconds"):
        assert rec.get(key) == local["recommendation"].get(key), key
    assert rec.get("emulationsSlowPhaseStepTimeSeconds") or len(rec["emulationsStepTimeSeconds"]) in (2, 3)


def test_a_restart_mid_plan_adopts_the_jobs_and_a_spec_change_replans(operator, kube_client, kube_namespace,
                                                                        local_run):
    ns = kube_namespace
    api = client.CustomObjectsApi(kube_client)
    with operator():
        api.create_namespaced_custom_object(G, V, ns, P, tiny_plan())
        # Micro-batch 8 waits for micro-batch 4: if 4 ran out of memory, 8 would not be emulated at all.
        wait(lambda: len(jobs(kube_client, ns)) == 1)
        assert complete_pods(kube_client, ns, local_run) == 1
        # Then micro-batch 8, and micro-batch 4 again (its step follows its host).
        wait(lambda: len(jobs(kube_client, ns)) == 3)
    adopted = {j["metadata"]["name"] for j in jobs(kube_client, ns)}
    with operator():  # a new operator process: same Jobs, nothing lost, nothing duplicated
        wait(lambda: complete_pods(kube_client, ns, local_run) == 0
             and read_plan(kube_client, ns).get("status", {}).get("phase") == "Recommended", timeout=90)
        first = {j["metadata"]["name"] for j in jobs(kube_client, ns)}
        ran = local_run.status()["emulations"]["ran"]
        assert adopted < first and len(first) == ran
        # Prices change the choice, not the emulations: the same Jobs serve the new generation.
        api.patch_namespaced_custom_object(G, V, ns, P, "tiny", {"spec": {"prices": {"H100-SXM-80GB": 9.0}}})
        wait(lambda: read_plan(kube_client, ns)["status"].get("observedGeneration") == 2
              and read_plan(kube_client, ns)["status"]["phase"] == "Recommended", timeout=90)
    status = read_plan(kube_client, ns)["status"]
    assert status["recommendation"]["gpu"] == "H200-SXM-141GB"
    assert {j["metadata"]["name"] for j in jobs(kube_client, ns)} == first
    assert status["emulations"]["reused"] == ran and status["emulations"]["ran"] == 0


def test_an_invalid_plan_fails_with_the_field_named(operator, kube_client, kube_namespace):
    ns = kube_namespace
    doc = tiny_plan(resources=[{"gpu": "H900"}])
    with operator():
        client.CustomObjectsApi(kube_client).create_namespaced_custom_object(G, V, ns, P, doc)
        wait(lambda: read_plan(kube_client, ns).get("status", {}).get("phase") == "Failed")
    cond = read_plan(kube_client, ns)["status"]["conditions"][0]
    assert cond["reason"] == "InvalidPlan" and "unknown GPU 'H900'" in cond["message"]
    assert "spec.resources" in cond["message"]
    assert jobs(kube_client, ns) == []
