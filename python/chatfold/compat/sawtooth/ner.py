"""sawtooth-memory's ``ner``: not supported by chatfold.

Sawtooth's regex NER pipeline (chatfold's core keeps the exact-identifier ledger). The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's regex NER pipeline (chatfold's core keeps the exact-identifier ledger)"

__all__ = ["DeterministicExtractor", "ExtractionResult", "NERPipeline", "RegexEntityExtractor"]

DeterministicExtractor = unsupported_class(__name__, "DeterministicExtractor", _FEATURE)
ExtractionResult = unsupported_class(__name__, "ExtractionResult", _FEATURE)
NERPipeline = unsupported_class(__name__, "NERPipeline", _FEATURE)
RegexEntityExtractor = unsupported_class(__name__, "RegexEntityExtractor", _FEATURE)
