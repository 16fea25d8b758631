"""Reading a user's YAML file (plus overrides) into a root dataclass: :func:`load_config`.

The YAML is read by :mod:`hyper_parallel.utils.yaml_lines` (the line of every key, duplicate
keys are errors); the overrides are applied to the raw tree; the tree is built strictly; and
``train.local_rank`` comes from the ``LOCAL_RANK`` environment variable.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.yaml_lines import (
    INVALID,
    YamlSyntaxError,
    load_yaml_located,
    parse_scalar,
)

from .build import _build
from .overrides import _apply_override, _split_overrides
from .problems import _Context

USAGE = (
    "usage: {prog} CONFIG.yaml [--section.field=value | --section.field value ...]\n"
    "       {prog} --help      (list every field)"
)



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


def parse_args(root_class: type, argv: Sequence[str] | None = None) -> Any:
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
