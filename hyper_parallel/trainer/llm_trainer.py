"""``LLMTrainer(args)``: the legacy front door of the engine.

``LLMTrainer(args).train()`` trains what a legacy ``HyperTrainerConfig`` (``model`` / ``data`` /
``train``, from ``parse_args``) describes, as it always did -- by converting ``args`` with the
generated adapter (``legacy_to_trainer_config``) and training the result with
:class:`~hyper_parallel.trainer.hyper_trainer.HyperTrainer`. There is no second trainer: a YAML
and its converted recipe are the same run, and their checkpoints are interchangeable.

``trainer.args`` keeps the legacy config for user code and callbacks that read it;
``trainer.config`` is the ``HyperTrainer.Config`` the engine runs.

**Errors speak the legacy schema.** The engine and its components name the recipe fields they
check (``parallelism.tensor_parallel_degree``, ``training.global_batch_size``, ...). A
:class:`~hyper_parallel.trainer.config.ConfigError` raised while the engine is built (or trains) is
rewritten here, and only here, by :func:`legacy_config_error`: its ``path`` and every recipe
field its message names become the legacy keys the field table maps them from
(``train.accelerator.tp``, ``train.global_batch_size``), with a ``(recipe field: ...)`` hint.
"""

from __future__ import annotations

import contextlib
import functools
import re

from hyper_parallel.config.legacy_adapter import FIELD_MAP, FieldMapping, legacy_to_trainer_config
from hyper_parallel.config.transforms import VALUE_PRESERVING_FORWARDS
from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

#: A dotted lower-case name (``training.global_batch_size``) not inside a longer dotted name.
_DOTTED = re.compile(r"(?<![\w.])[a-z_]\w*(?:\.[a-z_]\w*)+")


@functools.cache
def _rows_by_new_path() -> dict[str, FieldMapping]:
    """New-tree path -> the field-table row mapping it from legacy fields (rows with both)."""
    return {new: row for row in FIELD_MAP if row.legacy and row.new for new in row.new}


def _same_value_key(row: FieldMapping, new: str) -> str | None:
    """The legacy key holding the very value of ``new`` (one of the row's new fields), or None
    when the row computes that value from its legacy fields."""
    if row.kind == "rename":
        return row.legacy[0]
    forward = row.detail.split("/", 1)[0].strip()
    where = VALUE_PRESERVING_FORWARDS.get(forward) if row.kind == "transform" else None
    return None if where is None else row.legacy[0] + where[row.new.index(new)]


def _lookup(path: str) -> tuple[FieldMapping, str, str] | None:
    """The row owning ``path`` or its longest owned prefix, with that owned field and the rest
    (``.flavor`` of ``model.config_overrides.flavor``)."""
    rows = _rows_by_new_path()
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        owned = ".".join(parts[:cut])
        row = rows.get(owned)
        if row is not None:
            rest = ".".join(parts[cut:])
            return row, owned, f".{rest}" if rest else ""
    return None


def legacy_path(path: str) -> str | None:
    """The legacy key(s) a recipe field comes from (``parallelism.tensor_parallel_degree`` ->
    ``train.accelerator.tp``; several, comma-separated, when a transform reads several); None
    when no legacy field maps to it (``hf_assets_path``) or ``path`` is not a recipe field."""
    found = _legacy_keys(path)
    return None if found is None else found[0]


def _legacy_keys(path: str) -> tuple[str, bool] | None:
    """``(legacy key(s), whether they hold the very value of path)`` of a recipe field."""
    found = _lookup(path)
    if found is None:
        return None
    row, owned, rest = found
    key = _same_value_key(row, owned)
    if key is not None:
        return key + rest, True
    return ", ".join(row.legacy), False


def _legacy_name(match: re.Match) -> str:
    name = match.group(0)
    found = _legacy_keys(name)
    if found is None:
        return name
    legacy, same = found
    # Another value (a warmup ratio, not steps): keep the recipe name, say where it comes from.
    return legacy if same else f"{name} (from {legacy})"


def legacy_config_error(error: ConfigError) -> ConfigError:
    """``error`` as a legacy user reads it: its ``path`` and every recipe field named in its
    message rewritten to the legacy key (see the module docstring); ``error`` itself when it
    names no recipe field that has a legacy key. The one place this translation is done."""
    message = _DOTTED.sub(_legacy_name, error.message)
    path = error.path
    hint = ""
    if path:
        legacy = legacy_path(path)
        if legacy is not None and legacy != path:
            hint = f" (recipe field: {path})"
            path = legacy
    if message == error.message and path == error.path:
        return error
    return ConfigError(message + hint, path=path, location=error.location)


@contextlib.contextmanager
def _in_legacy_names():
    """A ``ConfigError`` raised inside, rewritten in the legacy schema's names."""
    try:
        yield
    except ConfigError as exc:
        translated = legacy_config_error(exc)
        if translated is exc:
            raise
        raise translated.with_traceback(exc.__traceback__) from None


class LLMTrainer(HyperTrainer):
    """Causal language-model training from a legacy ``HyperTrainerConfig``."""

    def __init__(self, args: HyperTrainerConfig):
        if not isinstance(args, HyperTrainerConfig):
            raise TypeError(
                f"LLMTrainer(args) expects the legacy HyperTrainerConfig (from parse_args), got "
                f"{type(args).__qualname__}; build a HyperTrainer.Config with config.build()"
            )
        self.args = args
        # The adapter's own errors already name the legacy fields.
        config = legacy_to_trainer_config(args)
        with _in_legacy_names():
            super().__init__(config)

    def train(self):
        """The engine's loop; a ``ConfigError`` found while training (a streamed record of the
        wrong kind, say) speaks the legacy schema too."""
        with _in_legacy_names():
            return super().train()

    def field_name(self, path: str) -> str:
        """``path`` as the YAML's key (``architecture.*`` and fields with no legacy key keep
        their engine names)."""
        legacy = legacy_path(path)
        return path if legacy is None else f"{legacy} ({path})"


__all__ = ["LLMTrainer", "legacy_config_error", "legacy_path"]
