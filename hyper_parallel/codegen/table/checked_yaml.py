"""Reading a hand-edited generator input -- the field table, a model descriptor -- and collecting
every problem in it.

The YAML is loaded by :mod:`hyper_parallel.utils.yaml_lines`, the one loader of the project
(the legacy configs use it too), with its rules: the YAML 1.2 core schema (``off`` is the string
``"off"``, ``010`` is ten), merge keys, duplicate keys are errors, bounded alias expansion; here
every key must be a string as well. Each problem is one line, ``file:line: where: message``, and
all of a file's problems are reported together (:class:`Problems`).
"""

from __future__ import annotations

from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.utils.suggest import did_you_mean
from hyper_parallel.utils.yaml_lines import LDict, YamlSyntaxError, load_nodes

__all__ = ["Problems", "check_keys", "load", "one_line"]


class Problems:
    """The problems found in one file, each ``<rel>:<line>: <where>: <message>``."""

    def __init__(self, rel: str):
        self.rel = rel
        self.items: list[str] = []

    def add(self, line: int, where: str, message: str) -> None:
        self.items.append(f"{self.rel}:{line}: {where}: {message}")


def one_line(value: Any) -> str:
    """``value`` as text on one line (YAML's folded newlines and runs of spaces become one
    space); "" for None."""
    return " ".join(str(value).split()) if value is not None else ""


def check_keys(obj: Any, where: str, line: int, allowed: tuple[str, ...],
               required: tuple[str, ...], problems: Problems) -> bool:
    """Whether ``obj`` is a mapping with only ``allowed`` keys and every ``required`` one; each
    unknown or missing key is a problem (with a did-you-mean)."""
    if not isinstance(obj, LDict):
        problems.add(line, where, f"must be a mapping, got {type(obj).__name__} {obj!r}")
        return False
    ok = True
    for key in obj:
        if key not in allowed:
            problems.add(obj.key_lines[key], where, f"unknown key {key!r}"
                         f"{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}")
            ok = False
    for key in required:
        if key not in obj:
            problems.add(obj.line, where, f"missing key {key!r}")
            ok = False
    return ok


def load(text: str, source: str, problems: list[str] | None = None) -> Any:
    """The document as :class:`~hyper_parallel.utils.yaml_lines.LDict` /
    :class:`~hyper_parallel.utils.yaml_lines.LList` / scalars.

    A text that cannot be loaded at all (not YAML, empty, too large) raises
    :class:`CodegenError`. The other problems (duplicate keys, unsupported tags, ...) are
    appended to ``problems`` as ``source:line: message`` when it is given, so that the caller
    reports them with its own (their values load as ``INVALID``); without it they raise one
    :class:`CodegenError` listing them all.
    """
    try:
        data, found = load_nodes(text, string_keys=True)
    except YamlSyntaxError as exc:
        where = f"{source}:{exc.line}" if exc.line else source
        message = str(exc)
        if message.startswith("invalid YAML: "):
            message = "not valid YAML: " + message[len("invalid YAML: "):]
        raise CodegenError(f"{where}: {message}") from None
    if data is None:
        raise CodegenError(f"{source}: the file is empty")
    messages = [f"{source}:{p.line}: {p.message}" for p in found]
    if problems is not None:
        problems.extend(messages)
    elif messages:
        raise CodegenError(messages)
    return data
