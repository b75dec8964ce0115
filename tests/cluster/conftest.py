"""Fixtures of the real-API-server tier: one etcd + kube-apiserver per test session.

``kube_apiserver`` starts them (building kube-apiserver first when Go is here
and the binary is not cached); ``kube_client`` and ``kube_namespace`` are
conveniences over it. With ``CI=true`` a missing binary fails the tests instead
of skipping them, so CI never passes without running this tier.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import control_plane
import pytest


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="session")
def kube_apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[control_plane.ControlPlane]:
    """A running API server on loopback (see control_plane.ControlPlane for what it carries)."""
    try:
        plane = control_plane.start(tmp_path_factory.mktemp("kube-apiserver"))
    except control_plane.Unavailable as reason:
        if _in_ci():
            pytest.fail(f"the real-API-server tier cannot run in CI: {reason}", pytrace=False)
        pytest.skip(str(reason))
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def kube_client(kube_apiserver: control_plane.ControlPlane) -> Iterator[Any]:
    """A ``kubernetes.client.ApiClient`` logged in as the admin."""
    client = kube_apiserver.api_client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def kube_namespace(kube_client: Any) -> str:
    """A fresh namespace per test (never deleted: no controller finalizes namespaces here)."""
    import kubernetes.client

    name = f"t-{uuid.uuid4().hex[:10]}"
    kubernetes.client.CoreV1Api(kube_client).create_namespace({"metadata": {"name": name}})
    return name
