"""A TrainingPlan read and checked: every error names the field and says what to do.

The document is checked against :data:`maya.plan.schema.PLAN_SCHEMA` first
(shapes of values, unknown and missing fields), then for what a schema cannot
say: GPU names in the catalog, durations, a global batch that some
micro-batch divides.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from maya import catalog
from maya.plan.schema import PLAN_SCHEMA


class PlanError(Exception):
    """The plan is malformed; the message names the field and what to do."""


@dataclass(frozen=True)
class Knob:
    """A setting of the script: a flag (values False/True) or an argument with values."""

    name: str
    flag: str | None = None
    arg: str | None = None
    values: tuple[Any, ...] = ()

    def choices(self) -> tuple[Any, ...]:
        return (False, True) if self.flag else self.values

    def argv(self, value: Any) -> list[str]:
        if self.flag:
            return [self.flag] if value else []
        assert self.arg is not None
        return [self.arg, str(value)]


@dataclass(frozen=True)
class Shape:
    gpu: str
    gpus_per_node: int = 1
    nodes: int = 1

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes


@dataclass(frozen=True)
class Deadline:
    steps: int
    seconds: float
    text: str


@dataclass(frozen=True)
class Search:
    exhaustive_up_to: int = 64
    sampler: str = "tpe"
    max_emulations: int = 24
    seed: int = 0


@dataclass(frozen=True)
class Plan:
    """What ``maya plan`` and the operator plan; built by :func:`parse`."""

    name: str
    namespace: str | None
    command: tuple[str, ...]
    global_batch: int
    micro_batch_arg: str
    micro_batches: tuple[int, ...]
    accumulation_arg: str | None
    knobs: tuple[Knob, ...]
    shapes: tuple[Shape, ...]
    objective: str
    deadline: Deadline | None
    prices: Mapping[str, float]
    search: Search
    exclude: tuple[Mapping[str, Any], ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    image: str | None = None
    working_dir: str | None = None
    emulation: Mapping[str, Any] = field(default_factory=dict)

    def price(self, gpu: str) -> float:
        return self.prices[gpu]

    @property
    def repeats(self) -> int | None:
        """``emulation.repeats``: emulations per program and GPU (None: as many as the first one asks for)."""
        value = self.emulation.get("repeats")
        return int(value) if value is not None else None


_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str) -> float:
    """'1h30m' -> 5400.0 seconds."""
    parts = re.findall(r"([0-9]+(?:\.[0-9]+)?)(d|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(text)
    return sum(float(n) * _UNITS[u] for n, u in parts)


def _where(path: Any) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "the document"


def _message(err: jsonschema.ValidationError) -> str:
    where = _where(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        schema = err.schema if isinstance(err.schema, Mapping) else {}
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed))
        if allowed:
            names = ", ".join(f"{where}.{x}" for x in extra)
            return f"{names}: unknown field; the fields of {where} are {', '.join(allowed)}"
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        return f"{where}.{missing}: missing; add it (see examples/plan.yaml)"
    if err.validator == "oneOf" and where.startswith("spec.knobs"):
        return f"{where}: give either 'flag' (tried off and on) or 'arg' with 'values', not both and not neither"
    if err.validator == "oneOf" and where == "spec.resources":
        return (f"{where}: give a list of shapes ({{gpu, gpusPerNode, nodes}}) or one grid "
                "({gpus: [...], gpusPerNode: [...], nodes: [...]})")
    if err.validator == "const":
        return f"{where}: must be {err.validator_value!r} (got {err.instance!r})"
    if err.validator == "pattern" and where.endswith("duration"):
        return f"{where}: {err.instance!r} is not a duration; write it like 55m, 2h30m, 1d or 90s"
    return f"{where}: {err.message}"


def _best_error(errors: list[jsonschema.ValidationError]) -> jsonschema.ValidationError:
    """The deepest error of the first failing field: it names the field a user must change."""
    err = jsonschema.exceptions.best_match(errors)
    while err.context and err.validator not in ("oneOf",):
        err = jsonschema.exceptions.best_match(err.context)
    if err.validator == "oneOf" and err.context:
        # A list of shapes with one bad shape: report the shape's error, not the alternation.
        deeper = [e for e in err.context if len(e.absolute_path) > len(err.absolute_path)]
        if deeper:
            return _best_error(deeper)
    return err


def parse(doc: Any, *, source: str = "the plan", default_prices: Mapping[str, float] | None = None) -> Plan:
    """Check ``doc`` (the parsed YAML) and build the :class:`Plan`; raise :class:`PlanError`.

    ``default_prices``: USD per GPU-hour over the catalog's defaults (an operator's price table); the plan's own win."""
    if not isinstance(doc, dict):
        raise PlanError(f"{source}: expected a TrainingPlan mapping (apiVersion, kind, metadata, spec)")
    errors = list(jsonschema.Draft202012Validator(PLAN_SCHEMA).iter_errors(doc))
    if errors:
        raise PlanError(_message(_best_error(errors)))
    spec = doc["spec"]
    known = catalog.names()
    shapes = _shapes(spec["resources"])
    for i, s in enumerate(shapes):
        try:
            shapes[i] = Shape(catalog.lookup(s.gpu).name, s.gpus_per_node, s.nodes)
        except catalog.UnknownGPU:
            raise PlanError(f"spec.resources: unknown GPU {s.gpu!r}; valid names: {', '.join(known)}") from None
    prices: dict[str, float] = {}
    for gpu in {s.gpu for s in shapes}:
        prices[gpu] = float((default_prices or {}).get(gpu, catalog.lookup(gpu).price_usd_per_hour))
    for name, value in (spec.get("prices") or {}).items():
        try:
            prices[catalog.lookup(name).name] = float(value)
        except catalog.UnknownGPU:
            raise PlanError(f"spec.prices.{name}: unknown GPU; valid names: {', '.join(known)}") from None
    batch = spec["batch"]
    micro = tuple(dict.fromkeys(batch["microBatches"]))
    if not any(batch["global"] % m == 0 for m in micro):
        raise PlanError(f"spec.batch.global: {batch['global']} is divisible by none of spec.batch.microBatches "
                        f"{list(micro)}; choose micro-batches that divide the global batch")
    knobs = []
    for i, k in enumerate(spec.get("knobs") or []):
        if k["name"] in ("gpu", "gpusPerNode", "nodes", "microBatch", "gradientAccumulation"):
            raise PlanError(f"spec.knobs[{i}].name: {k['name']!r} is reserved; choose another name")
        knobs.append(Knob(k["name"], k.get("flag"), k.get("arg"), tuple(dict.fromkeys(k.get("values") or ()))))
    names = [k.name for k in knobs]
    if len(set(names)) != len(names):
        raise PlanError("spec.knobs: two knobs share a name; give each a distinct name")
    deadline = None
    if "deadline" in spec:
        d = spec["deadline"]
        deadline = Deadline(int(d["steps"]), parse_duration(d["duration"]), d["duration"])
    knobs_of_search = spec.get("search") or {}
    search = Search(int(knobs_of_search.get("exhaustiveUpTo", 64)), knobs_of_search.get("sampler", "tpe"),
                    int(knobs_of_search.get("maxEmulations", 24)), int(knobs_of_search.get("seed", 0)))
    return Plan(
        name=doc["metadata"]["name"], namespace=doc["metadata"].get("namespace"),
        command=tuple(spec["command"]), global_batch=int(batch["global"]),
        micro_batch_arg=batch["microBatchArg"], micro_batches=tuple(sorted(micro)),
        accumulation_arg=batch.get("accumulationArg"), knobs=tuple(knobs), shapes=tuple(dict.fromkeys(shapes)),
        objective=spec.get("objective", "cost"), deadline=deadline, prices=prices, search=search,
        exclude=tuple(spec.get("exclude") or ()), env={e["name"]: e["value"] for e in spec.get("env") or ()},
        image=spec.get("image"), working_dir=spec.get("workingDir"), emulation=dict(spec.get("emulation") or {}),
    )


def _shapes(resources: Any) -> list[Shape]:
    if isinstance(resources, list):
        return [Shape(r["gpu"], int(r.get("gpusPerNode", 1)), int(r.get("nodes", 1))) for r in resources]
    return [Shape(g, int(p), int(n)) for g in resources["gpus"]
            for p in resources.get("gpusPerNode", [1]) for n in resources.get("nodes", [1])]


def load(path: Path) -> Plan:
    """Read a plan file (YAML or JSON); raise :class:`PlanError` naming what is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise PlanError(f"{path}: cannot read the plan ({e.strerror or e})") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise PlanError(f"{path}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    return parse(doc, source=str(path))


def human_duration(seconds: float) -> str:
    """A readable duration: 3300 -> '55m'."""
    if not math.isfinite(seconds):
        return "never"
    h, rest = divmod(int(round(seconds)), 3600)
    m, s = divmod(rest, 60)
    return (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s and not h else "") or "0s"
