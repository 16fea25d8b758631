"""``codegen/field_table.yaml`` as checked Python objects.

:func:`load_table` validates the *shape* of the table -- known keys, required keys, value kinds,
parseable types, defaults that fit their types, constraints that fit their fields -- and reports
every problem with ``file:line`` and the row (``mappings[12]``). Whether the rows agree with the
classes and cover every field is :mod:`hyper_parallel.codegen.coverage`'s job.
"""

from __future__ import annotations

import hashlib
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyper_parallel.codegen import types as T
from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.probes import OBSERVABLES, PROBE_KEYS
from hyper_parallel.codegen.yamlsrc import INVALID, LDict, LList, load, plain
from hyper_parallel.utils.suggest import did_you_mean

KINDS = ("rename", "transform", "unsupported", "new_only")
CONSTRAINTS = ("min", "max", "extra_values", "nonempty", "pattern", "pattern_hint", "items_choices")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
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
class Row:
    """One mapping row; ``legacy`` / ``new`` / ``reads`` / ``reads_new`` map local names to
    dotted paths (rename rows use the leaf names as local names)."""

    index: int
    line: int
    kind: str
    legacy: dict[str, str]
    new: dict[str, str]
    reads: dict[str, str] = field(default_factory=dict)
    reads_new: dict[str, str] = field(default_factory=dict)
    forward: str | None = None
    backward: str | None = None
    canonical: str | None = None
    reason: str | None = None
    note: str | None = None
    probe: dict = field(default_factory=dict)
    """The setting and the observable it moves (see :mod:`hyper_parallel.codegen.probes`)."""
    raw: str = ""

    @property
    def label(self) -> str:
        return f"mappings[{self.index}]"


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


class _Problems:
    def __init__(self, rel: str):
        self.rel = rel
        self.items: list[str] = []

    def add(self, line: int, where: str, message: str) -> None:
        self.items.append(f"{self.rel}:{line}: {where}: {message}")


def _text(value: Any) -> str:
    return " ".join(str(value).split()) if value is not None else ""


def _keys(
    obj: Any, where: str, line: int, allowed: tuple[str, ...], required: tuple[str, ...],
    problems: _Problems,
) -> bool:
    if not isinstance(obj, LDict):
        problems.add(line, where, f"must be a mapping, got {type(obj).__name__} {obj!r}")
        return False
    ok = True
    for key in obj:
        if key not in allowed:
            problems.add(
                obj.key_lines[key], where,
                f"unknown key {key!r}{did_you_mean(key, allowed)}; allowed: {', '.join(allowed)}",
            )
            ok = False
    for key in required:
        if key not in obj:
            problems.add(obj.line, where, f"missing key {key!r}")
            ok = False
    return ok


def _parse_type(text: Any, where: str, line: int, problems: _Problems) -> str | None:
    if not isinstance(text, str):
        problems.add(line, where, f"type must be a string, got {text!r}")
        return None
    try:
        return T.canonical(text)
    except T.TypeSyntaxError as exc:
        problems.add(line, where, str(exc))
        return None


def _field_spec(obj: LDict, where: str, problems: _Problems, *, root: bool = False) -> FieldSpec | None:
    allowed = ("name", "type", "default", "doc", *CONSTRAINTS) + (("cli",) if root else ())
    if not _keys(obj, where, getattr(obj, "line", 0), allowed, ("name", "type", "default", "doc"),
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
    _check_constraints(constraints, type_text, default, where, obj, problems)
    cli = obj.get("cli")
    if cli not in (None, "hidden"):
        problems.add(obj.key_lines["cli"], where, f"cli must be 'hidden', got {cli!r}")
    doc = _text(obj["doc"])
    if not doc:
        problems.add(line, where, "doc must not be empty (it is the --help text)")
    return FieldSpec(name, type_text, default, doc, line, constraints, cli == "hidden")


def _check_constraints(
    constraints: dict[str, Any], type_text: str, default: Any, where: str, obj: LDict,
    problems: _Problems,
) -> None:
    base, _optional = T.split_optional(type_text)
    numeric = base in ("int", "float")
    wrong: set[str] = set()

    def bad(key: str, message: str) -> None:
        problems.add(obj.key_lines[key], where, message)
        wrong.add(key)

    for key, value in constraints.items():
        if key in ("min", "max"):
            if not numeric or not T.matches(value, base):
                bad(key, f"{key} needs an {base} field and an {base} bound")
        elif key == "extra_values":
            if not numeric or not isinstance(value, list) or not all(T.matches(v, base) for v in value):
                bad(key, "extra_values must list values of the field's type")
        elif key == "nonempty":
            if value is not True or base not in ("str", "list[str]"):
                bad(key, "nonempty: true applies to str and list[str] fields")
        elif key == "pattern":
            if base != "str" or not isinstance(value, str):
                bad(key, "pattern applies to str fields")
            else:
                try:
                    re.compile(value)
                except re.error as exc:
                    bad(key, f"pattern is not a regular expression: {exc}")
        elif key == "pattern_hint" and "pattern" not in constraints:
            bad(key, "pattern_hint needs a pattern")
        elif key == "items_choices" and (base != "list[str]" or not isinstance(value, list)):
            bad(key, "items_choices applies to list[str] fields")
    # The default against the constraints that are themselves right (a wrong one is reported).
    usable = {k: v for k, v in constraints.items() if k not in wrong}
    if default is not None and not satisfies_constraints(usable, base, default):
        problems.add(obj.key_lines["default"], where,
                     f"default {default!r} violates the field's own constraints")


def satisfies_constraints(constraints: dict[str, Any], base: str, value: Any) -> bool:
    """Whether ``value`` (not None) satisfies ``constraints`` (the rules __post_init__ emits)."""
    extra = constraints.get("extra_values") or []
    if value in extra and base in ("int", "float"):
        return True
    if "min" in constraints and value < constraints["min"]:
        return False
    if "max" in constraints and value > constraints["max"]:
        return False
    if constraints.get("nonempty"):
        items = value if isinstance(value, list) else [value]
        if any(v == "" for v in items):
            return False
    if "pattern" in constraints and not re.fullmatch(constraints["pattern"], value):
        return False
    choices = constraints.get("items_choices")
    return choices is None or all(v in choices for v in value)


def _sections(raw: Any, problems: _Problems) -> list[Section]:
    out: list[Section] = []
    if not isinstance(raw, LList):
        problems.add(getattr(raw, "line", 1), "sections", "must be a list of sections")
        return out
    for i, obj in enumerate(raw):
        where = f"sections[{i}]"
        if not _keys(obj, where, raw.item_lines[i], ("name", "class", "doc", "fields", "checks"),
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
            if not _keys(cobj, cwhere, obj.line, ("field", "when", "require", "message"),
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
            checks.append(Check(cobj["field"], str(cobj["require"]), _text(cobj["message"]),
                                cobj.line, cobj.get("when")))
        out.append(Section(name, cls, _text(obj["doc"]), fields, checks, obj.line))
    return out


def _split_target(text: Any, where: str, line: int, problems: _Problems) -> tuple[str, str] | None:
    if not isinstance(text, str) or not _TARGET.fullmatch(text):
        problems.add(line, where, f"expected 'package.module:Class', got {text!r}")
        return None
    module, owner = text.split(":")
    return module, owner


def _components(raw: Any, problems: _Problems) -> list[Component]:
    out: list[Component] = []
    if not isinstance(raw, LList):
        problems.add(getattr(raw, "line", 1), "components", "must be a list")
        return out
    for i, obj in enumerate(raw):
        where = f"components[{i}]"
        if not _keys(obj, where, raw.item_lines[i], ("slot", "class", "slot_type", "doc", "fields"),
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
            if not _keys(fobj, fwhere, obj.line, ("name", "type", "default"),
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
        out.append(Component(obj["slot"], *target, *slot_target, _text(obj["doc"]), expected,
                             obj.line))
    return out


def _root(raw: Any, sections: list[Section], components: list[Component],
          problems: _Problems) -> tuple[str, list[RootEntry]]:
    if not _keys(raw, "root", getattr(raw, "line", 1), ("doc", "fields"), ("doc", "fields"),
                 problems):
        return "", []
    entries: list[RootEntry] = []
    section_names = {s.name for s in sections}
    slots = {c.slot for c in components}
    if not isinstance(raw["fields"], LList):
        problems.add(raw.key_lines["fields"], "root", "fields must be a list of root entries")
        return _text(raw["doc"]), entries
    for i, obj in enumerate(raw["fields"]):
        where = f"root.fields[{i}]"
        line = raw["fields"].item_lines[i]
        if isinstance(obj, LDict) and any(not isinstance(obj.get(k, ""), str)
                                          for k in ("section", "component")):
            problems.add(line, where, "section / component must name one by its name, got "
                         f"{obj.get('section', obj.get('component'))!r}")
        elif isinstance(obj, LDict) and "section" in obj:
            if _keys(obj, where, line, ("section",), ("section",), problems):
                if obj["section"] not in section_names:
                    problems.add(line, where, f"no section named {obj['section']!r}"
                                 f"{did_you_mean(str(obj['section']), section_names)}")
                entries.append(RootEntry("section", obj["section"], line))
        elif isinstance(obj, LDict) and "component" in obj:
            if _keys(obj, where, line, ("component",), ("component",), problems):
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
    return _text(raw["doc"]), entries


# Every row needs a probe (see hyper_parallel/codegen/probes.py): accepted-and-ignored fields
# cannot land.
_ROW_KEYS = {
    "rename": (("kind", "legacy", "new", "note", "probe"), ("kind", "legacy", "new")),
    "transform": (
        ("kind", "legacy", "new", "reads", "reads_new", "forward", "backward", "canonical", "note",
         "probe"),
        ("kind", "legacy", "new", "forward", "backward"),
    ),
    "unsupported": (("kind", "legacy", "reason", "note", "probe"), ("kind", "legacy", "reason")),
    "new_only": (("kind", "new", "reason", "note", "probe"), ("kind", "new", "reason")),
}
"""Allowed and required keys per row kind; ``probe`` is required of every row too, reported on
its own so that a row without one still gets its other problems checked."""


def _probe(obj: Any, where: str, line: int, own: list[str], problems: _Problems) -> dict | None:
    """Shape-check a row's probe; ``own`` are the paths one of which ``set`` must contain."""
    where = f"{where}.probe"
    if not _keys(obj, where, line, PROBE_KEYS, ("observe", "set"), problems):
        return None
    ok = True
    observe = obj["observe"]
    if observe not in OBSERVABLES:
        problems.add(obj.key_lines["observe"], where, f"observe: unknown observable {observe!r}"
                     f"{did_you_mean(str(observe), OBSERVABLES)}; known: {', '.join(OBSERVABLES)}")
        ok = False
    for key in ("set", "base"):
        value = obj.get(key, LDict() if key == "base" else None)
        if not isinstance(value, dict) or (key == "set" and not value) or not all(
                isinstance(k, str) and _PATH.fullmatch(k) for k in value):
            problems.add(obj.key_lines[key], where, f"{key} must map dotted field paths to "
                         f"values, got {value!r}")
            ok = False
    if ok and not any(path in obj["set"] for path in own):
        problems.add(obj.key_lines["set"], where, f"set must set the row's own field "
                     f"({' or '.join(own)}), so the probe tests this row")
        ok = False
    for key, needed in (("path", "attribute"), ("expect", "refused")):
        if (key in obj) != (observe == needed):
            problems.add(line, where, f"{key} is required with observe: {needed}, and only then")
            ok = False
    if obj.get("ranks", 1) not in (1, 2):
        problems.add(obj.key_lines["ranks"], where, f"ranks must be 1 or 2, got {obj['ranks']!r}")
        ok = False
    steps = obj.get("steps", 3)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        problems.add(obj.key_lines["steps"], where, f"steps must be an integer >= 0, got {steps!r}")
        ok = False
    return plain(obj) if ok else None


def _path_map(value: Any, where: str, line: int, key: str, problems: _Problems,
              *, single: bool) -> dict[str, str] | None:
    if single:
        if not isinstance(value, str) or not _PATH.fullmatch(value):
            problems.add(line, where, f"{key} must be a dotted field path, got {value!r}")
            return None
        return {value.rsplit(".", 1)[-1]: value}
    if not isinstance(value, LDict) or not value:
        problems.add(line, where, f"{key} must map local names to dotted paths "
                     f"({{local_name: a.b.c}}), got {value!r}")
        return None
    out = {}
    for local, path in value.items():
        if not _IDENT.fullmatch(local) or keyword.iskeyword(local):
            problems.add(value.key_lines[local], where, f"{key}: {local!r} is not a usable "
                         "keyword name")
        if not isinstance(path, str) or not _PATH.fullmatch(path):
            problems.add(value.key_lines[local], where, f"{key}.{local} must be a dotted path, "
                         f"got {path!r}")
            return None
        out[local] = path
    return out


def _rows(raw: Any, lines: list[str], problems: _Problems) -> list[Row]:
    out: list[Row] = []
    if not isinstance(raw, LList):
        problems.add(getattr(raw, "line", 1), "mappings", "must be a list of rows")
        return out
    for i, obj in enumerate(raw):
        line = raw.item_lines[i]
        where = f"mappings[{i}]"
        if not isinstance(obj, LDict):
            problems.add(line, where, f"a row must be a mapping, got {obj!r}")
            continue
        kind = obj.get("kind")
        if kind not in KINDS:
            problems.add(line, where, f"kind must be one of {', '.join(KINDS)}, got {kind!r}"
                         f"{did_you_mean(str(kind), KINDS)}")
            continue
        allowed, required = _ROW_KEYS[kind]
        if not _keys(obj, where, line, allowed, required, problems):
            continue
        single = kind != "transform"
        legacy = new = {}
        if "legacy" in obj:
            legacy = _path_map(obj["legacy"], where, obj.key_lines["legacy"], "legacy", problems,
                               single=single)
        if "new" in obj:
            new = _path_map(obj["new"], where, obj.key_lines["new"], "new", problems,
                            single=single)
        reads = reads_new = {}
        if "reads" in obj:
            reads = _path_map(obj["reads"], where, obj.key_lines["reads"], "reads", problems,
                              single=False)
        if "reads_new" in obj:
            reads_new = _path_map(obj["reads_new"], where, obj.key_lines["reads_new"],
                                  "reads_new", problems, single=False)
        if legacy is None or new is None or reads is None or reads_new is None:
            continue
        for key in ("forward", "backward", "canonical"):
            if key in obj and (not isinstance(obj[key], str) or not _IDENT.fullmatch(obj[key])):
                problems.add(obj.key_lines[key], where, f"{key} must name a function in "
                             f"hyper_parallel/config/transforms.py, got {obj[key]!r}")
        if set(legacy) & set(reads):
            problems.add(line, where, "a local name is used in both legacy and reads")
        if set(new) & set(reads_new):
            problems.add(line, where, "a local name is used in both new and reads_new")
        own = list(legacy.values()) if kind == "unsupported" else list(new.values())
        probe = None
        if "probe" not in obj:
            problems.add(line, where, "missing key 'probe': every row names a non-default "
                         "setting and the observable it moves (hyper_parallel/codegen/probes.py)")
        else:
            probe = _probe(obj["probe"], where, obj.key_lines["probe"], own, problems)
        end = raw.item_lines[i + 1] - 1 if i + 1 < len(raw) else len(lines)
        block = lines[line - 1:end]
        while len(block) > 1 and (not block[-1].strip() or block[-1].lstrip().startswith("#")):
            block.pop()
        text = "\n".join(block)
        out.append(Row(
            index=i, line=line, kind=kind, legacy=legacy, new=new, reads=reads,
            reads_new=reads_new, forward=obj.get("forward"), backward=obj.get("backward"),
            canonical=obj.get("canonical"),
            reason=_text(obj["reason"]) if "reason" in obj else None,
            note=_text(obj["note"]) if "note" in obj else None, probe=probe or {}, raw=text,
        ))
    return out


def load_table(path: Path, rel: str | None = None) -> Table:
    """Read and shape-check the table; a :class:`CodegenError` lists every problem."""
    rel = rel or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CodegenError(f"{rel}: cannot read the field table: {exc}") from None
    problems = _Problems(rel)
    # The YAML-level problems (duplicate keys, YAML 1.1 spellings) come first, then the schema's:
    # all of them are reported together.
    data = load(text, rel, problems.items)
    parts = ("schema_version", "sections", "components", "root", "mappings")
    if not _keys(data, "the table", 1, parts, parts, problems) and not isinstance(data, LDict):
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
    rows = _rows(data["mappings"], text.splitlines(), problems) if "mappings" in data else []
    if problems.items:
        raise CodegenError(problems.items)
    return Table(path, rel, text, hashlib.sha256(text.encode()).hexdigest(), sections,
                 components, root_doc, root, rows)
