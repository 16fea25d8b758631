"""Building the dataclass tree from the raw YAML mapping, strictly.

Every key must be a field of its section (the old flat top-level keys get their migration hint,
any other unknown key a did-you-mean); every value is coerced by its declared type; a key the new
configuration cannot express (an ``unsupported`` row of the field table) must hold its default
(:mod:`.unsupported`); then the section's own ``__post_init__`` runs, and each :class:`~hyper_parallel.utils.field_problems.
FieldProblem` it reports becomes a problem of the dotted path. Nothing is dropped: one bad value
leaves its section unbuilt and every problem is reported at the end.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable
from typing import Any

from hyper_parallel.utils.field_problems import ConfigValueError
from hyper_parallel.utils.suggest import closest
from hyper_parallel.utils.yaml_lines import INVALID, holds_invalid

from .coerce import _coerce, _Mismatch, describe_type
from .model_name import check_model
from .problems import _Context, _dotted, _shown
from .unsupported import check_unsupported

#: Top-level keys of the pre-``model/data/train`` layout -> where they live now.
LEGACY_TOP_LEVEL_HINTS = {
    "parallel": "train.accelerator",
    "optim": "train.optimizer",
    "mixed_precision": "train.mixed_precision",
    "memory": "train.gradient_checkpointing",
    "checkpoint": "train.checkpoint",
    "logging": "train.logging",
    "tensorboard": "train.tensorboard",
    "wandb": "train.wandb (not supported by hyper_parallel; remove it)",
    "profiler": "train.profile",
    "memory_monitor": "train.memory_monitor",
    "moe_monitor": "train.moe_monitor (not supported by hyper_parallel; remove it)",
    "eval": "train.eval",
    "runtime": "train (flatten init_device / backend / comm_backend into train)",
    "debug": "train.debug",
    "seed": "train.seed",
}

#: Keys that exist but must not be written by users, with the reason.
RESERVED_KEYS = {
    ("train", "local_rank"): "it is set by the launcher through the LOCAL_RANK environment variable",
    ("train_steps",): "it is computed from train.max_steps; set train.max_steps instead",
}


#: Checks of a section's values beyond their types, before the section is built, by the dotted
#: path of the section (``check(section_class, kwargs, bad_fields, path, ctx)``).
SECTION_CHECKS: dict[tuple, Callable[[type, dict, set, tuple, _Context], None]] = {
    ("model",): check_model,
}


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """``typing.get_type_hints(cls)``, once per class (the schema's annotations are strings)."""
    return typing.get_type_hints(cls)


def _all_field_paths(cls: type, prefix: tuple = ()) -> list[tuple]:
    paths = []
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        paths.append(prefix + (f.name,))
        if dataclasses.is_dataclass(tp):
            paths.extend(_all_field_paths(tp, prefix + (f.name,)))
    return paths


def _unknown_key_message(root: type, cls: type, key: Any, path: tuple) -> str:
    names = [f.name for f in dataclasses.fields(cls) if path + (f.name,) not in RESERVED_KEYS]
    full = path + (key,)
    if not path and key in LEGACY_TOP_LEVEL_HINTS:
        return (
            f"the flat top-level key {key!r} is from the old layout; it moved to "
            f"{LEGACY_TOP_LEVEL_HINTS[key]}. Top-level keys are exactly: {', '.join(names)}"
        )
    hint = f"unknown key {str(key)!r} in {_dotted(path) or 'the top level'}"
    local = closest(str(key), names)
    elsewhere = [p for p in _all_field_paths(root) if p[-1] == key and p != full]
    if local:
        hint += f" (did you mean {_dotted(path + (local,))!r}?)"
    elif elsewhere:
        hint += f" (did you mean {_dotted(elsewhere[0])!r}?)"
    return hint + f". Valid keys here: {', '.join(names)}"


def _build(root: type, cls: type, raw: Any, path: tuple, ctx: _Context) -> Any:
    """``cls`` from ``raw``; every problem goes to ``ctx`` (None when there was one: the caller
    then uses the default, and the problems are raised at the end)."""
    if raw is None:
        raw = {}
    if raw is INVALID:
        return None  # reported by the YAML loader
    if not isinstance(raw, dict):
        where = _dotted(path) or "the document"
        ctx.add(
            f"{where} must be a mapping of {cls.__name__} fields, got {type(raw).__name__} "
            f"{_shown(raw)}",
            path or None,
            location=ctx.locate(path),
        )
        return None
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    bad: set[str] = set()
    before = len(ctx.errors)
    for key, value in raw.items():
        key_path = path + (key,)
        if key_path in RESERVED_KEYS:
            ctx.add(f"must not be set: {RESERVED_KEYS[key_path]}", key_path)
            continue
        if key not in names:
            ctx.add(_unknown_key_message(root, cls, key, path), key_path)
            continue
        if holds_invalid(value):
            bad.add(key)  # reported by the YAML loader
            continue
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            section = _build(root, tp, value, key_path, ctx)
            if section is None:
                bad.add(key)
            else:
                kwargs[key] = section
            continue
        try:
            kwargs[key] = _coerce(value, tp)
        except _Mismatch as exc:
            reason = f" ({exc.reason})" if exc.reason else ""
            ctx.add(
                f"expected {describe_type(tp)}, got {type(value).__name__} {_shown(value)}"
                f"{reason}",
                key_path,
            )
            bad.add(key)
    check_unsupported(cls, kwargs, bad, path, ctx)
    check = SECTION_CHECKS.get(path)
    if check is not None:
        check(cls, kwargs, bad, path, ctx)
    try:
        built = cls(**kwargs)
    except ConfigValueError as exc:
        for problem in exc.problems:
            if problem.field in bad or bad.intersection(problem.reads):
                continue  # the field's own problem is reported; a rule reading it is moot
            ctx.add(problem.message, path + (problem.field,))
        return None
    return None if len(ctx.errors) > before else built
