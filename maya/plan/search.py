"""The search: which emulations a plan needs, in which order, and what each candidate's verdict is.

:class:`Search` is a state machine so that the same search drives the local
``maya plan`` (one emulation after another) and the operator (emulation Jobs
in parallel, results arriving while others run): ask :meth:`Search.next` for
emulations to run, hand each result to :meth:`Search.record`, and read
:meth:`Search.outcomes` when :meth:`Search.finished`.

Emulations are as few as possible: candidates that differ only by GPU model
within one architecture share one emulation, run on the largest of those
GPUs; a smaller GPU gets its own only when the peak memory comes near its
capacity.  Smallest micro-batches run first, so that one that runs out of
memory prunes the larger ones with the same knobs and shape (and GPUs with
no more memory).  Spaces larger than ``search.exhaustiveUpTo`` are sampled
by optuna (TPE or CMA-ES, with memory and deadline as constraints) under a
budget of ``search.maxEmulations`` emulations.  A program whose first
emulation says its step follows its host is emulated again (``run`` 1, 2 of
the same program and GPU, :func:`maya.plan.evaluate.runs_wanted`) and its
candidates judged on the median (:func:`maya.plan.evaluate.median_prediction`)
of the runs not made in a slow phase of their node's CPU
(:func:`maya.plan.evaluate.slow_phase_runs`; ``SPARE`` more at most).  Given
what the yardstick usually reads on a node (``usual``, :mod:`maya.usual_pace`:
the local ``maya plan``), a program whose every run read slow against it
asks for its spares too.  The operator gives none: its reconciles rebuild the
search from the Jobs each time and must decide alike, which a store that
grows between them would not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from maya.plan.candidates import Candidate, Program, Skipped, enumerate_candidates, program_of
from maya.plan.evaluate import (
    Outcome,
    architecture,
    first_buckets,
    median_prediction,
    memory_verdict,
    pace_readings,
    peak_bytes,
    runs_wanted,
    settled,
    slow_phase_runs,
    usable_bytes,
)
from maya.plan.spec import Plan
from maya.usual_pace import UsualPace


@dataclass(frozen=True)
class Request:
    """One emulation to run: ``program`` on ``gpu``, then predicted for each of ``predict_for``."""

    program: Program
    gpu: str
    predict_for: tuple[str, ...]
    run: int = 0  # 0: the first emulation of program on gpu; 1, 2...: the further ones its host noise asks for


@dataclass
class _Done:
    result: dict[str, Any]
    predictions: dict[str, dict[str, Any]]
    key: str
    reused: bool
    predict_for: tuple[str, ...] = ()


class Search:
    def __init__(self, plan: Plan, usual: Callable[[str], UsualPace] | None = None) -> None:
        self.plan = plan
        self.usual = usual  # a node's remembered yardstick readings (None: runs judged among themselves)
        self.candidates, self.skipped = enumerate_candidates(plan)
        self.program = {c: program_of(plan, c) for c in self.candidates}
        self._groups: dict[tuple[Program, str], list[Candidate]] = {}
        for c in self.candidates:
            self._groups.setdefault((self.program[c], architecture(c.gpu)), []).append(c)
        self.done: dict[tuple[Program, str], _Done] = {}
        self.requested: set[tuple[Program, str]] = set()
        self.again: dict[tuple[Program, str, int], _Done | None] = {}  # further runs: None while running
        self.pruned: dict[Candidate, str] = {}
        self.emulations = {"ran": 0, "failed": 0, "reused": 0}
        self.stopped = ""  # why the search ended early
        self.sampled = len(self.candidates) > plan.search.exhaustive_up_to
        self._sampler = _Sampler(self) if self.sampled and self.candidates else None

    @property
    def method(self) -> str:
        if self._sampler is None:
            return f"exhaustive ({len(self.candidates)} candidates)"
        return (f"sampled: optuna {self.plan.search.sampler.upper()} over {len(self.candidates)} candidates, "
                f"at most {self.plan.search.max_emulations} emulations")

    # -- which emulations ------------------------------------------------------------------------------------------
    def _request(self, program: Program, gpus: list[str]) -> Request:
        big = max(gpus, key=usable_bytes)
        return Request(program, big, tuple(sorted(set(gpus), key=lambda g: -usable_bytes(g))))

    def _first_request(self, program: Program, arch: str) -> Request:
        return self._request(program, [c.gpu for c in self._groups[(program, arch)] if c not in self.pruned])

    def next(self, limit: int = 1) -> list[Request]:
        """Up to ``limit`` emulations that can run now (none: wait for running ones, or the search is over)."""
        if self.stopped:
            return []
        more = self._further_runs()[:limit]
        for req in more:
            self.again[(req.program, req.gpu, req.run)] = None
        limit -= len(more)
        if limit <= 0:
            return more
        if self._sampler is not None:
            return more + self._sampler.next(limit)
        out: list[Request] = []
        busy = self._in_flight()
        for (program, arch), members in sorted(self._groups.items(), key=lambda kv: _order(kv[1][0])):
            if len(out) >= limit:
                break
            if all(c in self.pruned for c in members):
                continue
            chain = _chain(members[0])
            if chain in busy:
                # A smaller micro-batch of this chain is still running: its out-of-memory would prune this one.
                continue
            wanted = [r for r in self._wanted(program, arch) if (r.program, r.gpu) not in self.requested]
            out += wanted
            if wanted:
                busy.add(chain)
        for req in out:
            self.requested.add((req.program, req.gpu))
        return more + out

    def _further_runs(self) -> list[Request]:
        """The further emulations that finished ones ask for and nobody requested yet: as ``maya predict``
        asks them, each once the one before is done, until enough runs not made in a slow phase
        (:meth:`_counted`) or two that agree (:func:`maya.plan.evaluate.settled`), ``SPARE`` beyond those
        wanted at most; where the plan sets ``emulation.repeats``, all of them at once."""
        from maya.predict import SPARE

        out = []
        for (program, gpu), done in self.done.items():
            if done.result["status"] != "ok":
                continue
            wanted = runs_wanted(done.predictions, self.plan.repeats)
            predict_for = done.predict_for or tuple(done.predictions)
            if self.plan.repeats is not None:
                out += [Request(program, gpu, predict_for, run) for run in range(1, wanted)
                        if (program, gpu, run) not in self.again]
                continue
            runs = self._runs(program, gpu)
            if None in runs:
                continue  # the one running decides whether another is needed
            kept, slow = self._counted([d for d in runs if d is not None], by_usual=wanted > 1)
            if (len(kept) >= wanted or len(runs) >= wanted + min(len(slow), SPARE)
                    or settled([d.predictions for d in kept])):
                continue
            out.append(Request(program, gpu, predict_for, len(runs)))
        return out

    def _runs(self, program: Program, gpu: str) -> list[_Done | None]:
        """The runs of ``program`` on ``gpu`` in order, the first included (None: requested, not done)."""
        more = sorted((run, d) for (p, g, run), d in self.again.items() if (p, g) == (program, gpu))
        return [self.done.get((program, gpu)), *(d for _run, d in more)]

    def _counted(self, runs: list[_Done], by_usual: bool = True) -> tuple[list[_Done], list[_Done]]:
        """Of the completed runs, those that count and those made in a slow phase of their node's CPU
        (:func:`maya.plan.evaluate.slow_phase_runs`, against the node's usual pace too where ``by_usual``: a
        host-sensitive program); none is slow where the plan fixes the number of runs (``emulation.repeats``)."""
        ok = [d for d in runs if d.result["status"] == "ok" and d.predictions]
        if self.plan.repeats is not None:
            return ok, []
        slow = slow_phase_runs([(d.result, d.predictions) for d in ok], self._usual_reading if by_usual else None)
        return [d for d, aside in zip(ok, slow, strict=True) if not aside], [d for d, aside in zip(ok, slow, strict=True)
                                                                             if aside]

    def _usual_reading(self, node: str) -> float | None:
        return self.usual(node).reading() if self.usual is not None else None

    def _over_usual(self, runs: list[_Done]) -> float | None:
        """The runs' quickest yardstick reading over their node's usual one (the first run's node)."""
        node = str(runs[0].result.get("node") or "") if runs else ""
        usual = self._usual_reading(node) if node else None
        quickest = min((ns for d in runs if d.result.get("node") == node for ns in pace_readings(d.predictions)
                        if ns), default=0)
        return quickest / usual if usual and quickest else None

    def running(self, req: Request) -> None:
        """``req`` is running (the operator found its Job still at work)."""
        if req.run:
            self.again.setdefault((req.program, req.gpu, req.run), None)
        else:
            self.requested.add((req.program, req.gpu))

    def _in_flight(self) -> set[tuple[Any, ...]]:
        """The chains (knobs and shape: all but the micro-batch) with an emulation requested and not done."""
        running = {program for program, gpu in self.requested - set(self.done)}
        return {_chain(c) for c in self.candidates if self.program[c] in running}

    def _wanted(self, program: Program, arch: str) -> list[Request]:
        """The group's first emulation, or the re-emulations its memory verdicts ask for."""
        members = [c for c in self._groups[(program, arch)] if c not in self.pruned]
        first = self._first_request(program, arch) if members else None
        if first is None:
            return []
        done = self.done.get((program, first.gpu))
        if done is None:
            return [first]
        return [Request(program, c.gpu, (c.gpu,)) for c in members
                if c.gpu != first.gpu and memory_verdict(done.result, c.gpu) == "near"
                and (program, c.gpu) not in self.done]

    def stop(self, reason: str) -> None:
        """End the search: candidates not yet evaluated say ``reason``."""
        self.stopped = reason

    def finished(self) -> bool:
        """True when no emulation is running or still wanted."""
        if any(key not in self.done for key in self.requested) or None in self.again.values():
            return False
        if self.stopped:
            return True
        if self._further_runs():
            return False
        if self._sampler is not None:
            return self._sampler.exhausted
        return not any(self._wanted(p, a) for (p, a) in self._groups)

    # -- results ---------------------------------------------------------------------------------------------------
    def record(self, req: Request, result: dict[str, Any], predictions: dict[str, dict[str, Any]], *, key: str = "",
               reused: bool = False) -> None:
        """The result of ``req`` (see :func:`maya.plan.evaluate.run_result`) and its predictions by GPU."""
        done = _Done(result, predictions, key, reused, req.predict_for)
        self.emulations["reused" if reused else "ran"] += 1
        self.emulations["failed"] += result["status"] == "failed"
        if self.usual is not None and key and result.get("node") and result["status"] == "ok":
            self.usual(str(result["node"])).remember(
                {f"{key}#{r}": ns for r, ns in enumerate(pace_readings(predictions))})
        if req.run:  # a further run only adds its predictions to the median
            self.again[(req.program, req.gpu, req.run)] = done
            return
        self.requested.add((req.program, req.gpu))
        self.done[(req.program, req.gpu)] = done
        if result["status"] == "failed":
            if self.emulations["failed"] == self.emulations["ran"] + self.emulations["reused"]:
                # Every emulation so far failed: the script or its image is broken; one error, not one per candidate.
                self.stop("not run: the script failed under emulation (see the failed candidate)")
        if result["status"] == "oom":
            self._prune_after_oom(req)
        if self._sampler is not None:
            self._sampler.told(req)

    def _prune_after_oom(self, req: Request) -> None:
        """Larger micro-batches with the same knobs and shape, on GPUs with no more memory, run out too."""
        cap = usable_bytes(req.gpu)
        ran = next(c for c in self.candidates if self.program[c] == req.program)
        for c in self.candidates:
            p = self.program[c]
            if (c.micro_batch > ran.micro_batch and c.knobs == ran.knobs and usable_bytes(c.gpu) <= cap
                    and (p.gpus_per_node, p.nodes) == (req.program.gpus_per_node, req.program.nodes)
                    and c not in self.pruned and not any(q == p for (q, _g) in self.done)):
                self.pruned[c] = (f"micro-batch {ran.micro_batch} already ran out of memory on {req.gpu} with the "
                                  "same knobs and shape")

    # -- verdicts --------------------------------------------------------------------------------------------------
    def outcome(self, c: Candidate) -> Outcome:
        program, arch, capacity = self.program[c], architecture(c.gpu), usable_bytes(c.gpu)
        # Its own emulation, else its group's on a GPU of the same architecture with at least its memory.
        mine = self.done.get((program, c.gpu))
        gpu, done = (c.gpu, mine) if mine else next(
            ((g, d) for (p, g), d in self.done.items()
             if p == program and architecture(g) == arch and usable_bytes(g) >= capacity), (c.gpu, None))
        if done is None:
            reason = self.pruned.get(c) or self.stopped or (
                "not sampled: the search spent its emulation budget" if self.sampled else "not evaluated")
            return Outcome("pruned", reason)
        r = done.result
        peak = peak_bytes(r)
        values = dict(r.get("deviceValues") or {})
        if r["status"] == "failed":
            return Outcome("failed", r.get("error", "the emulation failed"), emulation=done.key, device_values=values)
        verdict = memory_verdict(r, c.gpu, emulated_here=done is mine)
        if verdict == "oom":
            return Outcome("oom", _oom_reason(r, c.gpu, done is mine), peak_bytes=peak, emulation=done.key,
                           device_values=values)
        if verdict == "near":
            return Outcome("pruned", f"peak memory near the capacity of {c.gpu}: needs an emulation on it",
                           peak_bytes=peak)
        pred = self.prediction(program, gpu, c.gpu)
        if not pred or "error" in pred:
            return Outcome("failed", (pred or {}).get("error", f"no prediction for {c.gpu}"), emulation=done.key,
                           device_values=values)
        return Outcome("ok", "", pred, int(pred.get("peakMemoryBytes") or peak or 0), done.key, values)

    def prediction(self, program: Program, emulated: str, gpu: str) -> dict[str, Any] | None:
        """The prediction for ``gpu`` of ``program`` emulated on ``emulated``: the first run's, or the median
        of the runs that count (:meth:`_counted`; all where every one ran in a slow phase) where there were more."""
        runs = [d for d in self._runs(program, emulated) if d is not None and gpu in d.predictions]
        first = self.done[(program, emulated)].predictions.get(gpu)
        if not first or len(runs) < 2:
            return first
        kept, slow = self._counted(runs)
        over = None
        if not kept:  # every one ran in a slow phase: none is slower than the others
            kept, slow = runs, []
            from maya.predict import SLOW_PHASE

            over = ratio if (ratio := self._over_usual(runs)) and ratio > SLOW_PHASE else None
        return median_prediction([d.predictions[gpu] for d in kept], [d.predictions[gpu] for d in slow], over)

    def outcomes(self) -> list[tuple[Candidate, Outcome]]:
        return [(c, self.outcome(c)) for c in self.candidates]

    def completed(self) -> int:
        """Emulations done (run or reused)."""
        return len(self.done) + sum(d is not None for d in self.again.values())

    def needed(self) -> int:
        """Emulations the search asked for (run or reused)."""
        return len(self.requested) + len(self.again)


def _chain(c: Candidate) -> tuple[Any, ...]:
    """Candidates that differ only by micro-batch (and so by accumulation and memory)."""
    return (c.knobs, c.shape.gpus_per_node, c.shape.nodes)


def _order(c: Candidate) -> tuple[Any, ...]:
    return (c.micro_batch, c.shape.gpus, repr(c.knobs))


def _oom_reason(r: dict[str, Any], gpu: str, emulated_here: bool) -> str:
    usable = usable_bytes(gpu)
    gib = 2**30
    need = max(int(r.get("peakAllocatedBytes") or 0) + first_buckets(r), int(r.get("requestBytes") or 0))
    where = "" if emulated_here else f" (emulated on {r.get('gpu') or 'a larger GPU'})"
    if r["status"] == "oom" and emulated_here:
        short = int(r.get("shortByBytes") or 0)
        return f"ran out of memory on {gpu}: short by {short / gib:.2f} GiB of {usable / gib:.2f} GiB"
    if r["status"] == "oom":
        return f"ran out of memory on a GPU with more memory than {gpu}{where}"
    held = (" in the runs whose NCCL watchdog still holds DDP's first gradient buckets in the second step"
            if first_buckets(r) else "")
    return (f"needs {need / gib:.2f} GiB{held}, {gpu} has {usable / gib:.2f} GiB: short by "
            f"{(need - usable) / gib:.2f} GiB{where}")


class _Sampler:
    """optuna over the candidate space: each trial a candidate, an emulation only for a new program."""

    def __init__(self, search: Search) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.search = search
        plan = search.plan
        self.by_choice = {(c.shape, c.micro_batch, c.knobs): c for c in search.candidates}
        self.space: list[tuple[str, list[Any]]] = [("shape", list(plan.shapes)), ("microBatch", list(plan.micro_batches))]
        self.space += [(k.name, list(k.choices())) for k in plan.knobs]
        sampler: Any
        if plan.search.sampler == "cmaes":
            sampler = optuna.samplers.CmaEsSampler(seed=plan.search.seed, warn_independent_sampling=False)
        else:
            sampler = optuna.samplers.TPESampler(seed=plan.search.seed)
        self.study = optuna.create_study(direction="minimize", sampler=sampler)
        self.waiting: dict[tuple[Program, str], list[tuple[Any, Candidate]]] = {}
        self.seen: set[Candidate] = set()
        self.asks = 0
        self.exhausted = False
        self.value: Callable[[Candidate, Outcome], float | None] = _default_value(plan)

    def next(self, limit: int) -> list[Request]:
        out: list[Request] = []
        budget = self.search.plan.search.max_emulations
        while len(out) < limit and not self.exhausted:
            if len(self.search.requested) >= budget or len(self.seen) >= len(self.search.candidates) \
                    or self.asks >= 20 * max(1, len(self.search.candidates)):
                self.exhausted = True
                break
            trial = self.study.ask()
            self.asks += 1
            picks = [v[trial.suggest_int(name, 0, len(v) - 1)] for name, v in self.space]
            c = self.by_choice.get((picks[0], picks[1], tuple(zip((n for n, _ in self.space[2:]), picks[2:],
                                                                   strict=True))))
            if c is None or c in self.search.pruned:
                trial.set_constraint("feasible", 1.0)
                self.study.tell(trial, float("inf"))
                continue
            self.seen.add(c)
            group = (self.search.program[c], architecture(c.gpu))
            wanted = self.search._wanted(*group)
            if not wanted:
                self._tell(trial, c)
                continue
            req = wanted[0]
            self.waiting.setdefault((req.program, req.gpu), []).append((trial, c))
            if (req.program, req.gpu) not in self.search.requested:
                self.search.requested.add((req.program, req.gpu))
                out.append(req)
        return out

    def told(self, req: Request) -> None:
        for trial, c in self.waiting.pop((req.program, req.gpu), []):
            self._tell(trial, c)

    def _tell(self, trial: Any, c: Candidate) -> None:
        o = self.search.outcome(c)
        value = self.value(c, o)
        trial.set_constraint("feasible", 0.0 if value is not None else 1.0)
        self.study.tell(trial, value if value is not None else float("inf"))


def _default_value(plan: Plan) -> Callable[[Candidate, Outcome], float | None]:
    from maya.plan.choose import objective_value

    return lambda c, o: objective_value(plan, c, o)


def skipped_outcomes(skipped: list[Skipped]) -> list[tuple[Candidate, Outcome]]:
    return [(s.candidate, Outcome("pruned", s.reason)) for s in skipped]
