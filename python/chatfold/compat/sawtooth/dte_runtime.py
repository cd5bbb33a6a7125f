"""sawtooth-memory's ``dte_runtime``: not supported by chatfold.

Sawtooth's DTE runtime (observation crush, consolidation, pools). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's DTE runtime (observation crush, consolidation, pools)"

__all__ = ["ConsolidationPrep", "account_main_prompt_tokens", "apply_fold_delta_to_pool", "apply_observation_crush", "merge_pool_into_state", "pool_content_fingerprint", "prepare_consolidation", "prompt_turn_key"]

ConsolidationPrep = unsupported_class(__name__, "ConsolidationPrep", _FEATURE)
account_main_prompt_tokens = unsupported_function(__name__, "account_main_prompt_tokens", _FEATURE)
apply_fold_delta_to_pool = unsupported_function(__name__, "apply_fold_delta_to_pool", _FEATURE)
apply_observation_crush = unsupported_function(__name__, "apply_observation_crush", _FEATURE)
merge_pool_into_state = unsupported_function(__name__, "merge_pool_into_state", _FEATURE)
pool_content_fingerprint = unsupported_function(__name__, "pool_content_fingerprint", _FEATURE)
prepare_consolidation = unsupported_function(__name__, "prepare_consolidation", _FEATURE)
prompt_turn_key = unsupported_function(__name__, "prompt_turn_key", _FEATURE)
