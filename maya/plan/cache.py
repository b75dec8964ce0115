"""Emulations and predictions kept by content, so re-planning with new prices, objective or deadline is instant.

An emulation is keyed by what decides its trace: the command line, the ranks
and their nodes, the emulated GPU, the contents of the script files the
command names (and the Python files beside them, which it may import), and
the version of Maya and of its interposer.  A prediction is further keyed by
the GPU it is made for and the predictor's own code.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import maya

# What a stored run's result.json holds (maya.plan.evaluate.run_result): bump it when its fields change, so
# that runs stored before are emulated again.  2: DDP's first buckets (firstBucketsBytes); 3: the node.
RESULT_FORMAT = 3


def cache_root() -> Path:
    root = os.environ.get("MAYA_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "maya") / "plans"


def _script_files(argv: Sequence[str], cwd: Path) -> list[Path]:
    files: set[Path] = set()
    for word in argv:
        for text in (word, word.split("=", 1)[-1]):
            p = (cwd / text) if not os.path.isabs(text) else Path(text)
            if text and p.is_file() and p.suffix in (".py", ".yaml", ".yml", ".json", ".sh"):
                files.add(p.resolve())
                files.update(q.resolve() for q in p.parent.glob("*.py"))
    return sorted(files)


@lru_cache(maxsize=1)
def _code_version(library: str) -> str:
    """Maya's version, its results' format and its interposer's bytes: any change re-emulates."""
    h = hashlib.sha256(f"{maya.__version__}/{RESULT_FORMAT}".encode())
    lib = Path(library)
    if lib.is_file():
        h.update(lib.read_bytes())
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def predictor_version() -> str:
    import maya.predictor

    h = hashlib.sha256()
    root = Path(str(maya.predictor.__file__)).parent
    for p in sorted(root.rglob("*")):
        if p.suffix in (".py", ".json") or p.name.endswith(".csv.gz"):
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()[:16]


def emulation_key(argv: Sequence[str], gpus_per_node: int, nodes: int, gpu: str, cwd: Path,
                  env: dict[str, str], library: Path) -> str:
    h = hashlib.sha256()
    h.update(json.dumps({"argv": list(argv), "gpus_per_node": gpus_per_node, "nodes": nodes, "gpu": gpu,
                         "env": sorted(env.items()), "code": _code_version(str(library))}).encode())
    for p in _script_files(argv, cwd):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:24]


class Cache:
    """``<root>/emulations/<key>/`` holds a run's traces, ``summary.json``, ``log.txt``, ``result.json``
    (how the run ended) and ``predictions/<gpu>-<predictor>.json``."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or cache_root()) / "emulations"

    def folder(self, key: str) -> Path:
        return self.root / key

    def result(self, key: str) -> dict[str, Any] | None:
        path = self.folder(key) / "result.json"
        try:
            return dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            return None

    def store_result(self, key: str, result: dict[str, Any]) -> None:
        _write_json(self.folder(key) / "result.json", result)

    def prediction(self, key: str, gpu: str) -> dict[str, Any] | None:
        path = self.folder(key) / "predictions" / f"{gpu}-{predictor_version()}.json"
        try:
            return dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            return None

    def store_prediction(self, key: str, gpu: str, prediction: dict[str, Any]) -> None:
        _write_json(self.folder(key) / "predictions" / f"{gpu}-{predictor_version()}.json", prediction)

    def discard(self, key: str) -> None:
        shutil.rmtree(self.folder(key), ignore_errors=True)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: a plan interrupted mid-write never leaves half a result."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)
