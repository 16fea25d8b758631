"""The rules every legacy section's ``__post_init__`` is written with, and the fixed value lists
the legacy schema shares.

A section decorated with :func:`validated` collects every problem its checks (:func:`require`,
:func:`one_of`, :func:`at_least`, :func:`at_most`) find and raises one
:class:`~hyper_parallel.utils.field_problems.ConfigValueError` with all of them: a field keeps
its first problem, and a cross-field rule reading a field that is already wrong is skipped.
Every number must be finite and every integer at most :data:`MAX_INT` (:func:`check_numbers`).

Framework-free, like the schema built on it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

from hyper_parallel.utils.choices import AC_MODES, DECAY_STYLES
from hyper_parallel.utils.field_problems import ConfigValueError, FieldProblem
from hyper_parallel.utils.numbers import MAX_INT
from hyper_parallel.utils.suggest import did_you_mean

ACTIVATION_CHECKPOINT_MODES = AC_MODES
LR_DECAY_STYLES = DECAY_STYLES
BACKENDS = ("torch", "mindspore")
INIT_DEVICES = ("meta", "cpu", "cuda", "npu")
COMM_BACKENDS = ("gloo", "nccl", "hccl", "mpi", "ucc")


MAX_TIMEOUT_SECONDS = 604800
"""The longest collective timeout (a week), as the new tree's ``comm`` section allows."""


_collecting = threading.local()


def validated(post_init: Callable[[Any], None]) -> Callable[[Any], None]:
    """Run a ``__post_init__`` whose checks collect their problems instead of stopping at the
    first; raise one :class:`ConfigValueError` with all of them. A field keeps its first
    problem only, and a cross-field rule that reads a field already wrong is skipped."""

    @functools.wraps(post_init)
    def run(self: Any) -> None:
        stack = _collecting.__dict__.setdefault("stack", [])
        found: list[FieldProblem] = []
        stack.append(found)
        try:
            check_numbers(self)
            post_init(self)
        finally:
            stack.pop()
        kept: list[FieldProblem] = []
        wrong: set[str] = set()
        for problem in found:
            if problem.field in wrong or wrong.intersection(problem.reads):
                continue
            kept.append(problem)
            wrong.add(problem.field)
        if kept:
            raise ConfigValueError(kept[0].field, kept[0].message, problems=kept)

    return run


def require(
    condition: bool, field_name: str, message: str, *, reads: Sequence[str] = ()
) -> None:
    """A rule of ``field_name``; ``reads`` names the other fields a cross-field rule uses."""
    if condition:
        return
    problem = FieldProblem(field_name, message, tuple(reads))
    stack = getattr(_collecting, "stack", None)
    if not stack:  # called outside a __post_init__
        raise ConfigValueError(field_name, message, problems=[problem])
    stack[-1].append(problem)


def check_numbers(section: Any) -> None:
    """Every number of ``section`` is finite and every integer at most :data:`MAX_INT` (also in
    lists and tuples; mappings are the model's, checked by the parser)."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, bool):
                continue
            if isinstance(item, float) and not math.isfinite(item):
                shown = f"{value!r}" if item is value else f"{list(value)!r}"
                require(False, f.name, f"must be a finite number, got {shown}")
            elif isinstance(item, int) and abs(item) > MAX_INT:
                require(False, f.name, f"must be <= {MAX_INT} (2**53 - 1) in magnitude, got "
                         f"{item}; it is far beyond any real run")


def cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def one_of(value: Any, choices: Sequence[Any], field_name: str) -> None:
    if value in choices:
        return  # (the message, with its did-you-mean, only for a wrong value)
    require(
        False,
        field_name,
        f"{cut(repr(value))} is not allowed{did_you_mean(str(value), map(str, choices))}; "
        f"choose one of: {', '.join(map(str, choices))}",
    )


def at_least(value: Any, minimum: float, field_name: str) -> None:
    require(value >= minimum, field_name, f"must be >= {minimum}, got {value!r}")


def at_most(value: Any, maximum: float, field_name: str) -> None:
    require(value <= maximum, field_name, f"must be <= {maximum}, got {value!r}")
