"""kmock's Kubernetes emulator with the API server behaviour the operator and kopf rely on, served in a thread.

kmock stores objects as they are posted and merges patches into them.  The API server also names an object
from its ``generateName`` (kopf's events), gives it a ``uid`` (the owner reference of an emulation Job) and a
``creationTimestamp``, moves ``metadata.resourceVersion`` on every write (kopf's JSON patches test it when they
add or remove its finalizer), moves ``metadata.generation`` when ``spec`` changes (a plan re-plans), applies
JSON patches, answers a create with 201, and keeps ``status`` apart for resources with a status subresource: created without it, written
only through ``/status``.  :class:`ApiServer` adds these.  Label selectors stay unemulated (a listing returns
the whole namespace: the operator selects its Jobs and pods client-side again), and so do owner references'
garbage collection and the kubelet (tests create the pods).
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import uuid
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import jsonpointer
import kmock
from kubernetes import client
from loop_thread import LoopThread

WRITES = (kmock.action.CREATE, kmock.action.UPDATE, kmock.action.DELETE)


def merged(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """``base`` with a JSON merge patch (RFC 7386) applied."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merge_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch that turns ``old`` into ``new`` (kmock applies writes as merge patches)."""
    out: dict[str, Any] = {key: None for key in old.keys() - new.keys()}
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(old.get(key), dict):
            inner = merge_patch(old[key], value)
            if inner:
                out[key] = inner
        elif key not in old or old[key] != value:
            out[key] = copy.deepcopy(value)
    return out


@attrs.define(kw_only=True)
class ApiServer(kmock.KubernetesEmulator):
    """kmock's emulator, each create and patch completed as the API server completes it before kmock stores it."""

    _version: int = attrs.field(default=0, init=False)
    _writes: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def _has_status_subresource(self, request: kmock.Request) -> bool:
        return request.resource in self.resources and "status" in self.resources[request.resource].subresources

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        if request.resource is None or request.action not in WRITES:
            return await super()._handle(request)
        async with self._writes:  # one write at a time, so that what a patch is checked against stays current
            data = None
            if request.action == kmock.action.CREATE and isinstance(request.data, dict):
                data = self._created(request)
            elif request.action == kmock.action.UPDATE and request.name:
                data = self._patched(request)
            if data is not None:
                # kmock matches its reactions to the very request it received (by identity), so the completed
                # body replaces the posted one in that (frozen) request.
                object.__setattr__(request, "data", data)
            response = await super()._handle(request)
        if request.action == kmock.action.CREATE and response.status == 200 and not response.prepared:
            response.set_status(201)  # Created: the kubernetes client reads a created object only from a 201
        return response

    def _created(self, request: kmock.Request) -> dict[str, Any]:
        obj = copy.deepcopy(request.data)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if request.namespace:
            meta["namespace"] = request.namespace
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        meta["resourceVersion"] = self._next_version()
        if "spec" in obj:
            meta["generation"] = 1
        if self._has_status_subresource(request):
            obj.pop("status", None)
        return obj

    def _patched(self, request: kmock.Request) -> dict[str, Any] | None:
        """The merge patch from the stored object to the patched one; None: no such object (kmock says 404)."""
        key = (request.resource, request.namespace, request.name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        old = copy.deepcopy(self.objects[key].raw)
        if isinstance(request.data, list):
            try:
                new = jsonpatch.apply_patch(old, request.data)
            except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
                raise kmock.KubernetesError(422, "Invalid", f"the JSON patch does not apply: {e}") from None
        elif isinstance(request.data, dict):
            new = merged(old, request.data)
        else:
            raise kmock.KubernetesError(400, "BadRequest", f"a patch is a JSON object or list, not {request.data!r}")
        if self._has_status_subresource(request):
            # Through /status only the status changes; through the object everything else does.
            source, base = (new, copy.deepcopy(old)) if request.subresource == "status" else (old, new)
            base.pop("status", None)
            if "status" in source:
                base["status"] = source["status"]
            new = base
        meta = new.setdefault("metadata", {})
        for field in ("name", "namespace", "uid", "creationTimestamp", "generation"):
            if field in old.get("metadata", {}):
                meta[field] = old["metadata"][field]
        if new.get("spec") != old.get("spec"):
            meta["generation"] = int(meta.get("generation") or 0) + 1
        meta["resourceVersion"] = self._next_version()
        return merge_patch(old, new)


class ServedApi(LoopThread):
    """An :class:`ApiServer` on a loopback port, in a thread of its own, serving ``resources``
    (``{"group/version/plural": kmock.ResourceInfo}``)."""

    def __init__(self, resources: dict[str, kmock.ResourceInfo]) -> None:
        super().__init__("kmock")
        self.resources = resources
        self.url = ""
        self.server_errors: list[BaseException] = []

    async def main(self) -> None:
        async with ApiServer() as api, kmock.Server(api):
            for key, info in self.resources.items():
                api.resources[key] = info
            self.url = str(api.url).rstrip("/")
            self.ready.set()
            while not self.stop_flag.is_set():
                await asyncio.sleep(0.05)
            # Kubernetes errors (404, 409, 422) are answers; anything else is a fault of the emulator.
            self.server_errors = [e for e in api.errors if not isinstance(e, kmock.KubernetesError)]

    def api_client(self) -> client.ApiClient:
        return client.ApiClient(client.Configuration(host=self.url))

    def __enter__(self) -> ServedApi:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        assert not self.server_errors, f"the emulated API server failed: {self.server_errors!r}"
