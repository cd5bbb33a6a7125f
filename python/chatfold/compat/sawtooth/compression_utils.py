"""sawtooth-memory's ``compression_utils``: not supported by chatfold.

Sawtooth's JSON compression output parsing (chatfold's summaries are plain text). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's JSON compression output parsing (chatfold's summaries are plain text)"

__all__ = ["normalize_compression_result", "parse_compression_json", "prune_compression_input", "strip_markdown_fences"]

normalize_compression_result = unsupported_function(__name__, "normalize_compression_result", _FEATURE)
parse_compression_json = unsupported_function(__name__, "parse_compression_json", _FEATURE)
prune_compression_input = unsupported_function(__name__, "prune_compression_input", _FEATURE)
strip_markdown_fences = unsupported_function(__name__, "strip_markdown_fences", _FEATURE)
