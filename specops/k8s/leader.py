"""Leader election for the in-cluster monitor over a ``coordination.k8s.io/v1`` Lease.

Two ``specops monitor`` replicas (manifests/monitor/deployment.yaml) watch the same engines; only the
one holding the Lease named by ``SPECOPS_LEADER_LEASE`` acts. The protocol is client-go's
(``k8s.io/client-go/tools/leaderelection``), on the Lease fields:

- **acquire** when the Lease is absent (create; a 409 means another replica created it first), when
  its ``holderIdentity`` is empty (released), or when it expired: ``renewTime +
  leaseDurationSeconds`` is in the past. Taking it over sets ``acquireTime`` and counts
  ``leaseTransitions``;
- **renew** while held: an update of ``renewTime``;
- every write is a PUT carrying the ``resourceVersion`` that was read, so the API server applies at
  most one of two concurrent writes; the other gets **409 Conflict** and has lost;
- **release** on shutdown: an update that clears ``holderIdentity`` (``leaseDurationSeconds: 1``),
  so another replica takes over at once instead of waiting for expiry. The Role grants ``update``,
  not ``delete``, on the Lease (specops.retrain.incluster.NEEDED): release is an update.

A holder believes it leads only until ``renew_deadline_s`` after the start of its last successful
write; the others can take over only ``lease_duration_s`` after the ``renewTime`` that write stored.
With ``renew_deadline_s < lease_duration_s`` the two windows never overlap, even when the API server
becomes unreachable. Expiry is judged on the wall clock (``renewTime``), so the replicas' clocks must
agree to within ``lease_duration_s - renew_deadline_s`` (NTP does far better). The clock is injected
(``now()`` wall seconds, ``monotonic()``).

``LeaderGate`` is what the monitor consults each cycle (``is_leader()``); ``NoLeaderGate`` always
leads (no ``SPECOPS_LEADER_LEASE``: a local run, the only process). ``leader_gate()`` builds the one
the settings ask for. Requests are raw JSON through the official client's transport (auth, TLS,
in-cluster token), so the times are written exactly in the Lease's MicroTime format.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from specops.errors import InputError

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


class LeaseUnavailable(Exception):
    """The Lease could not be read or written (API unreachable, forbidden, server error)."""


class _SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


def format_micro_time(t: float) -> str:
    """Epoch seconds -> Kubernetes MicroTime (RFC 3339, exactly six fractional digits, UTC)."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass
class LeaseRecord:
    """The Lease as last read or written."""

    holder: str | None
    duration_s: float
    renew_time: float | None
    acquire_time: float | None
    transitions: int
    raw: dict = field(repr=False)

    @classmethod
    def from_object(cls, obj: dict) -> LeaseRecord:
        spec = obj.get("spec") or {}
        return cls(holder=spec.get("holderIdentity") or None, duration_s=float(spec.get("leaseDurationSeconds") or 0),
                   renew_time=parse_time(spec.get("renewTime")), acquire_time=parse_time(spec.get("acquireTime")),
                   transitions=int(spec.get("leaseTransitions") or 0), raw=obj)

    def expired(self, now: float) -> bool:
        return self.renew_time is None or self.renew_time + self.duration_s <= now


class LeaseElector:
    """Acquires, renews and releases one Lease for ``identity`` (see the module docstring)."""

    def __init__(self, api_client, namespace: str, name: str, identity: str, *, clock=None,
                 lease_duration_s: float = 15.0, renew_deadline_s: float = 10.0,
                 request_timeout_s: float = 5.0) -> None:
        if not 0 < renew_deadline_s < lease_duration_s:
            raise InputError(f"renew deadline {renew_deadline_s:g}s must be shorter than the lease "
                             f"({lease_duration_s:g}s)", "e.g. a 15 s lease with a 10 s renew deadline")
        self.api, self.namespace, self.name, self.identity = api_client, namespace, name, identity
        self.clock = clock or _SystemClock()
        self.lease_duration_s, self.renew_deadline_s = lease_duration_s, renew_deadline_s
        self.request_timeout_s = request_timeout_s
        self.observed: LeaseRecord | None = None  # what the last read or write saw
        self._held_since: float | None = None  # monotonic start of the last successful write as holder

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def holder(self) -> str | None:
        return self.observed.holder if self.observed else None

    def is_leader(self) -> bool:
        """Whether this elector may act now (local: no request)."""
        return (self._held_since is not None
                and self.clock.monotonic() - self._held_since < self.renew_deadline_s)

    def try_acquire_or_renew(self) -> bool:
        """One round: read the Lease, then create, renew or take it over if allowed. Returns whether
        this elector leads. Raises ``LeaseUnavailable`` when the API cannot be used (leadership, if
        held, then lapses at the renew deadline)."""
        started, now = self.clock.monotonic(), self.clock.now()
        status, obj = self._request("GET", f"{self._collection()}/{self.name}")
        if status == 404:
            return self._won(started, self._create(now))
        rec = LeaseRecord.from_object(obj)
        self.observed = rec
        if rec.holder == self.identity:
            spec = {**rec.raw.get("spec", {}), "renewTime": format_micro_time(now),
                    "leaseDurationSeconds": int(self.lease_duration_s)}
        elif rec.holder is None or rec.expired(now):
            spec = {**rec.raw.get("spec", {}), "holderIdentity": self.identity,
                    "leaseDurationSeconds": int(self.lease_duration_s), "acquireTime": format_micro_time(now),
                    "renewTime": format_micro_time(now), "leaseTransitions": rec.transitions + 1}
        else:
            self._held_since = None
            return False
        return self._won(started, self._replace(rec.raw, spec))

    def release(self) -> bool:
        """Give the Lease up if this elector holds it; returns whether it was released."""
        rec, self._held_since = self.observed, None
        if rec is None or rec.holder != self.identity:
            return False
        spec = {**rec.raw.get("spec", {}), "leaseDurationSeconds": 1, "renewTime": format_micro_time(self.clock.now())}
        spec.pop("holderIdentity", None)
        try:
            written = self._replace(rec.raw, spec)
        except LeaseUnavailable:
            return False  # it expires on its own
        if written is not None:
            self.observed = LeaseRecord.from_object(written)
        return written is not None

    # --- requests --------------------------------------------------------------------------------
    def _won(self, started: float, written: dict | None) -> bool:
        if written is None:  # 409: another replica wrote first
            self._held_since = None
            return False
        self.observed = LeaseRecord.from_object(written)
        self._held_since = started
        return True

    def _collection(self) -> str:
        return LEASES.format(namespace=self.namespace)

    def _create(self, now: float) -> dict | None:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": {"app.kubernetes.io/managed-by": "specops"}},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease_duration_s),
                         "acquireTime": format_micro_time(now), "renewTime": format_micro_time(now),
                         "leaseTransitions": 0}}
        status, obj = self._request("POST", self._collection(), body)
        return None if status == 409 else obj

    def _replace(self, current: dict, spec: dict) -> dict | None:
        body = {**current, "spec": spec}  # metadata carries the resourceVersion that was read
        status, obj = self._request("PUT", f"{self._collection()}/{self.name}", body)
        return None if status == 409 else obj

    def _request(self, method: str, path: str, body: dict | None = None) -> tuple[int, Any]:
        """(status, parsed body) for 2xx, 404 and 409; anything else raises LeaseUnavailable."""
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        try:
            req = self.api.param_serialize(method, path, header_params=headers, body=body,
                                           auth_settings=["BearerToken"])
            resp = self.api.call_api(*req, _request_timeout=self.request_timeout_s)
            resp.read()
            status, data = resp.status, resp.data
        except Exception as exc:  # connection refused, timeout, TLS: the client raises many kinds
            raise LeaseUnavailable(f"cannot reach the Kubernetes API ({exc.__class__.__name__})") from None
        if 200 <= status <= 299:
            return status, json.loads(data)
        if status in (404, 409):
            return status, None
        hint = {401: "the service account token was refused",
                403: f"the Role must grant get/update on lease {self.name} and create on leases"}.get(status, "")
        raise LeaseUnavailable(f"{method} lease {self.where} answered {status}" + (f": {hint}" if hint else ""))


class NoLeaderGate:
    """No lease configured: this process is the only monitor and always acts."""

    lease = None

    def is_leader(self) -> bool:
        return True

    def status(self) -> str:
        return "no leader lease (SPECOPS_LEADER_LEASE unset): this process acts alone"

    def close(self) -> None:
        pass


class LeaderGate:
    """What the monitor consults each cycle. ``is_leader()`` refreshes the Lease when the last
    attempt is older than ``retry_period_s`` (client-go's default 2 s), then answers from the
    elector. ``start()`` runs a background keeper that renews every ``retry_period_s``, so a cycle
    (or an action) longer than the lease does not lose leadership; ``close()`` stops it and
    releases the Lease."""

    def __init__(self, elector: LeaseElector, *, retry_period_s: float = 2.0) -> None:
        self.elector, self.retry_period_s = elector, retry_period_s
        self.error: str | None = None
        self._last_attempt: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None

    @property
    def lease(self) -> str:
        return self.elector.where

    def refresh(self) -> bool:
        with self._lock:
            self._last_attempt = self.elector.clock.monotonic()
            try:
                self.elector.try_acquire_or_renew()
                self.error = None
            except LeaseUnavailable as exc:
                self.error = str(exc)
            return self.elector.is_leader()

    def is_leader(self) -> bool:
        last = self._last_attempt
        if last is None or self.elector.clock.monotonic() - last >= self.retry_period_s:
            return self.refresh()
        return self.elector.is_leader()

    def status(self) -> str:
        e = self.elector
        if e.is_leader():
            return f"leader: lease {e.where} held by this replica ({e.identity})"
        why = f"cannot use the lease ({self.error})" if self.error else (
            f"lease {e.where} is held by {e.holder}" if e.holder and e.holder != e.identity else
            f"lease {e.where} was taken by another replica")
        return f"not the leader: {why}; observing only, no actions"

    def start(self) -> LeaderGate:
        def keep() -> None:
            while not self._stop.wait(self.retry_period_s):
                self.refresh()

        self._keeper = threading.Thread(target=keep, daemon=True, name="specops-leader-lease")
        self._keeper.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join(self.elector.request_timeout_s + 1)
        with self._lock:
            self.elector.release()


def default_identity() -> str:
    """The pod name (SPECOPS_POD_NAME), else host name + a random suffix (unique per process)."""
    from specops.settings import setting

    return str(setting("pod_name") or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}")


def _namespace() -> str:
    from pathlib import Path

    from specops.settings import setting

    ns = setting("namespace")
    if not ns and Path(SA_NAMESPACE_FILE).is_file():
        ns = Path(SA_NAMESPACE_FILE).read_text().strip()
    if not ns:
        raise InputError("SPECOPS_LEADER_LEASE is set but the namespace of the lease is unknown",
                         "set SPECOPS_NAMESPACE (the manifests set it from metadata.namespace)")
    return str(ns)


def leader_gate(*, api_client=None, clock=None, identity: str | None = None) -> NoLeaderGate | LeaderGate:
    """The gate the settings ask for: ``leader_lease`` (SPECOPS_LEADER_LEASE) names the Lease, in
    ``namespace`` (SPECOPS_NAMESPACE, else the service account's), held as ``pod_name``
    (SPECOPS_POD_NAME); ``leader_lease_seconds`` (default 15) its duration. Without a lease name:
    ``NoLeaderGate`` (and no ``kubernetes`` import)."""
    from specops.settings import setting

    name = setting("leader_lease")
    if not name:
        return NoLeaderGate()
    name = str(name)
    if not _DNS_SUBDOMAIN.match(name):
        raise InputError(f'SPECOPS_LEADER_LEASE "{name}" is not a valid Lease name',
                         "use lower-case letters, digits, '-' and '.', e.g. specops-monitor")
    try:
        duration = int(str(setting("leader_lease_seconds", None, 15)))
    except ValueError:
        raise InputError("SPECOPS_LEADER_LEASE_SECONDS must be a whole number of seconds", "e.g. 15") from None
    if duration < 3:
        raise InputError(f"SPECOPS_LEADER_LEASE_SECONDS {duration} is too short", "use 15 (client-go's default)")
    namespace = _namespace()
    from specops.k8s.cluster import connect

    try:
        api = connect(api_client)
    except InputError as exc:
        raise InputError(f"SPECOPS_LEADER_LEASE is set but {exc.message}",
                         "run inside the cluster (the manifests do), set KUBECONFIG, or unset SPECOPS_LEADER_LEASE "
                         "for a single monitor without leader election") from None
    elector = LeaseElector(api, namespace, name, identity or default_identity(), clock=clock,
                           lease_duration_s=duration, renew_deadline_s=duration * 2 / 3)
    return LeaderGate(elector, retry_period_s=max(1.0, duration / 7.5))
