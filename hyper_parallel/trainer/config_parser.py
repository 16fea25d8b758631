"""The legacy command line: ``old.yaml [--a.b.c=value | --a.b.c value ...]``.

Rules (each one is tested in ``tests/torch/ut/trainer/test_legacy_config.py``):

* The first positional argument is the YAML path; a missing file is an error.
* Overrides ``--a.b.c=value`` or ``--a.b.c value`` are applied over the YAML. Values are read as
  YAML (``[0.9,0.95]``, ``{num_hidden_layers: 4}``, ``null``) and then coerced by the field's
  declared type. Overrides inside a dict field (``--model.config_overrides.head_dim=64``) merge.
* Strict: an unknown key anywhere is a :class:`ConfigError` with the dotted path, the file and
  line, and a did-you-mean; the old flat top-level keys get their migration hint. A value of the
  wrong type is a :class:`ConfigError` naming the field, the expected type, the value and where it
  came from. Nothing else escapes the parser.
* Booleans accept ``true/yes/y/on/1/t`` and ``false/no/n/off/0/f`` in any case.
* ``train.local_rank`` comes from the ``LOCAL_RANK`` environment variable.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import types
import typing
from pathlib import Path
from typing import Any, Sequence

import yaml

from hyper_parallel.trainer.config import ConfigError, ConfigValueError, HyperTrainerConfig
from hyper_parallel.utils.docstrings import field_docstrings
from hyper_parallel.utils.suggest import closest
from hyper_parallel.utils.yaml_lines import YamlSyntaxError, load_yaml_with_lines, parse_scalar

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
    """Where values came from, for error messages."""

    def __init__(self, source: str):
        self.source = source
        self.lines: dict[tuple, int] = {}
        self.cli: dict[tuple, str] = {}

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


def _dotted(path: Sequence[Any]) -> str:
    return ".".join(str(p) for p in path)


# ---------------------------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------------------------


class _Mismatch(Exception):
    """A value does not fit a declared type (turned into a ConfigError by the caller)."""


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
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise _Mismatch()
    if inner is float:
        if isinstance(value, bool):
            raise _Mismatch()
        if isinstance(value, (int, float)):
            result = float(value)
        elif isinstance(value, str):
            # PyYAML reads ``1e-4`` (no dot) as a string; accept any float spelling.
            try:
                result = float(value.strip())
            except ValueError:
                raise _Mismatch() from None
        else:
            raise _Mismatch()
        if math.isnan(result):
            raise _Mismatch()
        return result
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
        return {_coerce(k, key_type): _coerce(v, value_type) for k, v in value.items()}
    raise TypeError(f"the schema uses an unsupported type {tp!r}")  # a bug in the schema


# ---------------------------------------------------------------------------------------------
# Building dataclasses from the raw tree
# ---------------------------------------------------------------------------------------------


def _all_field_paths(cls: type, prefix: tuple = ()) -> list[tuple]:
    paths = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        paths.append(prefix + (f.name,))
        if dataclasses.is_dataclass(tp):
            paths.extend(_all_field_paths(tp, prefix + (f.name,)))
    return paths


def _unknown_key_error(root: type, cls: type, key: Any, path: tuple, ctx: _Context) -> ConfigError:
    names = [f.name for f in dataclasses.fields(cls) if path + (f.name,) not in RESERVED_KEYS]
    full = path + (key,)
    if not path and key in LEGACY_TOP_LEVEL_HINTS:
        hint = (
            f"the flat top-level key {key!r} is from the old layout; it moved to "
            f"{LEGACY_TOP_LEVEL_HINTS[key]}. Top-level keys are exactly: {', '.join(names)}"
        )
    else:
        hint = f"unknown key {str(key)!r} in {_dotted(path) or 'the top level'}"
        local = closest(str(key), names)
        elsewhere = [p for p in _all_field_paths(root) if p[-1] == key and p != full]
        if local:
            hint += f" (did you mean {_dotted(path + (local,))!r}?)"
        elif elsewhere:
            hint += f" (did you mean {_dotted(elsewhere[0])!r}?)"
        hint += f". Valid keys here: {', '.join(names)}"
    return ConfigError(hint, path=_dotted(full), location=ctx.locate(full))


def _build(root: type, cls: type, raw: Any, path: tuple, ctx: _Context) -> Any:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        where = _dotted(path) or "the document"
        raise ConfigError(
            f"{where} must be a mapping of {cls.__name__} fields, got {type(raw).__name__} "
            f"{raw!r}",
            path=_dotted(path) or None,
            location=ctx.locate(path),
        )
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        key_path = path + (key,)
        if key_path in RESERVED_KEYS:
            raise ConfigError(
                f"must not be set: {RESERVED_KEYS[key_path]}",
                path=_dotted(key_path),
                location=ctx.locate(key_path),
            )
        if key not in names:
            raise _unknown_key_error(root, cls, key, path, ctx)
        tp = hints[key]
        if dataclasses.is_dataclass(tp):
            kwargs[key] = _build(root, tp, value, key_path, ctx)
            continue
        try:
            kwargs[key] = _coerce(value, tp)
        except _Mismatch:
            raise ConfigError(
                f"expected {describe_type(tp)}, got {type(value).__name__} {value!r}",
                path=_dotted(key_path),
                location=ctx.locate(key_path),
            ) from None
    try:
        return cls(**kwargs)
    except ConfigValueError as exc:
        field_path = path + (exc.field,)
        raise ConfigError(
            str(exc).split(": ", 1)[1], path=_dotted(field_path), location=ctx.locate(field_path)
        ) from None


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def _split_overrides(tokens: Sequence[str]) -> list[tuple[str, str, str]]:
    """``[(dotted_key, raw_value, as_written)]`` from ``--a.b=c`` / ``--a.b c`` tokens."""
    overrides = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("--") or token == "--":
            raise ConfigError(
                f"unexpected argument {token!r}: overrides are written --section.field=value "
                "(only one YAML file may be given)",
                location="command line",
            )
        body = token[2:]
        if "=" in body:
            key, value = body.split("=", 1)
            written = token
        else:
            if i + 1 >= len(tokens) or tokens[i + 1].startswith("--"):
                raise ConfigError(
                    f"override {token!r} has no value; write {token}=VALUE",
                    location="command line",
                )
            key, value = body, tokens[i + 1]
            written = f"{token} {value}"
            i += 1
        if not key or any(not part for part in key.split(".")):
            raise ConfigError(f"malformed override {token!r}", location="command line")
        overrides.append((key, value, written))
        i += 1
    return overrides


def _apply_override(raw: dict, key: str, value: Any, written: str, ctx: _Context) -> None:
    parts = tuple(key.split("."))
    node = raw
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            prefix = parts[: depth + 1]
            raise ConfigError(
                f"cannot apply {written}: {_dotted(prefix)} is {child!r}, not a mapping",
                path=_dotted(prefix),
                location=ctx.locate(prefix),
            )
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


def load_config(
    root_class: type,
    text: str,
    *,
    source: str = "<string>",
    overrides: Sequence[str] = (),
) -> Any:
    """Build ``root_class`` from YAML ``text`` plus command-line ``overrides`` tokens."""
    ctx = _Context(source)
    try:
        located = load_yaml_with_lines(text)
    except YamlSyntaxError as exc:
        location = f"{source}:{exc.line}" if exc.line else source
        raise ConfigError(str(exc), location=location) from None
    ctx.lines = located.lines
    raw = located.data
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(
            f"the document must be a mapping with the keys model, data, train; got "
            f"{type(raw).__name__}",
            location=source,
        )
    for key, value, written in _split_overrides(overrides):
        _apply_override(raw, key, parse_scalar(value), written, ctx)
    config = _build(root_class, root_class, raw, (), ctx)
    train = getattr(config, "train", None)
    if train is not None and hasattr(train, "local_rank"):
        train.local_rank = _local_rank_from_env()
    return config


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
    if not path.is_file():
        raise ConfigError(
            f"config file {str(path)!r} does not exist" if not path.exists()
            else f"config path {str(path)!r} is not a file",
            location="command line",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {str(path)!r}: {exc}", location="command line") from None
    return load_config(root_class, text, source=str(path), overrides=args[1:])


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
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)


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
