"""sawtooth-memory's ``prompt_compiler``: not supported by chatfold.

Sawtooth's prompt compiler over its MemoryState (build_prompt() compiles chatfold's prompt). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's prompt compiler over its MemoryState (build_prompt() compiles chatfold's prompt)"

__all__ = ["PromptCompileResult", "compile_prompt", "format_l3_retrieval_block", "resolve_l3_retrieval_query"]

PromptCompileResult = unsupported_class(__name__, "PromptCompileResult", _FEATURE)
compile_prompt = unsupported_function(__name__, "compile_prompt", _FEATURE)
format_l3_retrieval_block = unsupported_function(__name__, "format_l3_retrieval_block", _FEATURE)
resolve_l3_retrieval_query = unsupported_function(__name__, "resolve_l3_retrieval_query", _FEATURE)
