"""sawtooth-memory's ``providers.factory``: not supported by chatfold.

Sawtooth's provider adapters (chatfold's OpenAI-compatible and Anthropic summarizers run in Rust). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from .._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's provider adapters (chatfold's OpenAI-compatible and Anthropic summarizers run in Rust)"

__all__ = ["get_adapter"]

get_adapter = unsupported_function(__name__, "get_adapter", _FEATURE)
