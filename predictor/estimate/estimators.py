"""Kernel-time estimators: how long a device operation takes on a catalog GPU.

One estimator per family of work (:data:`maya.predictor.estimate.work.FAMILIES`),
fitted on the profile tables of a GPU (``predictor/profiles/<GPU>/``).
What is estimated is an operation's device busy time: the summed durations
of the kernels (or copies) it caused, not the span from its first start to
its last end, because under ``maya record`` the gaps between the kernels of
one call (a split-K GEMM's two kernels, cuDNN's helpers) include the
recorder's own host overhead.  When the host issues slower than the device
runs, the replay's host model adds the wait.

An operation is estimated, in this order of confidence:

1. from the measured median, when its exact signature was profiled (``measured``);
2. by the family's model (:mod:`maya.predictor.estimate.fit`), a
   scikit-learn tree ensemble on the features of
   :mod:`maya.predictor.estimate.features` (``fitted``);
3. for work the family's model has not seen (an unseen kernel class, BLAS
   API or math type, cuDNN operation; every collective), by the roofline time
   scaled by the family's median efficiency on the profiled GPU (``fallback``).

A cuDNN RNN call, which no profile measures, is the sum of the equivalent
work of :mod:`maya.predictor.estimate.rnn`: its GEMMs estimated as BLAS
calls, its pointwise kernels at the memory family's calibrated per-kernel
cost (``derived``, below ``scaled`` and above ``fallback``).  An Inductor
Triton pointwise or reduction kernel, whose bytes its source gives (the
start-up hook's facts), and a torch.cat kernel, whose inputs' sizes the
interposer reads, are priced as a device-to-device copy of as many bytes
(``derived``).

Estimators fitted on one GPU estimate for another of the same architecture
(compute capability) by a speed-up (``scaled``): the one both GPUs measured
on the same operations of the domain or family
(:mod:`maya.predictor.estimate.speedup`) where the other GPU has profiles,
else the ratio of the two GPUs' roofline times; for another architecture
only the calibrated roofline is used (``fallback``).  An operation measured
on the GPU itself keeps its measured time even in a borrowed family.  Which
GPU lends its fits, and which families and domains, is
:mod:`maya.predictor.estimate.loading`'s choice; fits are kept by
:mod:`maya.predictor.estimate.cache`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from maya import catalog
from maya.predictor.estimate.features import matrix
from maya.predictor.estimate.fit import (
    DEFAULT_FLOOR_NS,
    FamilyFit,
    Fitter,
    NameTable,
    median_points,
    roofline_times,
    training_points,
)
from maya.predictor.estimate.profiles import ProfileRow
from maya.predictor.estimate.rnn import is_rnn
from maya.predictor.estimate.rnn import parts as rnn_parts
from maya.predictor.estimate.roofline import Work, roofline_ns
from maya.predictor.estimate.speedup import Speedups
from maya.predictor.estimate.work import (
    CAT_ELEMENTS_PER_S,
    CAT_RATE_CLOCK_KHZ,
    CAT_RATE_SMS,
    FITTED,
    cat_form,
    cat_inputs,
    domain,
    family,
    triton_facts,
    work,
)
from maya.predictor.trace.ops import Op
from maya.predictor.trace.records import CatInputs

Confidence = Literal["measured", "fitted", "scaled", "derived", "fallback"]


@dataclass(frozen=True)
class Estimate:
    """A duration and where it comes from.

    ``estimator``: ``measured``, ``<family>:<model>/<target>``,
    ``memory:names`` (per-name interpolation), ``roofline``, or one of these
    after ``scaled:``.  ``confidence`` orders them: measured > fitted > scaled
    > fallback.
    """

    ns: float
    estimator: str
    confidence: Confidence
    family: str



class Estimators:
    """The fitted estimators of one profiled GPU (``source``), estimating for ``gpu``."""

    def __init__(self, gpu: str, source: str, families: dict[str, FamilyFit], measured: dict[tuple[Any, ...], float],
                 names: NameTable, fit_seconds: float) -> None:
        self.gpu, self.source = gpu, source
        self.families, self.measured, self.names = families, measured, names
        self.fit_seconds = fit_seconds
        self.cache_hit = False
        self.borrowed: dict[str, Estimators] = {}  # family -> another GPU's estimators, for families without data
        # family -> domain -> another GPU's estimators, for domains without data in a family fitted here
        self.borrowed_domains: dict[str, dict[str, Estimators]] = {}
        # how much faster ``gpu`` runs work than ``source``, as both measured it (empty: not measured)
        self.speedups = Speedups()
        self._memo: dict[tuple[Any, ...], Estimate] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_memo"], state["borrowed"], state["borrowed_domains"], state["speedups"] = {}, {}, {}, Speedups()
        return state

    @classmethod
    def fit(cls, gpu: str, rows: Sequence[ProfileRow]) -> Estimators:
        """Fit every family on ``rows`` (profiles of ``gpu``; ``held-out:*`` rows are ignored)."""
        import sklearn.ensemble  # type: ignore[import-untyped]  # noqa: F401  (loads OpenMP before the limit below)
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

        start = time.perf_counter()
        g = catalog.lookup(gpu)
        points = median_points(r for r in rows if not r.source.startswith("held-out:"))
        by_family = training_points(points)
        # OpenMP (gradient boosting) on one thread: its threads spin at barriers and slow down
        # badly as soon as another process wants the same cores. Forests use joblib threads.
        with threadpool_limits(limits=1):
            families = {fam: Fitter(fam, by_family.get(fam, []), g).run() for fam in FITTED}
        names = NameTable(by_family.get("memory", []))
        measured = {p.op.signature(): p.ns for p in points}
        return cls(g.name, g.name, families, measured, names, time.perf_counter() - start)

    def on(self, gpu: str) -> Estimators:
        """The same fits, estimating for another catalog GPU (scaled or fallback estimates)."""
        other = Estimators(catalog.lookup(gpu).name, self.source, self.families, self.measured, self.names,
                           self.fit_seconds)
        other.cache_hit = self.cache_hit
        return other

    def summary(self) -> dict[str, Any]:
        """Per family: the chosen model, training points, validation scores (mean |log error|)."""
        return {f: {"choice": fit.choice, "n": fit.n, "domains": sorted(fit.domains), "floor_ns": fit.floor_ns,
                    "efficiency": fit.efficiency, "validation": fit.scores} for f, fit in self.families.items()}

    def estimate(self, op: Op) -> Estimate:
        return self.estimate_many([op])[0]

    def estimate_many(self, ops: Sequence[Op]) -> list[Estimate]:
        """Estimates for ``ops``, computed once per distinct operation and batched per family."""
        out: list[Estimate | None] = [self._memo.get(op.signature()) for op in ops]
        todo: dict[str, list[int]] = defaultdict(list)
        for i, op in enumerate(ops):
            if out[i] is None and is_rnn(op) and op.signature() not in self.measured:
                out[i] = self._memo[op.signature()] = self._estimate_rnn(op)
            elif out[i] is None and triton_facts(op) is not None and op.signature() not in self.measured:
                out[i] = self._memo[op.signature()] = self._estimate_streaming(op)
            elif out[i] is None and (cat := cat_inputs(op)) is not None and op.signature() not in self.measured:
                out[i] = self._memo[op.signature()] = self._estimate_cat(op, cat)
            elif out[i] is None:
                todo[family(op)].append(i)
        for fam, idx in todo.items():
            for i, e in zip(idx, self._estimate_family(fam, [ops[i] for i in idx]), strict=True):
                out[i] = self._memo[ops[i].signature()] = e
        return [e for e in out if e is not None]

    def _estimate_rnn(self, op: Op) -> Estimate:
        """An RNN call as its GEMMs (estimated as BLAS calls) plus its pointwise kernels, each at
        the memory family's calibrated cost for a kernel of its bytes (the roofline fallback's)."""
        p = rnn_parts(op)
        gemm_ops = [g for g, _ in p.gemms]
        ns = sum(e.ns * n for e, (_, n) in zip(self.estimate_many(gemm_ops), p.gemms, strict=True))
        ns += sum(n * self._calibrated_roofline("memory", w) for w, n in p.pointwise)
        return Estimate(ns, "rnn:derived", "derived", family(op))

    def _calibrated_roofline(self, fam: str, w: Work) -> float:
        """``w`` at family ``fam``'s calibrated roofline on this GPU (its fit's, or its lender's)."""
        fit = self.borrowed.get(fam, self).families.get(fam)
        floor = fit.floor_ns if fit else DEFAULT_FLOOR_NS
        efficiency = fit.efficiency if fit else 1.0
        return efficiency * (floor + roofline_ns(w, catalog.lookup(self.gpu)))

    def _estimate_streaming(self, op: Op) -> Estimate:
        """An Inductor Triton kernel whose source gave its bytes: priced as a device-to-device copy
        of as many bytes (the copy family's calibrated roofline).  Inductor's pointwise kernels and
        reductions stream their operands through device memory once, as a copy does; the memory
        family's own calibration is of byte counts guessed from launches, not known."""
        return Estimate(self._calibrated_roofline("copy", work(op)), "triton:streaming", "derived", family(op))

    def _estimate_cat(self, op: Op, cat: CatInputs) -> Estimate:
        """A torch.cat kernel whose inputs the interposer read: a device-to-device copy of their bytes, read and
        written (the copy family's calibrated roofline), since its grid (a few blocks per SM, whatever it copies)
        says nothing the memory family could price; a form that loads and stores element by element takes at least
        its elements at the rate that form was measured to copy them (``CAT_ELEMENTS_PER_S``)."""
        ns = self._calibrated_roofline("copy", work(op))
        form = cat_form(op)
        if form in CAT_ELEMENTS_PER_S:  # bound by the SMs' instructions at large sizes
            g = catalog.lookup(self.gpu)
            speed = g.sm_count * float(g.fields["clock_khz"]) / (CAT_RATE_SMS * CAT_RATE_CLOCK_KHZ)
            ns = max(ns, 1e9 * cat.elements / (CAT_ELEMENTS_PER_S[form] * speed))
        return Estimate(ns, f"cat:{form}", "derived", family(op))

    def _lender(self, fam: str, op: Op) -> Estimators | None:
        """The GPU that estimates ``op`` (of family ``fam``) for this one, if it is not this one's
        fit: none for an operation measured here."""
        if op.signature() in self.measured:
            return None
        lender = self.borrowed.get(fam)
        if lender is None and fam in self.borrowed_domains:
            lender = self.borrowed_domains[fam].get(domain(op))
        return lender

    def _estimate_family(self, fam: str, ops: Sequence[Op]) -> list[Estimate]:
        if fam not in self.borrowed and fam not in self.borrowed_domains:
            return self._own_estimates(fam, ops)
        found: list[Estimate | None] = [None] * len(ops)
        groups: dict[int, tuple[Estimators, list[int]]] = {}
        for i, op in enumerate(ops):
            lender = self._lender(fam, op) or self
            groups.setdefault(id(lender), (lender, []))[1].append(i)
        for lender, idx in groups.values():
            sub = [ops[i] for i in idx]
            estimates = self._own_estimates(fam, sub) if lender is self else lender._estimate_family(fam, sub)
            for i, e in zip(idx, estimates, strict=True):
                found[i] = e
        return [e for e in found if e is not None]

    def _own_estimates(self, fam: str, ops: Sequence[Op]) -> list[Estimate]:
        """Estimates from this object's own fits (``source``'s), carried over to ``gpu``."""
        src, dst = catalog.lookup(self.source), catalog.lookup(self.gpu)
        fit = self.families.get(fam)
        floor = fit.floor_ns if fit else DEFAULT_FLOOR_NS
        efficiency = fit.efficiency if fit else 1.0
        same_arch = src.fields["cc"] == dst.fields["cc"]
        found: list[Estimate | None] = [None] * len(ops)
        model_idx = []
        for i, op in enumerate(ops):
            ns = self.measured.get(op.signature())
            if ns is not None:
                found[i] = Estimate(ns, "measured", "measured", fam)
            elif fit is None or fit.model is None or domain(op) not in fit.domains:
                found[i] = Estimate(efficiency * (floor + roofline_ns(work(op), dst)), "roofline", "fallback", fam)
            elif fit.names and (ns := self.names.predict(op)) is not None:
                found[i] = Estimate(ns, "memory:names", "fitted", fam)
            else:
                model_idx.append(i)
        if model_idx and fit is not None:
            sub = [ops[i] for i in model_idx]
            y = fit.model.predict(matrix(sub, src, fam))
            ns_all = np.exp(y + np.log(floor + roofline_times(sub, src))) if fit.target == "ratio" else np.exp(y)
            for i, ns in zip(model_idx, ns_all.tolist(), strict=True):
                found[i] = Estimate(ns, f"{fam}:{fit.choice}", "fitted", fam)
        result = [e for e in found if e is not None]
        if src.name == dst.name:
            return result
        scaled = []
        for op, e in zip(ops, result, strict=True):
            if e.confidence == "fallback":
                scaled.append(e)
            elif same_arch:
                measured_speedup = self.speedups.of(fam, op, e.ns)
                if measured_speedup is not None:
                    ratio = 1.0 / measured_speedup
                else:
                    w = work(op)
                    ratio = (floor + roofline_ns(w, dst)) / (floor + roofline_ns(w, src))
                scaled.append(Estimate(e.ns * ratio, "scaled:" + e.estimator, "scaled", fam))
            else:
                ns = efficiency * (floor + roofline_ns(work(op), dst))
                scaled.append(Estimate(ns, "roofline", "fallback", fam))
        return scaled

