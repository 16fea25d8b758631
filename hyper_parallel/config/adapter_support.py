"""The fixed machinery of the generated legacy adapter (:mod:`hyper_parallel.config.legacy_adapter`).

The generated module states *what* maps to what -- ``FIELD_MAP``, the rows of
``codegen/field_table.yaml``, and one statement per row in each conversion. How a section is
built, how a failed validation names the legacy field, how an ``unsupported`` legacy value or a
``new_only`` value off its default is refused and how a canonical form is applied are the same
for every row; they live here, written once by hand, so that the generated module holds only the
table's facts.

Defaults are never restated: the value an ``unsupported`` legacy field or a ``new_only`` field
must hold is the default its dataclass declares (:func:`field_default`). The ``unsupported``
keys are refused by the legacy parser already, with every other problem of a file
(:mod:`hyper_parallel.trainer.legacy_parsing.unsupported`); the adapter refuses them of a config
built without it (``HyperTrainerConfig()`` edited in code) with the same function and words.

Framework-free: nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from hyper_parallel.trainer.config import ConfigValueError
from hyper_parallel.trainer.legacy_parsing.unsupported import field_default, unsupported_problems
from hyper_parallel.utils.errors import ConfigError

__all__ = [
    "FieldIndex",
    "FieldMapping",
    "Normalisation",
    "field_default",
    "legacy_section",
    "normalise",
    "require_classes",
]


class FieldMapping(NamedTuple):
    """One row of the field table."""

    legacy: tuple[str, ...]
    """Legacy dotted paths the row owns (empty for ``new_only``)."""
    new: tuple[str, ...]
    """New-tree dotted paths the row owns (empty for ``unsupported``)."""
    kind: str
    """``rename``, ``transform``, ``unsupported`` or ``new_only``."""
    line: int
    """Line of the row in ``codegen/field_table.yaml``."""
    detail: str
    """The transform functions (``forward / backward [/ canonical]``) or the reason."""


class Normalisation(NamedTuple):
    """A change ``canonicalize_legacy`` made: ``field`` went from ``old`` to ``new`` because
    ``why``."""

    field: str
    old: Any
    new: Any
    why: str


def _get(root: Any, path: str) -> Any:
    for part in path.split(".") if path else ():
        root = getattr(root, part)
    return root


def _set(root: Any, path: str, value: Any) -> None:
    parent, _, name = path.rpartition(".")
    setattr(_get(root, parent), name, value)


def _value_and_default(root: Any, path: str) -> tuple[Any, Any]:
    """The value at ``path`` under ``root`` and the default its dataclass declares for it."""
    parent_path, _, name = path.rpartition(".")
    parent = _get(root, parent_path)
    return getattr(parent, name), field_default(type(parent), name)


class FieldIndex:
    """The rows of the field table by path, and the checks the conversions make with them."""

    def __init__(self, rows: Iterable[FieldMapping], table: str):
        self.rows = tuple(rows)
        self.table = table
        self._owner = {path: row for row in self.rows for path in (*row.legacy, *row.new)}
        # New-tree path -> the legacy path(s) its value comes from (for error messages).
        self._legacy_source = {
            new: ", ".join(row.legacy) for row in self.rows if row.legacy for new in row.new
        }

    def owner(self, path: str) -> FieldMapping:
        """The row owning ``path`` (a legacy or a new-tree dotted path); ``KeyError`` if none."""
        try:
            return self._owner[path]
        except KeyError:
            raise KeyError(f"no row of {self.table} owns {path!r}") from None

    def reject_unsupported(self, legacy: Any) -> None:
        """Every key of an ``unsupported`` row set off its legacy default, in one error (the
        rows as the legacy parser reads them, generated from the same table rows)."""
        problems = unsupported_problems(legacy)
        if problems:
            raise ConfigError.combine(problems, "the configuration")

    def require_new_only_defaults(self, config: Any) -> None:
        """A ``new_only`` field converts to the legacy schema only at its default."""
        for row in self.rows:
            if row.kind != "new_only":
                continue
            (path,) = row.new
            value, default = _value_and_default(config, path)
            if value != default:
                raise ConfigError(
                    f"{value!r} has no legacy counterpart ({row.detail}); only the default "
                    f"{default!r} converts to the legacy schema",
                    path=path,
                )

    def new_section(self, cls: type, where: str, **values: Any) -> Any:
        """``cls(**values)`` for the new-tree section (or component Config) at ``where`` ("" for
        the root); a validation error names the legacy field the value came from."""
        try:
            return cls(**values)
        except (TypeError, ValueError) as exc:
            # Field checks raise ConfigFieldError, which names its field.
            name = getattr(exc, "field", None)
            new_path = f"{where}.{name}" if where and name else name or where
            raise ConfigError(
                f"cannot convert to the new configuration ({new_path}): {exc}",
                path=self._legacy_source.get(new_path or ""),
            ) from None

    def backward(self, fn: Callable[..., dict[str, Any]], new_path: str,
                 **values: Any) -> dict[str, Any]:
        """``fn(**values)``, the backward function of the row owning ``new_path``; a value it
        cannot express names the row's new-tree fields."""
        try:
            return fn(**values)
        except ValueError as exc:
            raise ConfigError(f"cannot convert to the legacy schema: {exc}",
                              path=", ".join(self.owner(new_path).new)) from None


def legacy_section(cls: type, where: str, **values: Any) -> Any:
    """``cls(**values)`` for the legacy section at ``where`` ("" for the root); a validation
    error names the legacy field."""
    try:
        return cls(**values)
    except ConfigValueError as exc:
        first, *rest = exc.problems
        message = "\n".join([first.message, *(f"{p.field}: {p.message}" for p in rest)])
        raise ConfigError(
            f"cannot convert to the legacy schema: {message}",
            path=f"{where}.{first.field}" if where else first.field,
        ) from None


def require_classes(config: Any, **classes: type) -> None:
    """Each named section of ``config`` is exactly the class the legacy schema can express."""
    for name, cls in classes.items():
        value = getattr(config, name)
        if type(value) is not cls:
            raise ConfigError(
                f"holds a {type(value).__qualname__}; the legacy schema can only express "
                f"{cls.__qualname__}",
                path=name,
            )


def normalise(canon: Any, notes: list[Normalisation],
              fn: Callable[..., dict[str, tuple[Any, str]]], owned: dict[str, str],
              reads: dict[str, str] | None = None) -> None:
    """Apply a row's canonical function to ``canon`` in place: ``owned`` and ``reads`` map its
    keyword names to legacy paths; it returns ``{name: (value, why)}`` for each owned field it
    rewrites, and each rewrite is noted."""
    values = {local: _get(canon, path) for local, path in {**owned, **(reads or {})}.items()}
    for local, (value, why) in fn(**values).items():
        path = owned[local]
        notes.append(Normalisation(path, _get(canon, path), value, why))
        _set(canon, path, value)
