"""The choice: cost and deadline of each candidate, the recommendation, its runner-up and ties.

Candidates that fit and meet the deadline are ranked by the objective (USD
per optimizer step, or seconds per step).  Candidates whose objective lies
within the best one's uncertainty (their prediction intervals overlap) are
ties: reported as such, and broken by cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from maya.plan.candidates import Candidate
from maya.plan.evaluate import Outcome, usable_bytes
from maya.plan.spec import Plan, human_duration

GIB = 2**30


@dataclass
class Row:
    """A candidate with its verdict, cost and deadline: one row of the table and of ``status.candidates``."""

    candidate: Candidate
    outcome: Outcome
    step_s: float | None = None
    low_s: float | None = None
    high_s: float | None = None
    cost_per_step: float | None = None
    deadline_s: float | None = None
    meets_deadline: bool | None = None

    @property
    def ok(self) -> bool:
        return self.outcome.status == "ok" and self.step_s is not None

    @property
    def eligible(self) -> bool:
        return self.ok and self.meets_deadline is not False


@dataclass
class Choice:
    rows: list[Row]
    recommendation: Row | None
    runner_up: Row | None
    ties: list[Row] = field(default_factory=list)
    problem: tuple[str, str] | None = None  # (reason, message) when nothing can be recommended


def price_per_second(plan: Plan, c: Candidate) -> float:
    return plan.price(c.gpu) * c.shape.gpus / 3600.0


def evaluate_row(plan: Plan, c: Candidate, o: Outcome) -> Row:
    row = Row(c, o)
    if o.status != "ok":
        return row
    step = o.prediction.get("stepTimeSeconds")
    if step is None or not math.isfinite(step):
        return row
    row.step_s = float(step)
    row.low_s = float(o.prediction.get("stepTimeSecondsLow") or step)
    row.high_s = float(o.prediction.get("stepTimeSecondsHigh") or step)
    row.cost_per_step = row.step_s * price_per_second(plan, c)
    if plan.deadline is not None:
        row.deadline_s = row.step_s * plan.deadline.steps
        row.meets_deadline = row.deadline_s <= plan.deadline.seconds
    return row


def objective_value(plan: Plan, c: Candidate, o: Outcome) -> float | None:
    """The value the search minimises, or None when the candidate is infeasible."""
    row = evaluate_row(plan, c, o)
    if not row.eligible:
        return None
    return row.cost_per_step if plan.objective == "cost" else row.step_s


def _metric(plan: Plan, row: Row, which: str) -> float:
    s = {"mid": row.step_s, "low": row.low_s, "high": row.high_s}[which]
    assert s is not None
    return s * price_per_second(plan, row.candidate) if plan.objective == "cost" else s


def choose(plan: Plan, outcomes: list[tuple[Candidate, Outcome]]) -> Choice:
    rows = [evaluate_row(plan, c, o) for c, o in outcomes]
    eligible = sorted((r for r in rows if r.eligible),
                      key=lambda r: (_metric(plan, r, "mid"), r.cost_per_step or 0.0))
    if not eligible:
        return Choice(rows, None, None, problem=_why_none(plan, rows))
    best = eligible[0]
    ties = [r for r in eligible[1:] if _metric(plan, r, "low") <= _metric(plan, best, "high")]
    if ties:
        # Within the prediction's uncertainty: the cheapest of the tied candidates wins.
        pick = min([best, *ties], key=lambda r: (r.cost_per_step or 0.0, _metric(plan, r, "mid")))
        ties = [r for r in [best, *ties] if r is not pick]
        best = pick
    rest = [r for r in eligible if r is not best]
    return Choice(rows, best, rest[0] if rest else None, ties)


def _why_none(plan: Plan, rows: list[Row]) -> tuple[str, str]:
    ok = [r for r in rows if r.ok]
    if ok and plan.deadline is not None:
        fastest = min(ok, key=lambda r: r.step_s or math.inf)
        assert fastest.deadline_s is not None
        miss = fastest.deadline_s - plan.deadline.seconds
        return ("DeadlineUnreachable",
                f"spec.deadline: no candidate trains {plan.deadline.steps} steps within {plan.deadline.text}; the "
                f"fastest, {fastest.candidate.label()}, needs {human_duration(fastest.deadline_s)} "
                f"({human_duration(miss)} too long, {100 * miss / plan.deadline.seconds:.0f}% over): allow more "
                "time, fewer steps, or add larger shapes to spec.resources")
    failed = [r for r in rows if r.outcome.status == "failed"]
    oom = [r for r in rows if r.outcome.status == "oom"]
    if oom and not failed:
        def short(r: Row) -> float:
            need = r.outcome.peak_bytes or 0
            return need - usable_bytes(r.candidate.gpu)
        best = min(oom, key=short)
        reason = best.outcome.reason
        return ("OutOfMemory",
                f"every candidate runs out of memory; the closest, {best.candidate.label()}: {reason}. Add smaller "
                "micro-batches to spec.batch.microBatches, a memory-saving knob (e.g. activation checkpointing), "
                "or GPUs with more memory to spec.resources")
    if failed:
        errors = list(dict.fromkeys(r.outcome.reason for r in failed))
        return ("EmulationFailed",
                f"the script failed under emulation ({len(failed)} candidate(s)); its error:\n{errors[0]}"
                + (f"\n(and {len(errors) - 1} other error(s))" if len(errors) > 1 else ""))
    if not rows or all(r.outcome.status == "pruned" for r in rows):
        reasons = list(dict.fromkeys(r.outcome.reason for r in rows))[:3]
        return ("NoCandidates",
                "spec.resources / spec.batch / spec.knobs: no candidate is left to evaluate"
                + (" (" + "; ".join(reasons) + ")" if reasons else "")
                + "; widen the micro-batches, the shapes or the exclusions")
    return ("NoCandidates", "no candidate could be evaluated")
