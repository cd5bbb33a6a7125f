"""Names sawtooth-memory exports for features chatfold does not do: they
import (so a switched program's imports keep working) and raise
:class:`~.exceptions.NotSupportedError` naming the feature when used."""

from __future__ import annotations

from typing import Any, Callable, Type

from .exceptions import NotSupportedError


def unsupported_class(module: str, name: str, feature: str, detail: str = "") -> Type[Any]:
    """A class ``name`` whose construction raises ``NotSupportedError(feature)``."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise NotSupportedError(feature, detail)

    doc = f"sawtooth-memory's ``{name}``: {feature} is not supported by chatfold; constructing it raises NotSupportedError."
    return type(name, (), {"__init__": __init__, "__doc__": doc, "__module__": module})


def unsupported_function(module: str, name: str, feature: str, detail: str = "") -> Callable[..., Any]:
    """A function ``name`` whose call raises ``NotSupportedError(feature)``."""

    def stub(*args: Any, **kwargs: Any) -> Any:
        raise NotSupportedError(feature, detail)

    stub.__name__ = stub.__qualname__ = name
    stub.__module__ = module
    stub.__doc__ = f"sawtooth-memory's ``{name}``: {feature} is not supported by chatfold; calling it raises NotSupportedError."
    return stub

