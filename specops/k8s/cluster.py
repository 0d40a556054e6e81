"""The cluster side, through the official ``kubernetes`` client's dynamic client.

- ``apply``: server-side apply (field manager ``specops``). Fields another manager changed are a
  conflict, reported as one line naming the managers and fields (``ConflictError``) unless the
  caller forces (``specops deploy --force-conflicts``); ``dry_run`` asks the server
  (``dryRun=All``). A real API server creates an object on its first apply; an API that answers 404
  to an apply of an object that does not exist yet (kmock, and the apply paths of some proxies) gets
  a create, which is what a correct apply path must do.
- ``preflight``: everything that would make an apply fail half-way is checked before the first
  write: the namespace, the API kinds, the GPU resource on the nodes, the Secrets, and name
  collisions with objects specops does not manage.
- Errors become one line with ``To fix:`` (InputError, exit 2); API bodies are never echoed (they
  might carry Secret data).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from specops.errors import ConflictError, InputError, did_you_mean
from specops.k8s.render import LABEL_MANAGED_BY, MANAGER

Progress = Callable[[str], None]


def _api_exception():
    from kubernetes.client.rest import ApiException

    return ApiException


def connect(api_client=None):
    """An ``ApiClient``: the one given, else from KUBECONFIG / ~/.kube/config, else in-cluster."""
    if api_client is not None:
        return api_client
    import os

    from kubernetes import config

    try:  # KUBECONFIG read now: the client reads it once, at import, and a later change would be ignored
        return config.new_client_from_config(config_file=os.environ.get("KUBECONFIG") or None)
    except Exception as exc:  # kubeconfig missing or malformed
        try:
            config.load_incluster_config()
            from kubernetes import client

            return client.ApiClient()
        except Exception:
            raise InputError(f"no usable Kubernetes credentials ({exc.__class__.__name__})",
                             "set KUBECONFIG to a kubeconfig file (or run inside a cluster); `specops deploy SPEC "
                             "--platform kubernetes --dry-run` renders the manifests without a cluster") from None


def server_version(api_client=None, timeout_s: float = 5) -> tuple[str, str]:
    """(API server URL, Kubernetes git version) of the current context, for `specops doctor`."""
    from kubernetes import client

    api = connect(api_client)
    version = client.VersionApi(api).get_code(_request_timeout=timeout_s)
    return api.configuration.host, version.git_version


def is_managed(obj: dict) -> bool:
    meta = obj.get("metadata") or {}
    if (meta.get("labels") or {}).get(LABEL_MANAGED_BY) == MANAGER:
        return True
    return any(f.get("manager") == MANAGER for f in meta.get("managedFields") or [])


class Cluster:
    """A thin, typed-error layer over ``kubernetes.dynamic.DynamicClient``."""

    def __init__(self, api_client=None) -> None:
        from kubernetes.dynamic import DynamicClient

        from specops.settings import cache_dir

        self.api = connect(api_client)
        host = getattr(self.api.configuration, "host", "") or ""
        cache = cache_dir() / "k8s"
        cache.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(host.encode()).hexdigest()[:12]
        try:
            self.dyn = DynamicClient(self.api, cache_file=str(cache / f"discovery-{digest}.json"))
        except Exception as exc:
            raise self._error(exc, f"reach the Kubernetes API at {host}") from None
        self.host = host

    # --- errors --------------------------------------------------------------------------------
    def _error(self, exc: Exception, doing: str) -> InputError:
        ApiException = _api_exception()
        if isinstance(exc, ApiException):
            if exc.status in (401, 403):
                return InputError(f"the Kubernetes API refused to {doing} (HTTP {exc.status})",
                                  "check the kubeconfig user and its RBAC permissions in that namespace")
            return InputError(f"the Kubernetes API could not {doing} (HTTP {exc.status} {exc.reason})",
                              "check the cluster (`kubectl get --raw /readyz`) and try again")
        return InputError(f"could not {doing} ({exc.__class__.__name__})",
                          f"check that the API server at {getattr(self, 'host', '?')} is reachable (KUBECONFIG)")

    # --- discovery -----------------------------------------------------------------------------
    def resource(self, api_version: str, kind: str):
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        try:
            return self.dyn.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            return None
        except Exception as exc:
            raise self._error(exc, f"discover {kind} ({api_version})") from None

    def _res(self, api_version: str, kind: str):
        res = self.resource(api_version, kind)
        if res is None:
            raise InputError(f"this cluster does not serve {kind} ({api_version})", _kind_fix(api_version))
        return res

    # --- reads -----------------------------------------------------------------------------------
    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict | None:
        ApiException = _api_exception()
        res = self._res(api_version, kind)
        try:
            got = self.dyn.get(res, name=name, namespace=namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise self._error(exc, f"read {kind} {name}") from None
        except Exception as exc:
            raise self._error(exc, f"read {kind} {name}") from None
        return got.to_dict()

    def exists(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool | None:
        """True/False, or None when RBAC does not allow reading it (the check is then skipped)."""
        ApiException = _api_exception()
        res = self._res(api_version, kind)
        try:
            self.dyn.get(res, name=name, namespace=namespace)  # the body (maybe Secret data) is dropped here
        except ApiException as exc:
            if exc.status == 404:
                return False
            if exc.status == 403:
                return None
            raise self._error(exc, f"read {kind} {name}") from None
        except Exception as exc:
            raise self._error(exc, f"read {kind} {name}") from None
        return True

    def nodes(self) -> list[dict] | None:
        ApiException = _api_exception()
        try:
            return [n.to_dict() for n in self.dyn.get(self._res("v1", "Node")).items]
        except ApiException as exc:
            if exc.status == 403:
                return None
            raise self._error(exc, "list nodes") from None
        except Exception as exc:
            raise self._error(exc, "list nodes") from None

    # --- writes ----------------------------------------------------------------------------------
    def apply(self, obj: dict, *, force: bool = False, dry_run: bool = False) -> tuple[dict, str]:
        """Server-side apply as field manager ``specops``; returns (object, "created"|"configured").

        A field another manager set to a different value is a conflict (HTTP 409): raised as
        ``ConflictError`` naming the managers and fields, unless ``force`` takes them over.
        ``dry_run``: the server runs admission, defaulting and schema checks and stores nothing
        (``dryRun=All``); the returned object is what it would have stored."""
        ApiException = _api_exception()
        meta = obj["metadata"]
        res = self._res(obj["apiVersion"], obj["kind"])
        what = f"{obj['kind']} {meta.get('namespace')}/{meta['name']}"
        extra = {"dry_run": "All"} if dry_run else {}
        try:
            existed = self.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")) is not None
            out = self.dyn.server_side_apply(res, body=obj, name=meta["name"], namespace=meta.get("namespace"),
                                             field_manager=MANAGER, force_conflicts=force, **extra)
            return out.to_dict(), "configured" if existed else "created"
        except ApiException as exc:
            if exc.status == 409:
                raise conflict_error(exc, what) from None
            if exc.status != 404:
                raise self._error(exc, f"apply {what}") from None
        try:  # the API has no apply-creates semantics for new objects: create, then it is ours to apply
            out = self.dyn.create(res, body=obj, namespace=meta.get("namespace"), field_manager=MANAGER, **extra)
        except ApiException as exc:
            if exc.status == 404:
                raise InputError(f"the Kubernetes API answered 404 when creating {what}",
                                 "check that the namespace exists and the kind is "
                                 "installed (`kubectl api-resources`)") from None
            raise self._error(exc, f"create {what}") from None
        return out.to_dict(), "created"

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None) -> bool:
        ApiException = _api_exception()
        res = self._res(api_version, kind)
        try:
            self.dyn.delete(res, name=name, namespace=namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise self._error(exc, f"delete {kind} {name}") from None
        return True


def conflict_error(exc, what: str) -> ConflictError:
    """The 409 of a server-side apply as one line: who owns which fields, and the way out."""
    import json
    import re

    try:
        causes = (json.loads(exc.body or "{}").get("details") or {}).get("causes") or []
    except (ValueError, AttributeError):
        causes = []
    managers = sorted({m for c in causes for m in re.findall(r'conflict with "([^"]+)"', c.get("message", ""))})
    fields = [c["field"] for c in causes if c.get("field")]
    shown = ", ".join(fields[:3]) + (f" and {len(fields) - 3} more" if len(fields) > 3 else "")
    who = ", ".join(f'"{m}"' for m in managers) or "another field manager"
    return ConflictError(f"applying {what} conflicts with {who}, which set "
                         + (shown or "fields specops also sets") + " to other values",
                         "rerun `specops deploy` with --force-conflicts to let specops take those fields over "
                         "(the other change is overwritten), or undo the other change (or put it in the spec)",
                         managers=managers, fields=fields)


def _kind_fix(api_version: str) -> str:
    group = api_version.split("/")[0]
    if group == "monitoring.coreos.com":
        return "install the Prometheus Operator CRDs (kube-prometheus-stack), or deploy without monitoring objects"
    if group == "serving.kserve.io":
        return "install KServe with LLMInferenceService (and the speculator field of kserve PR #5687), " \
               "or set kubernetes.kserve: false"
    if api_version == "autoscaling/v2":  # issue 44: served from Kubernetes 1.23
        return "set kubernetes.autoscaling.hpa_api_version: autoscaling/v2beta2 (Kubernetes 1.12-1.25)"
    if group == "keda.sh":
        return "install KEDA (its ScaledObject CRD), or set kubernetes.autoscaling.keda: false for an HPA"
    return "check the cluster version (`kubectl api-resources`)"


def gpu_capacity(nodes: list[dict], resource: str) -> tuple[int, list[str]]:
    """(largest allocatable count of ``resource`` on one node, all extended resource names seen)."""
    best, seen = 0, set()
    for node in nodes:
        status = node.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        seen.update(k for k in alloc if "/" in k)
        try:
            best = max(best, int(str(alloc.get(resource, "0"))))
        except ValueError:
            continue
    return best, sorted(seen)


def preflight(cluster: Cluster, objs: list[dict], *, namespace: str, gpu_resource: str, gpus: int,
              secrets: list[str], progress: Progress) -> list[str]:
    """Check everything before any write. Returns notes (checks skipped for lack of permission)."""
    notes: list[str] = []
    ns = cluster.exists("v1", "Namespace", namespace)
    if ns is False:
        raise InputError(f'namespace "{namespace}" does not exist in the cluster',
                         f"create it (`kubectl create namespace {namespace}`) or set kubernetes.namespace")
    if ns is None:
        notes.append(f"could not read namespace {namespace} (RBAC); not checked")
    for obj in objs:
        cluster._res(obj["apiVersion"], obj["kind"])
    if gpus > 0:
        nodes = cluster.nodes()
        if nodes is None:
            notes.append(f"could not list nodes (RBAC); {gpu_resource} capacity not checked")
        else:
            best, seen = gpu_capacity(nodes, gpu_resource)
            if best == 0:
                hint = did_you_mean(gpu_resource, seen)
                where = f"nodes advertise: {', '.join(seen)}" if seen else "no node advertises any extended resource"
                raise InputError(f'no node advertises the GPU resource "{gpu_resource}" ({where}).{hint}',
                                 "set kubernetes.gpu_resource to the name the device plugin advertises "
                                 "(`kubectl describe node`), or install the device plugin")
            if best < gpus:
                raise InputError(f"no node has {gpus} {gpu_resource} allocatable (the largest has {best})",
                                 "lower engine.tensor_parallel_size / kubernetes.gpus_per_replica, or add a "
                                 "larger node")
    for secret in secrets:
        found = cluster.exists("v1", "Secret", secret, namespace)
        if found is False:
            raise InputError(f'Secret "{secret}" does not exist in namespace {namespace}',
                             f"create it (`kubectl -n {namespace} create secret generic {secret} "
                             "--from-file=...`) before deploying")
        if found is None:
            notes.append(f"could not read Secret {secret} (RBAC); not checked")
    for obj in objs:
        meta = obj["metadata"]
        current = cluster.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        if current is not None and not is_managed(current):
            raise InputError(f"{obj['kind']} {meta.get('namespace')}/{meta['name']} already exists and is not "
                             f"managed by specops (no {LABEL_MANAGED_BY}={MANAGER} label, no '{MANAGER}' "
                             "field manager)",
                             "choose another deployment name, or delete that object, or label it "
                             f"{LABEL_MANAGED_BY}={MANAGER} to let specops adopt it")
        if current is not None and obj["kind"] == "PersistentVolumeClaim":
            had, want = current.get("spec", {}).get("accessModes"), obj["spec"]["accessModes"]
            if had and had != want:
                raise InputError(f"the model-cache claim {meta['name']} is {'/'.join(had)} but "
                                 f"{'/'.join(want)} is needed for this replica count, and a claim's access mode "
                                 "cannot change",
                                 f"delete the claim (`kubectl -n {namespace} delete pvc {meta['name']}`; the cache "
                                 "is downloaded again) or keep the replica count on the same side of 1")
    progress("preflight passed: namespace, kinds, GPU resource, secrets, ownership")
    return notes
