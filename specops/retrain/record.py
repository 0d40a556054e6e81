"""What a retraining run takes from the deployment's registry record rather than from defaults: the
engine's endpoint and served model name (the GPU backends regenerate the target's answers there), its API
key variable, and, for an EAGLE-3 incumbent, the generation to train (``--fc-norm --norm-output`` shape
EAGLE-3.1 heads only). Parameters the user passes (``--params``) always win."""

from __future__ import annotations

from specops.errors import InputError

RECORD_FIELDS = {
    "speculators": ("endpoint", "served_model_name", "eagle_generation"),
    "specforge": ("endpoint", "served_model_name", "api_key_env"),
}
"""Backend -> the parameters it takes from the record (the ``local`` backend trains in-process: none)."""


def params_from_record(backend: str, deployment, incumbent, given: dict) -> dict:
    """``given`` with the backend's record-derived parameters filled in where the user set none. Raises
    InputError when the backend needs the engine and the record has no endpoint, or when the incumbent is an
    EAGLE-3 head whose generation the registry cannot tell (training the wrong shape is not a default)."""
    fields = RECORD_FIELDS.get(backend, ())
    out = dict(given)
    name = deployment.name
    if "endpoint" in fields and "endpoint" not in out:
        if not deployment.endpoint:
            raise InputError(f"deployment {name} records no endpoint, and the {backend} backend regenerates the "
                             "target's answers from the serving engine",
                             f"record it with `specops deployment register {name} --endpoint URL` (adopted), or pass "
                             "--params '{\"endpoint\": \"URL\"}'")
        out["endpoint"] = deployment.endpoint
    if "served_model_name" in fields and "served_model_name" not in out and deployment.served_model_name:
        out["served_model_name"] = deployment.served_model_name
    if "api_key_env" in fields and "api_key_env" not in out and getattr(deployment, "api_key_env", None):
        out["api_key_env"] = deployment.api_key_env
    if "eagle_generation" in fields and "eagle_generation" not in out:
        generation = eagle_generation_of(incumbent)
        if generation is not None:
            out["eagle_generation"] = generation
        elif incumbent is not None and incumbent.method == "eagle3":
            raise InputError(f"the incumbent draft {incumbent.ref} is EAGLE-3, but the registry cannot tell whether "
                             "it is EAGLE-3 or EAGLE-3.1 (its config.json has no fc_norm marker the trainer wrote)",
                             "pass --params '{\"eagle_generation\": \"3\"}' (or \"3.1\") for the head you want")
    return out


def eagle_generation_of(draft) -> str | None:
    """"3" or "3.1" for an EAGLE-3 draft whose generation lineage recorded; None otherwise."""
    if draft is None or draft.method != "eagle3":
        return None
    gen = getattr(draft, "eagle_generation", None)
    return gen if gen in ("3", "3.1") else None
