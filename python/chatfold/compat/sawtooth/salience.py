"""sawtooth-memory's ``salience``: not supported by chatfold.

Sawtooth's salience extractor. The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's salience extractor"

__all__ = ["SalienceConfig", "SalienceEntityExtractor", "score_candidate"]

SalienceConfig = unsupported_class(__name__, "SalienceConfig", _FEATURE)
SalienceEntityExtractor = unsupported_class(__name__, "SalienceEntityExtractor", _FEATURE)
score_candidate = unsupported_function(__name__, "score_candidate", _FEATURE)
