"""sawtooth-memory's ``entity_guard``: not supported by chatfold.

Sawtooth's entity guard (chatfold's ledger is kept by its core). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's entity guard (chatfold's ledger is kept by its core)"

__all__ = ["apply_entity_guard", "build_compression_user_content", "build_protected_entities", "build_strategy_map", "format_protection_manifest", "secure_merge_entities", "verify_protected_entities"]

apply_entity_guard = unsupported_function(__name__, "apply_entity_guard", _FEATURE)
build_compression_user_content = unsupported_function(__name__, "build_compression_user_content", _FEATURE)
build_protected_entities = unsupported_function(__name__, "build_protected_entities", _FEATURE)
build_strategy_map = unsupported_function(__name__, "build_strategy_map", _FEATURE)
format_protection_manifest = unsupported_function(__name__, "format_protection_manifest", _FEATURE)
secure_merge_entities = unsupported_function(__name__, "secure_merge_entities", _FEATURE)
verify_protected_entities = unsupported_function(__name__, "verify_protected_entities", _FEATURE)
