"""``ConfigError``: the one exception type for a configuration a user must fix; and
``ConfigFieldError``, what a config class's own field check raises.

Framework-free and schema-free, so every layer (the legacy parser, the generated configs, the
engine, the models and the components) raises the same type without importing a schema; the
entry points turn it into one message and exit status 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["ConfigError", "ConfigFieldError"]


class ConfigError(ValueError):
    """A configuration problem a user must fix: unknown key, wrong type or invalid value.

    ``path`` is the dotted field path (``train.optimizer.lr``) when known and ``location`` where
    the value came from (``old.yaml:12`` or ``command line``). ``str(error)`` is the whole
    message, ready to print.
    """

    def __init__(self, message: str, *, path: str | None = None, location: str | None = None):
        self.path = path
        self.location = location
        self.message = message
        self.problems: list[ConfigError] = [self]
        """Every problem this error reports (itself, or those of :meth:`combine`)."""
        prefix = ""
        if location:
            prefix += f"{location}: "
        if path:
            prefix += f"{path}: "
        super().__init__(prefix + message)

    def __reduce__(self) -> tuple:
        # Pickled whole (a preflight in a process of its own returns one): the default would
        # rebuild it from the printed message alone, without the path an entry renames.
        problems = None if self.problems == [self] else self.problems
        return _restore, (type(self), self.message, self.path, self.location, problems)

    @classmethod
    def combine(cls, errors: Sequence[ConfigError], source: str) -> ConfigError:
        """One error reporting ``errors`` (not empty): the error itself when there is one, else
        ``N problems in <source>:`` and one line per problem; ``problems`` lists them."""
        flat = [p for e in errors for p in e.problems]
        if len(flat) == 1:
            return flat[0]
        combined = cls(f"{len(flat)} problems in {source}:\n" + "\n".join(f"- {e}" for e in flat))
        combined.problems = flat
        return combined


def _restore(cls: type[ConfigError], message: str, path: str | None, location: str | None,
             problems: list[ConfigError] | None) -> ConfigError:
    error = cls.__new__(cls)
    ConfigError.__init__(error, message, path=path, location=location)
    if problems is not None:
        error.problems = problems
    return error


class ConfigFieldError(ValueError):
    """A config field holds an invalid value: raised by the ``__post_init__`` checks of the
    generated sections and of the component Configs. ``owner`` (the class's qualified name),
    ``field``, ``value`` and ``reason`` say which and why, so that a caller names the field --
    a command-line flag, the legacy key it came from -- without reading the message; the message
    is ``<owner>.<field>=<value>: <reason>``."""

    def __init__(self, owner: str, field_name: str, value: Any, message: str) -> None:
        self.owner = owner
        self.field = field_name
        self.value = value
        self.reason = message
        super().__init__(f"{owner}.{field_name}={value!r}: {message}")
