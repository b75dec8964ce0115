"""Kernel-time estimators: how long a device operation takes on a catalog GPU.

One estimator per family of work (:data:`maya.predictor.features.FAMILIES`),
fitted on the profile tables of a GPU (``predictor/profiles/<GPU>/``).
What is estimated is an operation's device busy time: the summed durations
of the kernels (or copies) it caused.  Not the span from its first start to
its last end: under ``maya record`` the gaps between the kernels of one call
(a split-K GEMM's two kernels, cuDNN's helpers) include the recorder's own
host overhead; they put 37% of the 5-20 us GEMMs of the log-grid sweep more
than 10% above their busy time, and fitting spans instead of busy times
raised the held-out median error from 6.6% to 8.0% (GEMM) and from 6.6% to
11.4% (cuDNN).  When the host issues slower than the device runs, the
simulator's host model adds the wait.


1. an operation whose exact signature was profiled gets the measured median
   (confidence ``measured``);
2. otherwise the family's model, a scikit-learn tree ensemble on the
   features of :mod:`maya.predictor.features` predicting log(duration) or
   log(duration / roofline) (``fitted``); which ensemble and which target is
   chosen per family on a validation split of the training data.  For
   memory-bound kernels a candidate adds a per-name table (log duration
   interpolated over log total threads, for names profiled at several sizes);
3. work the family's model has not seen (an unseen kernel class, BLAS API or
   math type, cuDNN operation; every collective) gets the roofline time
   scaled by the family's median efficiency on the profiled GPU
   (``fallback``).

A GPU without profiles borrows the estimators of a profiled GPU: of the same
architecture (compute capability), the estimate is multiplied by the ratio of
the two GPUs' roofline times (``scaled``); of another architecture, only the
calibrated roofline is used (``fallback``).  A GPU whose tables lack a family
(fewer than ``MIN_SELECT`` points: no attention sweep, say) borrows that family
the same way.

Fits are cached in ``$MAYA_CACHE_DIR/estimators`` (default
``~/.cache/maya/estimators``) under a hash of the profile tables, this code, the
catalog entry and the library versions; nothing version-specific is committed.
:func:`evaluate` measures the estimators on profile points kept out of the fit.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np
import numpy.typing as npt

from maya import catalog
from maya.catalog import GPU
from maya.predictor import features as F
from maya.predictor.ops import Op
from maya.predictor.profiles import ProfileRow, load_profiles, table_paths
from maya.predictor.roofline import roofline_ns
from maya.predictor.trace import Kind

Confidence = Literal["measured", "fitted", "scaled", "fallback"]

SEED = 0
TEST_FRACTION = 0.2  # of signatures held out by evaluate()
VALIDATION_FRACTION = 0.2  # of the training signatures, to choose each family's model
MIN_SELECT = 40  # fewer training points than this: no selection, the default candidate
# Selection fits every candidate on at most this many training points and scores it on at most
# this many validation points (a random subset, by signature hash), to bound the fit time.  A
# smaller sample biases the choice: at 2000-6000 points boosting looked as good as extra trees,
# which are better on the full H100 tables.
SELECT_TRAIN, SELECT_VALIDATION = 20000, 5000
PER_NAME = 3000  # training points of one kernel name at most: see _thinned
# A family with fewer points than this fraction of a same-architecture GPU's (the H200's
# convolutions, from its example models alone, against the H100's sweep) is borrowed from it.
BORROW_FRACTION = 0.1
MIN_DOMAIN = 2  # training points of a domain before its model is trusted
DEFAULT_CANDIDATE = "et/ratio"
# Shortest kernels on an idle H100 last about 1 us (benchmarks/data/gpu_fidelity, torch.profiler):
# the roofline's floor where no profile calibrates it.
DEFAULT_FLOOR_NS = 1000.0
# Targets of issue 3, reported by evaluate().
SOURCE_MIN = 20  # test points of a source before render() gives it a line
TARGETS = {"gemm": 0.03, "attention": 0.05, "memory": 0.08, "examples_time_weighted": 0.04,
           "examples_coverage": 0.98}


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


# ---------------------------------------------------------------- models


def _regressor(name: str, n: int) -> Any:
    from sklearn.ensemble import ExtraTreesRegressor, HistGradientBoostingRegressor  # type: ignore[import-untyped]

    # 2 points a leaf and every feature at each split: on the H100 tables (busy times) 0.7 to 1.5
    # points of median error below 4 points a leaf and 80% of the features (GEMM 6.6% -> 5.9%,
    # attention 9.0% -> 8.2%, cuDNN 6.6% -> 5.1%); 64 trees gave nothing more than 32 on the GEMMs
    # at twice the fit time and cache size (the cached fit is a few hundred MB).
    if name == "et":
        return ExtraTreesRegressor(n_estimators=32, max_features=1.0, min_samples_leaf=2, n_jobs=-1,
                                   random_state=SEED)
    if name == "hgb":
        # Boosting rounds grow with the data: each round costs milliseconds however few the points.
        return HistGradientBoostingRegressor(max_iter=min(200, 40 + n // 20), learning_rate=0.15,
                                             min_samples_leaf=max(min(n // 50, 20), 2), l2_regularization=1e-3,
                                             early_stopping=False, random_state=SEED)
    raise ValueError(f"unknown model {name!r}")


# "<model>/<target>", target: log(ns / (floor + roofline)) or log(ns).  Also measured on the H100
# tables and left out: random forests (never better than extra trees, and slower), extra trees on
# log(ns) (never better than on the ratio, and each extra-trees fit costs seconds).
CANDIDATES = ("et/ratio", "hgb/ratio", "hgb/log")


@dataclass(frozen=True)
class _Point:
    """One training or test point: a distinct operation and its median duration."""

    op: Op
    ns: float


@dataclass
class _Family:
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


class _NameTable:
    """Per kernel name: log2(duration) against log2(total threads), for names seen at several sizes."""

    REACH = 1.0  # extrapolate at most a factor 2 in threads past the profiled sizes

    def __init__(self, points: Sequence[_Point]) -> None:
        per: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
        for p in points:
            per[p.op.name][F.launch(p.op).threads].append(math.log2(p.ns))
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
        x = math.log2(F.launch(op).threads)
        if x < xs[0] - self.REACH or x > xs[-1] + self.REACH:
            return None
        if x < xs[0] or x > xs[-1]:
            i = 0 if x < xs[0] else len(xs) - 2
            slope = float(np.clip((ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i]), 0.0, 1.0))
            edge = 0 if x < xs[0] else len(xs) - 1
            return float(2 ** (ys[edge] + slope * (x - xs[edge])))
        return float(2 ** np.interp(x, xs, ys))


def _roofline(ops: Sequence[Op], gpu: GPU) -> npt.NDArray[np.float64]:
    return np.array([roofline_ns(F.work(op), gpu) for op in ops], dtype=float)


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


class _Fitter:
    """Fits one family: candidates on a validation split, then the chosen one on everything."""

    def __init__(self, family: str, points: Sequence[_Point], gpu: GPU) -> None:
        self.family, self.points, self.gpu = family, points, gpu
        ops = [p.op for p in points]
        self._ns = np.array([p.ns for p in points], dtype=float)
        roofline = _roofline(ops, gpu)
        self.floor, self.efficiency = _calibrate(self._ns, roofline)
        self._x = F.matrix(ops, gpu, family)
        self._base = self.floor + roofline

    def _y(self, target: str, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        y = np.log(self._ns[idx])
        return y - np.log(self._base[idx]) if target == "ratio" else y

    def _fit(self, model: str, target: str, idx: npt.NDArray[np.int64]) -> Any:
        reg = _regressor(model, len(idx))
        reg.fit(self._x[idx], self._y(target, idx))
        return reg

    def _predict(self, reg: Any, target: str, idx: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        y = reg.predict(self._x[idx])
        return np.exp(y + np.log(self._base[idx])) if target == "ratio" else np.exp(y)

    def run(self) -> _Family:
        n = len(self.points)
        domains = Counter(F.domain(p.op) for p in self.points)
        trusted = frozenset(d for d, c in domains.items() if c >= MIN_DOMAIN)
        if n == 0:
            return _Family(self.family, "none", None, "ratio", False, 0, trusted, self.floor, self.efficiency)
        u = np.array([_hash_fraction(p.op.signature(), SEED + 1) for p in self.points])
        order = np.argsort(u, kind="stable")
        va = order[u[order] < VALIDATION_FRACTION]
        tr = order[u[order] >= VALIDATION_FRACTION]
        scores: dict[str, float] = {}
        if len(tr) >= MIN_SELECT and len(va) >= 5:
            looked: list[float | None] = [None] * len(va)
            if self.family == "memory":  # the name table sees every training point, as in production
                table = _NameTable([self.points[i] for i in tr])
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
        return _Family(self.family, choice, reg, target, rest.endswith("+names"), n, trusted, self.floor,
                       self.efficiency, scores)


def _thinned(points: Sequence[_Point]) -> list[_Point]:
    """At most ``PER_NAME`` points of one kernel name (a fixed subset, by signature hash).

    The sweeps fill every input with a random-number kernel, so that kernel
    comes at tens of thousands of sizes: more than its simple curve needs,
    and enough to double the forests' size and fit time."""
    by_name: dict[str, list[_Point]] = defaultdict(list)
    out: list[_Point] = []
    for p in points:
        if p.op.kind == int(Kind.KERNEL):
            by_name[p.op.name].append(p)
        else:
            out.append(p)
    for pts in by_name.values():
        if len(pts) > PER_NAME:
            pts = sorted(pts, key=lambda p: _hash_fraction(p.op.signature(), SEED + 2))[:PER_NAME]
        out += pts
    return out


def _training_points(points: Iterable[_Point]) -> dict[str, list[_Point]]:
    """Each family's training points (thinned)."""
    by_family: dict[str, list[_Point]] = defaultdict(list)
    for p in points:
        by_family[F.family(p.op)].append(p)
    return {fam: _thinned(pts) for fam, pts in by_family.items()}


def _hash_fraction(signature: tuple[Any, ...], seed: int) -> float:
    """A number in [0, 1) fixed by the signature and the seed: a split that does not depend on row order."""
    digest = hashlib.sha256(f"{seed}:{signature!r}".encode()).digest()
    return int.from_bytes(digest[:8], "little") / 2.0**64


def _points(rows: Iterable[ProfileRow]) -> list[_Point]:
    """One point per distinct signature: the median of its rows' device busy times."""
    by_sig: dict[tuple[Any, ...], tuple[Op, list[float]]] = {}
    for r in rows:
        if r.busy_ns > 0:
            by_sig.setdefault(r.op.signature(), (r.op, []))[1].append(float(r.busy_ns))
    return [_Point(op, ns[0] if len(ns) == 1 else float(np.median(ns))) for op, ns in by_sig.values()]


# ---------------------------------------------------------------- estimators


class Estimators:
    """The fitted estimators of one profiled GPU (``source``), estimating for ``gpu``."""

    def __init__(self, gpu: str, source: str, families: dict[str, _Family], measured: dict[tuple[Any, ...], float],
                 names: _NameTable, fit_seconds: float) -> None:
        self.gpu, self.source = gpu, source
        self.families, self.measured, self.names = families, measured, names
        self.fit_seconds = fit_seconds
        self.cache_hit = False
        self.borrowed: dict[str, Estimators] = {}  # family -> another GPU's estimators, for families without data
        self._memo: dict[tuple[Any, ...], Estimate] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_memo"], state["borrowed"] = {}, {}
        return state

    @classmethod
    def fit(cls, gpu: str, rows: Sequence[ProfileRow]) -> Estimators:
        """Fit every family on ``rows`` (profiles of ``gpu``; ``held-out:*`` rows are ignored)."""
        import sklearn.ensemble  # type: ignore[import-untyped]  # noqa: F401  (loads OpenMP before the limit below)
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

        start = time.perf_counter()
        g = catalog.lookup(gpu)
        points = _points(r for r in rows if not r.source.startswith("held-out:"))
        by_family = _training_points(points)
        # OpenMP (gradient boosting) on one thread: its threads spin at barriers and slow down
        # badly as soon as another process wants the same cores. Forests use joblib threads.
        with threadpool_limits(limits=1):
            families = {fam: _Fitter(fam, by_family.get(fam, []), g).run() for fam in F.FITTED}
        names = _NameTable(by_family.get("memory", []))
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
            if out[i] is None:
                todo[F.family(op)].append(i)
        for fam, idx in todo.items():
            for i, e in zip(idx, self._estimate_family(fam, [ops[i] for i in idx]), strict=True):
                out[i] = self._memo[ops[i].signature()] = e
        return [e for e in out if e is not None]

    def _estimate_family(self, fam: str, ops: Sequence[Op]) -> list[Estimate]:
        if fam in self.borrowed:
            return self.borrowed[fam]._estimate_family(fam, ops)
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
            elif fit is None or fit.model is None or F.domain(op) not in fit.domains:
                found[i] = Estimate(efficiency * (floor + roofline_ns(F.work(op), dst)), "roofline", "fallback", fam)
            elif fit.names and (ns := self.names.predict(op)) is not None:
                found[i] = Estimate(ns, "memory:names", "fitted", fam)
            else:
                model_idx.append(i)
        if model_idx and fit is not None:
            sub = [ops[i] for i in model_idx]
            y = fit.model.predict(F.matrix(sub, src, fam))
            ns_all = np.exp(y + np.log(floor + _roofline(sub, src))) if fit.target == "ratio" else np.exp(y)
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
                w = F.work(op)
                ratio = (floor + roofline_ns(w, dst)) / (floor + roofline_ns(w, src))
                scaled.append(Estimate(e.ns * ratio, "scaled:" + e.estimator, "scaled", fam))
            else:
                ns = efficiency * (floor + roofline_ns(F.work(op), dst))
                scaled.append(Estimate(ns, "roofline", "fallback", fam))
        return scaled


# ---------------------------------------------------------------- loading and caching


class _Table:
    """A GPU's profile rows, parsed only when a fit needs them: a cached fit is found by the
    tables' bytes (parsing the H100's 190,000 rows takes longer than reading its fit)."""

    def __init__(self, gpu: str, rows: Sequence[ProfileRow] | None = None) -> None:
        self.gpu = gpu
        self._given = rows is not None
        self._rows = list(rows) if rows is not None else None

    def digest(self) -> str:
        h = hashlib.sha256()
        if self._given:
            for r in self.rows():
                h.update(repr(r).encode())
        else:
            for path in table_paths(self.gpu):
                h.update(path.name.encode() + b"\0" + path.read_bytes())
        return h.hexdigest()

    def rows(self) -> list[ProfileRow]:
        if self._rows is None:
            self._rows = load_profiles(self.gpu)
        return self._rows


def cache_dir() -> Path:
    root = os.environ.get("MAYA_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "maya") / "estimators"


def _code_hash() -> str:
    h = hashlib.sha256()
    for module in (F, sys.modules[__name__], *(sys.modules[f.__module__] for f in (roofline_ns, Op, ProfileRow))):
        h.update(Path(str(module.__file__)).read_bytes())
    h.update(f"{metadata.version('scikit-learn')} {np.__version__} {sys.version}".encode())
    return h.hexdigest()


def _cache_path(gpu: GPU, purpose: str, table: _Table, directory: Path | None, suffix: str) -> Path:
    """Where the ``purpose`` result of ``table`` is kept; older ones of the same GPU and purpose are stale."""
    h = hashlib.sha256(_code_hash().encode())
    h.update(json.dumps({"gpu": gpu.name, "fields": gpu.fields, "purpose": purpose}, sort_keys=True).encode())
    h.update(table.digest().encode())
    return (directory or cache_dir()) / f"{gpu.name}-{purpose}-{h.hexdigest()[:24]}{suffix}"


@contextmanager
def _replacing(path: Path) -> Iterator[BinaryIO]:
    """A file to write ``path`` through, in place once whole (no reader sees half a file); the
    stale ones it replaces are removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    stem = path.name.rsplit("-", 1)[0]
    for old in path.parent.glob(f"{stem}-*{path.suffix}"):  # one per GPU and purpose: a fit is hundreds of MB
        old.unlink(missing_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        yield f
    os.replace(tmp, path)


def _cached_fit(gpu: GPU, purpose: str, table: _Table, directory: Path | None) -> Estimators:
    path = _cache_path(gpu, purpose, table, directory, ".pkl")
    if path.is_file():
        try:
            with open(path, "rb") as f:
                est = pickle.load(f)
            if isinstance(est, Estimators):
                est.cache_hit = True
                return est
        except Exception:  # a cache file from an interrupted write or another version: refit
            pass
    est = Estimators.fit(gpu.name, table.rows())
    with _replacing(path) as f:
        pickle.dump(est, f, protocol=pickle.HIGHEST_PROTOCOL)
    return est


def _family_sizes(gpu: GPU, table: _Table, directory: Path | None) -> dict[str, int]:
    """Training points per family of ``table``, as a fit would have them, without fitting (kept
    beside the fits): what decides whether another GPU borrows from this one."""
    path = _cache_path(gpu, "sizes", table, directory, ".json")
    if path.is_file():
        try:
            return {str(f): int(n) for f, n in json.loads(path.read_text()).items()}
        except (ValueError, AttributeError):  # an unreadable file: count again
            pass
    points = _points(r for r in table.rows() if not r.source.startswith("held-out:"))
    by_family = _training_points(points)
    sizes = {fam: len(by_family.get(fam, [])) for fam in F.FITTED}
    with _replacing(path) as f:
        f.write(json.dumps(sizes, sort_keys=True).encode())
    return sizes


def profiled_gpus() -> list[str]:
    """Catalog GPUs with profile tables in ``predictor/profiles``."""
    return [g.name for g in catalog.all_gpus() if table_paths(g.name)]


def _source_for(gpu: GPU, profiled: Sequence[str]) -> str | None:
    """The profiled GPU to borrow from: the GPU itself, else one of the same compute capability, else any."""
    if gpu.name in profiled:
        return gpu.name
    same = [p for p in profiled if catalog.lookup(p).fields["cc"] == gpu.fields["cc"]]
    candidates = same or list(profiled)
    return candidates[0] if candidates else None


def _table(gpu: str, profiles: Mapping[str, Sequence[ProfileRow]] | None) -> _Table:
    return _Table(gpu, profiles[gpu] if profiles is not None else None)


def load(gpu: str, *, profiles: Mapping[str, Sequence[ProfileRow]] | None = None,
         cache: Path | None = None, borrow: bool = True) -> Estimators:
    """Estimators for catalog GPU ``gpu``, fitted (or read from the cache) on its profiles, or
    borrowed from a profiled GPU.  ``profiles`` (GPU name -> rows) replaces the committed tables;
    ``borrow=False``: no family is borrowed from another GPU."""
    g = catalog.lookup(gpu)
    names = list(profiles) if profiles is not None else profiled_gpus()
    source = _source_for(g, names)
    if source is None:
        empty = Estimators(g.name, g.name, {}, {}, _NameTable([]), 0.0)
        return empty
    est = _cached_fit(catalog.lookup(source), "fit", _table(source, profiles), cache)
    if source != g.name:
        return est.on(g.name)
    if borrow:
        _borrow(est, g, names, profiles, cache)
    return est


def _borrow(est: Estimators, g: GPU, names: Sequence[str], profiles: Mapping[str, Sequence[ProfileRow]] | None,
            cache: Path | None) -> None:
    """Families with too few profile points of ``g`` (``MIN_SELECT``, or ``BORROW_FRACTION`` of the
    donor's) are estimated by a profiled GPU of the same architecture, scaled (``est.borrowed``).
    The donor is fitted only when it lends something."""
    donors = [p for p in names if p != g.name and catalog.lookup(p).fields["cc"] == g.fields["cc"]]
    if not donors:
        return
    donor, table = catalog.lookup(donors[0]), _table(donors[0], profiles)
    own = {f: fit.n for f, fit in est.families.items()}
    lent = [f for f, n in _family_sizes(donor, table, cache).items()
            if own.get(f, 0) < min(max(MIN_SELECT, BORROW_FRACTION * n), n)]
    if lent:
        lender = _cached_fit(donor, "fit", table, cache).on(g.name)
        est.borrowed = {f: lender for f in lent}


# ---------------------------------------------------------------- evaluation


def split(rows: Sequence[ProfileRow], seed: int = SEED) -> tuple[list[ProfileRow], list[ProfileRow]]:
    """(fit rows, test rows): a fixed fraction of signatures, and every ``held-out:*`` row, are test rows."""
    fit, test = [], []
    for r in rows:
        if r.source.startswith("held-out:") or _hash_fraction(r.op.signature(), seed) < TEST_FRACTION:
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
    same architecture and scaled) and the time-weighted error.  Families the
    GPU has too few points of are borrowed as :func:`load` does.
    """
    g = catalog.lookup(gpu)
    rows = list(profiles) if profiles is not None else load_profiles(g.name)
    fit_rows, test_rows = split(rows)
    est = _cached_fit(g, f"evaluate{SEED}", _Table(g.name, fit_rows), cache)
    if profiles is None:  # as load() does: thin families come from a profiled GPU of the same architecture
        _borrow(est, g, profiled_gpus(), None, cache)
    fitted_sigs = {r.op.signature() for r in fit_rows}
    points = [p for p in _points(test_rows) if p.op.signature() not in fitted_sigs]
    estimates = est.estimate_many([p.op for p in points])
    source: dict[tuple[Any, ...], str] = {}
    for r in test_rows:
        source.setdefault(r.op.signature(), r.source)
    families: dict[str, Any] = {}
    for fam in F.FAMILIES:
        sel = [i for i, p in enumerate(points) if F.family(p.op) == fam]
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
    examples = _examples(est, [r for r in test_rows if r.source.startswith(("example:", "held-out:"))])
    return {
        "gpu": g.name, "seed": SEED, "test_fraction": TEST_FRACTION,
        "fit": {"rows": len(fit_rows), "seconds": est.fit_seconds, "cache_hit": est.cache_hit,
                "families": est.summary()},
        "families": families, "examples": examples, "targets": TARGETS,
        "borrowed": {fam: other.source for fam, other in est.borrowed.items()},
    }


def _examples(est: Estimators, rows: Sequence[ProfileRow]) -> dict[str, Any]:
    kernel_rows = [r for r in rows if F.family(r.op) in F.FITTED and r.busy_ns > 0]
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
        out[source] = {
            "n": len(idx), "kernel_ns": total,
            "coverage": float(np.sum((weight * true)[covered]) / total),
            "measured_share": float(np.sum((weight * true)[measured]) / total),
            **_errors(pred, true, weight),
        }
    coll = [r for r in rows if F.family(r.op) == "coll"]
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
    lines.append(f"  {'example model':28} {'n':>5} {'coverage':>9} {'measured':>9} {'time-wtd':>9} {'median':>8}")
    for source, r in report["examples"].items():
        if isinstance(r, dict):
            lines.append(f"  {source:28} {r['n']:5} {_percent(r['coverage']):>9} {_percent(r['measured_share']):>9} "
                         f"{_percent(r['time_weighted']):>9} {_percent(r['median_ape']):>8}")
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
