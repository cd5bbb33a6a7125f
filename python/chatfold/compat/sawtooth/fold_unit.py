"""sawtooth-memory's ``fold_unit``: not supported by chatfold.

Sawtooth's DTE fold stubs (chatfold folds in its Rust core). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's DTE fold stubs (chatfold folds in its Rust core)"

__all__ = ["FoldUnit", "create_fold_unit", "fold_lines", "remove_fold_lines"]

FoldUnit = unsupported_class(__name__, "FoldUnit", _FEATURE)
create_fold_unit = unsupported_function(__name__, "create_fold_unit", _FEATURE)
fold_lines = unsupported_function(__name__, "fold_lines", _FEATURE)
remove_fold_lines = unsupported_function(__name__, "remove_fold_lines", _FEATURE)
