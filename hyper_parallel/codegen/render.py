"""Template contexts, rendering and formatting of the generated files.

The Python-side work (deciding every annotation, default, check and call) happens here; the
Jinja2 templates in ``templates/`` only lay the results out, so the templates read like the files
they produce. Python output goes through black in-process with explicit settings
(:data:`BLACK_MODE`; black's own configuration discovery is never used), so the output does not
depend on the working directory or a ``pyproject.toml``.
"""

from __future__ import annotations

import decimal
import functools
import re
import textwrap
import time
from dataclasses import dataclass
from typing import Any

from hyper_parallel.codegen import types as T
from hyper_parallel.codegen.coverage import NewLeaf, Resolved
from hyper_parallel.codegen.descriptors import ModelDescriptor, Recipe, Setting
from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.table import FieldSpec, Row

LINE_LENGTH = 100
#: Where the generated section classes and ``HyperTrainer`` live (recipe modules import them).
CONFIGS_MODULE = "hyper_parallel.config.configs"
TRAINER_CONFIG_MODULE = "hyper_parallel.trainer.trainer_config"


@dataclass
class Timer:
    """Seconds spent in black (for ``bench/bench_codegen.py``)."""

    black_seconds: float = 0.0


def black_mode() -> Any:
    """black's settings, all explicit: py310+, 100 columns, the stable style."""
    import black

    return black.Mode(
        target_versions={black.TargetVersion.PY310},
        line_length=LINE_LENGTH,
        string_normalization=True,
        is_pyi=False,
        magic_trailing_comma=True,
        preview=False,
    )


def black_version() -> str:
    import black

    return black.__version__


def format_python(source: str, timer: Timer | None = None) -> str:
    """``source`` formatted by black (raises ``black.InvalidInput`` on a syntax error).

    Results are remembered for the life of the process (``check`` after ``generate``, and the
    tests, format the same text again); nothing is cached across processes.
    """
    start = time.perf_counter()
    try:
        return _format_cached(source)
    finally:
        if timer is not None:
            timer.black_seconds += time.perf_counter() - start


@functools.lru_cache(maxsize=32)
def _format_cached(source: str) -> str:
    import black

    return black.format_str(source, mode=black_mode())


# ---------------------------------------------------------------------------------------------
# shared helpers
# ---------------------------------------------------------------------------------------------


def docstring(text: str, indent: int) -> str:
    """``text`` wrapped for a docstring at ``indent`` spaces (continuation lines indented)."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    # Room for the opening and the closing quotes on every line keeps each line in bounds.
    width = LINE_LENGTH - indent - 6
    lines = textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)
    return ("\n" + " " * indent).join(lines)


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


def _md(text: str) -> str:
    """A docstring as one Markdown table cell (RST double backticks become single ones)."""
    return " ".join(text.replace("``", "`").replace("|", "\\|").split())


def _code(value: Any) -> str:
    return f"`{value!r}`" if not isinstance(value, str) else f'`"{value}"`'


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
            annotation = f"Annotated[{s.type}, _CliHidden]" if s.cli_hidden else s.type
            fields.append({"name": s.name, "annotation": annotation,
                           "default": default_expr(s.default), "doc": docstring(s.doc, 8)})
            checks.extend(check_calls(s))
        elif entry.kind == "section":
            s = t.section(entry.name)
            section_imports.add(s.cls)
            fields.append({"name": s.name, "annotation": s.cls,
                           "default": f"field(default_factory={s.cls})",
                           "doc": docstring(s.doc, 8)})
            checks.append(f'check_instance(self, "{s.name}", {s.cls})')
        else:
            c = t.component(entry.name)
            imports.setdefault(c.module, set()).add(c.owner)
            imports.setdefault(c.slot_module, set()).add(c.slot_owner)
            fields.append({"name": c.slot, "annotation": f"{c.slot_owner}.Config",
                           "default": f"field(default_factory={c.owner}.Config)",
                           "doc": docstring(c.doc, 8)})
            checks.append(f'check_instance(self, "{c.slot}", {c.slot_owner}.Config)')
    component_imports = [
        f"from {module} import {', '.join(sorted(names))}" for module, names in sorted(imports.items())
    ]
    return {"root_doc": docstring(t.root_doc, 8), "fields": fields, "checks": checks,
            "component_imports": component_imports,
            "section_imports": sorted(section_imports),
            "validators": sorted(_called(checks)),
            "typing_imports": _typing_names([f["annotation"] for f in fields], {"Any"})}


# ---------------------------------------------------------------------------------------------
# hyper_parallel/config/legacy_adapter.py
# ---------------------------------------------------------------------------------------------


def _describe(row: Row) -> str:
    if row.kind == "transform":
        names = [row.forward, row.backward] + ([row.canonical] if row.canonical else [])
        return " / ".join(names)
    return row.reason or ""


def _copy_if_mutable(expr: str, type_text: str) -> str:
    return f"copy.deepcopy({expr})" if T.mutable(type_text) else expr


def _call(fn_expr: str, values: dict[str, str], lead: list[str]) -> str:
    args = lead + [f"{k}={v}" for k, v in values.items()]
    return f"{fn_expr}({', '.join(args)})"


def legacy_adapter_context(r: Resolved) -> dict[str, Any]:
    t = r.table
    var = {row.index: f"row{row.index}" for row in t.rows if row.kind == "transform"}

    def comment(row: Row) -> str:
        def side(paths: list[str]) -> str:
            return paths[0] + (f" (+{len(paths) - 1} more)" if len(paths) > 1 else "")

        text = f"{row.label} (line {row.line}): " + " <-> ".join(
            ", ".join(paths) for paths in (list(row.legacy.values()), list(row.new.values())))
        if len(text) <= LINE_LENGTH - 6:
            return text
        return (f"{row.label} (line {row.line}): {side(list(row.legacy.values()))} <-> "
                f"{side(list(row.new.values()))}")

    # legacy -> new
    forward_calls, backward_calls, canonical_calls = [], [], []
    for row in t.rows:
        if row.kind != "transform":
            continue
        values = {k: f"legacy.{p}" for k, p in {**row.legacy, **row.reads}.items()}
        forward_calls.append({"comment": comment(row), "code": f"{var[row.index]} = "
                              + _call("_forward", values, [f"transforms.{row.forward}"])})
        new_values = {k: f"config.{p}" for k, p in {**row.new, **row.reads_new}.items()}
        paths = repr(tuple(row.new.values()))
        backward_calls.append({"comment": comment(row), "code": f"{var[row.index]} = "
                               + _call("_backward", new_values,
                                       [f"transforms.{row.backward}", paths])})
        if row.canonical:
            canonical_calls.append({
                "comment": comment(row),
                "code": f"_canonicalize(canon, notes, transforms.{row.canonical}, "
                        f"{dict(row.legacy)!r}, {dict(row.reads)!r})",
            })

    def new_value(leaf: NewLeaf) -> str | None:
        row = r.owner_of_new[leaf.path]
        if row.kind == "rename":
            (lpath,) = row.legacy.values()
            return _copy_if_mutable(f"legacy.{lpath}", leaf.type)
        if row.kind == "transform":
            local = next(k for k, p in row.new.items() if p == leaf.path)
            return _copy_if_mutable(f'{var[row.index]}["{local}"]', leaf.type)
        return None  # new_only: the default applies

    def new_node(cls_expr: str, where: str, leaves: list[NewLeaf]) -> str:
        kwargs = [f"{leaf.name}={v}" for leaf in leaves if (v := new_value(leaf)) is not None]
        return f"_new({', '.join([cls_expr, repr(where), *kwargs])})"

    root_kwargs = []
    forward_imports = {"from hyper_parallel.trainer.trainer_config import HyperTrainer"}
    backward_imports: set[str] = set()
    exact_checks = []
    for entry in t.root:
        if entry.kind == "field":
            leaf = r.new[entry.name]
            value = new_value(leaf)
            if value is not None:
                root_kwargs.append(f"{entry.name}={value}")
        elif entry.kind == "section":
            s = t.section(entry.name)
            leaves = [r.new[f"{s.name}.{f.name}"] for f in s.fields]
            root_kwargs.append(f"{s.name}={new_node(f'sections.{s.cls}', s.name, leaves)}")
            exact_checks.append(f'_require_class(config.{s.name}, sections.{s.cls}, "{s.name}")')
        else:
            c = t.component(entry.name)
            forward_imports.add(f"from {c.module} import {c.owner}")
            backward_imports.add(f"from {c.module} import {c.owner}")
            leaves = [r.new[f"{c.slot}.{name}"] for name in r.components[c.slot]]
            root_kwargs.append(f"{c.slot}={new_node(f'{c.owner}.Config', c.slot, leaves)}")
            exact_checks.append(f'_require_class(config.{c.slot}, {c.owner}.Config, "{c.slot}")')
    forward_tree = f"_new({', '.join(['HyperTrainer.Config', repr(''), *root_kwargs])})"

    # new -> legacy
    def legacy_value(path: str) -> str:
        row = r.owner_of_legacy[path]
        info = r.legacy[path]
        if row.kind == "rename":
            (npath,) = row.new.values()
            return _copy_if_mutable(f"config.{npath}", info.type)
        if row.kind == "transform":
            local = next(k for k, p in row.legacy.items() if p == path)
            return _copy_if_mutable(f'{var[row.index]}["{local}"]', info.type)
        return repr(info.default)  # unsupported: only the default converts

    def legacy_node(section_path: str) -> str:
        cls = r.legacy_sections[section_path]
        prefix = f"{section_path}." if section_path else ""
        kwargs = []
        import dataclasses

        for f in dataclasses.fields(cls):
            path = prefix + f.name
            if path in r.legacy_sections:
                kwargs.append(f"{f.name}={legacy_node(path)}")
            else:
                kwargs.append(f"{f.name}={legacy_value(path)}")
        return f"_legacy({', '.join([f'legacy_schema.{cls.__name__}', repr(section_path), *kwargs])})"

    new_only_checks = []
    unsupported_checks = []
    for row in t.rows:
        if row.kind == "new_only":
            (npath,) = row.new.values()
            leaf = r.new[npath]
            new_only_checks.append(
                f"_require_default(config.{npath}, {leaf.default!r}, FIELD_MAP[{row.index}])"
            )
        elif row.kind == "unsupported":
            (lpath,) = row.legacy.values()
            unsupported_checks.append(
                f"_unsupported(legacy.{lpath}, {r.legacy[lpath].default!r}, FIELD_MAP[{row.index}])"
            )

    columns = []
    for row in t.rows:
        cells = [row.kind, str(row.line), ", ".join(row.legacy.values()) or "-",
                 ", ".join(row.new.values()) or "-", _describe(row)]
        if any("|" in c or "\n" in c for c in cells):
            raise CodegenError(f"{t.rel}:{row.line}: {row.label}: '|' cannot appear in a "
                               "reason or path (it separates FIELD_MAP columns)")
        columns.append(cells)
    # Align the columns for reading; a rare very long cell (a many-field transform) is left
    # unpadded rather than widening every line.
    widths = [max((len(c[i]) for c in columns if len(c[i]) <= 48), default=0) for i in range(4)]
    field_map = [
        " | ".join([c.ljust(w) for c, w in zip(cells[:4], widths)] + [cells[4]]).rstrip()
        for cells in columns
    ]
    return {
        "table": t.rel,
        "field_map": field_map,
        "forward_imports": sorted(forward_imports),
        "backward_imports": sorted(backward_imports),
        "forward_calls": forward_calls,
        "forward_tree": forward_tree,
        "exact_checks": exact_checks,
        "new_only_checks": new_only_checks,
        "backward_calls": backward_calls,
        "backward_tree": legacy_node(""),
        "canonical_calls": canonical_calls,
        "unsupported_checks": unsupported_checks,
    }


# ---------------------------------------------------------------------------------------------
# docs/config_reference.md
# ---------------------------------------------------------------------------------------------

KIND_TEXT = {
    "rename": "the value is copied to the new path (same meaning, possibly a new name).",
    "transform": "the value is converted by a named pair of functions in "
    "`hyper_parallel/config/transforms.py` (they may read other fields).",
    "unsupported": "the new configuration cannot express a non-default value; converting a "
    "config that sets one is an error quoting the reason.",
    "new_only": "a new-tree field with no legacy key; converting to the legacy schema fails "
    "unless it holds its default.",
}


def _type_default(type_text: str, default: Any) -> str:
    # A "|" inside a table cell must be escaped, also within code spans (GitHub Markdown).
    return f"`{type_text}` = {_code(default)}".replace("|", "\\|")


def reference_context(r: Resolved) -> dict[str, Any]:
    t = r.table
    groups: dict[str, list[dict[str, str]]] = {name: [] for name in r.legacy_sections if name}
    for path, info in r.legacy.items():
        row = r.owner_of_legacy[path]
        group = path.rsplit(".", 1)[0]
        first = next(iter(row.legacy.values()))
        if row.kind == "unsupported":
            new, doc = "—", f"Unsupported: {row.reason}."
        elif path != first:
            # A many-field transform is described once, on its first legacy key.
            new = "see `" + first + "`"
            doc = f"{info.doc} Converted together with `{first}`; see that row."
            groups[group].append({
                "legacy": path, "legacy_type": _type_default(info.type, info.default),
                "new": new, "kind": f"transform<br>`{row.forward}`", "doc": _md(doc),
            })
            continue
        else:
            new = "<br>".join(
                f"`{p}`<br>{_type_default(r.new[p].type, r.new[p].default)}"
                for p in row.new.values()
            )
            doc = " ".join(r.new[p].doc for p in row.new.values())
        kind = row.kind
        if row.kind == "transform":
            kind = f"transform<br>`{row.forward}`"
            others = [p for p in row.legacy.values() if p != path]
            if others:
                doc += f" Converted together with {', '.join(f'`{p}`' for p in others)}."
            if row.reads:
                doc += f" Reads {', '.join(f'`{p}`' for p in row.reads.values())}."
        if row.note:
            doc += f" {row.note}"
        groups[group].append({
            "legacy": path, "legacy_type": _type_default(info.type, info.default), "new": new,
            "kind": kind, "doc": _md(doc),
        })
    legacy_groups = [{"name": name, "rows": rows} for name, rows in groups.items() if rows]
    new_only = []
    for row in t.rows:
        if row.kind == "new_only":
            (npath,) = row.new.values()
            leaf = r.new[npath]
            new_only.append({"path": npath, "type": _type_default(leaf.type, leaf.default),
                             "reason": _md(row.reason or "")})
    tree = []

    def legacy_of(path: str) -> str:
        row = r.owner_of_new[path]
        return "<br>".join(f"`{p}`" for p in row.legacy.values()) or "—"

    plain = [e for e in t.root if e.kind == "field"]
    tree.append({
        "name": "(root)", "cls": "HyperTrainer.Config", "doc": _md(t.root_doc),
        "fields": [{"path": e.name, "type": _type_default(r.new[e.name].type,
                                                          r.new[e.name].default),
                    "legacy": legacy_of(e.name), "doc": _md(r.new[e.name].doc)} for e in plain],
    })
    for entry in t.root:
        if entry.kind == "field":
            continue
        if entry.kind == "section":
            s = t.section(entry.name)
            name, cls, doc = s.name, f"{s.cls} (generated)", s.doc
        else:
            c = t.component(entry.name)
            name, cls, doc = c.slot, f"{c.owner}.Config", c.doc
        leaves = [leaf for leaf in r.new.values() if leaf.container == name]
        tree.append({"name": name, "cls": cls, "doc": _md(doc), "fields": [
            {"path": leaf.path, "type": _type_default(leaf.type, leaf.default),
             "legacy": legacy_of(leaf.path), "doc": _md(leaf.doc)} for leaf in leaves
        ]})
    return {"table": t.rel, "kinds": list(KIND_TEXT.items()), "legacy_groups": legacy_groups,
            "new_only": new_only, "tree": tree}


# ---------------------------------------------------------------------------------------------
# hyper_parallel/models/<model>/config_registry.py
# ---------------------------------------------------------------------------------------------


def docstring_paragraphs(text: str, indent: int) -> str:
    """Paragraphs (one per line of ``text``) wrapped for a docstring, a blank line between."""
    return ("\n\n" + " " * indent).join(docstring(p, indent) for p in text.split("\n") if p)


def _float(value: float) -> str:
    """A float as a person writes it: ``3e-4`` rather than ``0.0003`` for small magnitudes (the
    text round-trips to the same float), ``repr`` otherwise."""
    text = repr(value)
    if value == 0 or abs(value) >= 0.01 or "inf" in text or "nan" in text:
        return text
    sign, digits, exponent = decimal.Decimal(text).as_tuple()
    mantissa = "".join(map(str, digits)).rstrip("0") or "0"
    power = exponent + len(digits) - 1
    short = ("-" if sign else "") + mantissa[0] + (f".{mantissa[1:]}" if len(mantissa) > 1
                                                   else "") + f"e{power}"
    return short if float(short) == value else text


def _value(value: Any) -> str:
    """Source of a descriptor value (black then turns the quotes into double quotes)."""
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, tuple):
        items = [_value(v) for v in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if isinstance(value, list):
        return f"[{', '.join(_value(v) for v in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_value(k)}: {_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _base_recipe_call(r: Resolved, model: ModelDescriptor, recipe: Recipe,
                      imports: dict[str, set[str]]) -> list[str]:
    """The keyword arguments of ``HyperTrainer.Config(...)`` for a base recipe: the spec, then
    every section / component / root field the recipe sets, in the tree's order."""
    t = r.table
    grouped: dict[str, list[Setting]] = {}
    for s in recipe.settings:
        grouped.setdefault(r.new[s.path].container, []).append(s)
    root_values = {s.path: s.value for s in grouped.get("", [])}
    kwargs = [f"model_spec={model.factory}({recipe.flavor!r})"]
    for entry in t.root:
        if entry.kind == "field":
            if entry.name in root_values:
                kwargs.append(f"{entry.name}={_value(root_values[entry.name])}")
            continue
        settings = grouped.get(entry.name)
        if not settings:
            continue  # the section's default_factory gives its defaults
        if entry.kind == "section":
            cls = t.section(entry.name).cls
            imports.setdefault(CONFIGS_MODULE, set()).add(cls)
        else:
            c = t.component(entry.name)
            imports.setdefault(c.module, set()).add(c.owner)
            cls = f"{c.owner}.Config"
        args = ", ".join(f"{r.new[s.path].name}={_value(s.value)}" for s in settings)
        kwargs.append(f"{entry.name}={cls}({args})")
    return kwargs


def config_registry_context(r: Resolved, model: ModelDescriptor) -> dict[str, Any]:
    imports: dict[str, set[str]] = {TRAINER_CONFIG_MODULE: {"HyperTrainer"}}
    recipes = []
    for recipe in model.recipes:
        doc = docstring_paragraphs(recipe.doc, 4)
        # A docstring of several lines closes on a line of its own (PEP 257).
        item: dict[str, Any] = {"name": recipe.name, "base": recipe.base,
                                "doc": doc + ("\n    " if "\n" in doc else "")}
        if recipe.base is None:
            imports.setdefault(model.factory_module, set()).add(model.factory)
            item["kwargs"] = _base_recipe_call(r, model, recipe, imports)
        else:
            item["assignments"] = [f"config.{s.path} = {_value(s.value)}"
                                   for s in recipe.settings]
        recipes.append(item)
    paragraphs = [
        (f"Training recipes of ``{model.name}``: one zero-argument function per recipe, each "
         "returning a fresh ``HyperTrainer.Config``."),
        model.doc,
        (f"Run one with ``--module {model.name} --config <recipe>`` and override any field on "
         "the command line (``--training.steps=10``). A recipe derived from another calls it "
         "and changes only what differs; a base recipe states only the values that are not "
         "defaults."),
        f"Generated from ``{model.rel}``; edit the descriptor, not this file.",
    ]
    module_doc = docstring_paragraphs("\n".join(paragraphs), 0)
    return {
        "module_doc": module_doc,
        "imports": [f"from {module} import {', '.join(sorted(names))}"
                    for module, names in sorted(imports.items())],
        "exports": sorted(recipe.name for recipe in model.recipes),
        "recipes": recipes,
    }
