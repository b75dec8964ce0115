"""The pure sizing functions of ``maya.operator.sizing``.

Covers:
- a recommendation applied to a batch/v1 Job (training container first or named by annotation; GPU limits, and
  requests where present; an Indexed Job's parallelism and completions; PET_NPROC_PER_NODE where set), to a
  PyTorchJob (Master 1, Worker nodes - 1, a Worker made from the Master, worker-only jobs, nprocPerNode) and to
  a TrainJob (numNodes, resourcesPerNode, numProcPerNode, a runtimePatches entry of its own);
- the node selector's label and values from the catalog or the settings; the ``maya.dev/sized`` record;
- every JSONPatch applied by an independent implementation (``jsonpatch``) gives the sized object; sizing a
  sized job again changes nothing;
- jobs that cannot take a recommendation, and bad recommendations, say why;
- the memory verdict over a plan's candidates: rejected with how much is missing, allowed with a warning
  when only some configurations fit or the shape was not evaluated.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import pytest
from job_objects import candidate, container, job, pytorchjob, runtime_patch, trainjob

from maya.operator.settings import Settings
from maya.operator.sizing import (
    SIZED_ANNOTATION,
    Shape,
    SizingError,
    json_patch,
    memory_verdict,
    requested_shape,
    size,
)

H100 = "NVIDIA-H100-80GB-HBM3"
H200 = "NVIDIA-H200"
SETTINGS = Settings()
LABEL = "nvidia.com/gpu.product"


def rec(gpu: str = "H100-SXM-80GB", gpus_per_node: int = 4, nodes: int = 1) -> dict[str, Any]:
    return candidate(gpu, gpus_per_node, nodes)


def sized(obj: dict[str, Any], recommendation: dict[str, Any], settings: Settings = SETTINGS) -> dict[str, Any]:
    """Sizes ``obj``, applies the JSONPatch with jsonpatch and checks it gives the sized object."""
    result = size(obj, recommendation, plan="llm", generation=3, settings=settings)
    patched = jsonpatch.apply_patch(obj, result.ops)
    assert patched == result.sized
    return patched


def pod_spec(obj: dict[str, Any], replica: str | None = None) -> dict[str, Any]:
    if replica:
        return obj["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"]
    return obj["spec"]["template"]["spec"]


def trainer_selector(obj: dict[str, Any]) -> dict[str, str]:
    (mine,) = [p for p in obj["spec"]["runtimePatches"] if p["manager"] == "maya.dev/sizing"]
    (node,) = mine["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert node["name"] == "node"
    return node["template"]["spec"]["template"]["spec"]["nodeSelector"]


# -- batch/v1 Job ----------------------------------------------------------------------------------------------

JOB_CASES = [
    # (id, job, recommendation, GPUs in limits, GPUs in requests, parallelism/completions)
    ("limits-set", job(8), rec(gpus_per_node=4), "4", None, None),
    ("no-gpus-asked", job(), rec(gpus_per_node=2), "2", None, None),
    ("requests-follow", job(containers=[container(gpus=8, requests=True)]), rec(gpus_per_node=1), "1", "1", None),
    ("indexed-grows", job(8, indexed=True, completions=1), rec(gpus_per_node=8, nodes=3), "8", None, 3),
    ("indexed-shrinks", job(8, indexed=True, completions=4), rec(gpus_per_node=2, nodes=1), "2", None, 1),
]


@pytest.mark.parametrize(("obj", "recommendation", "limit", "request_", "nodes"),
                         [c[1:] for c in JOB_CASES], ids=[c[0] for c in JOB_CASES])
def test_job(obj: dict[str, Any], recommendation: dict[str, Any], limit: str, request_: str | None,
             nodes: int | None) -> None:
    out = sized(obj, recommendation)
    c = pod_spec(out)["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == limit
    assert c["resources"].get("requests", {}).get("nvidia.com/gpu") == request_
    assert pod_spec(out)["nodeSelector"] == {LABEL: H100}
    if nodes is None:
        assert "parallelism" not in out["spec"] and "completions" not in out["spec"]
    else:
        assert out["spec"]["parallelism"] == out["spec"]["completions"] == nodes
    assert c["resources"].get("limits", {}).get("cpu") == obj["spec"]["template"]["spec"]["containers"][0][
        "resources"].get("limits", {}).get("cpu")


def test_job_records_what_changed() -> None:
    out = sized(job(8, selector={LABEL: "NVIDIA-A100-SXM4-80GB"}), rec("H200-SXM-141GB", 2))
    record = json.loads(out["metadata"]["annotations"][SIZED_ANNOTATION])
    assert record == {
        "plan": "llm", "generation": 3,
        "before": {"gpu": "A100-SXM-80GB", "gpuProduct": "NVIDIA-A100-SXM4-80GB", "gpusPerNode": 8, "nodes": 1,
                   "procsPerNode": None},
        "after": {"gpu": "H200-SXM-141GB", "gpuProduct": H200, "gpusPerNode": 2, "nodes": 1, "procsPerNode": None},
    }
    assert out["metadata"]["annotations"]["maya.dev/plan"] == "llm"


def test_job_container_named_by_annotation() -> None:
    obj = job(containers=[container("sidecar"), container("trainer", 8)],
              annotations={"maya.dev/container": "trainer"})
    out = sized(obj, rec(gpus_per_node=2))
    sidecar, trainer = pod_spec(out)["containers"]
    assert trainer["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert sidecar["resources"] == {}


def test_job_nproc_env_follows_when_set() -> None:
    obj = job(containers=[container(gpus=8, env={"PET_NPROC_PER_NODE": "8", "OTHER": "x"})])
    env = pod_spec(sized(obj, rec(gpus_per_node=4)))["containers"][0]["env"]
    assert env == [{"name": "PET_NPROC_PER_NODE", "value": "4"}, {"name": "OTHER", "value": "x"}]
    untouched = pod_spec(sized(job(8), rec(gpus_per_node=4)))["containers"][0]
    assert "env" not in untouched


@pytest.mark.parametrize(("obj", "recommendation", "says"), [
    (job(8), rec(nodes=2), "completionMode: Indexed"),
    (job(containers=[container("a")], annotations={"maya.dev/container": "b"}), rec(), "no container named 'b'"),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}, "spec": {}}, rec(), "cannot size a apps/v1"),
    ({"apiVersion": "batch/v1", "kind": "Job", "metadata": {}}, rec(), "has no spec"),
    (job(8), {"gpu": "H100-SXM-80GB", "nodes": 1}, "lacks gpusPerNode"),
    (job(8), rec("TPU-v5"), "unknown GPU 'TPU-v5'"),
    (job(8), rec(gpus_per_node=0), "0 GPUs per node"),
    (job(containers=[container(gpus=8) | {"resources": {"limits": {"nvidia.com/gpu": "1.5"}}}]), rec(),
     "not a whole number"),
], ids=["not-indexed", "container", "kind", "no-spec", "rec-fields", "rec-gpu", "rec-zero", "bad-quantity"])
def test_unsizable(obj: dict[str, Any], recommendation: dict[str, Any], says: str) -> None:
    with pytest.raises(SizingError, match=says):
        size(obj, recommendation, plan="llm", generation=1, settings=SETTINGS)


# -- PyTorchJob ------------------------------------------------------------------------------------------------

PYTORCH_CASES = [
    # (id, job, nodes recommended, Master replicas, Worker replicas)
    ("shrink", pytorchjob(8, workers=3, nproc="8"), 2, 1, 1),
    ("one-node", pytorchjob(8, workers=3), 1, 1, 0),
    ("worker-made", pytorchjob(8), 3, 1, 2),
    ("master-only-stays", pytorchjob(8), 1, 1, None),
    ("worker-only", pytorchjob(8, master=False, workers=4), 2, None, 2),
]


@pytest.mark.parametrize(("obj", "nodes", "masters", "workers"), [c[1:] for c in PYTORCH_CASES],
                         ids=[c[0] for c in PYTORCH_CASES])
def test_pytorchjob(obj: dict[str, Any], nodes: int, masters: int | None, workers: int | None) -> None:
    out = sized(obj, rec("H200-SXM-141GB", 2, nodes))
    replicas = out["spec"]["pytorchReplicaSpecs"]
    assert (replicas.get("Master") or {}).get("replicas") == masters
    assert (replicas.get("Worker") or {}).get("replicas") == workers
    for name in replicas:
        spec = pod_spec(out, name)
        (c,) = spec["containers"]
        assert c["name"] == "pytorch" and c["resources"]["limits"]["nvidia.com/gpu"] == "2"
        assert spec["nodeSelector"] == {LABEL: H200}
    assert out["spec"]["nprocPerNode"] == "2"
    assert requested_shape(out, SETTINGS) == Shape("H200-SXM-141GB", H200, 2, nodes, "2")


def test_pytorchjob_unsizable() -> None:
    elastic = pytorchjob(8, workers=1)
    elastic["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 4}
    with pytest.raises(SizingError, match="elastic"):
        size(elastic, rec(), plan="llm", generation=1, settings=SETTINGS)
    wrong = pytorchjob(8, workers=1)
    wrong["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "main"
    with pytest.raises(SizingError, match="replica Worker has no container named 'pytorch'"):
        size(wrong, rec(), plan="llm", generation=1, settings=SETTINGS)


# -- TrainJob --------------------------------------------------------------------------------------------------


def test_trainjob() -> None:
    team = runtime_patch("example.io/platform", labels={"team": "ml"})
    out = sized(trainjob(8, nodes=4, nproc=8, patches=[team]), rec("H100-SXM-80GB", 4, 2))
    trainer = out["spec"]["trainer"]
    assert trainer["numNodes"] == 2 and trainer["numProcPerNode"] == 4
    assert trainer["resourcesPerNode"] == {"limits": {"nvidia.com/gpu": "4"}}
    assert out["spec"]["runtimePatches"][0] == team
    assert trainer_selector(out) == {LABEL: H100}
    assert requested_shape(out, SETTINGS) == Shape("H100-SXM-80GB", H100, 4, 2, 4)


def test_trainjob_without_trainer_numbers() -> None:
    obj = trainjob()
    before = requested_shape(obj, SETTINGS)
    assert before == Shape(None, None, None, None, None)
    out = sized(obj, rec("H200-SXM-141GB", 8, 1))
    assert out["spec"]["trainer"]["numNodes"] == 1
    assert trainer_selector(out) == {LABEL: H200}


def test_trainjob_replaces_its_own_patch_only() -> None:
    mine = runtime_patch("maya.dev/sizing", selector={LABEL: "NVIDIA-A100-SXM4-80GB"})
    out = sized(trainjob(8, nodes=1, patches=[mine]), rec("H100-SXM-80GB", 8, 1))
    assert len(out["spec"]["runtimePatches"]) == 1
    assert trainer_selector(out) == {LABEL: H100}
    theirs = runtime_patch("example.io/platform", selector={LABEL: "NVIDIA-A100-SXM4-80GB"})
    with pytest.raises(SizingError, match="'example.io/platform' already selects"):
        size(trainjob(8, patches=[theirs]), rec(), plan="llm", generation=1, settings=SETTINGS)


# -- settings, idempotence, JSONPatch --------------------------------------------------------------------------


def test_settings_rename_label_and_products() -> None:
    custom = Settings(gpu_products={"H200-SXM-141GB": "NVIDIA-H200-SXM-141GB"}, gpu_product_label="gpu.example/model")
    out = sized(job(8), rec("H200-SXM-141GB", 4), custom)
    assert pod_spec(out)["nodeSelector"] == {"gpu.example/model": "NVIDIA-H200-SXM-141GB"}
    assert requested_shape(out, custom).gpu == "H200-SXM-141GB"
    assert requested_shape(out, SETTINGS).gpu is None


@pytest.mark.parametrize("obj", [job(8), job(8, indexed=True, completions=2), pytorchjob(8, workers=1),
                                 trainjob(8, nodes=2)], ids=["job", "indexed", "pytorchjob", "trainjob"])
def test_sizing_twice_changes_nothing(obj: dict[str, Any]) -> None:
    recommendation = rec("H100-SXM-80GB", 2, 2 if obj["kind"] != "Job" or "completionMode" in obj["spec"] else 1)
    once = sized(obj, recommendation)
    again = size(once, recommendation, plan="llm", generation=3, settings=SETTINGS)
    assert again.ops == [] and again.before == again.after


def test_job_with_the_recommended_shape_is_not_annotated() -> None:
    result = size(job(4, selector={LABEL: H100}), rec(gpus_per_node=4), plan="llm", generation=1,
                  settings=SETTINGS)
    assert result.ops == []
    assert SIZED_ANNOTATION not in result.sized["metadata"]["annotations"]


@pytest.mark.parametrize(("before", "after"), [
    ({"a": 1, "b": {"c": [1, 2]}}, {"a": "1", "b": {"c": [1, 2, 3]}}),
    ({"x/y": 1, "m~n": 2, "gone": True}, {"x/y": 2, "m~n": 2}),
    ({"l": [1, 2, 3]}, {"l": [3]}),
    ({"l": [{"k": 1}, {"k": 2}]}, {"l": [{"k": 1}, {"k": 5, "j": None}]}),
    ({"v": 1}, {"v": True}),
    ({}, {"new": {"deep": [1]}}),
], ids=["types-and-growth", "escapes", "shrink", "items", "bool-vs-int", "add"])
def test_json_patch(before: dict[str, Any], after: dict[str, Any]) -> None:
    ops = json_patch(before, after)
    assert jsonpatch.apply_patch(before, ops) == after
    assert json_patch(after, after) == []


# -- memory verdict --------------------------------------------------------------------------------------------

OOM_H100 = candidate("H100-SXM-80GB", 1, 1, status="oom", micro_batch=32, peak_gib=92.5, reason="short")
OOM_H100_B64 = candidate("H100-SXM-80GB", 1, 1, status="oom", micro_batch=64, peak_gib=150.0)
FITS_H100 = candidate("H100-SXM-80GB", 1, 1, micro_batch=16)
FITS_H200 = candidate("H200-SXM-141GB", 1, 1, micro_batch=32, capacity_gib=139.0)
OOM_H200 = candidate("H200-SXM-141GB", 1, 1, status="oom", micro_batch=64, peak_gib=150.0, capacity_gib=139.0)
PRUNED = candidate("H100-SXM-80GB", 2, 1, status="pruned", peak_gib=None)

VERDICTS = [
    # (id, shape, candidates, allowed, words the message must hold)
    ("every-config-oom", Shape("H100-SXM-80GB", H100, 1, 1), [OOM_H100, OOM_H100_B64, FITS_H200], False,
     ["runs out of GPU memory", "micro-batch 32; micro-batch 64", "92.5 GiB per GPU", "79.6 GiB usable",
      "12.9 GiB over"]),
    ("some-configs-fit", Shape("H100-SXM-80GB", H100, 1, 1), [OOM_H100, FITS_H100], True,
     ["fits only some", "micro-batch 32", "fits with micro-batch 16 on H100-SXM-80GB"]),
    ("all-fit", Shape("H100-SXM-80GB", H100, 1, 1), [FITS_H100], True, []),
    ("no-model-all-oom", Shape(None, None, 1, 1), [OOM_H100, OOM_H200], False, ["any GPU model", "over"]),
    ("no-model-one-fits", Shape(None, None, 1, 1), [OOM_H100, FITS_H200], True, ["H200-SXM-141GB"]),
    ("not-evaluated", Shape("H100-SXM-80GB", H100, 8, 1), [OOM_H100], True, ["evaluated no candidate", "8 GPU(s)"]),
    ("only-pruned", Shape("H100-SXM-80GB", H100, 2, 1), [PRUNED], True, ["could not evaluate"]),
    ("other-nodes", Shape("H100-SXM-80GB", H100, 1, 2), [OOM_H100], True, ["evaluated no candidate"]),
    ("no-gpus", Shape(None, None, None, 1), [OOM_H100], True, ["requests no nvidia.com/gpu"]),
    ("unknown-product", Shape(None, "NVIDIA-X", 1, 1), [OOM_H100], True, ["'NVIDIA-X'"]),
    ("reason-without-peak", Shape("H100-SXM-80GB", H100, 1, 1),
     [candidate(status="oom", gpus_per_node=1, peak_gib=None, reason="ran out of memory on H100-SXM-80GB: short by "
                "2.00 GiB of 79.60 GiB")], False, ["short by 2.00 GiB"]),
]


@pytest.mark.parametrize(("shape", "candidates", "allowed", "words"), [c[1:] for c in VERDICTS],
                         ids=[c[0] for c in VERDICTS])
def test_memory_verdict(shape: Shape, candidates: list[dict[str, Any]], allowed: bool, words: list[str]) -> None:
    verdict = memory_verdict(shape, candidates, plan="team/llm")
    assert verdict.allowed is allowed
    for word in words:
        assert word in verdict.message
    assert bool(verdict.message) == bool(words)
