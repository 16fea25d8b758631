"""The legacy command line: ``old.yaml [--a.b.c=value | --a.b.c value ...]``.

Rules (each one is tested in ``tests/torch/ut/trainer/test_legacy_config.py`` and
``tests/torch/ut/config/test_bad_input_legacy.py``):

* The first positional argument is the YAML path; a missing file is an error, and so is an
  empty one (nothing, only comments, or a bare ``null``: write ``{}`` to run every default).
* The YAML is read by :mod:`hyper_parallel.utils.yaml_lines`: the YAML 1.2 core schema (``010``
  is ten, ``1_000`` and ``off`` are strings), merge keys, duplicate keys are errors, alias
  expansion is bounded. The top level must be a mapping.
* Overrides ``--a.b.c=value`` or ``--a.b.c value`` are applied over the YAML. Values are read as
  YAML (``[0.9,0.95]``, ``{num_hidden_layers: 4}``, ``null``) and then coerced by the field's
  declared type. Overrides inside a dict field (``--model.config_overrides.head_dim=64``) merge.
* Strict: an unknown key anywhere is a :class:`ConfigError` with the dotted path, the file and
  line, and a did-you-mean; the old flat top-level keys get their migration hint. A value of the
  wrong type is a :class:`ConfigError` naming the field, the expected type, the value and where it
  came from. So is a value the section refuses (its ``__post_init__``): non-finite numbers,
  integers beyond ``MAX_INT``, values outside a field's range or choices.
* ``model.config_overrides`` keys are the model config's fields (plus ``flavor``), read from the
  model's source without importing it (the model packages import torch): an unknown key, an
  unknown flavor or a value of the wrong type is an error with its line and a did-you-mean.
* Every problem is reported at once: one problem is one :class:`ConfigError`; several are one
  ``ConfigError`` saying ``N problems in old.yaml:`` with a line each (``problems`` lists them),
  in the order of the file, then the command line. A cross-field rule that reads a field that is
  wrong already is skipped. Nothing else escapes the parser.
* Booleans accept ``true/yes/y/on/1/t`` and ``false/no/n/off/0/f`` in any case.
* ``train.local_rank`` comes from the ``LOCAL_RANK`` environment variable.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
import os
import sys
import types
import typing
from pathlib import Path
from typing import Any, NamedTuple, Sequence

from hyper_parallel.trainer.config import (
    MAX_INT,
    ConfigError,
    ConfigValueError,
    HyperTrainerConfig,
    ModelConfig,
)
from hyper_parallel.utils.docstrings import field_docstrings
from hyper_parallel.utils.suggest import closest, did_you_mean
from hyper_parallel.utils.yaml_lines import (
    FLOAT_RE,
    INT_RE,
    INVALID,
    YamlSyntaxError,
    dump,
    holds_invalid,
    load_yaml_located,
    parse_scalar,
)

TRUE_WORDS = frozenset({"true", "yes", "y", "on", "1", "t"})
FALSE_WORDS = frozenset({"false", "no", "n", "off", "0", "f"})

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

USAGE = (
    "usage: {prog} CONFIG.yaml [--section.field=value | --section.field value ...]\n"
    "       {prog} --help      (list every field)"
)


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


# ---------------------------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------------------------


class _Mismatch(Exception):
    """A value does not fit a declared type (turned into a ConfigError by the caller);
    ``reason`` says why when the type alone does not."""

    def __init__(self, reason: str = ""):
        self.reason = reason
        super().__init__(reason)


def _is_optional(tp: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) != len(typing.get_args(tp)) and len(args) == 1:
            return True, args[0]
    return False, tp


def describe_type(tp: Any) -> str:
    """Human wording of a declared type (``int``, ``list of str``, ``float or null``)."""
    optional, inner = _is_optional(tp)
    if optional:
        return f"{describe_type(inner)} or null"
    origin = typing.get_origin(inner)
    if origin is list:
        (item,) = typing.get_args(inner) or (Any,)
        return f"list of {describe_type(item)}"
    if origin is tuple:
        return "[" + ", ".join(describe_type(a) for a in typing.get_args(inner)) + "]"
    if origin is dict:
        return "mapping"
    if inner is Any:
        return "any value"
    if dataclasses.is_dataclass(inner):
        return f"mapping ({inner.__name__})"
    return getattr(inner, "__name__", str(inner))


def _to_float(value: Any) -> float:
    """``value`` (an int, a float or a number spelled as a string) as a finite float."""
    if isinstance(value, bool):
        raise _Mismatch()
    if isinstance(value, (int, float)):
        try:
            result = float(value)
        except OverflowError:
            raise _Mismatch("too large for a float") from None
    elif isinstance(value, str):
        # A quoted number ("1e-4"), spelled as YAML 1.2 spells numbers.
        text = value.strip()
        if not FLOAT_RE.match(text) or text.lower().lstrip("+-") in (".inf", ".nan"):
            raise _Mismatch()
        result = float(text)
    else:
        raise _Mismatch()
    if not math.isfinite(result):
        raise _Mismatch("not a finite number")
    return result


def _coerce(value: Any, tp: Any) -> Any:
    optional, inner = _is_optional(tp)
    if value is None:
        if optional or inner is Any:
            return None
        raise _Mismatch()
    origin = typing.get_origin(inner)
    if inner is Any:
        return value
    if inner is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, (str, int)):
            word = str(value).strip().lower()
            if word in TRUE_WORDS:
                return True
            if word in FALSE_WORDS:
                return False
        raise _Mismatch()
    if inner is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and INT_RE.match(value.strip()):
            # A quoted integer ("8"), spelled as YAML 1.2 spells integers ("1_000" is not one).
            text = value.strip()
            try:
                if text[:2] in ("0o", "0x"):
                    return int(text[2:], 8 if text[1] == "o" else 16)
                return int(text)
            except ValueError:
                raise _Mismatch("too many digits") from None
        raise _Mismatch()
    if inner is float:
        return _to_float(value)
    if inner is str:
        if isinstance(value, str):
            return value
        raise _Mismatch()
    if origin is list:
        (item,) = typing.get_args(inner) or (Any,)
        if not isinstance(value, list):
            raise _Mismatch()
        return [_coerce(v, item) for v in value]
    if origin is tuple:
        item_types = typing.get_args(inner)
        if not isinstance(value, list) or len(value) != len(item_types):
            raise _Mismatch()
        return tuple(_coerce(v, t) for v, t in zip(value, item_types))
    if origin is dict:
        key_type, value_type = typing.get_args(inner) or (Any, Any)
        if not isinstance(value, dict):
            raise _Mismatch()
        out = {}
        for k, v in value.items():
            try:
                key = _coerce(k, key_type)
            except _Mismatch:
                raise _Mismatch(f"the key {k!r} is not a {describe_type(key_type)}") from None
            out[key] = _coerce(v, value_type)
        return out
    raise TypeError(f"the schema uses an unsupported type {tp!r}")  # a bug in the schema


# ---------------------------------------------------------------------------------------------
# model.config_overrides: the model config's fields, read from source
# ---------------------------------------------------------------------------------------------


class _ModelConfigSource(NamedTuple):
    file: str
    """The module under ``hyper_parallel/`` that defines the config class."""
    cls: str
    """The config dataclass whose fields ``model.config_overrides`` sets."""
    flavors: str
    """The module-level dict literal of named sizes (``flavor: <name>``)."""
    flavor_key: str = "flavor"


#: ``model.name`` -> where its model config is defined. The keys of ``model.config_overrides``
#: are checked against that class's fields, read with ``ast``: importing the model package
#: would import torch, and the legacy parser runs without it. A name not listed here (a custom
#: model module) is checked by its model when the run builds it.
MODEL_CONFIG_SOURCES: dict[str, _ModelConfigSource] = {
    "qwen3_5": _ModelConfigSource("models/qwen3_5/configuration.py", "Qwen3_5Config", "FLAVORS"),
    "qwen3_5_v2": _ModelConfigSource("models/qwen3_5/configuration.py", "Qwen3_5Config", "FLAVORS"),
}

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]


class ModelOverrideKeys(NamedTuple):
    """What ``model.config_overrides`` of one model accepts."""

    fields: dict[str, str]
    """Field name -> its annotation as written (``int``, ``list[str] | None``)."""
    flavors: tuple[str, ...] | None
    flavor_key: str


@functools.cache
def model_override_keys(name: str) -> ModelOverrideKeys | None:
    """The accepted ``model.config_overrides`` keys of model ``name`` (None: not known here)."""
    entry = MODEL_CONFIG_SOURCES.get(name)
    if entry is None:
        return None
    try:
        tree = ast.parse((_PACKAGE_ROOT / entry.file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    fields: dict[str, str] = {}
    flavors: tuple[str, ...] | None = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == entry.cls:
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    annotation = ast.unparse(stmt.annotation)
                    if "ClassVar" not in annotation:
                        fields[stmt.target.id] = annotation
        targets = (
            node.targets if isinstance(node, ast.Assign)
            else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        value = getattr(node, "value", None)
        if any(isinstance(t, ast.Name) and t.id == entry.flavors for t in targets) and isinstance(
            value, ast.Dict
        ):
            flavors = tuple(
                k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
            )
    if not fields:
        return None
    return ModelOverrideKeys(fields, flavors, entry.flavor_key)


def _split_union(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "|" and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    parts.append(current.strip())
    return parts


def _fits(value: Any, annotation: str) -> bool:
    """Whether ``value`` fits a simple annotation (``int``, ``float``, ``list[str] | None``);
    an annotation this reader does not know accepts anything."""
    members = _split_union(annotation)
    if len(members) > 1:
        return any(_fits(value, m) for m in members)
    text = members[0]
    if text.startswith("Optional[") and text.endswith("]"):
        return value is None or _fits(value, text[len("Optional["):-1])
    if text == "None":
        return value is None
    if text == "bool":
        return isinstance(value, bool)
    if text == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if text == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if text == "str":
        return isinstance(value, str)
    for head in ("list[", "tuple["):
        if text.startswith(head) and text.endswith("]"):
            item = text[len(head):-1]
            if head == "tuple[" and not item.endswith(", ..."):
                return isinstance(value, list)
            item = item.removesuffix(", ...")
            return isinstance(value, list) and all(_fits(v, item) for v in value)
    return True


def _number_problem(value: Any) -> str | None:
    """Why a value of ``model.config_overrides`` cannot train (non-finite, too large)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    if isinstance(value, int) and abs(value) > MAX_INT:
        return f"must be <= {MAX_INT} (2**53 - 1) in magnitude, got {value}"
    if isinstance(value, list):
        return next((p for p in map(_number_problem, value) if p), None)
    if isinstance(value, dict):
        return next((p for p in map(_number_problem, value.values()) if p), None)
    return None


def _check_config_overrides(kwargs: dict, bad: set, path: tuple, ctx: _Context) -> None:
    """``model.config_overrides`` against the model config of ``model.name``."""
    if "name" in bad or "config_overrides" in bad:
        return
    overrides = kwargs.get("config_overrides")
    name = kwargs.get("name", ModelConfig.name)
    schema = model_override_keys(name) if isinstance(name, str) else None
    if not overrides or schema is None:
        return
    valid = [*schema.fields, schema.flavor_key]
    where = path + ("config_overrides",)
    for key, value in overrides.items():
        key_path = where + (key,)
        if key == schema.flavor_key:
            if schema.flavors is not None and value not in schema.flavors:
                hint = did_you_mean(str(value), schema.flavors)
                ctx.add(
                    f"unknown flavor {_shown(value)}{hint} of model {name!r}; valid flavors: "
                    f"{', '.join(schema.flavors)}",
                    key_path,
                )
                bad.add("config_overrides")
            continue
        if key not in schema.fields:
            ctx.add(
                f"unknown key {key!r} in {_dotted(where)} of model {name!r}"
                f"{did_you_mean(str(key), valid)}. Valid keys: {', '.join(valid)}",
                key_path,
            )
            bad.add("config_overrides")
            continue
        annotation = schema.fields[key]
        if not _fits(value, annotation):
            ctx.add(f"expected {annotation}, got {type(value).__name__} {_shown(value)}",
                    key_path)
            bad.add("config_overrides")
            continue
        problem = _number_problem(value)
        if problem:
            ctx.add(problem, key_path)
            bad.add("config_overrides")


#: Checks of a section's values beyond their types, before the section is built.
_SECTION_CHECKS = {ModelConfig: _check_config_overrides}


# ---------------------------------------------------------------------------------------------
# Building dataclasses from the raw tree
# ---------------------------------------------------------------------------------------------


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
    check = _SECTION_CHECKS.get(cls)
    if check is not None:
        check(kwargs, bad, path, ctx)
    try:
        built = cls(**kwargs)
    except ConfigValueError as exc:
        for problem in exc.problems:
            if problem.field in bad or bad.intersection(problem.reads):
                continue  # the field's own problem is reported; a rule reading it is moot
            ctx.add(problem.message, path + (problem.field,))
        return None
    return None if len(ctx.errors) > before else built


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _split_overrides(tokens: Sequence[str], ctx: _Context) -> list[tuple[str, str, str]]:
    """``[(dotted_key, raw_value, as_written)]`` from ``--a.b=c`` / ``--a.b c`` tokens; a
    malformed token is recorded in ``ctx`` and skipped."""
    overrides = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("--") or token == "--":
            ctx.add(
                f"unexpected argument {token!r}: overrides are written --section.field=value "
                "(only one YAML file may be given)",
                location="command line",
            )
            continue
        body = token[2:]
        if "=" in body:
            key, value = body.split("=", 1)
            written = token
        else:
            if i >= len(tokens) or tokens[i].startswith("--"):
                ctx.add(f"override {token!r} has no value; write {token}=VALUE",
                        location="command line")
                continue
            key, value = body, tokens[i]
            written = f"{token} {value}"
            i += 1
        if not key or any(not part for part in key.split(".")):
            ctx.add(f"malformed override {token!r}", location="command line")
            continue
        overrides.append((key, value, written))
    return overrides


def _apply_override(raw: dict, key: str, value: Any, written: str, ctx: _Context) -> None:
    parts = tuple(key.split("."))
    node = raw
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif child is INVALID:
            return  # the YAML value is reported already
        elif not isinstance(child, dict):
            prefix = parts[: depth + 1]
            ctx.add(
                f"cannot apply {written}: {_dotted(prefix)} is {_shown(child)}, not a mapping",
                prefix,
            )
            return
        node = child
    last = parts[-1]
    if isinstance(value, dict) and isinstance(node.get(last), dict):
        _deep_merge(node[last], value)
    else:
        node[last] = value
    ctx.cli[parts] = written


def _deep_merge(base: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value


def _local_rank_from_env() -> int:
    text = os.environ.get("LOCAL_RANK", "0")
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(
            f"LOCAL_RANK must be an integer, got {text!r}", location="environment"
        ) from None
    if value < 0:
        raise ConfigError(f"LOCAL_RANK must be >= 0, got {value}", location="environment")
    return value


def empty_config_error(source: str) -> ConfigError:
    """The error of a YAML that sets nothing (empty, only comments, or a bare ``null``)."""
    return ConfigError(
        "empty configuration: the file sets nothing (it is empty, holds only comments, or is "
        "null), which is most likely the wrong file; write the model, data and train sections "
        "to change, or `{}` to train with every default",
        location=source,
    )


def load_config(
    root_class: type,
    text: str,
    *,
    source: str = "<string>",
    overrides: Sequence[str] = (),
    allow_empty: bool = True,
) -> Any:
    """Build ``root_class`` from YAML ``text`` plus command-line ``overrides`` tokens.

    One :class:`ConfigError` reports every problem (see the module docstring). An empty
    document means every default unless ``allow_empty`` is false (a user's file:
    :func:`parse_args`)."""
    ctx = _Context(source)
    try:
        located = load_yaml_located(text)
    except YamlSyntaxError as exc:
        location = f"{source}:{exc.line}" if exc.line else source
        raise ConfigError(str(exc), location=location) from None
    ctx.lines = located.lines
    for problem in located.problems:
        ctx.add(problem.message, location=f"{source}:{problem.line}")
    raw = located.data
    if raw is None:
        if not allow_empty:
            raise empty_config_error(source)
        raw = {}
    if raw is INVALID:
        ctx.raise_errors()
    if not isinstance(raw, dict):
        raise ConfigError(
            f"the document must be a mapping with the keys model, data, train; got "
            f"{type(raw).__name__}",
            location=source,
        )
    for key, value, written in _split_overrides(overrides, ctx):
        _apply_override(raw, key, parse_scalar(value), written, ctx)
    config = _build(root_class, root_class, raw, (), ctx)
    local_rank = None
    train = getattr(config, "train", None)
    if train is not None and hasattr(train, "local_rank"):
        try:
            local_rank = _local_rank_from_env()
        except ConfigError as exc:
            ctx.errors.append(exc)
    ctx.raise_errors()
    if local_rank is not None:
        train.local_rank = local_rank
    return config


def read_config_file(path: Path, shown: str | None = None, *, location: str = "command line"
                     ) -> str:
    """The text of a user's YAML file (``shown``: its name in messages); a missing, unreadable
    or empty file is a :class:`ConfigError`."""
    shown = str(path) if shown is None else shown
    if not path.is_file():
        raise ConfigError(
            f"config file {shown!r} does not exist" if not path.exists()
            else f"config path {shown!r} is not a file",
            location=location,
        )
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {shown!r}: {exc}", location=location) from None


def parse_args(root_class: type = HyperTrainerConfig, argv: Sequence[str] | None = None) -> Any:
    """Parse ``argv`` (default ``sys.argv[1:]``): a YAML path, then overrides."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("--"):
        raise ConfigError(
            "the first argument must be the YAML config file; "
            + USAGE.format(prog="train_lm.py").splitlines()[0],
            location="command line",
        )
    path = Path(args[0])
    text = read_config_file(path)
    return load_config(root_class, text, source=str(path), overrides=args[1:], allow_empty=False)


# ---------------------------------------------------------------------------------------------
# Printing
# ---------------------------------------------------------------------------------------------


def config_to_dict(config: Any) -> dict:
    """Plain nested dict of a config (tuples become lists), in field order."""

    def convert(value: Any) -> Any:
        if dataclasses.is_dataclass(value):
            return {f.name: convert(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, (list, tuple)):
            return [convert(v) for v in value]
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        return value

    return convert(config)


def dump_yaml(config: Any) -> str:
    """The config as YAML text (field order, no ``train.local_rank``)."""
    data = config_to_dict(config)
    data.get("train", {}).pop("local_rank", None)
    return dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


def field_help(cls: type = HyperTrainerConfig, prefix: str = "") -> list[str]:
    """One block per field: dotted path, type, default, docstring."""
    lines = []
    hints = typing.get_type_hints(cls)
    docs = field_docstrings(cls)
    defaults = cls()
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        path = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(tp):
            lines.append(f"\n[{path}] {docs.get(f.name, '')}")
            lines.extend(field_help(tp, path + "."))
            continue
        default = getattr(defaults, f.name)
        lines.append(f"  --{path} ({describe_type(tp)}, default {default!r})")
        for doc_line in docs.get(f.name, "").splitlines():
            lines.append(f"      {doc_line}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hyper_parallel.trainer.config old.yaml [overrides]``: print the resolved config."""
    args = list(sys.argv[1:] if argv is None else argv)
    prog = "python -m hyper_parallel.trainer.config"
    if not args or args[0] in ("-h", "--help"):
        print(USAGE.format(prog=prog))
        if args:
            print("\nFields (YAML key = dotted path):")
            print("\n".join(field_help()))
        return 0 if args else 2
    try:
        config = parse_args(HyperTrainerConfig, args)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(dump_yaml(config), end="")
    return 0
