"""A loopback HTTPS admission webhook that the real API server can call.

The server answers ``AdmissionReview`` v1 requests with whatever JSONPatch a
test's ``mutate`` function returns, and records each request it saw, so a test
proves that the API server itself called it (registered by ``url`` and
``caBundle``, as a ``service`` reference needs cluster networking).
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pki import CertificateAuthority

LOOPBACK = "127.0.0.1"

Mutate = Callable[[dict[str, Any]], list[dict[str, Any]]]


class WebhookServer:
    """Serves ``POST <any path>`` with AdmissionReviews on ``https://127.0.0.1:<port>``.

    ``mutate`` gets the review's ``request`` and returns JSONPatch operations
    (empty: admit unchanged). ``requests`` lists what was asked, in order.
    """

    def __init__(self, ca: CertificateAuthority, mutate: Mutate) -> None:
        self.ca = ca
        self.mutate = mutate
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        pair = ca.issue("webhook", "maya-test-webhook", hosts=(LOOPBACK,))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pair.cert_file, pair.key_file)
        self._httpd = ThreadingHTTPServer((LOOPBACK, 0), self._handler())
        self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)
        self._httpd.daemon_threads = True
        self.port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="webhook", daemon=True)

    def url(self, path: str = "/mutate") -> str:
        return f"https://{LOOPBACK}:{self.port}{path}"

    @property
    def ca_bundle(self) -> str:
        """The base64 PEM that goes into ``clientConfig.caBundle``."""
        return base64.b64encode(self.ca.cert_pem).decode()

    def __enter__(self) -> WebhookServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def _review(self, review: dict[str, Any]) -> dict[str, Any]:
        request = review["request"]
        with self._lock:
            self.requests.append({
                "uid": request["uid"],
                "kind": request["kind"]["kind"],
                "operation": request["operation"],
                "namespace": request.get("namespace"),
                "name": request.get("name") or request.get("object", {}).get("metadata", {}).get("name"),
                "user": request.get("userInfo", {}).get("username"),
            })
        response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
        patch = self.mutate(request)
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                try:
                    review = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                    body = json.dumps(server._review(review)).encode()
                except (ValueError, KeyError, TypeError) as error:
                    self.send_error(400, f"not an AdmissionReview: {error}")
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
