"""sawtooth-memory's ``intent_planner``: not supported by chatfold.

Sawtooth's prompt intent planner. The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's prompt intent planner"

__all__ = ["PromptIntentPlan", "ledger_covers", "ledger_term_set", "plan_prompt"]

PromptIntentPlan = unsupported_class(__name__, "PromptIntentPlan", _FEATURE)
ledger_covers = unsupported_function(__name__, "ledger_covers", _FEATURE)
ledger_term_set = unsupported_function(__name__, "ledger_term_set", _FEATURE)
plan_prompt = unsupported_function(__name__, "plan_prompt", _FEATURE)
