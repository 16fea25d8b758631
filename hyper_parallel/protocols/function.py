"""``Function``: a plain callable as a node of the config tree.

Some settings are code, not data: a per-layer init rule, a trace post-processor. Wrapping the
callable as ``Function.Config(fn=...)`` lets it sit in a config tree like any other component
(``traverse`` finds it, an override can swap it) and ``build()`` gives a callable object.
``to_dict`` writes the callable's ``repr``: a Function is not serialisable.

This module imports no deep-learning framework.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from hyper_parallel.protocols.configurable import Configurable

R = TypeVar("R")


class Function(Configurable, Generic[R]):
    """A built ``Function`` calls ``config.fn`` with whatever it is called with."""

    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        fn: Callable[..., Any]
        """The callable to wrap (a function, a ``functools.partial``, a class, ...)."""

        def __post_init__(self) -> None:
            if not callable(self.fn):
                raise TypeError(
                    f"Function.Config.fn must be callable, got {type(self.fn).__qualname__} "
                    f"{self.fn!r}"
                )

    def __init__(self, config: Config) -> None:
        self.config = config

    def __call__(self, *args: Any, **kwargs: Any) -> R:
        return self.config.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config.fn!r})"


__all__ = ["Function"]
