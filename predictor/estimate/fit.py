"""Fitting one family's kernel-time model on profile points.

Candidates (``CANDIDATES``: a tree ensemble and a target, log(duration) or
log(duration / roofline)) are scored on a validation split of the family's
training points (by signature hash, so independent of row order); the best
is refitted on every point.  For memory-bound kernels a candidate adds a
per-name table (:class:`NameTable`).  The roofline fallback's floor and
efficiency are calibrated on the same points.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from maya.catalog import GPU
from maya.predictor.estimate.features import matrix
from maya.predictor.estimate.profiles import ProfileRow
from maya.predictor.estimate.roofline import roofline_ns
from maya.predictor.estimate.work import domain, family, launch, work
from maya.predictor.trace.format import Kind
from maya.predictor.trace.ops import Op

SEED = 0
VALIDATION_FRACTION = 0.2  # of the training signatures, to choose each family's model
MIN_SELECT = 40  # fewer training points than this: no selection, the default candidate
# Selection fits every candidate on at most this many training points and scores it on at most
# this many validation points (a random subset, by signature hash), to bound the fit time; a
# much smaller sample would bias the choice towards boosting, which only small samples favour.
SELECT_TRAIN, SELECT_VALIDATION = 20000, 5000
PER_NAME = 3000  # training points of one kernel name at most: see _thinned
MIN_DOMAIN = 2  # training points of a domain before its model is trusted
DEFAULT_CANDIDATE = "et/ratio"
# Shortest kernels on an idle H100 last about 1 us (benchmarks/data/gpu_fidelity, torch.profiler):
# the roofline's floor where no profile calibrates it.
DEFAULT_FLOOR_NS = 1000.0


def regressor(name: str, n: int) -> Any:
    """A fresh, unfitted model of ``name`` (``et``: extra trees, ``hgb``: boosting) for ``n`` training points."""
    from sklearn.ensemble import ExtraTreesRegressor, HistGradientBoostingRegressor  # type: ignore[import-untyped]

    # Small leaves and every feature at each split: the profile tables are dense enough for
    # fine trees.  32 trees: more cost fit time and cache size (a cached fit is a few hundred MB)
    # without lowering the error.
    if name == "et":
        return ExtraTreesRegressor(n_estimators=32, max_features=1.0, min_samples_leaf=2, n_jobs=-1,
                                   random_state=SEED)
    if name == "hgb":
        # Boosting rounds grow with the data: each round costs milliseconds however few the points.
        return HistGradientBoostingRegressor(max_iter=min(200, 40 + n // 20), learning_rate=0.15,
                                             min_samples_leaf=max(min(n // 50, 20), 2), l2_regularization=1e-3,
                                             early_stopping=False, random_state=SEED)
    raise ValueError(f"unknown model {name!r}")


# "<model>/<target>", target: log(ns / (floor + roofline)) or log(ns).  Extra trees are fitted on
# the ratio only: a fit costs seconds, and the ratio varies less with size than the duration.
CANDIDATES = ("et/ratio", "hgb/ratio", "hgb/log")


@dataclass(frozen=True)
class Point:
    """One training or test point: a distinct operation and its median duration."""

    op: Op
    ns: float


@dataclass
class FamilyFit:
    """A fitted family: its model, how it was chosen, its fallback calibration."""

    family: str
    choice: str  # "<model>/<target>" (+ "+names" for memory)
    model: Any  # fitted regressor, or None without training points
    target: str
    names: bool
    n: int
    domains: frozenset[str]
    floor_ns: float
    efficiency: float
    scores: dict[str, float] = field(default_factory=dict)
    domain_sizes: dict[str, int] = field(default_factory=dict)  # training points per domain


class NameTable:
    """Per kernel name: log2(duration) against log2(total threads), for names seen at several sizes."""

    REACH = 1.0  # extrapolate at most a factor 2 in threads past the profiled sizes

    def __init__(self, points: Sequence[Point]) -> None:
        per: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
        for p in points:
            per[p.op.name][launch(p.op).threads].append(math.log2(p.ns))
        self.curves: dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]] = {}
        for name, by_threads in per.items():
            if len(by_threads) >= 2:
                xs = np.log2(np.array(sorted(by_threads), dtype=float))
                ys = np.array([float(np.median(by_threads[t])) for t in sorted(by_threads)])
                self.curves[name] = (xs, ys)

    def predict(self, op: Op) -> float | None:
        curve = self.curves.get(op.name)
        if curve is None:
            return None
        xs, ys = curve
        x = math.log2(launch(op).threads)
        if x < xs[0] - self.REACH or x > xs[-1] + self.REACH:
            return None
        if x < xs[0] or x > xs[-1]:
            i = 0 if x < xs[0] else len(xs) - 2
            slope = float(np.clip((ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i]), 0.0, 1.0))
            edge = 0 if x < xs[0] else len(xs) - 1
            return float(2 ** (ys[edge] + slope * (x - xs[edge])))
        return float(2 ** np.interp(x, xs, ys))


def roofline_times(ops: Sequence[Op], gpu: GPU) -> npt.NDArray[np.float64]:
    return np.array([roofline_ns(work(op), gpu) for op in ops], dtype=float)


def _calibrate(ns: npt.NDArray[np.float64], roofline: npt.NDArray[np.float64]) -> tuple[float, float]:
    """(floor ns, efficiency) of the roofline fallback: the 5th percentile duration, and the
    median of duration / (floor + roofline)."""
    if len(ns) == 0:
        return DEFAULT_FLOOR_NS, 1.0
    floor = float(np.percentile(ns, 5))
    return floor, float(np.median(ns / (floor + roofline)))


def _score(pred: npt.NDArray[np.float64], true: npt.NDArray[np.float64]) -> float:
    """Mean absolute log error: what selection minimises."""
    return float(np.mean(np.abs(np.log(pred / true))))


class Fitter:
    """Fits one family: candidates on a validation split, then the chosen one on everything."""

    def __init__(self, family: str, points: Sequence[Point], gpu: GPU) -> None:
        self.family, self.points, self.gpu = family, points, gpu
        ops = [p.op for p in points]
        self._ns = np.array([p.ns for p in points], dtype=float)
        roofline = roofline_times(ops, gpu)
        self.floor, self.efficiency = _calibrate(self._ns, roofline)
        self._x = matrix(ops, gpu, family)
        self._base = self.floor + roofline

    def _y(self, target: str, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        y = np.log(self._ns[idx])
        return y - np.log(self._base[idx]) if target == "ratio" else y

    def _fit(self, model: str, target: str, idx: npt.NDArray[np.int64]) -> Any:
        reg = regressor(model, len(idx))
        reg.fit(self._x[idx], self._y(target, idx))
        return reg

    def _predict(self, reg: Any, target: str, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        y = reg.predict(self._x[idx])
        return np.exp(y + np.log(self._base[idx])) if target == "ratio" else np.exp(y)

    def run(self) -> FamilyFit:
        n = len(self.points)
        domains = Counter(domain(p.op) for p in self.points)
        trusted = frozenset(d for d, c in domains.items() if c >= MIN_DOMAIN)
        sizes = dict(domains)
        if n == 0:
            return FamilyFit(self.family, "none", None, "ratio", False, 0, trusted, self.floor, self.efficiency,
                             domain_sizes=sizes)
        u = np.array([hash_fraction(p.op.signature(), SEED + 1) for p in self.points])
        order = np.argsort(u, kind="stable")
        va = order[u[order] < VALIDATION_FRACTION]
        tr = order[u[order] >= VALIDATION_FRACTION]
        scores: dict[str, float] = {}
        if len(tr) >= MIN_SELECT and len(va) >= 5:
            looked: list[float | None] = [None] * len(va)
            if self.family == "memory":  # the name table sees every training point, as in production
                table = NameTable([self.points[i] for i in tr])
                looked = [table.predict(self.points[i].op) for i in va]
            tr, va = tr[:SELECT_TRAIN], va[:SELECT_VALIDATION]
            looked = looked[:SELECT_VALIDATION]
            for candidate in CANDIDATES:
                model, target = candidate.split("/")
                pred = self._predict(self._fit(model, target, tr), target, va)
                scores[candidate] = _score(pred, self._ns[va])
                if self.family == "memory":
                    with_names = np.array([t if t is not None else p for t, p in zip(looked, pred, strict=True)])
                    scores[candidate + "+names"] = _score(with_names, self._ns[va])
            choice = min(scores, key=lambda c: scores[c])
        else:
            choice = DEFAULT_CANDIDATE
        model, rest = choice.split("/")
        target = rest.removesuffix("+names")
        reg = self._fit(model, target, np.arange(n))
        return FamilyFit(self.family, choice, reg, target, rest.endswith("+names"), n, trusted, self.floor,
                       self.efficiency, scores, sizes)


def _thinned(points: Sequence[Point]) -> list[Point]:
    """At most ``PER_NAME`` points of one kernel name (a fixed subset, by signature hash).

    The sweeps fill every input with a random-number kernel, so that kernel
    comes at tens of thousands of sizes: more than its simple curve needs,
    and enough to double the forests' size and fit time."""
    by_name: dict[str, list[Point]] = defaultdict(list)
    out: list[Point] = []
    for p in points:
        if p.op.kind == int(Kind.KERNEL):
            by_name[p.op.name].append(p)
        else:
            out.append(p)
    for pts in by_name.values():
        if len(pts) > PER_NAME:
            pts = sorted(pts, key=lambda p: hash_fraction(p.op.signature(), SEED + 2))[:PER_NAME]
        out += pts
    return out


def training_points(points: Iterable[Point]) -> dict[str, list[Point]]:
    """Each family's training points (thinned)."""
    by_family: dict[str, list[Point]] = defaultdict(list)
    for p in points:
        by_family[family(p.op)].append(p)
    return {fam: _thinned(pts) for fam, pts in by_family.items()}


def hash_fraction(signature: tuple[Any, ...], seed: int) -> float:
    """A number in [0, 1) fixed by the signature and the seed: a split that does not depend on row order."""
    digest = hashlib.sha256(f"{seed}:{signature!r}".encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2.0**64


def median_points(rows: Iterable[ProfileRow]) -> list[Point]:
    """One point per distinct signature: the median of its rows' device busy times."""
    by_sig: dict[tuple[Any, ...], tuple[Op, list[float]]] = {}
    for r in rows:
        if r.busy_ns > 0:
            by_sig.setdefault(r.op.signature(), (r.op, []))[1].append(float(r.busy_ns))
    return [Point(op, ns[0] if len(ns) == 1 else float(np.median(ns))) for op, ns in by_sig.values()]
