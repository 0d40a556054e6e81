"""Retraining: pluggable backends (local, speculators, specforge), the lease-guarded driver, the
train-stage acceptance check, and the in-cluster monitor manifests. See docs/retrain.md.

Importing this package loads neither torch nor transformers."""

from specops.retrain.acceptance import compare_drafts, decide, measure_acceptance
from specops.retrain.driver import RetrainOutcome, retrain
from specops.retrain.types import Comparison, Decision, DraftAcceptance, TrainResult

__all__ = ["DraftAcceptance", "Comparison", "Decision", "RetrainOutcome", "TrainResult", "compare_drafts", "decide",
           "measure_acceptance", "retrain"]
