"""Heal: the closed loop for a local deployment whose draft went stale — retrain, validate, canary,
promote or roll back, every step recorded in the registry. See docs/heal.md.

Importing this package loads neither torch nor vLLM."""

from specops.heal.canary import canary_local, measure_engine
from specops.heal.promote import promote_local, rollback_local
from specops.heal.run import heal, resolve_live_target
from specops.heal.types import CanaryResult, EngineAcceptance, HealOutcome, HealStep

__all__ = ["CanaryResult", "EngineAcceptance", "HealOutcome", "HealStep", "canary_local", "heal", "measure_engine",
           "promote_local", "resolve_live_target", "rollback_local"]
