"""Offline validation of every rendered object before anything is written or applied.

- Built-in kinds (Deployment, Service, PersistentVolumeClaim): the Kubernetes 1.33 OpenAPI schemas
  shipped by ``kubernetes-validate``, strict (unknown fields are errors).
- Custom resources are not in those schemas. PodMonitor, PrometheusRule and LLMInferenceService are
  checked against the small JSON schemas below: the fields specops renders, their types and the
  required ones, taken from the Prometheus Operator ``monitoring.coreos.com/v1`` CRDs and kserve
  PR #5687. They catch specops' own mistakes, not everything a cluster's CRD would refuse.
"""

from __future__ import annotations

from specops.errors import InputError

KUBERNETES_VERSION = "1.33"

_NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_META = {"type": "object", "required": ["name", "namespace"],
         "properties": {"name": _NAME, "namespace": _NAME, "labels": _LABELS, "annotations": _LABELS},
         "additionalProperties": False}
_DURATION = {"type": "string", "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
                                          r"(([0-9]+)s)?(([0-9]+)ms)?)$"}


def _crd(spec: dict, api_version: str, kind: str) -> dict:
    return {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
            "properties": {"apiVersion": {"const": api_version}, "kind": {"const": kind},
                           "metadata": _META, "spec": spec}}


_RELABEL = {"type": "object", "additionalProperties": False,
            "properties": {"sourceLabels": {"type": "array", "items": {"type": "string",
                                                                       "pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*$"}},
                           "targetLabel": {"type": "string", "pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*$"},
                           "action": {"enum": ["replace", "keep", "drop", "labelmap", "labeldrop", "labelkeep",
                                               "hashmod", "lowercase", "uppercase", "keepequal", "dropequal"]},
                           "regex": {"type": "string"}, "replacement": {"type": "string"}}}

SCHEMAS: dict[tuple[str, str], dict] = {
    ("monitoring.coreos.com/v1", "PodMonitor"): _crd({
        "type": "object", "required": ["selector", "podMetricsEndpoints"], "additionalProperties": False,
        "properties": {
            "selector": {"type": "object", "required": ["matchLabels"],
                         "properties": {"matchLabels": _LABELS}, "additionalProperties": False},
            "podMetricsEndpoints": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["port"], "additionalProperties": False,
                "properties": {"port": {"type": "string"}, "path": {"type": "string", "pattern": "^/"},
                               "interval": _DURATION, "relabelings": {"type": "array", "items": _RELABEL}}}},
        }}, "monitoring.coreos.com/v1", "PodMonitor"),
    ("monitoring.coreos.com/v1", "PrometheusRule"): _crd({
        "type": "object", "required": ["groups"], "additionalProperties": False,
        "properties": {"groups": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["name", "rules"], "additionalProperties": False,
            "properties": {"name": {"type": "string", "minLength": 1}, "rules": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["alert", "expr"], "additionalProperties": False,
                "properties": {"alert": {"type": "string", "pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*$"},
                               "expr": {"type": "string", "minLength": 1}, "for": _DURATION,
                               "labels": _LABELS, "annotations": _LABELS}}}}}}},
    }, "monitoring.coreos.com/v1", "PrometheusRule"),
    ("serving.kserve.io/v1alpha2", "LLMInferenceService"): _crd({
        "type": "object", "required": ["model"], "additionalProperties": False,
        "properties": {
            "model": {"type": "object", "required": ["uri"], "additionalProperties": False,
                      "properties": {"uri": {"type": "string", "pattern": r"^[a-z0-9+]+://"},
                                     "name": {"type": "string"}}},
            "replicas": {"type": "integer", "minimum": 0},
            "template": {"type": "object"},
            "speculator": {"type": "object", "additionalProperties": False, "properties": {
                "model": {"type": "object", "required": ["uri"], "properties": {"uri": {"type": "string"}}},
                "config": {"type": "object", "required": ["method"],
                           "properties": {"method": {"type": "string"}}}}},
        }}, "serving.kserve.io/v1alpha2", "LLMInferenceService"),
    # KEDA's ScaledObject as specops renders it (keda.sh/v1alpha1 CRD; the prometheus scaler's metadata)
    ("keda.sh/v1alpha1", "ScaledObject"): _crd({
        "type": "object", "required": ["scaleTargetRef", "triggers"], "additionalProperties": False,
        "properties": {
            "scaleTargetRef": {"type": "object", "required": ["name"], "additionalProperties": False,
                               "properties": {"name": _NAME, "kind": {"type": "string"},
                                              "apiVersion": {"type": "string"}}},
            "minReplicaCount": {"type": "integer", "minimum": 0}, "maxReplicaCount": {"type": "integer", "minimum": 1},
            "cooldownPeriod": {"type": "integer", "minimum": 0}, "pollingInterval": {"type": "integer", "minimum": 1},
            "triggers": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["type", "metadata"], "properties": {
                    "type": {"const": "prometheus"},
                    "metadata": {"type": "object", "required": ["serverAddress", "query", "threshold"],
                                 "additionalProperties": {"type": "string"},
                                 "properties": {"serverAddress": {"type": "string", "pattern": "^https?://"},
                                                "query": {"type": "string", "minLength": 1},
                                                "threshold": {"type": "string", "pattern": r"^[0-9.]+$"}}}}}},
        }}, "keda.sh/v1alpha1", "ScaledObject"),
}


def _where(err) -> str:
    return ".".join(str(p) for p in err.absolute_path) or "(top level)"


def validate_object(obj: dict) -> str:
    """Validate one object; returns what it was checked against. Raises InputError on the first problem."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    name = f'{key[1]} "{obj.get("metadata", {}).get("name", "?")}"'
    if key in SCHEMAS:
        import jsonschema

        validator = jsonschema.Draft7Validator(SCHEMAS[key])
        errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
        if errors:
            err = errors[0]
            raise InputError(f"rendered {name} fails specops' {key[0]} schema at {_where(err)}: {err.message}",
                             "check the spec fields that feed it (kubernetes: block); if they look right, "
                             "report it as a specops bug")
        return f"specops schema for {key[0]} {key[1]}"
    import kubernetes_validate

    if key == ("autoscaling/v2beta2", "HorizontalPodAutoscaler"):  # gone from 1.26's schemas; v2 has its fields
        obj = {**obj, "apiVersion": "autoscaling/v2"}
    try:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as err:
        message = str(err.message).splitlines()[0]
        raise InputError(f"rendered {name} fails the Kubernetes {KUBERNETES_VERSION} schema at {_where(err)}: "
                         f"{message}",
                         "check the spec's kubernetes: block (node_selector, tolerations, cache_size, ...)") from None
    except kubernetes_validate.SchemaNotFoundError:
        raise InputError(f"no Kubernetes {KUBERNETES_VERSION} schema for {key[0]} {key[1]}",
                         "report it as a specops bug") from None
    return f"Kubernetes {KUBERNETES_VERSION} schema"


def validate_objects(objs: list[dict]) -> list[str]:
    return [validate_object(o) for o in objs]
