"""``codegen/field_table.yaml`` as checked Python objects.

:func:`load_table` validates the *shape* of the table -- known keys, required keys, value kinds,
parseable types, defaults that fit their types, constraints that fit their fields -- and reports
every problem with ``file:line`` and where (``sections[2] (training).fields[0]``). The sections,
component slots and root are read here; the mapping rows by :mod:`.mapping_rows`, the
constraints by :mod:`.constraints`. Whether the rows agree with the classes and cover every
field is :mod:`hyper_parallel.codegen.table.coverage`'s job.
"""

from __future__ import annotations

import hashlib
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.table import types as T
from hyper_parallel.codegen.table.checked_yaml import Problems, check_keys, load, one_line
from hyper_parallel.codegen.table.constraints import CONSTRAINTS, check_constraints
from hyper_parallel.codegen.table.mapping_rows import Row, read_rows
from hyper_parallel.utils.suggest import did_you_mean
from hyper_parallel.utils.yaml_lines import INVALID, LDict, LList

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


@dataclass
class FieldSpec:
    """A field the table defines (a section field or a plain root field)."""

    name: str
    type: str
    default: Any
    doc: str
    line: int
    constraints: dict[str, Any] = field(default_factory=dict)
    cli_hidden: bool = False


@dataclass
class Check:
    """A cross-field rule of a section."""

    field: str
    require: str
    message: str
    line: int
    when: str | None = None


@dataclass
class Section:
    name: str
    cls: str
    doc: str
    fields: list[FieldSpec]
    checks: list[Check]
    line: int


@dataclass
class ExpectedField:
    """A component Config field as the table expects it."""

    name: str
    type: str
    default: Any
    line: int


@dataclass
class Component:
    slot: str
    module: str
    owner: str
    slot_module: str
    slot_owner: str
    doc: str
    fields: list[ExpectedField]
    line: int


@dataclass
class RootEntry:
    """One field of ``HyperTrainer.Config``: ``kind`` is ``field``, ``section`` or
    ``component``; ``spec`` is set for plain fields."""

    kind: str
    name: str
    line: int
    spec: FieldSpec | None = None


@dataclass
class Table:
    path: Path
    rel: str
    text: str
    sha256: str
    sections: list[Section]
    components: list[Component]
    root_doc: str
    root: list[RootEntry]
    rows: list[Row]

    def section(self, name: str) -> Section:
        return next(s for s in self.sections if s.name == name)

    def component(self, slot: str) -> Component:
        return next(c for c in self.components if c.slot == slot)


def _parse_type(text: Any, where: str, line: int, problems: Problems) -> str | None:
    if not isinstance(text, str):
        problems.add(line, where, f"type must be a string, got {text!r}")
        return None
    try:
        return T.canonical(text)
    except T.TypeSyntaxError as exc:
        problems.add(line, where, str(exc))
        return None


def _field_spec(obj: LDict, where: str, problems: Problems, *, root: bool = False) -> FieldSpec | None:
    allowed = ("name", "type", "default", "doc", *CONSTRAINTS) + (("cli",) if root else ())
    if not check_keys(obj, where, getattr(obj, "line", 0), allowed, ("name", "type", "default", "doc"),
                 problems):
        return None
    if any(value is INVALID for value in obj.values()):
        return None  # a value YAML could not read: its problem is reported already
    name = obj["name"]
    line = obj.line
    if not isinstance(name, str) or not _IDENT.fullmatch(name) or keyword.iskeyword(name):
        problems.add(line, where, f"name must be a Python identifier, got {name!r}")
        return None
    where = f"{where} ({name})"
    type_text = _parse_type(obj["type"], where, obj.key_lines["type"], problems)
    if type_text is None:
        return None
    default = T.from_yaml(obj["default"], type_text)
    if not T.matches(default, type_text):
        problems.add(
            obj.key_lines["default"], where,
            f"wrong type: default {obj['default']!r} is not of type {type_text}",
        )
        return None
    constraints = {k: obj[k] for k in CONSTRAINTS if k in obj}
    check_constraints(constraints, type_text, default, where, obj, problems)
    cli = obj.get("cli")
    if cli not in (None, "hidden"):
        problems.add(obj.key_lines["cli"], where, f"cli must be 'hidden', got {cli!r}")
    doc = one_line(obj["doc"])
    if not doc:
        problems.add(line, where, "doc must not be empty (it is the --help text)")
    return FieldSpec(name, type_text, default, doc, line, constraints, cli == "hidden")


def _sections(raw: Any, problems: Problems) -> list[Section]:
    out: list[Section] = []
    if not isinstance(raw, LList):
        problems.add(getattr(raw, "line", 1), "sections", "must be a list of sections")
        return out
    for i, obj in enumerate(raw):
        where = f"sections[{i}]"
        if not check_keys(obj, where, raw.item_lines[i], ("name", "class", "doc", "fields", "checks"),
                     ("name", "class", "doc", "fields"), problems):
            continue
        name, cls = obj["name"], obj["class"]
        if not isinstance(name, str) or not _IDENT.fullmatch(name):
            problems.add(obj.line, where, f"name must be an identifier, got {name!r}")
            continue
        if not isinstance(cls, str) or not _IDENT.fullmatch(cls):
            problems.add(obj.key_lines["class"], where, f"class must be an identifier, got {cls!r}")
            continue
        where = f"sections[{i}] ({name})"
        fields: list[FieldSpec] = []
        raw_fields = obj["fields"]
        if not isinstance(raw_fields, LList) or not raw_fields:
            problems.add(obj.key_lines["fields"], where, "fields must be a non-empty list")
            continue
        for j, fobj in enumerate(raw_fields):
            spec = _field_spec(fobj, f"{where}.fields[{j}]", problems)
            if spec is not None:
                if any(f.name == spec.name for f in fields):
                    problems.add(spec.line, where, f"field {spec.name!r} is declared twice")
                fields.append(spec)
        checks: list[Check] = []
        raw_checks = obj.get("checks") or LList()
        if not isinstance(raw_checks, LList):
            problems.add(obj.key_lines["checks"], where, "checks must be a list of checks")
            raw_checks = LList()
        for j, cobj in enumerate(raw_checks):
            cwhere = f"{where}.checks[{j}]"
            if not check_keys(cobj, cwhere, obj.line, ("field", "when", "require", "message"),
                         ("field", "require", "message"), problems):
                continue
            if not isinstance(cobj["field"], str):
                problems.add(cobj.key_lines["field"], cwhere,
                             f"field must name a field of {name}, got {cobj['field']!r}")
                continue
            for key in ("when", "require"):
                if key in cobj:
                    try:
                        compile(str(cobj[key]), "<check>", "eval")
                    except SyntaxError as exc:
                        problems.add(cobj.key_lines[key], cwhere, f"{key} is not a Python "
                                     f"expression: {exc.msg}")
            if cobj["field"] not in {f.name for f in fields}:
                problems.add(cobj.key_lines["field"], cwhere,
                             f"field {cobj['field']!r} is not a field of {name}")
            checks.append(Check(cobj["field"], str(cobj["require"]), one_line(cobj["message"]),
                                cobj.line, cobj.get("when")))
        out.append(Section(name, cls, one_line(obj["doc"]), fields, checks, obj.line))
    return out


def _split_target(text: Any, where: str, line: int, problems: Problems) -> tuple[str, str] | None:
    if not isinstance(text, str) or not _TARGET.fullmatch(text):
        problems.add(line, where, f"expected 'package.module:Class', got {text!r}")
        return None
    module, owner = text.split(":")
    return module, owner


def _components(raw: Any, problems: Problems) -> list[Component]:
    out: list[Component] = []
    if not isinstance(raw, LList):
        problems.add(getattr(raw, "line", 1), "components", "must be a list")
        return out
    for i, obj in enumerate(raw):
        where = f"components[{i}]"
        if not check_keys(obj, where, raw.item_lines[i], ("slot", "class", "slot_type", "doc", "fields"),
                     ("slot", "class", "slot_type", "doc", "fields"), problems):
            continue
        if not isinstance(obj["slot"], str) or not _IDENT.fullmatch(obj["slot"]):
            problems.add(obj.key_lines["slot"], where,
                         f"slot must be an identifier, got {obj['slot']!r}")
            continue
        where = f"components[{i}] ({obj['slot']})"
        target = _split_target(obj["class"], where, obj.key_lines["class"], problems)
        slot_target = _split_target(obj["slot_type"], where, obj.key_lines["slot_type"], problems)
        if target is None or slot_target is None:
            continue
        expected: list[ExpectedField] = []
        raw_fields = obj["fields"] or LList()
        if not isinstance(raw_fields, LList):
            problems.add(obj.key_lines["fields"], where, "fields must be a list")
            continue
        for j, fobj in enumerate(raw_fields):
            fwhere = f"{where}.fields[{j}]"
            if not check_keys(fobj, fwhere, obj.line, ("name", "type", "default"),
                         ("name", "type", "default"), problems):
                continue
            if not isinstance(fobj["name"], str) or not _IDENT.fullmatch(fobj["name"]):
                problems.add(fobj.line, fwhere,
                             f"name must be a Python identifier, got {fobj['name']!r}")
                continue
            type_text = _parse_type(fobj["type"], fwhere, fobj.key_lines["type"], problems)
            if type_text is None:
                continue
            default = T.from_yaml(fobj["default"], type_text)
            if not T.matches(default, type_text):
                problems.add(fobj.key_lines["default"], fwhere,
                             f"wrong type: default {fobj['default']!r} is not of type {type_text}")
                continue
            expected.append(ExpectedField(fobj["name"], type_text, default, fobj.line))
        out.append(Component(obj["slot"], *target, *slot_target, one_line(obj["doc"]), expected,
                             obj.line))
    return out


def _root(raw: Any, sections: list[Section], components: list[Component],
          problems: Problems) -> tuple[str, list[RootEntry]]:
    if not check_keys(raw, "root", getattr(raw, "line", 1), ("doc", "fields"), ("doc", "fields"),
                 problems):
        return "", []
    entries: list[RootEntry] = []
    section_names = {s.name for s in sections}
    slots = {c.slot for c in components}
    if not isinstance(raw["fields"], LList):
        problems.add(raw.key_lines["fields"], "root", "fields must be a list of root entries")
        return one_line(raw["doc"]), entries
    for i, obj in enumerate(raw["fields"]):
        where = f"root.fields[{i}]"
        line = raw["fields"].item_lines[i]
        if isinstance(obj, LDict) and any(not isinstance(obj.get(k, ""), str)
                                          for k in ("section", "component")):
            problems.add(line, where, "section / component must name one by its name, got "
                         f"{obj.get('section', obj.get('component'))!r}")
        elif isinstance(obj, LDict) and "section" in obj:
            if check_keys(obj, where, line, ("section",), ("section",), problems):
                if obj["section"] not in section_names:
                    problems.add(line, where, f"no section named {obj['section']!r}"
                                 f"{did_you_mean(str(obj['section']), section_names)}")
                entries.append(RootEntry("section", obj["section"], line))
        elif isinstance(obj, LDict) and "component" in obj:
            if check_keys(obj, where, line, ("component",), ("component",), problems):
                if obj["component"] not in slots:
                    problems.add(line, where, f"no component slot {obj['component']!r}"
                                 f"{did_you_mean(str(obj['component']), slots)}")
                entries.append(RootEntry("component", obj["component"], line))
        else:
            spec = _field_spec(obj, where, problems, root=True)
            if spec is not None:
                entries.append(RootEntry("field", spec.name, spec.line, spec))
    names = [e.name for e in entries]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.add(raw.line, "root", f"{name!r} appears more than once")
    for name in sorted(section_names - {e.name for e in entries if e.kind == "section"}):
        problems.add(raw.line, "root", f"section {name!r} is not placed in root.fields; add "
                     f"`- {{section: {name}}}`")
    for slot in sorted(slots - {e.name for e in entries if e.kind == "component"}):
        problems.add(raw.line, "root", f"component {slot!r} is not placed in root.fields; add "
                     f"`- {{component: {slot}}}`")
    return one_line(raw["doc"]), entries


def load_table(path: Path, rel: str | None = None) -> Table:
    """Read and shape-check the table; a :class:`CodegenError` lists every problem."""
    rel = rel or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CodegenError(f"{rel}: cannot read the field table: {exc}") from None
    problems = Problems(rel)
    # The YAML-level problems (duplicate keys, unsupported tags) come first, then the schema's:
    # all of them are reported together.
    data = load(text, rel, problems.items)
    parts = ("schema_version", "sections", "components", "root", "mappings")
    if not check_keys(data, "the table", 1, parts, parts, problems) and not isinstance(data, LDict):
        raise CodegenError(problems.items)
    if "schema_version" in data and data["schema_version"] != 1:
        problems.add(data.key_lines["schema_version"], "schema_version",
                     f"this generator reads schema_version 1, got {data['schema_version']!r}")
    # A missing part is reported above; the others are still checked (the root's entries only
    # when the sections and components they name could be read).
    sections = _sections(data["sections"], problems) if "sections" in data else []
    components = _components(data["components"], problems) if "components" in data else []
    root_doc, root = "", []
    if "root" in data and "sections" in data and "components" in data:
        root_doc, root = _root(data["root"], sections, components, problems)
    rows = read_rows(data["mappings"], text.splitlines(), problems) if "mappings" in data else []
    if problems.items:
        raise CodegenError(problems.items)
    return Table(path, rel, text, hashlib.sha256(text.encode()).hexdigest(), sections,
                 components, root_doc, root, rows)
