"""The on-disk cache of fitted estimators.

A fit of the H100's tables takes minutes and its result hundreds of MB, so
fits are kept in ``$MAYA_CACHE_DIR/estimators`` (default
``~/.cache/maya/estimators``) under a hash of the profile tables, the
estimation code, the catalog entry and the library versions; a fit made by
other code or other tables is never read, and nothing version-specific is
committed.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import BinaryIO

import numpy as np

from maya.catalog import GPU
from maya.predictor.estimate.estimators import Estimators
from maya.predictor.estimate.fit import median_points, training_points
from maya.predictor.estimate.profiles import ProfileRow, load_profiles, table_paths
from maya.predictor.estimate.work import FITTED, domain
from maya.predictor.trace import ops as _ops
from maya.predictor.trace import records as _records


class Table:
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
    """What a fit depends on besides its data: the estimation package, the trace decoders, the libraries."""
    h = hashlib.sha256()
    sources = sorted(Path(__file__).parent.glob("*.py")) + [Path(str(m.__file__)) for m in (_ops, _records)]
    for path in sources:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    h.update(f"{metadata.version('scikit-learn')} {np.__version__} {sys.version}".encode())
    return h.hexdigest()


def _cache_path(gpu: GPU, purpose: str, table: Table, directory: Path | None, suffix: str) -> Path:
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


def cached_fit(gpu: GPU, purpose: str, table: Table, directory: Path | None) -> Estimators:
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


def domain_sizes(gpu: GPU, table: Table, directory: Path | None) -> dict[str, dict[str, int]]:
    """Training points per family and domain of ``table`` (family -> domain -> count), as a fit
    would have them, without fitting (kept beside the fits): what decides whether another GPU
    borrows from this one."""
    path = _cache_path(gpu, "sizes", table, directory, ".json")
    if path.is_file():
        try:
            return {str(f): {str(d): int(n) for d, n in by_domain.items()}
                    for f, by_domain in json.loads(path.read_text()).items()}
        except (ValueError, AttributeError):  # an unreadable file: count again
            pass
    points = median_points(r for r in table.rows() if not r.source.startswith("held-out:"))
    by_family = training_points(points)
    sizes = {fam: dict(Counter(domain(p.op) for p in by_family.get(fam, []))) for fam in FITTED}
    with _replacing(path) as f:
        f.write(json.dumps(sizes, sort_keys=True).encode())
    return sizes
