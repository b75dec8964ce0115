"""The operator's Kubernetes API clients: in the cluster from its service account, elsewhere from a kubeconfig.

Tests point them elsewhere with :func:`use` (a kmock server or a loopback API server).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

_CLIENT: client.ApiClient | None = None


def use(api_client: client.ApiClient | None) -> None:
    """Talk through ``api_client`` from now on (None: configure from the environment again)."""
    global _CLIENT
    _CLIENT = api_client


def api() -> client.ApiClient:
    global _CLIENT
    if _CLIENT is None:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config()
        _CLIENT = client.ApiClient()
    return _CLIENT


def batch() -> client.BatchV1Api:
    return client.BatchV1Api(api())


def core() -> client.CoreV1Api:
    return client.CoreV1Api(api())


def networking() -> client.NetworkingV1Api:
    return client.NetworkingV1Api(api())


def custom() -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api())


def items(listing: Any) -> list[dict[str, Any]]:
    """A typed list response as plain dicts in the API's own camelCase."""
    return [api().sanitize_for_serialization(x) for x in listing.items]


def ignore_missing(call: Callable[[], Any]) -> None:
    try:
        call()
    except ApiException as e:
        if e.status != 404:
            raise
