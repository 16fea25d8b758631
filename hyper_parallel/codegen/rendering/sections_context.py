"""The template contexts of ``hyper_parallel/config/configs.py`` (the generic section
dataclasses) and ``hyper_parallel/trainer/trainer_config.py`` (``HyperTrainer.Config``).

Every annotation, default and ``__post_init__`` check is decided here from the field table; the
templates only lay them out. A field's type and constraints become one ``check_*`` call of
:mod:`hyper_parallel.config.validation` (the rules :mod:`.constraints` states).
"""

from __future__ import annotations

import re
from typing import Any

from hyper_parallel.codegen.rendering.render import docstring
from hyper_parallel.codegen.table import types as T
from hyper_parallel.codegen.table.coverage import Resolved
from hyper_parallel.codegen.table.field_table import FieldSpec


def default_expr(value: Any) -> str:
    """Source of a field default: mutable values get a ``default_factory``."""
    if isinstance(value, list):
        return f"field(default_factory=lambda: {value!r})" if value else "field(default_factory=list)"
    if isinstance(value, dict):
        return f"field(default_factory=lambda: {value!r})" if value else "field(default_factory=dict)"
    return repr(value)


def check_calls(spec: FieldSpec, prefix: str = "") -> list[str]:
    """The ``check_*`` calls validating one table-defined field (type and constraints)."""
    base, optional = T.split_optional(spec.type)
    c = spec.constraints
    args: list[str] = []
    if optional:
        args.append("optional=True")
    name = f'self, "{spec.name}"'
    if base in ("int", "float"):
        if "min" in c:
            args.append(f"minimum={c['min']!r}")
        if "max" in c:
            args.append(f"maximum={c['max']!r}")
        if c.get("extra_values") and base == "int":
            args.append(f"extra={tuple(c['extra_values'])!r}")
        fn = "check_int" if base == "int" else "check_float"
    elif base == "bool":
        fn = "check_bool"
    elif base == "str":
        if c.get("nonempty"):
            args.append("nonempty=True")
        if "pattern" in c:
            args.append(f"pattern={c['pattern']!r}")
            if "pattern_hint" in c:
                args.append(f"hint={c['pattern_hint']!r}")
        fn = "check_str"
    elif base.startswith("Literal["):
        name += f", {tuple(T.literal_values(base))!r}"
        fn = "check_choice"
    elif base == "list[str]":
        if c.get("nonempty"):
            args.append("nonempty=True")
        if "items_choices" in c:
            args.append(f"choices={tuple(c['items_choices'])!r}")
        fn = "check_str_list"
    elif base in ("list[int]", "int | list[int]"):
        if "min" in c:
            args.append(f"minimum={c['min']!r}")
        fn = "check_int_list" if base == "list[int]" else "check_int_or_int_list"
    elif base == "list[list[str]]":
        fn = "check_str_lists"
    elif base.startswith("dict["):
        fn = "check_mapping"
    else:
        name += f", {base}"
        fn = "check_instance"
    return [f"{prefix}{fn}({', '.join([name, *args])})"]


def _called(lines: list[str]) -> set[str]:
    """Names of the validation helpers the generated ``lines`` call."""
    return {m.group(1) for line in lines if (m := _HELPER.match(line.strip()))}


_HELPER = re.compile(r"(check_\w+|fail)\(")
_TYPING_NAMES = ("Annotated", "Any", "Literal")


def _typing_names(annotations: list[str], always: set[str] = frozenset()) -> list[str]:
    """The ``typing`` names the annotations use (imports must be exactly the used ones)."""
    used = set(always)
    for text in annotations:
        used |= {n for n in _TYPING_NAMES if re.search(rf"\b{n}\[|\b{n}\b", text)}
    return sorted(used)


# ---------------------------------------------------------------------------------------------
# hyper_parallel/config/configs.py
# ---------------------------------------------------------------------------------------------


def configs_context(r: Resolved) -> dict[str, Any]:
    sections = []
    uses_field = False
    for s in r.table.sections:
        fields = []
        checks: list[str] = []
        for f in s.fields:
            default = default_expr(f.default)
            uses_field |= default.startswith("field(")
            fields.append({"name": f.name, "annotation": f.type, "default": default,
                           "doc": docstring(f.doc, 4)})
            checks.extend(check_calls(f))
        for chk in s.checks:
            cond = f"not ({chk.require})"
            if chk.when:
                cond = f"({chk.when}) and {cond}"
            checks.append(f"if {cond}:")
            checks.append(f"    fail(self, {chk.field!r}, {chk.message!r})")
        sections.append({"name": s.name, "cls": s.cls, "doc": docstring(s.doc, 4),
                         "fields": fields, "checks": checks})
    used = {name for s in sections for name in _called(s["checks"])}
    validators = sorted(used | {"ConfigFieldError"}, key=lambda n: (n[0].islower(), n))
    exports = sorted([s.cls for s in r.table.sections] + ["ConfigFieldError"])
    annotations = [f["annotation"] for s in sections for f in s["fields"]]
    return {"sections": sections, "exports": exports, "validators": validators,
            "uses_field": uses_field, "typing_imports": _typing_names(annotations)}


# ---------------------------------------------------------------------------------------------
# hyper_parallel/trainer/trainer_config.py
# ---------------------------------------------------------------------------------------------


def trainer_config_context(r: Resolved) -> dict[str, Any]:
    t = r.table
    fields = []
    checks: list[str] = []
    imports: dict[str, set[str]] = {}
    section_imports: set[str] = set()
    for entry in t.root:
        if entry.kind == "field":
            s = entry.spec
            annotation = (f"Annotated[{s.type}, tyro_rules.CLI_HIDDEN]" if s.cli_hidden
                          else s.type)
            fields.append({"name": s.name, "annotation": annotation,
                           "default": default_expr(s.default), "doc": docstring(s.doc, 4)})
            checks.extend(check_calls(s))
        elif entry.kind == "section":
            s = t.section(entry.name)
            section_imports.add(s.cls)
            fields.append({"name": s.name, "annotation": s.cls,
                           "default": f"field(default_factory={s.cls})",
                           "doc": docstring(s.doc, 4)})
            checks.append(f'check_instance(self, "{s.name}", {s.cls})')
        else:
            c = t.component(entry.name)
            imports.setdefault(c.module, set()).add(c.owner)
            imports.setdefault(c.slot_module, set()).add(c.slot_owner)
            fields.append({"name": c.slot, "annotation": f"{c.slot_owner}.Config",
                           "default": f"field(default_factory={c.owner}.Config)",
                           "doc": docstring(c.doc, 4)})
            checks.append(f'check_instance(self, "{c.slot}", {c.slot_owner}.Config)')
    component_imports = [
        f"from {module} import {', '.join(sorted(names))}" for module, names in sorted(imports.items())
    ]
    return {"root_doc": docstring(t.root_doc, 4), "fields": fields, "checks": checks,
            "component_imports": component_imports,
            "section_imports": sorted(section_imports),
            "validators": sorted(_called(checks)),
            "typing_imports": _typing_names([f["annotation"] for f in fields], {"Any"})}
