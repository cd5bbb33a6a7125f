"""sawtooth-memory's ``observation_crush``: not supported by chatfold.

Sawtooth's observation crush. The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from ._unsupported import unsupported_class, unsupported_function

_FEATURE = "sawtooth's observation crush"

__all__ = ["ObservationCrushResult", "crush_observation"]

ObservationCrushResult = unsupported_class(__name__, "ObservationCrushResult", _FEATURE)
crush_observation = unsupported_function(__name__, "crush_observation", _FEATURE)
