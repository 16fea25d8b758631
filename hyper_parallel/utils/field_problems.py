"""What a configuration section's ``__post_init__`` reports: every problem, each with its field.

The legacy schema's sections (``hyper_parallel.trainer.config``) raise
:class:`ConfigValueError`; the YAML parser below them turns each :class:`FieldProblem` into a
``ConfigError`` with the dotted path and the file and line. Both need these two classes, and the
parser must not import the schema (the schema's ``parse_args`` calls the parser), so they live
here, framework-free.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class FieldProblem:
    """One problem a section's ``__post_init__`` found: the ``field``, what is wrong, and the
    other fields of the section the rule ``reads`` (a cross-field rule is moot when one of those
    is wrong already)."""

    field: str
    message: str
    reads: tuple[str, ...] = ()


class ConfigValueError(ValueError):
    """Raised by a section's ``__post_init__``; ``problems`` holds every problem it found (at
    most one per field) and ``field`` names the first one's field."""

    def __init__(self, field_name: str, message: str, *, problems: Sequence[FieldProblem] = ()):
        self.problems = list(problems) or [FieldProblem(field_name, message)]
        self.field = self.problems[0].field
        super().__init__("\n".join(f"{p.field}: {p.message}" for p in self.problems))


__all__ = ["ConfigValueError", "FieldProblem"]
