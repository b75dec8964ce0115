"""Emulation Jobs: one per emulation a plan's search asks for, running the user's image untouched.

The pod has three parts.  An init container from the emulation image copies
the interposer and Maya's start-up hook into a shared volume.  The ``train``
container runs the user's image with that interposer preloaded (nothing in
the image changes): it records the image's PyTorch and CUDA versions, times
the CPU probe, runs the program, and writes its exit code.  The
``predictor`` container (emulation image) waits for it, summarises the
traces, predicts every GPU of the architecture, and leaves a compact result
in its termination message, so user pods need no API access.

Pods are built for untrusted code: no service-account token, non-root, no
privilege escalation, every capability dropped, seccomp RuntimeDefault,
requests and limits, an active deadline, no GPU, and labels that the
deny-egress NetworkPolicy selects.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from typing import Any

from maya import catalog
from maya.cpu_probe import PROBE_CODE
from maya.operator.settings import Settings
from maya.plan.candidates import Program
from maya.plan.search import Request
from maya.plan.spec import Plan

LABEL_PLAN = "maya.dev/plan"
LABEL_REQUEST = "maya.dev/request"
LABEL_ROLE = "maya.dev/role"
ANNOTATION_REQUEST = "maya.dev/request"
ANNOTATION_GENERATION = "maya.dev/generation"
OUT = "/maya-out"
LIB = "/maya"
EXIT_FILE = f"{OUT}/exit-code"

# Runs in the user's image: versions, probe, the program (its output kept for the error message), exit code.
_TRAIN_SCRIPT = f"""
py="$1"; shift
"$py" -c 'import sys, torch; print(torch.__version__, torch.version.cuda or "none")' > {OUT}/versions.txt 2>&1 \\
  || echo "no-torch $("$py" --version 2>&1)" > {OUT}/versions.txt
"$py" -c "$MAYA_PROBE_CODE" - > {OUT}/probe-ns.txt 2>/dev/null || true
"$@" > {OUT}/log.txt 2>&1
code=$?
cat {OUT}/log.txt
echo $code > {EXIT_FILE}.tmp && mv {EXIT_FILE}.tmp {EXIT_FILE}
"""


def request_id(plan: Plan, req: Request) -> str:
    """Names a Job after what it emulates: a restarted operator finds the same name for the same work."""
    what = {"argv": req.program.argv, "per_node": req.program.gpus_per_node, "nodes": req.program.nodes,
            "gpu": req.gpu, "predict": req.predict_for, "image": plan.image,
            "env": sorted(plan.env.items()), "steps": plan.emulation.get("steps")}
    text = json.dumps(what | ({"run": req.run} if req.run else {}))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def job_name(plan_name: str, rid: str) -> str:
    return f"{plan_name[:40].rstrip('-.')}-emu-{rid}"


def request_json(req: Request) -> str:
    return json.dumps({"argv": list(req.program.argv), "gpusPerNode": req.program.gpus_per_node,
                       "nodes": req.program.nodes, "gpu": req.gpu, "predictFor": list(req.predict_for),
                       "run": req.run})


def request_from_json(text: str) -> Request:
    d = json.loads(text)
    return Request(Program(tuple(d["argv"]), int(d["gpusPerNode"]), int(d["nodes"])), d["gpu"],
                   tuple(d["predictFor"]), int(d.get("run", 0)))


def _quantity_times(value: str, n: int) -> str:
    """'1' x 2 -> '2', '500m' x 2 -> '1000m'."""
    if value.endswith("m") and value[:-1].isdigit():
        return f"{int(value[:-1]) * n}m"
    try:
        return f"{float(value) * n:g}"
    except ValueError:
        return value


def emulation_job(plan: Plan, owner: dict[str, Any], generation: int, req: Request, settings: Settings) -> dict[str, Any]:
    """The batch/v1 Job of one emulation; ``owner`` is the plan's metadata (name, namespace, uid)."""
    rid = request_id(plan, req)
    name = job_name(owner["name"], rid)
    gpu = catalog.lookup(req.gpu)
    per_node = req.program.gpus_per_node
    command = req.program.emulation_command()
    if plan.emulation.get("steps"):
        command += ["--steps", str(plan.emulation["steps"])]
    cpu = _quantity_times(str(plan.emulation.get("cpu", settings.emulation_cpu)), req.program.ranks)
    memory = str(plan.emulation.get("memory", settings.emulation_memory))
    deadline = int(plan.emulation.get("timeoutSeconds", settings.emulation_timeout_seconds))
    labels = {LABEL_PLAN: owner["name"], LABEL_REQUEST: rid, LABEL_ROLE: "emulation",
              "app.kubernetes.io/managed-by": "maya-operator"}
    env = [{"name": k, "value": v} for k, v in plan.env.items()] + [
        {"name": "LD_PRELOAD", "value": f"{LIB}/lib/libmaya.so"},
        {"name": "LD_LIBRARY_PATH", "value": f"{LIB}/lib"},
        {"name": "PYTHONPATH", "value": f"{LIB}/hook"},
        {"name": "MAYA_GPU_SPEC", "value": gpu.spec_string()},
        {"name": "MAYA_GPUS_PER_NODE", "value": str(per_node)},
        {"name": "MAYA_NUM_GPUS", "value": str(per_node)},
        {"name": "MAYA_TRACE_DIR", "value": f"{OUT}/traces"},
        {"name": "MAYA_RUN_ID", "value": rid},
        {"name": "MAYA_PIN_CPU", "value": "1"},
        {"name": "MAYA_PROBE_CODE", "value": PROBE_CODE},
        {"name": "HOME", "value": "/tmp"},
    ]
    restricted = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}
    volumes = [{"name": "maya", "emptyDir": {}}, {"name": "out", "emptyDir": {}},
               {"name": "tmp", "emptyDir": {}}, {"name": "shm", "emptyDir": {"medium": "Memory"}}]
    train: dict[str, Any] = {
        "name": "train", "image": plan.image, "command": ["sh", "-c", _TRAIN_SCRIPT, "maya-train", command[0],
                                                          *command],
        "env": env, "securityContext": restricted,
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}},
        "volumeMounts": [{"name": "maya", "mountPath": LIB, "readOnly": True}, {"name": "out", "mountPath": OUT},
                         {"name": "tmp", "mountPath": "/tmp"}, {"name": "shm", "mountPath": "/dev/shm"}],
    }
    if plan.working_dir:
        train["workingDir"] = plan.working_dir
    predictor = {
        "name": "predictor", "image": settings.emulation_image,
        "command": ["python", "-m", "maya.operator.pod", "--out", OUT, "--gpu", req.gpu, "--predict-for",
                    ",".join(req.predict_for), "--gpus-per-node", str(per_node), "--timeout", str(deadline),
                    "--command", shlex.join(command)],
        "securityContext": {**restricted, "readOnlyRootFilesystem": True},
        "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}},
        "volumeMounts": [{"name": "out", "mountPath": OUT}, {"name": "tmp", "mountPath": "/tmp"}],
        "env": [{"name": "MAYA_CACHE_DIR", "value": "/tmp/maya-cache"}, {"name": "HOME", "value": "/tmp"},
                {"name": "NUMBA_CACHE_DIR", "value": "/tmp/numba"},
                # the node, so that only one machine's CPU readings are compared (maya.plan.evaluate.this_node)
                {"name": "MAYA_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "terminationMessagePolicy": "File",
    }
    init = {
        "name": "maya-interposer", "image": settings.emulation_image, "command": ["cp", "-r", "/opt/maya/.", LIB],
        "securityContext": {**restricted, "readOnlyRootFilesystem": True},
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}},
        "volumeMounts": [{"name": "maya", "mountPath": LIB}],
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [init],
        "containers": [train, predictor],
        "volumes": volumes,
    }
    if settings.emulation_node_selector:
        pod_spec["nodeSelector"] = dict(settings.emulation_node_selector)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name, "namespace": owner["namespace"], "labels": labels,
            "annotations": {ANNOTATION_REQUEST: request_json(req), ANNOTATION_GENERATION: str(generation)},
            "ownerReferences": [{"apiVersion": "maya.dev/v1alpha1", "kind": "TrainingPlan", "name": owner["name"],
                                 "uid": owner["uid"], "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": deadline,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def deny_egress_policy(namespace: str) -> dict[str, Any]:
    """Emulation pods reach nothing: torchrun's rendezvous stays on the pod's loopback."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "maya-emulation-deny-egress", "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "maya-operator"}},
        "spec": {"podSelector": {"matchLabels": {LABEL_ROLE: "emulation"}}, "policyTypes": ["Egress", "Ingress"],
                 "egress": [], "ingress": []},
    }


def pod_result(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The predictor's compact result from a finished pod, a failure when the pod cannot finish, else None."""
    status = pod.get("status") or {}
    states = {c.get("name"): c for c in status.get("containerStatuses") or []}
    pred = (states.get("predictor") or {}).get("state") or {}
    if "terminated" in pred and pred["terminated"].get("message"):
        try:
            return dict(json.loads(pred["terminated"]["message"]))
        except ValueError:
            return _failed(f"the predictor's result is unreadable: {pred['terminated']['message'][:200]!r}")
    for c in [*(status.get("initContainerStatuses") or []), *states.values()]:
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerError",
                                     "CreateContainerConfigError"):
            return _failed(f"container {c.get('name')} cannot start ({waiting['reason']}): "
                           f"{waiting.get('message', '')}".strip())
    train = ((states.get("train") or {}).get("state") or {}).get("terminated")
    if train and train.get("exitCode", 0) != 0:
        return _failed(f"the training container was killed ({train.get('reason', 'Error')}, exit code "
                       f"{train.get('exitCode')}) before its program finished; if it ran out of memory, raise "
                       "spec.emulation.memory")
    if status.get("phase") == "Failed":
        return _failed(f"the emulation pod failed: {status.get('reason', '')} {status.get('message', '')}".strip()
                       + ("; raise spec.emulation.timeoutSeconds" if status.get("reason") == "DeadlineExceeded"
                          else ""))
    return None


def _failed(message: str) -> dict[str, Any]:
    return {"result": {"status": "failed", "error": message, "exitCode": -1, "peakReservedBytes": 0,
                       "peakAllocatedBytes": 0}, "predictions": {}}
