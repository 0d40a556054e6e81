"""Judging a draft/target pair: ``check`` decides, registration only records (and warns).

Finding codes (severity error makes the pair incompatible, exit 1):

- ``STALE_DRAFT`` (error): the draft was trained against another version of this target (by
  NAME@VERSION, or the fingerprints differ), or the target folder changed on disk since registration.
- ``OTHER_TARGET`` (error): the draft was trained for a different model altogether.
- ``SAME_WEIGHTS`` (info): registered under another name/version, but the fingerprints are identical.
- ``VOCAB_MISMATCH`` (error): draft and target vocab sizes differ (vllm#5203, #7252).
- ``TOKENIZER_MISMATCH`` (error for draft_model): the tokenizer files differ.
- ``HIDDEN_SIZE_MISMATCH`` (error): an EAGLE head's hidden size differs from the target's.
- ``METHOD_MISMATCH`` (error): the method asked for is not the one the draft was built for.
- ``METHOD_UNSUPPORTED`` (error): the chosen vLLM version lacks (or cannot run) the method.
- ``VERIFIER_UNRESOLVABLE`` / ``VERIFIER_DIFFERS`` (warning): the draft's speculators_config names a
  verifier path that does not exist here (speculators#1065) / names another model.
- ``UNVERIFIABLE`` (warning): a hub id without revision has no fingerprint to compare.
- ``DRAFT_CHANGED`` (warning), ``FOLDER_MISSING`` (warning): the draft folder changed / is gone.
- ``EAGLE_3_1`` (info): the draft is EAGLE 3.1 by its trainer's markers (specops.speculation.eagle_generation).
- ``EAGLE_GENERATION_UNKNOWN`` (info): an eagle3 draft whose markers cannot tell 3 from 3.1.
- ``EAGLE_NORM_MISMATCH`` (warning): a SpecForge 0.2.0 draft with norm_output (served with a norm it was
  not trained with).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from specops.models import EXIT_CODES, Finding, Outcome, Strict, verdict
from specops.registry.schema import DraftPublic, TargetPublic
from specops.speculation import WEIGHTLESS_METHODS


class LineageReport(Strict):
    """The verdict of ``check_lineage``."""


    target: str = Field(description="Target NAME@VERSION checked.")
    draft: str = Field(description="Draft NAME@VERSION checked.")
    method: str = Field(description="Method checked.")
    vllm_version: str = Field(description="vLLM release checked against.")
    findings: list[Finding] = Field(default_factory=list, description="What was found, worst first.")

    @property
    def verdict(self) -> Outcome:
        """pass, fail, or "could not evaluate" (a folder that could not be read again, ...)."""
        return verdict(self.findings)

    @property
    def ok(self) -> bool:
        return self.verdict == "pass"

    @property
    def unevaluated(self) -> list[Finding]:
        """The findings that could not look (why the verdict is "could not evaluate")."""
        return [f for f in self.findings if not f.evaluated]

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def model_dump_public(self) -> dict:
        return {"ok": self.ok, "verdict": self.verdict, **self.model_dump(mode="json")}


def _f(code: str, severity: str, message: str, fix: str | None = None, *, evaluated: bool = True,
       **evidence) -> Finding:
    return Finding(code=code, severity=severity, message=message, fix=fix, evidence=evidence, evaluated=evaluated)


def structural_findings(target: TargetPublic, draft: DraftPublic, method: str) -> list[Finding]:
    """Vocab, tokenizer and hidden-size agreement (used by check, and as warnings by registration)."""
    out: list[Finding] = []
    if method in WEIGHTLESS_METHODS:
        return out
    if draft.vocab_size and target.vocab_size and draft.vocab_size != target.vocab_size:
        out.append(_f("VOCAB_MISMATCH", "error",
                      f"draft vocab_size {draft.vocab_size} != target vocab_size {target.vocab_size} "
                      "(vllm#5203, #7252: rejected or degraded)",
                      "use a draft trained with the target's tokenizer, or pad the draft's embed_tokens/lm_head "
                      "and set its config vocab_size to the target's; on vLLM >= 0.25 draft_model can set "
                      "use_heterogeneous_vocab: true", draft=draft.vocab_size, target=target.vocab_size))
    if (method == "draft_model" and draft.tokenizer_hash and target.tokenizer_hash
            and draft.tokenizer_hash != target.tokenizer_hash):
        out.append(_f("TOKENIZER_MISMATCH", "error", "draft and target tokenizer files differ",
                      "copy the target's tokenizer into the draft folder if it is the same tokenizer, "
                      "otherwise retrain the draft with the target's tokenizer",
                      draft=draft.tokenizer_hash, target=target.tokenizer_hash))
    if method in ("eagle", "eagle3"):
        head = draft.target_hidden_size or draft.hidden_size
        if head and target.hidden_size and head != target.hidden_size:
            out.append(_f("HIDDEN_SIZE_MISMATCH", "error",
                          f"EAGLE head expects hidden size {head}, target has {target.hidden_size}",
                          "use an EAGLE head trained for this target", draft=head, target=target.hidden_size))
    return out


def _lineage_findings(target: TargetPublic, draft: DraftPublic, trained: TargetPublic) -> list[Finding]:
    if trained.id == target.id:
        if (draft.trained_against_fingerprint and target.fingerprint
                and draft.trained_against_fingerprint != target.fingerprint):
            return [_f("STALE_DRAFT", "error", f"{draft.ref} was trained against other weights than {target.ref}",
                       f"retrain the draft against {target.ref} (specops retrain) and register it",
                       trained_against=draft.trained_against_fingerprint, target=target.fingerprint)]
        return []
    same = bool(trained.fingerprint and trained.fingerprint == target.fingerprint)
    if same:
        return [_f("SAME_WEIGHTS", "info", f"{draft.ref} was trained against {trained.ref}, "
                   f"which has the same fingerprint as {target.ref}")]
    if trained.name == target.name:
        return [_f("STALE_DRAFT", "error",
                   f"{draft.ref} was trained against {trained.ref}, not {target.ref} (vllm#36223: acceptance collapses)",
                   f"retrain the draft against {target.ref} and register it with --target {target.ref}, "
                   f"or deploy {trained.ref}", trained_against=trained.ref, target=target.ref)]
    return [_f("OTHER_TARGET", "error", f"{draft.ref} was trained for {trained.ref}, a different model than {target.ref}",
               f"pick a draft registered for {target.name} (specops lineage tree)", trained_against=trained.ref)]


def _disk_findings(target: TargetPublic, draft: DraftPublic) -> list[Finding]:
    from specops.registry.fingerprint import inspect_artifact

    out = []
    for kind, art in (("target", target), ("draft", draft)):
        if art.source_kind != "local":
            continue
        if not Path(art.source).is_dir():
            out.append(_f("FOLDER_MISSING", "warning", f"{kind} folder {art.source} is gone; its weights "
                          "cannot be re-checked", f"restore the folder or re-register the {kind}"))
            continue
        try:
            now = inspect_artifact(art.source)["fingerprint"]
        except Exception as exc:  # noqa: BLE001 - an unreadable folder is reported: the pair cannot be judged
            why = getattr(exc, "message", None) or f"{exc.__class__.__name__}: {exc}"
            out.append(_f("FOLDER_UNREADABLE", "error", f"{kind} folder {art.source} cannot be read again ({why}); "
                          f"whether it still holds the registered weights cannot be judged",
                          f"repair the folder (its config.json, tokenizer and weights), or register what it now "
                          f"holds as a new version of {art.name}", evaluated=False, folder=art.source))
            continue
        if now and art.fingerprint and now != art.fingerprint:
            if kind == "target":
                out.append(_f("STALE_DRAFT", "error", f"target folder {art.source} changed since {art.ref} was "
                              f"registered; {draft.ref} was trained against the registered weights",
                              f"register the new weights as a new version of {art.name} and retrain the draft",
                              registered=art.fingerprint, on_disk=now))
            else:
                out.append(_f("DRAFT_CHANGED", "warning", f"draft folder {art.source} changed since {art.ref} "
                              "was registered", f"register it as a new version of {art.name}"))
    return out


def _method_findings(draft: DraftPublic, method: str, vllm_version: str) -> list[Finding]:
    from specops.capabilities import default_table

    out = []
    if method != draft.method and not (draft.method == "eagle3" and method == "eagle3"):
        out.append(_f("METHOD_MISMATCH", "error", f"{draft.ref} is a {draft.method} draft, not {method}",
                      f"use --method {draft.method} or a {method} draft"))
    table = default_table()
    if not table.has("method", method, vllm_version):
        row = table.lookup("method", method)
        span = row.span() if row else "no release"
        out.append(_f("METHOD_UNSUPPORTED", "error", f"method {method} is not in vLLM {vllm_version} (present in {span})",
                      f"choose a vLLM release in {span} or another method"))
    else:
        runnable, why = table.runnable_method(method, vllm_version)
        if not runnable:
            out.append(_f("METHOD_UNSUPPORTED", "error", f"vLLM {vllm_version} cannot run {method}: {why}",
                          "choose another vLLM release or method"))
    return out


def _verifier_findings(target: TargetPublic, draft: DraftPublic) -> list[Finding]:
    verifier = (draft.facts or {}).get("verifier")
    if not verifier:
        return []
    if verifier.startswith(("/", ".", "~")) and not Path(verifier).expanduser().exists():
        return [_f("VERIFIER_UNRESOLVABLE", "warning", f"draft config names verifier path {verifier}, which does "
                   "not exist here (speculators#1065: auto-detection fails)",
                   "specops passes --model and an explicit --speculative-config; set speculators_config.verifier."
                   "name_or_path to a hub id to serve it with plain `vllm serve`")]
    names = {target.name, target.source, Path(target.source).name}
    if verifier not in names and Path(verifier).name not in names:
        return [_f("VERIFIER_DIFFERS", "warning", f"draft config names verifier {verifier}, not {target.ref}",
                   "check that the draft was trained against this target")]
    return []


def judge(target: TargetPublic, draft: DraftPublic, trained: TargetPublic, *, method: str | None,
          vllm_version: str, recheck_disk: bool = True) -> LineageReport:
    method = method or draft.method
    findings = _method_findings(draft, method, vllm_version)
    if draft.method not in WEIGHTLESS_METHODS:
        findings += _lineage_findings(target, draft, trained)
    if recheck_disk:
        findings += _disk_findings(target, draft)
    findings += structural_findings(target, draft, method)
    findings += _verifier_findings(target, draft)
    for art in (target, draft):
        if art.source_kind == "hub" and not art.fingerprint:
            findings.append(_f("UNVERIFIABLE", "warning", f"{art.ref} is a hub id without a revision: its weights "
                               "cannot be compared", f"re-register it as {art.source}@<commit>"))
    eagle = (draft.facts or {}).get("eagle") or {}
    if draft.eagle_generation == "3.1":
        findings.append(_f("EAGLE_3_1", "info", f"{draft.ref} is an EAGLE-3.1 head ({eagle.get('generation_reason') or 'fc_norm'}); "
                           "serve it with method eagle3"))
    elif draft.method == "eagle3" and draft.eagle_generation is None:
        findings.append(_f("EAGLE_GENERATION_UNKNOWN", "info", f"{draft.ref}: EAGLE 3 or 3.1 cannot be told "
                           f"({eagle.get('generation_reason') or 'no markers recorded'})",
                           "record the trainer and its version with the draft (speculators writes speculators_version)"))
    if eagle.get("norm_mismatch"):
        findings.append(_f("EAGLE_NORM_MISMATCH", "warning", f"{draft.ref}: {eagle.get('generation_reason')}",
                           "retrain with SpecForge after PR #879 or with speculators, or measure acceptance before "
                           "trusting it"))
    order = {"error": 0, "warning": 1, "info": 2}
    findings.sort(key=lambda f: order[f.severity])
    return LineageReport(target=target.ref, draft=draft.ref, method=method, vllm_version=vllm_version,
                         findings=findings)
