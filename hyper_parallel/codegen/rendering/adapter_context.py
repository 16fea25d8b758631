"""The template contexts of ``hyper_parallel/config/legacy_adapter.py`` and of its
``unsupported`` rows for the legacy parser (``hyper_parallel/trainer/legacy_parsing/
unsupported_keys.py``, :func:`legacy_unsupported_context`).

The adapter is written the way a person would write it: ``FIELD_MAP`` as a literal tuple of
``FieldMapping(...)`` calls grouped by section, then each conversion as one block per section
-- the transforms that feed it, one statement per row, then the section's constructor with one
keyword argument per mapped field (``steps=legacy.train.max_steps``). Rows are named by their
paths, never by their position in the table. An ``unsupported`` or ``new_only`` row needs no
statement of its own: ``FIELD_MAP`` lists it and
:mod:`hyper_parallel.config.adapter_support` checks it against the dataclass default.
"""

from __future__ import annotations

import builtins
import dataclasses
import keyword
import textwrap
from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.rendering.render import LINE_LENGTH
from hyper_parallel.codegen.table import types as T
from hyper_parallel.codegen.table.coverage import Resolved
from hyper_parallel.codegen.table.mapping_rows import Row

#: The root of the new tree, as the forward conversion names it.
_ROOT = "HyperTrainer.Config"
#: Names the conversions use already (parameters, imports, the module's own).
_TAKEN = ("legacy", "config", "canon", "notes", "copy", "sections", "transforms", "legacy_spec",
          "legacy_schema", "HyperTrainer", "HyperTrainerConfig", "TYPE_CHECKING", "TABLE",
          "FIELD_MAP", "_ROWS", "FieldIndex", "FieldMapping", "Normalisation", "field_mapping",
          "legacy_section", "normalise", "require_classes")


def _describe(row: Row) -> str:
    """``FieldMapping.detail``: the transform functions, or the reason."""
    if row.kind == "transform":
        return " / ".join([row.forward, row.backward] + ([row.canonical] if row.canonical else []))
    return row.reason or ""


def _literal(text: str, width: int | None = None) -> str:
    """A string literal; a long one as adjacent literals of one line each (black keeps them),
    each at most ``width`` characters of text (default :data:`_LITERAL_WIDTH`)."""
    width = _LITERAL_WIDTH if width is None else width
    if len(text) <= width:
        return repr(text)
    pieces = textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
    return " ".join(repr(piece + " ") for piece in pieces[:-1]) + " " + repr(pieces[-1])


#: The longest text of a literal argument on a line of its own (indented 8, quotes, comma).
_LITERAL_WIDTH = LINE_LENGTH - 14


def _field_mapping(row: Row) -> str:
    legacy, new = tuple(row.legacy.values()), tuple(row.new.values())
    return (f"FieldMapping({legacy!r}, {new!r}, {row.kind!r}, {row.line}, "
            f"{_literal(_describe(row))})")


def _group(row: Row) -> str:
    """The section a row is listed under in ``FIELD_MAP``."""
    if row.kind == "new_only":
        return "new-only fields"
    first = next(iter(row.legacy.values()))
    return first.rpartition(".")[0] or "(root)"


def _comment(row: Row, reads: dict[str, str]) -> str:
    """The row by its paths, ``legacy paths <-> new paths (reads ...)``, the other fields its
    function reads included; shortened to the first path of each side when too long."""
    def side(paths: list[str], short: bool) -> str:
        if short and len(paths) > 1:
            return f"{paths[0]} (+{len(paths) - 1} more)"
        return ", ".join(paths)

    legacy, new = list(row.legacy.values()), list(row.new.values())
    also = f" (reads {', '.join(reads.values())})" if reads else ""
    for short in (False, True):
        text = f"{side(legacy, short)} <-> {side(new, short)}{also}"
        if len(text) <= LINE_LENGTH - 6:
            break
    return text


def _usable(name: str) -> bool:
    return not keyword.iskeyword(name) and not hasattr(builtins, name)


def _variable(path: str) -> str:
    """A local variable named after a dotted path; never a keyword or a builtin."""
    name = path.replace(".", "_")
    return name if _usable(name) else f"{name}_section"


def _stem(function: str) -> str:
    """``mixed_precision_forward`` -> ``mixed_precision``."""
    for suffix in ("_forward", "_backward"):
        if function.endswith(suffix):
            return function[: -len(suffix)]
    return function


def _copy_if_mutable(expr: str, type_text: str) -> str:
    return f"copy.deepcopy({expr})" if T.mutable(type_text) else expr


def _call(fn: str, lead: list[str], values: dict[str, str]) -> str:
    return f"{fn}({', '.join(lead + [f'{k}={v}' for k, v in values.items()])})"


class _Locals:
    """The local variables of one conversion: a section's, or a transform row's result (the one
    value it gives, named after its field, or the dict of several)."""

    def __init__(self, table_rel: str, sections: list[str]):
        self.rel = table_rel
        self.used = dict.fromkeys(_TAKEN, "a parameter or an import")
        for name in sections:
            self.claim([_variable(name)], f"the section {name}")
        self.results: dict[int, tuple[str, bool]] = {}  # row index -> (variable, a dict?)

    def claim(self, candidates: list[str], what: str) -> str:
        for name in candidates:
            if name not in self.used and _usable(name):
                self.used[name] = what
                return name
        raise CodegenError(f"{self.rel}: {what} would make the adapter's local variable "
                           f"{candidates[-1]!r}, which {self.used.get(candidates[-1], 'Python')} "
                           "already uses; rename one of them")

    def transform(self, row: Row, outputs: dict[str, str], reads: dict[str, str],
                  function: str, call: str) -> list[str]:
        """The statement computing a transform row's ``outputs`` (``{local: path}``) from its
        fields and ``reads``, with the comment naming the row; remembers the variable."""
        (first_local, first_path), many = next(iter(outputs.items())), len(outputs) > 1
        what = f"the row of {first_path}"
        if many:
            var = self.claim([f"{_stem(function)}_values", f"{_variable(first_path)}_values"], what)
            statement = f"{var} = {call}"
        else:
            # The field's own name when it says what it is (``load_path``), else its path.
            leaf = first_path.rpartition(".")[2]
            var = self.claim([leaf, _variable(first_path)] if "_" in leaf
                             else [_variable(first_path)], what)
            statement = f"{var} = {call}[{first_local!r}]"
            if len(statement) + 4 > LINE_LENGTH:
                # A magic trailing comma makes black break the call, not the subscript.
                statement = f"{var} = {call[:-1]},)[{first_local!r}]"
        self.results[row.index] = (var, many)
        return [f"# {_comment(row, reads)}", statement]

    def value(self, row: Row, local: str) -> str:
        var, many = self.results[row.index]
        return f"{var}[{local!r}]" if many else var


# ---------------------------------------------------------------------------------------------
# legacy -> new
# ---------------------------------------------------------------------------------------------


def _forward(r: Resolved) -> tuple[list[dict[str, Any]], str, set[str]]:
    """Blocks of ``legacy_to_trainer_config``, its return expression and its imports."""
    t = r.table
    names = _Locals(t.rel, [e.name for e in t.root if e.kind != "field"])
    imports = {"from hyper_parallel.trainer.hyper_trainer import HyperTrainer"}

    def value(path: str, type_text: str) -> str | None:
        row = r.owner_of_new[path]
        if row.kind == "rename":
            (legacy_path,) = row.legacy.values()
            return _copy_if_mutable(f"legacy.{legacy_path}", type_text)
        if row.kind == "transform":
            local = next(k for k, p in row.new.items() if p == path)
            return _copy_if_mutable(names.value(row, local), type_text)
        return None  # new_only: the dataclass default applies

    def transforms_for(paths: list[str]) -> list[str]:
        lines = []
        for path in paths:
            row = r.owner_of_new[path]
            if row.kind != "transform" or row.index in names.results:
                continue
            args = {k: f"legacy.{p}" for k, p in {**row.legacy, **row.reads}.items()}
            lines += names.transform(row, row.new, row.reads, row.forward,
                                     _call(f"transforms.{row.forward}", [], args))
        return lines

    blocks: list[dict[str, Any]] = []
    root_kwargs: list[str] = []
    for entry in t.root:
        if entry.kind == "field":
            lines = transforms_for([entry.name])
            if lines:
                blocks.append({"lines": lines})
            expr = value(entry.name, r.new[entry.name].type)
            if expr is not None:
                root_kwargs.append(f"{entry.name}={expr}")
            continue
        if entry.kind == "section":
            cls = f"sections.{t.section(entry.name).cls}"
        else:
            component = t.component(entry.name)
            imports.add(f"from {component.module} import {component.owner}")
            cls = f"{component.owner}.Config"
        leaves = [leaf for leaf in r.new.values() if leaf.container == entry.name]
        lines = transforms_for([leaf.path for leaf in leaves])
        kwargs = {leaf.name: expr for leaf in leaves
                  if (expr := value(leaf.path, leaf.type)) is not None}
        if not kwargs:
            continue  # every field is new_only: the section's default_factory applies
        var = _variable(entry.name)
        lines.append(f"{var} = {_call('_ROWS.new_section', [cls, repr(entry.name)], kwargs)}")
        blocks.append({"lines": lines})
        root_kwargs.append(f"{entry.name}={var}")
    result = f"_ROWS.new_section({', '.join([_ROOT, repr(''), *root_kwargs])})"
    return blocks, result, imports


# ---------------------------------------------------------------------------------------------
# new -> legacy
# ---------------------------------------------------------------------------------------------


def _backward(r: Resolved) -> tuple[list[dict[str, Any]], str, set[str], list[str]]:
    """Blocks of ``trainer_config_to_legacy``, its return expression, its imports and the
    ``require_classes`` keyword arguments."""
    t = r.table
    names = _Locals(t.rel, [path for path in r.legacy_sections if path])
    imports: set[str] = set()
    classes: list[str] = []
    for entry in t.root:
        if entry.kind == "section":
            classes.append(f"{entry.name}=sections.{t.section(entry.name).cls}")
        elif entry.kind == "component":
            component = t.component(entry.name)
            imports.add(f"from {component.module} import {component.owner}")
            classes.append(f"{entry.name}={component.owner}.Config")

    def value(path: str) -> str | None:
        row = r.owner_of_legacy[path]
        type_text = r.legacy[path].type
        if row.kind == "rename":
            (new_path,) = row.new.values()
            return _copy_if_mutable(f"config.{new_path}", type_text)
        if row.kind == "transform":
            local = next(k for k, p in row.legacy.items() if p == path)
            return _copy_if_mutable(names.value(row, local), type_text)
        return None  # unsupported: only the dataclass default converts

    blocks: list[dict[str, Any]] = []

    def build(section_path: str) -> str | None:
        """The block building the legacy section ``section_path`` after its subsections; the
        variable holding it (the root: the expression), or None when every field keeps its
        default."""
        cls = r.legacy_sections[section_path]
        prefix = f"{section_path}." if section_path else ""
        kwargs: dict[str, str] = {}
        lines: list[str] = []
        for f in dataclasses.fields(cls):
            path = prefix + f.name
            if path in r.legacy_sections:
                sub = build(path)
                if sub is not None:
                    kwargs[f.name] = sub
                continue
            row = r.owner_of_legacy[path]
            if row.kind == "transform" and row.index not in names.results:
                args = {k: f"config.{p}" for k, p in {**row.new, **row.reads_new}.items()}
                lead = [f"transforms.{row.backward}", repr(next(iter(row.new.values())))]
                lines += names.transform(row, row.legacy, row.reads_new, row.backward,
                                         _call("_ROWS.backward", lead, args))
            expr = value(path)
            if expr is not None:
                kwargs[f.name] = expr
        call = _call("legacy_section", [f"legacy_schema.{cls.__name__}", repr(section_path)],
                     kwargs)
        if not section_path:
            if lines:
                blocks.append({"lines": lines})
            return call
        if not kwargs:
            return None  # every field is unsupported: the section's default_factory applies
        var = _variable(section_path)
        blocks.append({"lines": [*lines, f"{var} = {call}"]})
        return var

    result = build("")
    return blocks, result, imports, classes


# ---------------------------------------------------------------------------------------------
# the canonical form
# ---------------------------------------------------------------------------------------------


def _canonical(r: Resolved) -> list[dict[str, Any]]:
    blocks = []
    for row in r.table.rows:
        if row.kind != "transform" or not row.canonical:
            continue
        args = [f"transforms.{row.canonical}", repr(dict(row.legacy))]
        if row.reads:
            args.append(f"reads={dict(row.reads)!r}")
        blocks.append({"lines": [f"# {_comment(row, row.reads)}",
                                 f"normalise(canon, notes, {', '.join(args)})"]})
    return blocks


def legacy_adapter_context(r: Resolved) -> dict[str, Any]:
    groups: list[dict[str, Any]] = []
    for row in r.table.rows:
        title = _group(row)
        if not groups or groups[-1]["title"] != title:
            groups.append({"title": title, "rows": []})
        groups[-1]["rows"].append(_field_mapping(row))
    forward_blocks, forward_result, forward_imports = _forward(r)
    backward_blocks, backward_result, backward_imports, classes = _backward(r)
    return {
        "table": r.table.rel,
        "field_map": groups,
        "forward_imports": sorted(forward_imports),
        "forward_blocks": forward_blocks,
        "forward_result": forward_result,
        "backward_imports": sorted(backward_imports),
        "required_classes": classes,
        "backward_blocks": backward_blocks,
        "backward_result": backward_result,
        "canonical_blocks": _canonical(r),
    }


def legacy_unsupported_context(r: Resolved) -> dict[str, Any]:
    """The ``unsupported`` rows, for the legacy parser's layer: each legacy path with its table
    line and reason (the same rows ``FIELD_MAP`` lists; the table is the one home of both)."""
    rows = []
    for row in r.table.rows:
        if row.kind == "unsupported":
            (path,) = row.legacy.values()
            reason = row.reason or ""
            literal = _literal(reason)
            if len(reason) > _LITERAL_WIDTH:
                # Adjacent literals in a tuple are parenthesised (ruff's ISC004), 4 columns in.
                literal = f"({_literal(reason, _LITERAL_WIDTH - 4)})"
            rows.append({"path": repr(path), "line": row.line, "reason": literal})
    return {"table": r.table.rel, "rows": rows}
