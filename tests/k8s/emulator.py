"""A Kubernetes API emulated with kmock, served over HTTP on 127.0.0.1 for the official client.

No kube-apiserver can run on this machine (see docs/kubernetes.md), so kmock's KubernetesEmulator
stands in: it stores objects and speaks the REST conventions (discovery, create, get, list, patch,
delete, 404/409). What it lacks is filled in here, each the way the real component behaves:

- the API server bumps ``metadata.generation`` when a Deployment's spec changes (kmock does not);
- list responses carry ``kind: <Kind>List`` and ``apiVersion`` (kmock leaves them out; the official
  dynamic client needs them);
- kmock cannot route ``GET /api/v1/namespaces/NAME`` (it reads "namespaces/NAME" as a namespace
  prefix), so each namespace added here gets an explicit reaction serving the Namespace object;
- no controllers: a stand-in Deployment controller task sets ``status`` (observedGeneration,
  replicas, updatedReplicas, availableReplicas) like a healthy rollout; tests can pause it.

kmock has no server-side-apply semantics (an apply of a new object answers 404); specops handles
that itself, which is what these tests exercise.
"""

from __future__ import annotations

import asyncio
import copy
import threading

import attrs
import kmock

DEPLOYMENTS = kmock.resource("apps", "v1", "deployments")
CRDS = {
    "monitoring.coreos.com/v1/podmonitors": "PodMonitor",
    "monitoring.coreos.com/v1/prometheusrules": "PrometheusRule",
    "serving.kserve.io/v1alpha2/llminferenceservices": "LLMInferenceService",
}


@attrs.define(kw_only=True)
class ApiServer(kmock.KubernetesEmulator):
    """kmock plus the API server's generation bookkeeping for Deployments."""

    _seen_specs: dict = attrs.field(factory=dict, init=False)

    async def _bump(self, resource, namespace, name, created: bool) -> None:
        if resource != DEPLOYMENTS:
            return
        async with self._lock:
            key = (resource, namespace, name)
            obj = self.objects[DEPLOYMENTS, namespace, name]
            spec = copy.deepcopy(obj.raw.get("spec"))
            if created or self._seen_specs.get(key) != spec:
                gen = 1 if created else int(obj.raw.get("metadata", {}).get("generation") or 0) + 1
                obj.patch({"metadata": {"generation": gen}})
                self._seen_specs[key] = spec

    async def _serve_create(self, request):
        data = request.data or {}
        ns = request.namespace or data.get("metadata", {}).get("namespace")
        await self._bump(request.resource, ns, data.get("metadata", {}).get("name"), created=True)
        return await super()._serve_create(request)

    async def _serve_list(self, request):
        # A real API server names the list (e.g. NodeList); kmock leaves kind/apiVersion out.
        body = await super()._serve_list(request)
        res = request.resource
        kind = self.resources[res].kind or res.plural.capitalize()
        body.update({"kind": f"{kind}List", "apiVersion": f"{res.group}/{res.version}".lstrip("/")})
        return body

    async def _serve_update(self, request):
        await self._bump(request.resource, request.namespace, request.name, created=False)
        return await super()._serve_update(request)


class EmulatedCluster:
    """Runs the emulator in a background thread with its own event loop."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kmock", daemon=True)
        self.controller_enabled = True
        self.url = ""

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> EmulatedCluster:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("kmock did not start")
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.run(self._main())

    server_class = None  # subclasses may serve a richer ApiServer (tests/k8s/lease_emulation.py)

    async def _main(self) -> None:
        async with (self.server_class or ApiServer)() as km, kmock.Server(km, host="127.0.0.1") as server:
            km.resources.load_bundled()
            for path, kind in CRDS.items():
                km.resources[path] = kmock.ResourceInfo(kind=kind, namespaced=True,
                                                        verbs={"get", "list", "create", "patch", "delete"})
            self.km, self.loop, self._stop = km, asyncio.get_running_loop(), asyncio.Event()
            self.url = str(server.url).rstrip("/")
            task = asyncio.create_task(self._controller())
            self._ready.set()
            await self._stop.wait()
            task.cancel()

    def _call(self, fn):
        async def locked():
            async with self.km._lock:
                return fn()

        return asyncio.run_coroutine_threadsafe(locked(), self.loop).result(10)

    # --- stand-in controller -----------------------------------------------------------------------
    async def _controller(self) -> None:
        while True:
            if self.controller_enabled:
                async with self.km._lock:
                    for (res, _ns, _name), obj in list(self.km.objects.items()):
                        if res != DEPLOYMENTS or obj.deleted:
                            continue
                        raw = obj.raw
                        gen = raw.get("metadata", {}).get("generation")
                        n = raw.get("spec", {}).get("replicas", 1)
                        st = raw.get("status") or {}
                        if st.get("observedGeneration") != gen or st.get("availableReplicas") != n:
                            obj.patch({"status": {"observedGeneration": gen, "replicas": n, "updatedReplicas": n,
                                                  "readyReplicas": n, "availableReplicas": n}})
            await asyncio.sleep(0.05)

    # --- cluster contents ----------------------------------------------------------------------------
    def api_client(self):
        from kubernetes import client

        return client.ApiClient(client.Configuration(host=self.url))

    def add_namespace(self, name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        self._call(lambda: self.km[f"get /api/v1/namespaces/{name}"] << body)

    def add_node(self, name: str, allocatable: dict[str, str]) -> None:
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                "status": {"allocatable": allocatable, "capacity": allocatable}}
        self._call(lambda: self.km.objects.__setitem__(("v1/nodes", None, name), body))

    def add_object(self, resource: str, namespace: str | None, body: dict) -> None:
        name = body["metadata"]["name"]
        self._call(lambda: self.km.objects.__setitem__((resource, namespace, name), body))

    def get(self, resource: str, namespace: str | None, name: str) -> dict | None:
        def read():
            key = (kmock.resource(resource), namespace, name)
            if key not in self.km.objects:
                return None
            obj = self.km.objects[resource, namespace, name]
            return None if obj.deleted else copy.deepcopy(obj.raw)

        return self._call(read)

    def requests(self) -> list[tuple[str, str, str]]:
        """(method, path, content type) of every request served so far."""
        return self._call(lambda: [(r.method, r.url.path, r.headers.get("Content-Type", ""))
                                   for r in list(self.km)])
