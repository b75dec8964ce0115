"""Tests never touch the user's Maya cache, and emulations take the CPU probe as given.

``MAYA_CACHE_DIR`` (where the estimators' fits go) is a folder of the test's own under pytest's
temporary folder, and one for the session while fixtures of a wider scope run; the commands a test
runs inherit it.  Tests that predict share one fit of the committed H100 tables
(``fitted_cache``), made once a session: it takes half a minute or more.  ``MAYA_HOST_PROBE_NS`` is the
calibrating CPU's probe reading, so that an emulation skips the probe (seconds each) and a
prediction does not depend on the machine's load; a test of the probe itself unsets it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FITTED_GPU = "H100-SXM-80GB"


@pytest.fixture(scope="session", autouse=True)
def session_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    from maya import cpu_probe

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MAYA_CACHE_DIR", str(tmp_path_factory.mktemp("maya-cache-session")))
        mp.setenv("MAYA_HOST_PROBE_NS", str(cpu_probe.reference_ns()))
        # Each answer from its own emulations alone: a test's earlier questions must not move its later ones
        # (tests/test_usual_pace.py turns it back on).
        mp.setenv("MAYA_USUAL_PACE", "0")
        yield


@pytest.fixture(autouse=True)
def maya_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's own cache root."""
    root = tmp_path_factory.mktemp("maya-cache")
    monkeypatch.setenv("MAYA_CACHE_DIR", str(root))
    return root


@pytest.fixture(scope="session")
def fitted_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """A cache root that holds the fit of the committed tables, and the load that fitted it."""
    from maya.predictor import estimate as estimators

    root = tmp_path_factory.mktemp("maya-cache-fitted")
    return root, estimators.load(FITTED_GPU, cache=root / "estimators")


@pytest.fixture
def fitted_cache(fitted_once: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch) -> Path:
    """``MAYA_CACHE_DIR`` for the test: the shared cache with the committed tables' fit."""
    monkeypatch.setenv("MAYA_CACHE_DIR", str(fitted_once[0]))
    return fitted_once[0]
