"""The TrainingPlan schema: one source of truth for ``maya plan``, the operator's status and the CRD.

``PLAN_SCHEMA`` is a JSON Schema (draft 2020-12) of the whole document as a
user writes it (the same YAML as the custom resource); ``STATUS_SCHEMA`` is
the status the operator writes and ``maya plan --json`` prints.  The CRD's
openAPIV3Schema is generated from both (``maya.operator.crd``), so a field
added here reaches the API server's validation too.
"""

from __future__ import annotations

from typing import Any

API_VERSION = "maya.dev/v1alpha1"
KIND = "TrainingPlan"

_NAME = {"type": "string", "minLength": 1}
_POSITIVE = {"type": "integer", "minimum": 1}
_INT_OR_STRING = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
_SCALAR = {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "boolean"}]}
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(d|h|m|s))+$"

SHAPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "One hardware shape: a GPU model, GPUs per node and nodes.",
    "required": ["gpu"],
    "additionalProperties": False,
    "properties": {
        "gpu": {**_NAME, "description": "GPU catalog name (see 'maya gpus')."},
        "gpusPerNode": {**_POSITIVE, "maximum": 16, "default": 1, "description": "GPUs (processes) per node."},
        "nodes": {**_POSITIVE, "maximum": 64, "default": 1, "description": "Nodes."},
    },
}

GRID_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Every combination of GPU models, GPUs per node and nodes.",
    "required": ["gpus"],
    "additionalProperties": False,
    "properties": {
        "gpus": {"type": "array", "minItems": 1, "items": _NAME, "description": "GPU catalog names."},
        "gpusPerNode": {"type": "array", "minItems": 1, "items": {**_POSITIVE, "maximum": 16}, "default": [1]},
        "nodes": {"type": "array", "minItems": 1, "items": {**_POSITIVE, "maximum": 64}, "default": [1]},
    },
}

SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "What to run, what may vary, on which hardware, and what to optimise.",
    "required": ["command", "batch", "resources"],
    "additionalProperties": False,
    "properties": {
        "image": {**_NAME, "description": "The training image (cluster only; 'maya plan' runs the command here)."},
        "command": {"type": "array", "minItems": 1, "items": _NAME,
                    "description": "The training command for one GPU, e.g. [python, train.py, --layers, '24']."},
        "workingDir": {**_NAME, "description": "Where the command runs (default: the plan file's folder locally, "
                                              "the image's working directory in the cluster)."},
        "env": {"type": "array", "description": "Extra environment variables of the training command.",
                "items": {"type": "object", "required": ["name", "value"], "additionalProperties": False,
                          "properties": {"name": _NAME, "value": {"type": "string"}}}},
        "batch": {
            "type": "object",
            "required": ["global", "microBatchArg", "microBatches"],
            "additionalProperties": False,
            "properties": {
                "global": {**_POSITIVE, "description": "Samples per optimizer step, over all data-parallel ranks."},
                "microBatchArg": {**_NAME, "description": "The script's per-rank micro-batch argument."},
                "microBatches": {"type": "array", "minItems": 1, "items": _POSITIVE,
                                 "description": "Micro-batch sizes to try."},
                "accumulationArg": {**_NAME, "description": "The script's gradient-accumulation argument: it gets "
                                                           "global / (micro-batch x data-parallel ranks)."},
            },
        },
        "knobs": {
            "type": "array",
            "description": "Settings of the script to try: a flag is tried off and on, an argument at each value.",
            "items": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    "name": _NAME,
                    "flag": {**_NAME, "description": "A command-line flag, tried absent and present."},
                    "arg": {**_NAME, "description": "A command-line argument, tried at each of 'values'."},
                    "values": {"type": "array", "minItems": 1, "items": _INT_OR_STRING},
                },
                "oneOf": [{"required": ["flag"]}, {"required": ["arg", "values"]}],
            },
        },
        "exclude": {
            "type": "array",
            "description": "Combinations not to try: each entry is a partial candidate (gpu, gpusPerNode, nodes, "
                           "microBatch or a knob's name) that a candidate matching all its fields is skipped for.",
            "items": {"type": "object", "minProperties": 1,
                      "additionalProperties": _SCALAR},
        },
        "resources": {
            "description": "Hardware to consider: a list of explicit shapes, or one grid.",
            "oneOf": [{"type": "array", "minItems": 1, "items": SHAPE_SCHEMA}, GRID_SCHEMA],
        },
        "objective": {"type": "string", "enum": ["cost", "time"], "default": "cost",
                      "description": "cost: USD per optimizer step; time: seconds per optimizer step."},
        "deadline": {
            "type": "object",
            "required": ["steps", "duration"],
            "additionalProperties": False,
            "description": "Keep only shapes that train 'steps' optimizer steps within 'duration'.",
            "properties": {"steps": _POSITIVE,
                           "duration": {"type": "string", "pattern": DURATION_PATTERN,
                                        "description": "e.g. 55m, 2h30m, 1d, 90s."}},
        },
        "prices": {"type": "object", "description": "USD per GPU-hour by GPU catalog name (default: the catalog's).",
                   "additionalProperties": {"type": "number", "minimum": 0}},
        "search": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "exhaustiveUpTo": {**_POSITIVE, "default": 64,
                                   "description": "Evaluate every candidate when there are at most this many."},
                "sampler": {"type": "string", "enum": ["tpe", "cmaes"], "default": "tpe",
                            "description": "The optuna sampler for larger spaces."},
                "maxEmulations": {**_POSITIVE, "default": 24, "description": "Emulation budget of a sampled search: programs emulated (the further runs "
                                                                "of a step that follows its host come on top)."},
                "seed": {"type": "integer", "default": 0},
            },
        },
        "emulation": {
            "type": "object",
            "additionalProperties": False,
            "description": "How emulation pods run (cpu, memory, timeoutSeconds: cluster only).",
            "properties": {
                "cpu": {**_INT_OR_STRING, "description": "CPU request and limit per emulated rank (default 1)."},
                "memory": {**_INT_OR_STRING, "description": "Memory request and limit of a pod (default 8Gi)."},
                "timeoutSeconds": {**_POSITIVE, "default": 1800, "description": "Active deadline of a pod."},
                "steps": {**_POSITIVE, "description": "If set, append '--steps N' to shorten the emulated run."},
                "repeats": {**_POSITIVE, "maximum": 9,
                            "description": "Emulations per program and GPU, ranked on their median. Unset: one, or "
                                           "where the step follows its host a tenth or more two, and a third "
                                           "unless those agree within 1%."},
            },
        },
    },
}

PLAN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": KIND,
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": API_VERSION},
        "kind": {"const": KIND},
        "metadata": {"type": "object", "required": ["name"],
                     "properties": {"name": _NAME, "namespace": _NAME}},
        "spec": SPEC_SCHEMA,
        "status": {"type": "object"},
    },
}

_NUMBER_OR_NULL = {"type": ["number", "null"]}
CANDIDATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "gpu": {"type": "string"},
        "gpus": {"type": "integer"},
        "gpusPerNode": {"type": "integer"},
        "nodes": {"type": "integer"},
        "microBatch": {"type": "integer"},
        "gradientAccumulation": {"type": "integer"},
        "knobs": {"type": "object", "additionalProperties": _SCALAR},
        "fits": {"type": ["boolean", "null"]},
        "stepTimeSeconds": _NUMBER_OR_NULL,
        "stepTimeSecondsLow": _NUMBER_OR_NULL,
        "stepTimeSecondsHigh": _NUMBER_OR_NULL,
        "emulationsStepTimeSeconds": {"type": "array", "items": {"type": "number"},
                                      "description": "Each emulation's step time, where the step is their median."},
        "emulationsSlowPhaseStepTimeSeconds": {
            "type": "array", "items": {"type": "number"},
            "description": "The step times of emulations set aside: made in a slow phase of their node's CPU."},
        "paceOverUsual": {
            "type": "number",
            "description": "Every emulation read the Python yardstick this many times its node's usual pace: all "
                           "ran in a slow phase of the CPU, and the step may be long (maya plan only)."},
        "peakMemoryBytes": {"type": ["integer", "null"]},
        "capacityBytes": {"type": "integer"},
        "costPerStepUSD": _NUMBER_OR_NULL,
        "deadlineSeconds": _NUMBER_OR_NULL,
        "deadlineCostUSD": _NUMBER_OR_NULL,
        "meetsDeadline": {"type": ["boolean", "null"]},
        "status": {"type": "string", "enum": ["ok", "oom", "failed", "pruned", "skipped"]},
        "reason": {"type": "string"},
        "emulation": {"type": "string"},
        "deviceValues": {
            "type": "object",
            "description": "Data-dependent device values the emulated script read (no kernel computes them "
                           "under emulation), a few program lines of each kind: 'assumed' were given expected "
                           "values (the prediction holds for that data), 'unknown' read zeros (work they size "
                           "or choose may be missing from the prediction).",
            "properties": {
                "assumed": {"type": "array", "items": {"type": "object", "properties": {
                    "operation": {"type": "string"}, "where": {"type": "string"}, "count": {"type": "integer"},
                    "as": {"type": "string"}}}},
                "unknown": {"type": "array", "items": {"type": "object", "properties": {
                    "operation": {"type": "string"}, "where": {"type": "string"}, "count": {"type": "integer"}}}},
            },
        },
    },
    "required": ["gpu", "gpusPerNode", "nodes", "microBatch", "gradientAccumulation", "knobs", "status"],
}

STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "phase": {"type": "string", "enum": ["Pending", "Emulating", "Predicting", "Recommended", "Failed"]},
        "observedGeneration": {"type": "integer"},
        "conditions": {"type": "array", "items": {
            "type": "object",
            "required": ["type", "status"],
            "properties": {"type": {"type": "string"}, "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                           "reason": {"type": "string"}, "message": {"type": "string"},
                           "lastTransitionTime": {"type": "string"}, "observedGeneration": {"type": "integer"}}}},
        "recommendation": CANDIDATE_SCHEMA,
        "runnerUp": CANDIDATE_SCHEMA,
        "ties": {"type": "array", "items": CANDIDATE_SCHEMA},
        "candidates": {"type": "array", "items": CANDIDATE_SCHEMA},
        "searchedCandidates": {"type": "integer"},
        "search": {"type": "string"},
        "emulations": {"type": "object", "properties": {k: {"type": "integer"}
                                                         for k in ("ran", "failed", "reused", "needed")}},
    },
}
