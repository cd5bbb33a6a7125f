"""sawtooth-memory's ``storage.postgres_adapter``: not supported by chatfold.

The Postgres + pgvector storage backend. The names import, so a switched
program's imports keep working; using one raises
:class:`~chatfold.compat.sawtooth.exceptions.NotSupportedError`.
"""

from .._unsupported import unsupported_class, unsupported_function

_FEATURE = "the Postgres + pgvector storage backend"

__all__ = ["PostgresStorageAdapter"]

PostgresStorageAdapter = unsupported_class(__name__, "PostgresStorageAdapter", _FEATURE)
