"""Whether the model can serve a pinned method at all: a method needs MTP layers the model has, or a draft
that exists. A plan with a made-up draft (``<eagle draft for ...>``) cannot be launched. For a model the catalog
(or its config.json) describes, the catalog shows which drafts exist, so a pinned method without one is refused
with what would work (issue 41). A model specops does not know (sizes estimated from --params-b) is given the
benefit of the doubt: for MTP a typical module, with a warning; for a draft-head method (specops.speculation.TRAINED_HEAD_METHODS)
the method's typical draft is predicted and the launch withheld until --draft names one (the prediction is about
the configuration, the launch about artifacts). A draft model without --draft stays refused: its acceptance depends
on the draft's size, which nothing gives."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specops.errors import InputError
from specops.planner.types import WithheldLaunch
from specops.speculation import TRAINED_HEAD_METHODS

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


def refuse_unservable(ctx: Context, method: str) -> WithheldLaunch | None:
    """Raise InputError when ``method`` is pinned but the model cannot serve it (no MTP layers, no draft). For a
    model specops does not know: None for MTP (the caller predicts with a typical module and warns); for a
    trained-head method (TRAINED_HEAD_METHODS: eagle, eagle3, medusa, dflash), the missing draft (the caller predicts with the method's typical draft and
    withholds the launch)."""
    model = ctx.model
    estimated = model.source.startswith("estimated")
    art = "an" if method.startswith("eagle") else "a"
    if estimated and method in TRAINED_HEAD_METHODS:
        return WithheldLaunch(artifact="draft", missing=f"no {method} draft is known for {model.id}, and a launch "
                              "with a made-up draft cannot start", fix=f"pass --draft HUB_ID_OR_FOLDER ({art} {method} "
                              f"draft trained for {model.id}); the launch then names it")
    if method == "mtp":
        if estimated:
            return None
        where = ("its config.json has no num_nextn_predict_layers or mtp_num_hidden_layers"
                 if model.source.endswith("(config.json)") else "the catalog lists none for it")
        raise InputError(f"--method mtp: {model.id} has no MTP layers ({where}), so vLLM has nothing to draft with",
                         f"use {_instead(ctx, method)}")
    raise InputError(f"--method {method}: no {method} draft is known for {model.id}, and a plan with a made-up draft "
                     "cannot be launched",
                     f"pass --draft HUB_ID_OR_FOLDER ({art} {method} draft trained for {model.id}), or use "
                     f"{_instead(ctx, method)}")
