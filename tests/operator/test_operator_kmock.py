"""The TrainingPlan operator in-process against kmock: a plan driven to Recommended through emulation Jobs.

kopf runs the operator's own handlers (``maya.operator.handlers``, as ``kopf run`` does) in a thread and event
loop of its own, against kmock in another (:class:`kube_emulator.ApiServer`: kmock with the API server's
metadata, patch and status-subresource rules), so the API server outlives a stopped operator.  No kubelet runs:
the tests give each Job its pod (:mod:`tests.plan_pods`), with the predictor's message taken from the emulations
``maya plan`` ran for the same file.  Covers: the Jobs' pod security and owner reference and the deny-egress
NetworkPolicy; the status reaching ``Recommended`` with the local recommendation, with events and metrics; a
restart mid-plan adopting the Jobs; a spec change re-planning on the same Jobs; a deletion through kopf's
finalizer dropping the plan's metric series; a pod that cannot pull its image settling the plan ``Failed``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import kmock
import kopf
import pytest
from kube_emulator import ServedApi
from kubernetes import client
from loop_thread import LoopThread
from test_webhooks import sample

os.environ.setdefault("MAYA_POLL_SECONDS", "1")
os.environ.setdefault("MAYA_METRICS_PORT", "0")

from maya.operator import handlers, kube, metrics  # noqa: E402
from maya.operator.jobs import ANNOTATION_REQUEST, request_from_json  # noqa: E402
from maya.plan.local import PlanRun  # noqa: E402
from maya.predict import SPARE  # noqa: E402
from tests.plan_pods import (  # noqa: E402
    PULL_ERROR,
    G,
    P,
    V,
    check_emulation_job,
    complete_pods,
    fail_pods,
    identity,
    jobs,
    local_plan,
    phase,
    read_plan,
    tiny_plan,
    wait,
)

pytestmark = [pytest.mark.operator, pytest.mark.emulation]

TERMINAL = ("Recommended", "Failed")
_info = kmock.ResourceInfo
RESOURCES = {
    # kopf starts its watches only once it has found the namespaces resource.
    "v1/namespaces": _info(kind="Namespace", singular="namespace", namespaced=False, verbs={"list", "watch", "get"}),
    f"{G}/{V}/{P}": _info(kind="TrainingPlan", singular="trainingplan", namespaced=True, shortnames={"tp"},
                          verbs={"list", "watch", "get", "create", "patch", "delete"}, subresources={"status"}),
    "batch/v1/jobs": _info(kind="Job", singular="job", namespaced=True,
                           verbs={"list", "get", "create", "patch", "delete"}, subresources={"status"}),
    "v1/pods": _info(kind="Pod", singular="pod", namespaced=True, verbs={"list", "get", "create", "patch", "delete"},
                     subresources={"status"}),
    "networking.k8s.io/v1/networkpolicies": _info(kind="NetworkPolicy", singular="networkpolicy", namespaced=True,
                                                  verbs={"list", "get", "create"}),
    "v1/events": _info(kind="Event", singular="event", namespaced=True, verbs={"list", "get", "create"}),
}

_SERVER: list[str] = []  # the emulated API server's URL while this module's fixture runs


@kopf.on.login()
def login(**_: Any) -> kopf.ConnectionInfo | None:
    """kmock while this module runs; the default registry may hold another tier's login, so it outranks it."""
    return kopf.ConnectionInfo(server=_SERVER[0], priority=1) if _SERVER else None


class Operator(LoopThread):
    """One operator process: ``kopf run --standalone --all-namespaces -m maya.operator.handlers``."""

    def __init__(self) -> None:
        super().__init__("kopf")

    async def main(self) -> None:
        settings = kopf.OperatorSettings()
        settings.scanning.disabled = True  # kmock serves no CustomResourceDefinitions to scan
        await kopf.operator(settings=settings, clusterwide=True, standalone=True, stop_flag=self.stop_flag,
                            ready_flag=self.ready)

    def __enter__(self) -> Operator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> PlanRun:
    """``maya plan`` of the tiny plan on this machine (its emulations feed the pods the tests give the Jobs)."""
    return local_plan(tmp_path_factory.mktemp("plan-cache"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[ServedApi]:
    """The emulated API server, which the operator's own client (``maya.operator.kube``) talks to."""
    assert (handlers.SETTINGS.poll_seconds, handlers.SETTINGS.metrics_port) == (1, 0), \
        "maya.operator.handlers read its settings before this module set MAYA_POLL_SECONDS and MAYA_METRICS_PORT"
    with ServedApi(RESOURCES) as served:
        operator_client = served.api_client()
        kube.use(operator_client)
        _SERVER.append(served.url)
        try:
            yield served
        finally:
            _SERVER.clear()
            kube.use(None)
            operator_client.close()


@pytest.fixture
def api(cluster: ServedApi) -> Iterator[client.ApiClient]:
    """The test's own client (the operator's runs in kopf's threads)."""
    c = cluster.api_client()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def ns() -> str:
    """A namespace per test (kmock needs none created)."""
    return f"t-{uuid.uuid4().hex[:10]}"


def create(api: client.ApiClient, ns: str, doc: dict[str, Any]) -> dict[str, Any]:
    return dict(client.CustomObjectsApi(api).create_namespaced_custom_object(G, V, ns, P, doc))


def events(api: client.ApiClient, ns: str, name: str) -> dict[str, list[Any]]:
    """The events posted about plan ``name``, by reason."""
    out: dict[str, list[Any]] = {}
    for e in client.CoreV1Api(api).list_namespaced_event(ns).items:
        if e.involved_object.kind == "TrainingPlan" and e.involved_object.name == name:
            out.setdefault(e.reason, []).append(e)
    return out


def recommend(api: client.ApiClient, ns: str, run: PlanRun, name: str = "tiny") -> dict[str, Any]:
    """Completes the plan's Jobs' pods until the plan settles; returns its status."""
    wait(lambda: complete_pods(api, ns, run) == 0 and phase(api, ns, name) in TERMINAL, timeout=90)
    return dict(read_plan(api, ns, name)["status"])


def test_a_plan_is_recommended_through_emulation_jobs(api, ns, local_run):
    with Operator():
        plan = create(api, ns, tiny_plan())
        assert plan["metadata"]["generation"] == 1 and "status" not in plan
        job = wait(lambda: jobs(api, ns))[0]
        check_emulation_job(api, job, plan)
        wait(lambda: phase(api, ns) == "Emulating")
        emulating = read_plan(api, ns)["status"]
        assert emulating["observedGeneration"] == 1 and emulating["emulations"]["running"] == 1
        assert emulating["startedAt"]
        status = recommend(api, ns, local_run)
        said = wait(lambda: (e := events(api, ns, "tiny")).get("Recommended") and e)
    local = local_run.status()
    assert status["phase"] == "Recommended", status
    assert identity(status["recommendation"]) == identity(local["recommendation"])
    assert status["recommendation"]["stepTimeSeconds"] == pytest.approx(local["recommendation"]["stepTimeSeconds"])
    assert [identity(c) for c in status["candidates"]] == [identity(c) for c in local["candidates"]]
    assert status["observedGeneration"] == 1
    # Two programs, each following its host: emulated two or three times (one Job per run; more where one ran in a
    # slow phase of the emulating CPU), judged on the median.
    ran = local["emulations"]["ran"]
    assert status["emulations"]["ran"] == ran == len(jobs(api, ns)) and 4 <= ran <= 2 * (3 + SPARE)
    runs = sorted(request_from_json(j["metadata"]["annotations"][ANNOTATION_REQUEST]).run for j in jobs(api, ns))
    assert runs[:4] == [0, 0, 1, 1] and set(runs) <= set(range(3 + SPARE))
    rec = status["recommendation"]
    assert rec.get("emulationsSlowPhaseStepTimeSeconds") or len(rec["emulationsStepTimeSeconds"]) in (2, 3)
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Recommended"]["status"] == "True" and conditions["Degraded"]["status"] == "False"
    # One "Emulating" event per Job, one "Recommended" with the condition's message.
    assert len(said["Emulating"]) == ran
    assert said["Recommended"][0].message == conditions["Recommended"]["message"]
    rec = status["recommendation"]
    assert sample("maya_plan_step_seconds", namespace=ns, plan="tiny") == pytest.approx(rec["stepTimeSeconds"])
    assert sample("maya_plan_recommended_gpus", namespace=ns, plan="tiny", gpu=rec["gpu"]) == rec["gpus"]


def test_a_restart_mid_plan_adopts_the_jobs_and_a_spec_change_replans(api, ns, local_run):
    with Operator():
        create(api, ns, tiny_plan())
        # Micro-batch 8 waits for micro-batch 4: if 4 ran out of memory, 8 would not be emulated at all.
        wait(lambda: len(jobs(api, ns)) == 1)
        assert complete_pods(api, ns, local_run) == 1
        # Then micro-batch 8, and micro-batch 4 again (its step follows its host).
        wait(lambda: len(jobs(api, ns)) == 3)
    adopted = {j["metadata"]["name"] for j in jobs(api, ns)}
    assert read_plan(api, ns)["status"]["phase"] == "Emulating"
    with Operator():  # a new operator process: same Jobs, nothing lost, nothing duplicated
        status = recommend(api, ns, local_run)
        assert status["phase"] == "Recommended", status
        ran = local_run.status()["emulations"]["ran"]
        assert status["emulations"]["ran"] == ran and status["emulations"]["reused"] == 0
        first = {j["metadata"]["name"] for j in jobs(api, ns)}
        assert adopted < first and len(first) == ran
        # Prices change the choice, not the emulations: the same Jobs serve the new generation.
        client.CustomObjectsApi(api).patch_namespaced_custom_object(
            G, V, ns, P, "tiny", {"spec": {"prices": {"H100-SXM-80GB": 9.0}}})
        assert read_plan(api, ns)["metadata"]["generation"] == 2
        wait(lambda: read_plan(api, ns)["status"].get("observedGeneration") == 2
             and read_plan(api, ns)["status"]["phase"] in TERMINAL, timeout=90)
    status = read_plan(api, ns)["status"]
    assert status["phase"] == "Recommended", status
    assert status["recommendation"]["gpu"] == "H200-SXM-141GB"
    assert {j["metadata"]["name"] for j in jobs(api, ns)} == first
    assert status["emulations"]["reused"] == ran and status["emulations"]["ran"] == 0
    assert all(c["observedGeneration"] == 2 for c in status["conditions"])


def test_deleting_a_plan_drops_its_metric_series(api, ns, local_run):
    with Operator():
        plan = create(api, ns, tiny_plan())
        rec = recommend(api, ns, local_run)["recommendation"]
        series = {"namespace": ns, "plan": "tiny"}
        assert sample("maya_plan_step_seconds", **series) == pytest.approx(rec["stepTimeSeconds"])
        # kopf's finalizer holds the plan until its timer has stopped and the delete handler has run.
        assert read_plan(api, ns)["metadata"].get("finalizers")
        client.CustomObjectsApi(api).delete_namespaced_custom_object(G, V, ns, P, "tiny")
        wait(lambda: not _exists(api, ns, "tiny"))
    assert metrics.REGISTRY.get_sample_value("maya_plan_step_seconds", series) is None
    assert metrics.REGISTRY.get_sample_value("maya_plan_recommended_gpus", {**series, "gpu": rec["gpu"]}) is None
    assert metrics.REGISTRY.get_sample_value("maya_plan_hourly_cost_dollars", {**series, "gpu": rec["gpu"]}) is None
    # The plan's Jobs carry it as their controlling owner: the API server's garbage collector deletes them.
    assert {j["metadata"]["ownerReferences"][0]["uid"] for j in jobs(api, ns)} == {plan["metadata"]["uid"]}


def _exists(api: client.ApiClient, ns: str, name: str) -> bool:
    try:
        read_plan(api, ns, name)
    except client.ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def test_a_pod_that_cannot_pull_its_image_fails_the_plan(api, ns):
    with Operator():
        create(api, ns, tiny_plan("pull"))
        wait(lambda: fail_pods(api, ns) == 0 and phase(api, ns, "pull") in TERMINAL, timeout=90)
        said = wait(lambda: (e := events(api, ns, "pull")).get("EmulationFailed") and e)
    status = read_plan(api, ns, "pull")["status"]
    assert status["phase"] == "Failed", status
    assert status.get("recommendation") is None
    assert status["emulations"]["failed"] == status["emulations"]["ran"] == len(jobs(api, ns))
    conditions = {c["type"]: c for c in status["conditions"]}
    recommended, degraded = conditions["Recommended"], conditions["Degraded"]
    assert (recommended["status"], recommended["reason"]) == ("False", "EmulationFailed")
    assert (degraded["status"], degraded["reason"]) == ("True", "EmulationFailed")
    for said_why in (recommended["message"], degraded["message"], said["EmulationFailed"][0].message):
        assert "container train cannot start (ErrImagePull)" in said_why and PULL_ERROR in said_why
    # The first failure stops the search, as maya plan does: one error, not one Job per candidate.
    assert len(jobs(api, ns)) == 1
    assert all(c["status"] == "failed" or c["reason"].startswith("not run: the script failed")
               for c in status["candidates"])
