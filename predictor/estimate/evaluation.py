"""How good the estimators are: errors on profile points kept out of the fit, and their report.

``maya estimators evaluate GPU`` prints :func:`render` of :func:`evaluate`;
``benchmarks/results/estimators-<GPU>.txt`` keeps the committed tables' report.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from maya import catalog
from maya.predictor.estimate import loading
from maya.predictor.estimate.cache import Table, cached_fit
from maya.predictor.estimate.estimators import Estimators
from maya.predictor.estimate.fit import SEED, hash_fraction, median_points
from maya.predictor.estimate.profiles import ProfileRow, load_profiles
from maya.predictor.estimate.work import FAMILIES, FITTED, family
from maya.predictor.trace import Kind

TEST_FRACTION = 0.2  # of signatures held out by evaluate()
# Targets of issue 3, reported by evaluate().
SOURCE_MIN = 20  # test points of a source before render() gives it a line
TARGETS = {"gemm": 0.03, "attention": 0.05, "memory": 0.08, "examples_time_weighted": 0.04,
           "examples_coverage": 0.98}



def split(rows: Sequence[ProfileRow], seed: int = SEED) -> tuple[list[ProfileRow], list[ProfileRow]]:
    """(fit rows, test rows): a fixed fraction of signatures, and every ``held-out:*`` row, are test rows."""
    fit, test = [], []
    for r in rows:
        if r.source.startswith("held-out:") or hash_fraction(r.op.signature(), seed) < TEST_FRACTION:
            test.append(r)
        else:
            fit.append(r)
    return fit, test


def _errors(pred: npt.NDArray[np.float64], true: npt.NDArray[np.float64],
            weight: npt.NDArray[np.float64]) -> dict[str, float]:
    ape = np.abs(pred - true) / true
    return {
        "median_ape": float(np.median(ape)) if len(ape) else math.nan,
        "p90_ape": float(np.percentile(ape, 90)) if len(ape) else math.nan,
        "time_weighted": float(np.sum(weight * np.abs(pred - true)) / np.sum(weight * true)) if len(ape) else math.nan,
    }


def evaluate(gpu: str, *, profiles: Sequence[ProfileRow] | None = None, cache: Path | None = None) -> dict[str, Any]:
    """Errors of the estimators of ``gpu`` on profile points not used in fitting.

    The signatures are split (fixed seed) before anything is fitted; the
    estimators, model choice included, are fitted on the fit part only.
    ``families``: per family, over test signatures absent from the fit part,
    median and 90th percentile absolute percentage error and time-weighted
    error (sum |pred - meas| / sum meas), overall and per source (the sweep
    or example a signature was profiled in: ``gemm`` random shapes, aligned
    or not, ``gemm-grid`` the log grid; fills of the sweeps' inputs count
    under the memory family of their sweep).  ``examples``: per example model
    (``example:*`` rows of test signatures and every ``held-out:*`` row,
    weighted by occurrences ``n``), the share of kernel time not left to the
    roofline fallback (coverage: measured, fitted, or fitted on a GPU of the
    same architecture and scaled) and the time-weighted error.  Families and
    domains the GPU has too few points of are borrowed as :func:`load` does
    (``borrowed``, ``borrowed_domains``), scaled by the speed-ups measured on
    the fit part's signatures only.
    """
    g = catalog.lookup(gpu)
    rows = list(profiles) if profiles is not None else load_profiles(g.name)
    fit_rows, test_rows = split(rows)
    est = cached_fit(g, f"evaluate{SEED}", Table(g.name, fit_rows), cache)
    if profiles is None:  # as load() does: thin families come from a profiled GPU of the same architecture
        loading.borrow_families(est, g, loading.profiled_gpus(), None, cache)
    fitted_sigs = {r.op.signature() for r in fit_rows}
    points = [p for p in median_points(test_rows) if p.op.signature() not in fitted_sigs]
    estimates = est.estimate_many([p.op for p in points])
    source: dict[tuple[Any, ...], str] = {}
    for r in test_rows:
        source.setdefault(r.op.signature(), r.source)
    families: dict[str, Any] = {}
    for fam in FAMILIES:
        sel = [i for i, p in enumerate(points) if family(p.op) == fam]
        if not sel:
            continue
        pred = np.array([estimates[i].ns for i in sel])
        true = np.array([points[i].ns for i in sel])
        by_source: dict[str, list[int]] = defaultdict(list)
        for j, i in enumerate(sel):
            by_source[source[points[i].op.signature()]].append(j)
        families[fam] = {
            "n": len(sel), **_errors(pred, true, np.ones(len(sel))),
            "estimators": dict(Counter(estimates[i].estimator for i in sel).most_common()),
            "sources": {src: {"n": len(js), **_errors(pred[js], true[js], np.ones(len(js)))}
                        for src, js in sorted(by_source.items(), key=lambda kv: -len(kv[1]))},
        }
    examples = _examples(est, [r for r in test_rows if r.source.startswith(("example:", "held-out:"))],
                         autotune_trials(rows))
    return {
        "gpu": g.name, "seed": SEED, "test_fraction": TEST_FRACTION,
        "fit": {"rows": len(fit_rows), "seconds": est.fit_seconds, "cache_hit": est.cache_hit,
                "families": est.summary()},
        "families": families, "examples": examples, "targets": TARGETS,
        "borrowed": {fam: other.source for fam, other in est.borrowed.items()},
        "borrowed_domains": {fam: {d: other.source for d, other in sorted(by_domain.items())}
                             for fam, by_domain in est.borrowed_domains.items()},
    }


def autotune_trials(rows: Sequence[ProfileRow]) -> set[tuple[str, tuple[Any, ...]]]:
    """(source, signature) of the rows that are ``cudnn.benchmark``'s trials: a cuDNN operation
    its source also ran, same name and parameters, under another engine more often.

    Why: autotuning times every candidate engine of a new convolution once or twice in the first
    step, and the steps after it run the chosen one; a recorded model's trials (40-53% of the
    example CNNs' kernel time) weigh in a whole-model sum although no steady step runs them."""
    most: dict[tuple[Any, ...], int] = defaultdict(int)
    for r in rows:
        if r.op.kind == Kind.DNN:
            key = (r.source, r.op.name, r.op.params)
            most[key] = max(most[key], r.n)
    return {(r.source, r.op.signature()) for r in rows
            if r.op.kind == Kind.DNN and r.n < most[(r.source, r.op.name, r.op.params)]}


def _examples(est: Estimators, rows: Sequence[ProfileRow],
              trials: set[tuple[str, tuple[Any, ...]]]) -> dict[str, Any]:
    """Per example model: coverage and errors weighted by occurrences; ``steady_time_weighted``
    leaves out cuDNN's autotuning trials (:func:`autotune_trials`), ``trial_share`` their share of
    the kernel time."""
    kernel_rows = [r for r in rows if family(r.op) in FITTED and r.busy_ns > 0]
    estimates = est.estimate_many([r.op for r in kernel_rows])
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(kernel_rows):
        groups[r.source].append(i)
        groups["all"].append(i)
    out: dict[str, Any] = {}
    for source, idx in sorted(groups.items()):
        pred = np.array([estimates[i].ns for i in idx])
        true = np.array([float(kernel_rows[i].busy_ns) for i in idx])
        weight = np.array([float(max(kernel_rows[i].n, 1)) for i in idx])
        covered = np.array([estimates[i].confidence != "fallback" for i in idx])
        measured = np.array([estimates[i].confidence == "measured" for i in idx])
        total = float(np.sum(weight * true))
        steady = np.array([(kernel_rows[i].source, kernel_rows[i].op.signature()) not in trials for i in idx])
        out[source] = {
            "n": len(idx), "kernel_ns": total,
            "coverage": float(np.sum((weight * true)[covered]) / total),
            "measured_share": float(np.sum((weight * true)[measured]) / total),
            **_errors(pred, true, weight),
            "steady_time_weighted": _errors(pred[steady], true[steady], weight[steady])["time_weighted"],
            "trial_share": 1.0 - float(np.sum((weight * true)[steady]) / total),
        }
    coll = [r for r in rows if family(r.op) == "coll"]
    if coll:
        out["coll_excluded_ns"] = float(sum(r.dur_ns * max(r.n, 1) for r in coll))
    return out


def _percent(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{100 * x:.1f}%"


def render(report: Mapping[str, Any]) -> list[str]:
    """:func:`evaluate`'s report as text lines, targets included."""
    fit, fams, targets = report["fit"], report["families"], report["targets"]
    how = "cache hit" if fit["cache_hit"] else f"fitted in {fit['seconds']:.1f} s"
    lines = [f"{report['gpu']}: {fit['rows']} profile rows fitted ({how}); errors on points not used in fitting",
             f"  {'family':10} {'n':>6} {'median':>8} {'p90':>8} {'time-wtd':>9}  estimator (then per source)"]
    for fam, r in fams.items():
        lent = report.get("borrowed", {}).get(fam)
        choice = f"{lent}'s, scaled" if lent else fit["families"].get(fam, {}).get("choice", "roofline")
        lines.append(f"  {fam:10} {r['n']:6} {_percent(r['median_ape']):>8} {_percent(r['p90_ape']):>8} "
                     f"{_percent(r['time_weighted']):>9}  {choice}")
        for src, e in r.get("sources", {}).items():
            if e["n"] >= SOURCE_MIN and len(r["sources"]) > 1:
                lines.append(f"    {'from ' + src:28} {e['n']:6} {_percent(e['median_ape']):>8} "
                             f"{_percent(e['p90_ape']):>8} {_percent(e['time_weighted']):>9}")
    for fam, by_domain in report.get("borrowed_domains", {}).items():
        for d, lent in by_domain.items():
            lines.append(f"  {fam} {d}: {lent}'s, scaled (too few points of its own)")
    lines.append(f"  {'example model':28} {'n':>5} {'coverage':>9} {'measured':>9} {'time-wtd':>9} {'median':>8} "
                 f"{'steady':>8} {'trials':>7}")
    for source, r in report["examples"].items():
        if isinstance(r, dict):
            lines.append(f"  {source:28} {r['n']:5} {_percent(r['coverage']):>9} {_percent(r['measured_share']):>9} "
                         f"{_percent(r['time_weighted']):>9} {_percent(r['median_ape']):>8} "
                         f"{_percent(r.get('steady_time_weighted')):>8} {_percent(r.get('trial_share')):>7}")
    lines.append("  (steady: time-weighted without cudnn.benchmark's trial runs, whose share of the time is 'trials')")
    ex = report["examples"].get("all", {})
    checks: list[tuple[str, float | None, bool]] = [
        (f"{f} median", fams.get(f, {}).get("median_ape"), True) for f in ("gemm", "attention", "memory")]
    checks += [("examples time-weighted", ex.get("time_weighted"), True), ("examples coverage", ex.get("coverage"), False)]
    for label, value, below in checks:
        key = label.replace(" median", "").replace(" ", "_").replace("-", "_")
        target = targets[key]
        verdict = "no data" if value is None else ("met" if (value <= target if below else value >= target) else "NOT met")
        lines.append(f"  target {label} {'<=' if below else '>='} {_percent(target)}: {verdict} ({_percent(value)})")
    return lines
