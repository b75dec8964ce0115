"""The candidates of a plan: shape x micro-batch x knob values, and the command each one runs.

A *candidate* is what a user could deploy (GPU model, GPUs per node, nodes,
micro-batch, gradient accumulation, knob values).  A *program* is what an
emulation runs: the same command line and number of ranks, whatever the GPU
model, so one emulation serves every GPU of an architecture.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

from maya.plan.spec import Plan, PlanError, Shape

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")


@dataclass(frozen=True)
class Program:
    """One emulation: the command of every rank, and how the ranks sit on nodes."""

    argv: tuple[str, ...]  # the one-GPU command with this program's arguments
    gpus_per_node: int
    nodes: int

    @property
    def ranks(self) -> int:
        return self.gpus_per_node * self.nodes

    def emulation_command(self) -> list[str]:
        """The command ``maya emulate`` runs: one torchrun for every virtual node of the job."""
        return launch_command(self.argv, self.ranks, 1)

    def job_command(self) -> list[str]:
        """The command each node of the real job runs (its launcher adds the rendezvous)."""
        return launch_command(self.argv, self.gpus_per_node, self.nodes)


@dataclass(frozen=True)
class Candidate:
    shape: Shape
    micro_batch: int
    accumulation: int
    knobs: tuple[tuple[str, Any], ...]

    @property
    def gpu(self) -> str:
        return self.shape.gpu

    def fields(self) -> dict[str, Any]:
        """The fields an exclusion can name."""
        return {"gpu": self.shape.gpu, "gpusPerNode": self.shape.gpus_per_node, "nodes": self.shape.nodes,
                "microBatch": self.micro_batch, "gradientAccumulation": self.accumulation, **dict(self.knobs)}

    def label(self) -> str:
        knobs = " ".join(f"{k}={_text(v)}" for k, v in self.knobs)
        return (f"{self.shape.gpus_per_node * self.shape.nodes}x {self.shape.gpu} micro-batch {self.micro_batch} "
                f"x{self.accumulation}" + (f" {knobs}" if knobs else ""))


@dataclass(frozen=True)
class Skipped:
    candidate: Candidate
    reason: str


def _text(v: Any) -> str:
    return ("on" if v else "off") if isinstance(v, bool) else str(v)


def is_python(word: str) -> bool:
    return bool(_PYTHON.match(os.path.basename(word)))


def launch_command(argv: Sequence[str], per_node: int, nodes: int) -> list[str]:
    """``argv`` for one process per GPU: as it is for one GPU, else under torchrun from its own interpreter."""
    if per_node * nodes == 1:
        return list(argv)
    if not is_python(argv[0]):
        raise PlanError(f"spec.command: starts with {argv[0]!r}, not a Python interpreter; shapes of several GPUs "
                        "run it under torchrun, so write the one-GPU command as [python, train.py, ...]")
    return [argv[0], "-m", "torch.distributed.run", f"--nproc-per-node={per_node}", f"--nnodes={nodes}", *argv[1:]]


def with_argument(argv: Sequence[str], name: str, value: str | None) -> list[str]:
    """``argv`` with ``name`` set to ``value`` (``None``: a flag, present), replacing any occurrence."""
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        if word == name:
            skip = value is not None
            continue
        if value is not None and word.startswith(name + "="):
            continue
        out.append(word)
    return out + ([name] if value is None else [name, value])


def without_flag(argv: Sequence[str], name: str) -> list[str]:
    return [w for w in argv if w != name]


def program_of(plan: Plan, c: Candidate) -> Program:
    argv = with_argument(plan.command, plan.micro_batch_arg, str(c.micro_batch))
    if plan.accumulation_arg:
        argv = with_argument(argv, plan.accumulation_arg, str(c.accumulation))
    knobs = {k.name: k for k in plan.knobs}
    for name, value in c.knobs:
        k = knobs[name]
        if k.flag:
            argv = with_argument(argv, k.flag, None) if value else without_flag(argv, k.flag)
        else:
            assert k.arg is not None
            argv = with_argument(argv, k.arg, str(value))
    return Program(tuple(argv), c.shape.gpus_per_node, c.shape.nodes)


def _excluded(c: Candidate, exclude: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    fields = c.fields()
    for rule in exclude:
        if all(k in fields and _same(fields[k], v) for k, v in rule.items()):
            return rule
    return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    return bool(a == b) and isinstance(a, bool) == isinstance(b, bool)


def enumerate_candidates(plan: Plan) -> tuple[list[Candidate], list[Skipped]]:
    """Every candidate of the plan, and those skipped with their reason (in plan order)."""
    knob_values = [k.choices() for k in plan.knobs]
    kept: list[Candidate] = []
    skipped: list[Skipped] = []
    for shape, micro, values in product(plan.shapes, plan.micro_batches, product(*knob_values)):
        knobs = tuple(zip((k.name for k in plan.knobs), values, strict=True))
        per_step = micro * shape.gpus
        accumulation = max(1, plan.global_batch // per_step)
        c = Candidate(shape, micro, accumulation, knobs)
        if plan.global_batch % per_step:
            skipped.append(Skipped(c, f"micro-batch {micro} x {shape.gpus} ranks does not divide the global "
                                      f"batch {plan.global_batch}"))
        elif accumulation > 1 and not plan.accumulation_arg:
            skipped.append(Skipped(c, f"needs gradient accumulation {accumulation}, and spec.batch.accumulationArg "
                                      "is not set"))
        elif (rule := _excluded(c, plan.exclude)) is not None:
            skipped.append(Skipped(c, "excluded by spec.exclude " + ", ".join(f"{k}={v}" for k, v in rule.items())))
        else:
            kept.append(c)
    return kept, skipped


def memory_order(candidates: Sequence[Candidate]) -> Iterator[Candidate]:
    """Smallest micro-batch first: an out-of-memory verdict then prunes the larger ones."""
    return iter(sorted(candidates, key=lambda c: (c.micro_batch, c.shape.gpus, c.knobs.__repr__())))
