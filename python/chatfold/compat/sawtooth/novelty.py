"""sawtooth-memory's ``novelty``: not supported by chatfold.

Sawtooth's novelty filter. The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's novelty filter"

__all__ = ["NoveltyResult", "residualize"]

NoveltyResult = unsupported_class(__name__, "NoveltyResult", _FEATURE)
residualize = unsupported_function(__name__, "residualize", _FEATURE)
