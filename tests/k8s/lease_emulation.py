"""coordination.k8s.io/v1 Leases for the kmock emulator (tests/k8s/emulator.py), the way the API
server serves them. kmock on its own lacks what leader election rests on:

- **PUT** (replace) of a named object: kmock routes only GET/POST/PATCH/DELETE and merges rather
  than replaces; here a PUT replaces the whole object;
- **resourceVersion**: kmock assigns none. Here every write stores a new one (a global counter, as
  etcd's revision), and a PUT whose ``metadata.resourceVersion`` differs from the stored one is
  answered **409 Conflict** (reason ``Conflict``) without writing: optimistic concurrency. A PUT
  without a resourceVersion is unconditional, as for Leases on a real server;
- a POST of an existing Lease is **409 AlreadyExists**; GET/PUT of a missing one 404 NotFound;
  ``uid`` and ``creationTimestamp`` are set on create and kept by a PUT;
- Status bodies (kind Status, reason, code) like the API server's.

Test hooks, run inside the server's event loop under its lock: ``before_next_lease_write(fn)``
(``fn(server)`` runs just before the next POST/PUT is applied, e.g. another replica's write landing
first), ``fail_lease_requests(status, n)`` (the next ``n`` lease requests are answered ``status``),
and ``write_lease(...)`` (a write by some other holder). Everything else is emulator.py's.
"""

from __future__ import annotations

import copy
import uuid

import aiohttp.web
import attrs
import kmock

from tests.k8s.emulator import ApiServer, EmulatedCluster

LEASES = kmock.resource("coordination.k8s.io", "v1", "leases")
REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed", 500: "InternalError"}


def status_body(code: int, reason: str, message: str, name: str | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code,
            "details": {"name": name, "group": "coordination.k8s.io", "kind": "leases"}}


@attrs.define(kw_only=True)
class LeaseApiServer(ApiServer):
    """emulator.ApiServer plus Leases with resourceVersion and PUT (see the module docstring)."""

    leases: dict = attrs.field(factory=dict, init=False)
    revision: int = attrs.field(default=100, init=False)
    before_write: list = attrs.field(factory=list, init=False)
    failures: list = attrs.field(factory=list, init=False)

    async def _handle(self, request):
        if request.resource != LEASES:
            return await super()._handle(request)
        async with self._lock:
            code, body = self._serve_lease(str(request.method.value if hasattr(request.method, "value")
                                               else request.method).upper(), request)
        return aiohttp.web.json_response(body, status=code)

    def _next_version(self) -> str:
        self.revision += 1
        return str(self.revision)

    def store(self, namespace: str, obj: dict, *, create: bool) -> dict:
        """Write ``obj`` as the Lease (new resourceVersion; uid/creationTimestamp kept or set)."""
        meta = obj.setdefault("metadata", {})
        key = (namespace, meta["name"])
        old = self.leases.get(key, {}).get("metadata", {})
        meta.update(namespace=namespace, resourceVersion=self._next_version(),
                    uid=old.get("uid") if not create else str(uuid.uuid4()),
                    creationTimestamp=old.get("creationTimestamp") if not create else "2026-01-01T00:00:00Z")
        obj.setdefault("apiVersion", "coordination.k8s.io/v1")
        obj.setdefault("kind", "Lease")
        self.leases[key] = obj
        return copy.deepcopy(obj)

    def _serve_lease(self, method: str, request) -> tuple[int, dict]:
        ns, name = request.namespace, request.name
        if self.failures:
            code = self.failures.pop(0)
            return code, status_body(code, REASONS.get(code, "Failure"), f"injected {code}", name)
        if method == "GET" and name is None:
            items = [copy.deepcopy(o) for (n, _), o in sorted(self.leases.items()) if n == ns]
            return 200, {"apiVersion": "coordination.k8s.io/v1", "kind": "LeaseList",
                         "metadata": {"resourceVersion": str(self.revision)}, "items": items}
        if method == "POST":
            body = copy.deepcopy(request.data or {})
            name = (body.get("metadata") or {}).get("name")
            if not name:
                return 400, status_body(400, "BadRequest", "metadata.name is required")
            self._run_hooks()
            if (ns, name) in self.leases:
                return 409, status_body(409, "AlreadyExists", f'leases.coordination.k8s.io "{name}" already exists',
                                        name)
            return 201, self.store(ns, body, create=True)
        current = self.leases.get((ns, name))
        if method == "GET":
            return (200, copy.deepcopy(current)) if current else self._not_found(name)
        if method == "PUT":
            body = copy.deepcopy(request.data or {})
            if (body.get("metadata") or {}).get("name") != name:
                return 400, status_body(400, "BadRequest", "the name in the body does not match the URL", name)
            self._run_hooks()
            current = self.leases.get((ns, name))
            if current is None:
                return self._not_found(name)
            sent = body["metadata"].get("resourceVersion")
            if sent is not None and sent != current["metadata"]["resourceVersion"]:
                return 409, status_body(409, "Conflict", f'Operation cannot be fulfilled on leases.coordination.k8s.io '
                                        f'"{name}": the object has been modified; please apply your changes to the '
                                        f'latest version and try again', name)
            return 200, self.store(ns, body, create=False)
        if method == "DELETE":
            if current is None:
                return self._not_found(name)
            del self.leases[(ns, name)]
            return 200, {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 200}
        return 405, status_body(405, "MethodNotAllowed", f"{method} on leases is not emulated", name)

    def _not_found(self, name):
        return 404, status_body(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found', name)

    def _run_hooks(self) -> None:
        if self.before_write:
            self.before_write.pop(0)(self)


class LeaseCluster(EmulatedCluster):
    """EmulatedCluster served by LeaseApiServer."""

    @property
    def server_class(self):  # the Lease-aware server, in EmulatedCluster._main
        return LeaseApiServer

    def lease(self, namespace: str, name: str) -> dict | None:
        return self._call(lambda: copy.deepcopy(self.km.leases.get((namespace, name))))

    def write_lease(self, namespace: str, name: str, spec: dict) -> dict:
        """A write by someone else (another replica, kubectl): create or replace, unconditionally."""
        def write():
            current = self.km.leases.get((namespace, name))
            obj = {"metadata": {"name": name, **({"labels": current["metadata"].get("labels")} if current else {})},
                   "spec": spec}
            return self.km.store(namespace, obj, create=current is None)

        return self._call(write)

    def before_next_lease_write(self, fn) -> None:
        self._call(lambda: self.km.before_write.append(fn))

    def fail_lease_requests(self, status: int, times: int = 1) -> None:
        self._call(lambda: self.km.failures.extend([status] * times))
