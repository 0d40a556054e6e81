"""Data types of the retraining capability: what a backend produced, what was measured, what was decided."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from specops.models import Strict

BackendName = Literal["local", "speculators", "specforge"]
BACKENDS: tuple[str, ...] = get_args(BackendName)
"""The retraining backends, in the order `specops retrain --help` names them."""


_Model = Strict


class DraftAcceptance(_Model):
    """Speculative acceptance of one draft against one target, measured in-process (greedy, exact)."""

    acceptance_rate: float = Field(ge=0, le=1, description="Accepted draft tokens / drafted tokens.")
    mean_acceptance_length: float = Field(ge=1, description="1 + accepted / verify steps (tokens per target step).")
    per_position: list[float] = Field(description="Fraction of verify steps whose position i was accepted.")
    num_drafts: int = Field(ge=0, description="Verify steps.")
    num_draft_tokens: int = Field(ge=0, description="Drafted tokens.")
    num_accepted_tokens: int = Field(ge=0, description="Accepted tokens.")
    num_prompts: int = Field(ge=0, description="Prompts measured.")
    gamma: int = Field(ge=1, description="Draft tokens per verify step (num_speculative_tokens).")
    max_new_tokens: int = Field(ge=1, description="Tokens generated per prompt.")


class Comparison(_Model):
    """Incumbent and candidate drafts measured sequentially on the same prompts against the same target."""

    target: str = Field(description="Target folder measured against.")
    incumbent: str | None = Field(description="Incumbent draft folder (None: no incumbent).")
    candidate: str = Field(description="Candidate draft folder.")
    prompts_sha256: str = Field(description="sha256 of the prompts, so two comparisons can be matched.")
    incumbent_acceptance: DraftAcceptance | None = Field(description="Incumbent's acceptance (None: no incumbent).")
    candidate_acceptance: DraftAcceptance = Field(description="Candidate's acceptance.")
    min_gain: float = Field(default=0.0, description="Required acceptance-rate gain over the incumbent.")
    floor: float = Field(default=0.0, ge=0, le=1, description="Acceptance rate the candidate must reach anyway.")

    @property
    def gain(self) -> float | None:
        if self.incumbent_acceptance is None:
            return None
        return self.candidate_acceptance.acceptance_rate - self.incumbent_acceptance.acceptance_rate


class Decision(_Model):
    """promote or rollback, with the reason and the numbers behind it."""

    action: Literal["promote", "rollback"] = Field(description="promote the candidate, or keep the incumbent.")
    reason: str = Field(description="Why, for people and the event log.")
    candidate_rate: float = Field(description="Candidate acceptance rate.")
    incumbent_rate: float | None = Field(description="Incumbent acceptance rate (None: no incumbent).")


class TrainResult(_Model):
    """What a backend run produced (or, for a dry run, would run)."""

    backend: BackendName = Field(description="The backend that ran.")
    output_dir: str = Field(description="Folder holding the produced draft (Hugging Face layout).")
    commands: list[list[str]] = Field(description="The exact argv of every step, in order.")
    data_sha256: str = Field(description="sha256 of the training prompts/data.")
    trained_on: str = Field(description="Human description of the data (source and count).")
    packages: dict[str, str] = Field(default_factory=dict, description="Versions of the packages involved.")
    method: str = Field(description="Speculative method of the produced draft (draft_model, eagle3).")
    initialised_from: str | None = Field(default=None, description="Incumbent folder the weights started from.")
    metrics: dict = Field(default_factory=dict, description="Losses, step counts, seconds.")
    dry_run: bool = Field(default=False, description="Nothing was run; commands are what would run.")


def params_of(model: type, params: dict):
    """``retrain --params`` validated as a backend's parameter model; a wrong key or value is one line
    naming it (exit 2), never a pydantic traceback."""
    from specops.jsonfile import validate_json

    return validate_json(params, model, "--params", fix=f"use the {model.__name__} keys and ranges in docs/retrain.md")
