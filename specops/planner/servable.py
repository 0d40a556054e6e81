"""Whether the model can serve a pinned method at all: a method needs MTP layers the model has, or a draft
that exists. A plan with a made-up draft (``<eagle draft for ...>``) cannot be launched, so it is refused with
what would work; a model specops does not know (sizes estimated from --params-b) is given the benefit of the
doubt for MTP, with a warning."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specops.errors import InputError

if TYPE_CHECKING:
    from specops.planner.recommend import Context


def _instead(ctx: Context, method: str) -> str:
    model = ctx.model
    options = list({r.method: f"--method {r.method} ({r.id} is known)" for r in reversed(model.drafts)
                    if r.method != method}.values())[::-1]
    if model.mtp_layers and method != "mtp":
        options.append(f"--method mtp ({model.mtp_layers} native MTP module(s))")
    options.append("--method ngram (no draft weights)")
    return " or ".join(dict.fromkeys(options))


def refuse_unservable(ctx: Context, method: str) -> None:
    """Raise InputError when ``method`` is pinned but the model cannot serve it (no MTP layers, no draft);
    return for an unknown model's MTP (the caller predicts with a typical module and warns)."""
    model = ctx.model
    estimated = model.source.startswith("estimated")
    if method == "mtp":
        if estimated:
            return
        where = ("its config.json has no num_nextn_predict_layers or mtp_num_hidden_layers"
                 if model.source.endswith("(config.json)") else "the catalog lists none for it")
        raise InputError(f"--method mtp: {model.id} has no MTP layers ({where}), so vLLM has nothing to draft with",
                         f"use {_instead(ctx, method)}")
    raise InputError(f"--method {method}: no {method} draft is known for {model.id}, and a plan with a made-up draft "
                     "cannot be launched",
                     f"pass --draft HUB_ID_OR_FOLDER (a {method} draft trained for {model.id}), or use "
                     f"{_instead(ctx, method)}")
