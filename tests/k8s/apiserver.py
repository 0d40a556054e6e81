"""A real etcd + kube-apiserver v1.20.2 on free loopback ports, for the `kube_apiserver` tests.

The binaries come from `bash scripts/kube.sh build` (cached outside the tree; `make test-kube` builds
them once per machine). This module makes the certificates (openssl), a static token file with an
admin token and one token per named identity, starts etcd and the apiserver in a temp folder, polls
``/readyz`` until a deadline (no fixed sleeps) and stops both processes by pid.

What there is not: no kube-controller-manager, scheduler or kubelet. Pods stay Pending, Deployments
get no status, deleted namespaces stay Terminating; tests use a fresh namespace each and write the
status subresource themselves where they need readiness (and say so).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

VERSION = "v1.20.2"


def binary_dir() -> Path:
    """Where scripts/kube.sh caches the binaries (same rule as the script)."""
    if os.environ.get("SPECOPS_KUBE_CACHE"):
        cache = Path(os.environ["SPECOPS_KUBE_CACHE"])
    elif os.geteuid() == 0:
        cache = Path("/var/cache/specops-kube")
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specops-kube"
    return cache / VERSION / "bin"


def missing() -> str | None:
    """Why the real apiserver cannot start here, or None."""
    if not (binary_dir() / "kube-apiserver").is_file():
        return f"no kube-apiserver in {binary_dir()}: run `bash scripts/kube.sh build` (or `make test-kube`)"
    if shutil.which("etcd") is None:
        return "no etcd on PATH: run `bash scripts/kube.sh build` (installs Debian's etcd-server)"
    if shutil.which("openssl") is None:
        return "no openssl on PATH"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=specops-test-ca", cwd=d)
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=kube-apiserver", cwd=d)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.crt", "-days", "2", "-extfile", "server.ext", cwd=d)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)


@dataclass
class Identity:
    user: str
    groups: tuple[str, ...]
    token: str = field(default_factory=lambda: secrets.token_hex(16))


@dataclass
class KubeAPIServer:
    """One etcd + kube-apiserver; ``start()`` blocks until ``/readyz`` answers 200."""

    root: Path
    identities: dict[str, Identity] = field(default_factory=dict)
    admin: Identity = field(default_factory=lambda: Identity("admin", ("system:masters",)))
    procs: list[subprocess.Popen] = field(default_factory=list)
    port: int = 0
    started_in_s: float = 0.0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca(self) -> Path:
        return self.root / "pki" / "ca.crt"

    def start(self, timeout_s: float = 90) -> KubeAPIServer:
        t0 = time.monotonic()
        pki, data = self.root / "pki", self.root / "etcd"
        make_pki(pki)
        lines = [f"{self.admin.token},{self.admin.user},admin-uid,\"{','.join(self.admin.groups)}\""]
        for i, ident in enumerate(self.identities.values()):
            lines.append(f"{ident.token},{ident.user},uid-{i},\"{','.join(ident.groups)}\"")
        (pki / "tokens.csv").write_text("\n".join(lines) + "\n")
        client, peer, self.port = free_port(), free_port(), free_port()
        logs = self.root / "logs"
        logs.mkdir(exist_ok=True)
        etcd = ["etcd", "--data-dir", str(data), "--name", "specops-test",
                "--listen-client-urls", f"http://127.0.0.1:{client}",
                "--advertise-client-urls", f"http://127.0.0.1:{client}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", f"specops-test=http://127.0.0.1:{peer}"]
        api = [str(binary_dir() / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{client}",
               "--bind-address=127.0.0.1", f"--secure-port={self.port}", "--insecure-port=0",
               "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
               f"--tls-cert-file={pki / 'server.crt'}", f"--tls-private-key-file={pki / 'server.key'}",
               f"--client-ca-file={pki / 'ca.crt'}", f"--token-auth-file={pki / 'tokens.csv'}",
               "--authorization-mode=RBAC", "--service-account-issuer=https://kubernetes.default.svc",
               f"--service-account-key-file={pki / 'sa.pub'}",
               f"--service-account-signing-key-file={pki / 'sa.key'}",
               "--service-cluster-ip-range=10.96.0.0/24", f"--cert-dir={pki}"]
        for argv, log in ((etcd, "etcd.log"), (api, "kube-apiserver.log")):
            with open(logs / log, "wb") as out:
                self.procs.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL, start_new_session=True))
        try:
            self._wait_ready(t0 + timeout_s)
        except BaseException:
            self.stop()
            raise
        self.started_in_s = time.monotonic() - t0
        return self

    def _wait_ready(self, deadline: float) -> None:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        last = "no answer yet"
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode} during start-up; log: "
                                       f"{self.root / 'logs'}:\n{self.log_tail()}")
            req = urllib.request.Request(f"{self.url}/readyz",
                                         headers={"Authorization": f"Bearer {self.admin.token}"})
            try:
                with urllib.request.urlopen(req, context=ctx, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except Exception as exc:  # not listening yet, 500 while post-start hooks run
                last = f"{exc.__class__.__name__}: {exc}"
            time.sleep(0.2)
        raise TimeoutError(f"kube-apiserver not ready before the deadline ({last}):\n{self.log_tail()}")

    def log_tail(self, n: int = 20) -> str:
        path = self.root / "logs" / "kube-apiserver.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:]) if path.is_file() else ""

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        self.procs.clear()

    def kubeconfig(self, path: Path, who: Identity | None = None) -> Path:
        """A kubeconfig file for ``who`` (default: the admin)."""
        import yaml

        who = who or self.admin
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url, "certificate-authority": str(self.ca)}}],
            "users": [{"name": who.user, "user": {"token": who.token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": who.user}}]}))
        path.chmod(0o600)
        return path

    def api_client(self, who: Identity | None = None):
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.url
        cfg.ssl_ca_cert = str(self.ca)
        cfg.api_key = {"authorization": f"Bearer {(who or self.admin).token}"}
        return client.ApiClient(cfg)
