"""``model.config_overrides``: its keys are the model config's fields, read from source.

The legacy parser runs without torch, and the model packages import it, so the model config
class is read with ``ast`` instead of imported: an unknown key, an unknown flavor or a value of
the wrong type is reported with its line and a did-you-mean before anything is built.
"""

from __future__ import annotations

import ast
import functools
import math
from pathlib import Path
from typing import Any, NamedTuple

from hyper_parallel.utils.literal_keys import dict_literal_keys
from hyper_parallel.utils.numbers import MAX_INT
from hyper_parallel.utils.suggest import did_you_mean

from .problems import _Context, _dotted, _shown


class _ModelConfigSource(NamedTuple):
    file: str
    """The module under ``hyper_parallel/`` that defines the config class."""
    cls: str
    """The config dataclass whose fields ``model.config_overrides`` sets."""
    flavors: str
    """The module-level dict literal of named sizes (``flavor: <name>``)."""
    flavor_key: str = "flavor"
    base: tuple[str, str] | None = None
    """``(file, class)`` of the config class ``cls`` extends: its fields come first (the
    subclass re-declares some and adds its own; its ``UNUSED_FIELDS`` are left out)."""


_DENSE = ("models/qwen3_5/configuration.py", "Qwen3_5Config")

#: ``model.name`` -> where its model config is defined. The keys of ``model.config_overrides``
#: are checked against that class's fields, read with ``ast``: importing the model package
#: would import torch, and the legacy parser runs without it. A name not listed here (a custom
#: model module) is checked by its model when the run builds it.
MODEL_CONFIG_SOURCES: dict[str, _ModelConfigSource] = {
    "qwen3_5": _ModelConfigSource(*_DENSE, "FLAVORS"),
    "qwen3_5_v2": _ModelConfigSource(*_DENSE, "FLAVORS"),
    "qwen3_5_moe": _ModelConfigSource(
        "models/qwen3_5_moe/configuration.py", "Qwen3_5MoeConfig", "FLAVORS", base=_DENSE
    ),
}

#: ``hyper_parallel/``, where the ``file`` of every :data:`MODEL_CONFIG_SOURCES` entry lives.
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


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
    tree = _parse(entry.file)
    if tree is None:
        return None
    fields: dict[str, str] = {}
    unused: set[str] = set()
    if entry.base is not None:
        base_tree = _parse(entry.base[0])
        if base_tree is None:
            return None
        _read_class(base_tree, entry.base[1], fields, unused)
    _read_class(tree, entry.cls, fields, unused)
    for name_ in unused:
        fields.pop(name_, None)
    try:
        flavors = dict_literal_keys(tree, entry.flavors)
    except ValueError:
        flavors = None
    if not fields:
        return None
    return ModelOverrideKeys(fields, flavors, entry.flavor_key)


def _parse(file: str) -> ast.Module | None:
    try:
        return ast.parse((_PACKAGE_ROOT / file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None


def _read_class(tree: ast.Module, cls: str, fields: dict[str, str], unused: set[str]) -> None:
    """Add the fields class ``cls`` of ``tree`` declares (name -> annotation as written) to
    ``fields``, and the names its ``UNUSED_FIELDS`` tuple lists to ``unused``."""
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and node.name == cls):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            annotation = ast.unparse(stmt.annotation)
            if "ClassVar" not in annotation:
                fields[stmt.target.id] = annotation
            elif stmt.target.id == "UNUSED_FIELDS" and isinstance(stmt.value, ast.Tuple):
                unused.update(
                    e.value for e in stmt.value.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                )


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


#: The upstream image-text keys of ``model.config_overrides`` (``vl``, ``text_config``), read
#: by ``models/qwen3_5/model_section.py: upstream_overrides``; named here without importing it.
UPSTREAM_KEYS = ("vl", "text_config")


def check_fields(fields: dict, schema: ModelOverrideKeys, where: tuple, model: str,
                 ctx: _Context, bad: set) -> None:
    """The text fields of ``config_overrides.text_config``: each a field of the model config."""
    for key, value in fields.items():
        if key not in schema.fields:
            ctx.add(f"unknown key {key!r} in {_dotted(where)} of model {model}"
                    f"{did_you_mean(str(key), list(schema.fields))}", where + (key,))
            bad.add("config_overrides")
        elif not _fits(value, schema.fields[key]):
            ctx.add(f"expected {schema.fields[key]}, got {type(value).__name__} {_shown(value)}",
                    where + (key,))
            bad.add("config_overrides")


def check_config_overrides(
    name: str, kwargs: dict, bad: set, path: tuple, ctx: _Context, *,
    instead_of: str | None = None,
) -> None:
    """``model.config_overrides`` (in ``kwargs``, the ``model`` section's values) against the
    model config of model ``name``; ``instead_of``: the unknown ``model.name`` that ``name``,
    the closest known model, stands in for (the messages say so)."""
    if "config_overrides" in bad:
        return
    overrides = kwargs.get("config_overrides")
    schema = model_override_keys(name)
    if not overrides or schema is None:
        return
    model = f"{name!r}" + (f", the closest to the unknown {instead_of!r}" if instead_of else "")
    valid = [*schema.fields, schema.flavor_key, *UPSTREAM_KEYS]
    where = path + ("config_overrides",)
    items = list(overrides.items())
    for key, value in items:
        key_path = where + (key,)
        if key == "vl":  # the upstream image-text switch (models/qwen3_5/model_section.py)
            if not isinstance(value, bool):
                ctx.add(f"expected true or false (the image-text model or the text decoder "
                        f"alone), got {_shown(value)}", key_path)
                bad.add("config_overrides")
            continue
        if key == "text_config":  # the text fields, nested as in an image-text config.json
            if not isinstance(value, dict):
                ctx.add(f"expected a mapping of the text model's fields, got {_shown(value)}",
                        key_path)
                bad.add("config_overrides")
            else:
                check_fields(value, schema, key_path, model, ctx, bad)
            continue
        if key == schema.flavor_key:
            if schema.flavors is not None and value not in schema.flavors:
                hint = did_you_mean(str(value), schema.flavors)
                ctx.add(
                    f"unknown flavor {_shown(value)}{hint} of model {model}; valid flavors: "
                    f"{', '.join(schema.flavors)}",
                    key_path,
                )
                bad.add("config_overrides")
            continue
        if key not in schema.fields:
            ctx.add(
                f"unknown key {key!r} in {_dotted(where)} of model {model}"
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
