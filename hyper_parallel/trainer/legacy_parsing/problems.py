"""Error collection: where every value came from, and every problem found so far.

The parser reports all of a file's problems at once: each one is recorded in a
:class:`_Context` with the dotted path it concerns, located at ``file:line`` (or at the
command-line override that wrote it), and :meth:`_Context.raise_errors` raises them together as
one :class:`~hyper_parallel.utils.errors.ConfigError`, in the order of the file and then of the
command line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hyper_parallel.utils.errors import ConfigError


class _Context:
    """Where values came from, for error messages, and the problems found so far."""

    def __init__(self, source: str):
        self.source = source
        self.lines: dict[tuple, int] = {}
        self.cli: dict[tuple, str] = {}
        self.errors: list[ConfigError] = []

    def locate(self, path: tuple) -> str:
        if path not in self.lines:
            # A key that only the command line created (``--train.optimiser.lr=1``).
            for cli_path, written in self.cli.items():
                if cli_path[: len(path)] == path:
                    return f"command line ({written})"
        for end in range(len(path), 0, -1):
            prefix = path[:end]
            if prefix in self.cli:
                return f"command line ({self.cli[prefix]})"
            if prefix in self.lines:
                return f"{self.source}:{self.lines[prefix]}"
        return self.source

    def add(self, message: str, path: tuple | None = None, location: str | None = None) -> None:
        """Record a problem at ``path`` (located from it unless ``location`` is given)."""
        if location is None:
            location = self.locate(path or ())
        self.errors.append(
            ConfigError(message, path=_dotted(path) if path else None, location=location)
        )

    def _order(self, error: ConfigError) -> tuple[int, int]:
        location = error.location or ""
        if location == self.source:
            return (0, 0)
        head = f"{self.source}:"
        if location.startswith(head) and location[len(head):].isdigit():
            return (0, int(location[len(head):]))
        if location.startswith("command line ("):
            # In the order the overrides were written.
            written = location[len("command line ("):-1]
            order = list(self.cli.values())
            return (1, order.index(written) + 1 if written in order else 0)
        return (1, 0) if location == "command line" else (2, 0)

    def raise_errors(self) -> None:
        """Raise every recorded problem as one :class:`ConfigError` (in the file's order)."""
        if self.errors:
            ordered = sorted(self.errors, key=self._order)  # stable: ties keep their order
            raise ConfigError.combine(ordered, self.source)


def _dotted(path: Sequence[Any]) -> str:
    return ".".join(str(p) for p in path)


def _shown(value: Any, limit: int = 200) -> str:
    """``repr(value)``, cut to ``limit`` characters (a message quotes the value, not a file)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
