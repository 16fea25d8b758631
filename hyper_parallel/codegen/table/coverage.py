"""Coverage and agreement: the table against the classes it describes.

Rules (each violation is a problem naming the field and the row, with the row to add or fix):

1. Every leaf field of the legacy ``HyperTrainerConfig`` is owned by exactly one row (``legacy``
   of a rename / transform / unsupported row). ``reads`` do not count.
2. Every leaf field of the new tree -- plain root fields, section fields, component Config fields
   -- is owned by exactly one row (``new`` of a rename / transform / new_only row). ``reads_new``
   do not count.
3. The component Configs declare exactly the fields the table's ``components:`` lists, with the
   same types and defaults.
4. A rename copies between compatible types (:func:`types.rename_compatible`) with equal
   defaults.
5. A transform's functions exist in ``hyper_parallel/config/transforms.py`` with keyword
   parameters named after the row's local names; ``forward`` maps the legacy defaults to the new
   defaults, ``backward`` maps them back, and ``canonical`` leaves the defaults alone -- so
   defaults agree across the two worlds.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.table import introspect
from hyper_parallel.codegen.table import types as T
from hyper_parallel.codegen.table.field_table import Table
from hyper_parallel.codegen.table.mapping_rows import Row
from hyper_parallel.utils.suggest import closest

TRANSFORMS_MODULE = "hyper_parallel.config.transforms"


@dataclass
class NewLeaf:
    """A leaf field of the new tree. ``container`` is the section or component slot ("" for
    plain root fields); ``origin`` is ``root``, ``section`` or ``component``."""

    path: str
    container: str
    origin: str
    name: str
    type: str
    default: Any
    doc: str
    spec: Any = None  # the table's FieldSpec for root / section fields


@dataclass
class Resolved:
    """Everything the emitters need, checked."""

    table: Table
    legacy: dict[str, introspect.FieldInfo]
    legacy_sections: dict[str, type]
    new: dict[str, NewLeaf]
    components: dict[str, dict[str, introspect.FieldInfo]]
    transforms: ModuleType
    owner_of_legacy: dict[str, Row]
    owner_of_new: dict[str, Row]


def load_transforms(src_root: Path) -> ModuleType:
    """``hyper_parallel/config/transforms.py``, loaded from its file.

    Loaded by path so that the generator does not import the ``hyper_parallel.config`` package
    (its ``__init__`` is not an input of the generator); an already imported module is reused.
    """
    if TRANSFORMS_MODULE in sys.modules:
        return sys.modules[TRANSFORMS_MODULE]
    path = src_root / "hyper_parallel" / "config" / "transforms.py"
    spec = importlib.util.spec_from_file_location("_hyper_parallel_codegen_transforms", path)
    if spec is None or spec.loader is None:
        raise CodegenError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _new_leaves(table: Table, components: dict[str, dict[str, introspect.FieldInfo]]
                ) -> dict[str, NewLeaf]:
    out: dict[str, NewLeaf] = {}
    for entry in table.root:
        if entry.kind == "field":
            s = entry.spec
            out[s.name] = NewLeaf(s.name, "", "root", s.name, s.type, s.default, s.doc, s)
        elif entry.kind == "section":
            for s in table.section(entry.name).fields:
                path = f"{entry.name}.{s.name}"
                out[path] = NewLeaf(path, entry.name, "section", s.name, s.type, s.default,
                                    s.doc, s)
        else:
            for name, info in components[entry.name].items():
                path = f"{entry.name}.{name}"
                out[path] = NewLeaf(path, entry.name, "component", name, info.type,
                                    info.default, info.doc)
    return out


def _check_components(table: Table, actual: dict[str, dict[str, introspect.FieldInfo]],
                      problems: list[str]) -> None:
    for comp in table.components:
        fields = actual[comp.slot]
        where = f"{comp.module}:{comp.owner}.Config"
        expected = {f.name: f for f in comp.fields}
        for f in comp.fields:
            loc = f"{table.rel}:{f.line}: components ({comp.slot}).{f.name}"
            if f.name not in fields:
                problems.append(
                    f"{loc}: {where} has no field {f.name!r} (it has: {', '.join(fields) or 'none'}"
                    "); remove the entry and its mapping row, or restore the field"
                )
                continue
            info = fields[f.name]
            if info.type != f.type:
                problems.append(
                    f"{loc}: wrong type: the table says {f.type}, {where}.{f.name} is declared "
                    f"{info.type}; write `{{name: {f.name}, type: '{info.type}', default: ...}}`"
                )
            if info.default is introspect.MISSING:
                problems.append(f"{loc}: {where}.{f.name} has no default; every Config field "
                                "needs one so that HyperTrainer.Config() is complete")
            elif info.default != f.default or type(info.default) is not type(f.default):
                problems.append(
                    f"{loc}: default disagrees: the table says {f.default!r}, {where}.{f.name} "
                    f"defaults to {info.default!r}"
                )
        for name, info in fields.items():
            if name not in expected:
                default = "null" if info.default is None else repr(info.default)
                problems.append(
                    f"{table.rel}:{comp.line}: components ({comp.slot}): {where}.{name} "
                    f"({info.type}, default {info.default!r}) is not in the table; add "
                    f"`- {{name: {name}, type: '{info.type}', default: {default}}}` to its "
                    f"fields and a mapping row for {comp.slot}.{name}"
                )


def _suggest_row(path: str, side: str, candidates: list[str]) -> str:
    leaf = path.rsplit(".", 1)[-1]
    same = [c for c in candidates if c.rsplit(".", 1)[-1] == leaf]
    guess = same[0] if same else None
    if guess is None:
        near = closest(leaf, [c.rsplit(".", 1)[-1] for c in candidates])
        guess = next((c for c in candidates if c.rsplit(".", 1)[-1] == near), None)
    # Every row carries a probe: the observable its field moves (codegen/table/probes.py).
    if side == "legacy":
        target = guess or "<section.field>"
        probe = f"probe: {{observe: <observable>, set: {{{target}: <a non-default value>}}}}"
        return (f"  - {{kind: rename, legacy: {path}, new: {target},\n     {probe}}}\n"
                f"or, if the new tree has no equivalent:\n"
                f"  - {{kind: unsupported, legacy: {path}, reason: <why>,\n"
                f"     probe: {{observe: refused, set: {{{path}: <a value>}}, expect: <why>}}}}")
    source = guess or "<legacy.path>"
    probe = f"probe: {{observe: <observable>, set: {{{path}: <a non-default value>}}}}"
    return (f"  - {{kind: new_only, new: {path}, reason: <why it has no legacy counterpart>,\n"
            f"     {probe}}}\n"
            f"or, if a legacy field maps onto it:\n"
            f"  - {{kind: rename, legacy: {source}, new: {path},\n     {probe}}}")


def _check_ownership(table: Table, legacy: dict, new: dict, problems: list[str]
                     ) -> tuple[dict[str, Row], dict[str, Row]]:
    owner_legacy: dict[str, Row] = {}
    owner_new: dict[str, Row] = {}
    for row in table.rows:
        loc = f"{table.rel}:{row.line}: {row.label}"
        for label, paths, known in (
            ("legacy", row.legacy, legacy), ("reads", row.reads, legacy),
            ("new", row.new, new), ("reads_new", row.reads_new, new),
        ):
            for path in paths.values():
                if path not in known:
                    world = "legacy schema" if label in ("legacy", "reads") else "new tree"
                    hint = closest(path, known)
                    problems.append(
                        f"{loc}: {label} field {path!r} does not exist in the {world}"
                        + (f" (did you mean {hint!r}?)" if hint else "")
                    )
        for path in row.legacy.values():
            if path in owner_legacy:
                first = owner_legacy[path]
                problems.append(
                    f"{loc}: legacy field {path!r} is already covered by {first.label} (line "
                    f"{first.line}); a field is covered exactly once"
                )
            elif path in legacy:
                owner_legacy[path] = row
        for path in row.new.values():
            if path in owner_new:
                first = owner_new[path]
                problems.append(
                    f"{loc}: new field {path!r} is already covered by {first.label} (line "
                    f"{first.line}); a field is covered exactly once"
                )
            elif path in new:
                owner_new[path] = row
    uncovered_legacy = [p for p in legacy if p not in owner_legacy]
    uncovered_new = [p for p in new if p not in owner_new]
    for path in uncovered_legacy:
        info = legacy[path]
        problems.append(
            f"{table.rel}: legacy field {path} ({info.type}, default {info.default!r}) is not "
            f"covered by any mapping row; add:\n{_suggest_row(path, 'legacy', uncovered_new)}"
        )
    for path in uncovered_new:
        leaf = new[path]
        problems.append(
            f"{table.rel}: new field {path} ({leaf.type}, default {leaf.default!r}) is not "
            f"covered by any mapping row; add:\n{_suggest_row(path, 'new', uncovered_legacy)}"
        )
    return owner_legacy, owner_new


def _same_value(a: Any, b: Any) -> bool:
    return a == b and type(a) is type(b)


def _check_rename(table: Table, row: Row, legacy: dict, new: dict, problems: list[str]) -> None:
    (lpath,), (npath,) = row.legacy.values(), row.new.values()
    if lpath not in legacy or npath not in new:
        return
    lf, nf = legacy[lpath], new[npath]
    loc = f"{table.rel}:{row.line}: {row.label}"
    if not T.rename_compatible(lf.type, nf.type):
        problems.append(
            f"{loc}: wrong type: rename {lpath} ({lf.type}) -> {npath} ({nf.type}) copies "
            "between different types; make the types agree or use a transform row"
        )
    if not _same_value(lf.default, nf.default):
        problems.append(
            f"{loc}: defaults disagree: {lpath} defaults to {lf.default!r}, {npath} to "
            f"{nf.default!r}; the new default must be what the legacy default converts to"
        )


def _call(fn: Any, kwargs: dict[str, Any]) -> Any:
    return fn(**kwargs)


def _check_transform(table: Table, row: Row, legacy: dict, new: dict, module: ModuleType,
                     problems: list[str]) -> None:
    loc = f"{table.rel}:{row.line}: {row.label}"
    paths = [*row.legacy.values(), *row.reads.values()]
    new_paths = [*row.new.values(), *row.reads_new.values()]
    if any(p not in legacy for p in paths) or any(p not in new for p in new_paths):
        return  # reported by the ownership check
    funcs = {}
    for key, params in (
        ("forward", {**row.legacy, **row.reads}),
        ("backward", {**row.new, **row.reads_new}),
        ("canonical", {**row.legacy, **row.reads}),
    ):
        name = getattr(row, key)
        if name is None:
            continue
        fn = getattr(module, name, None)
        if fn is None or not callable(fn):
            problems.append(f"{loc}: {key} function {name!r} is not defined in "
                            "hyper_parallel/config/transforms.py")
            continue
        got = set(inspect.signature(fn).parameters)
        if got != set(params):
            problems.append(
                f"{loc}: {key} {name}({', '.join(sorted(got))}) must take exactly the keyword "
                f"arguments {', '.join(sorted(params))} (the row's local names)"
            )
            continue
        funcs[key] = fn
    legacy_defaults = {k: legacy[p].default for k, p in {**row.legacy, **row.reads}.items()}
    new_defaults = {k: new[p].default for k, p in {**row.new, **row.reads_new}.items()}
    if "forward" in funcs:
        try:
            out = _call(funcs["forward"], legacy_defaults)
        except Exception as exc:  # noqa: BLE001 - a bug in transforms.py is a table problem
            problems.append(f"{loc}: forward {row.forward}(legacy defaults) raised {exc!r}")
            out = None
        if out is not None:
            if set(out) != set(row.new):
                problems.append(f"{loc}: forward {row.forward} returned keys {sorted(out)}, "
                                f"expected {sorted(row.new)}")
            else:
                for local, path in row.new.items():
                    if not _same_value(out[local], new[path].default):
                        problems.append(
                            f"{loc}: defaults disagree: forward({legacy_defaults}) gives "
                            f"{path}={out[local]!r} but its default is {new[path].default!r}"
                        )
    if "backward" in funcs:
        try:
            back = _call(funcs["backward"], new_defaults)
        except Exception as exc:  # noqa: BLE001 - reported with the row
            problems.append(f"{loc}: backward {row.backward}(new defaults) raised {exc!r}")
            back = None
        if back is not None:
            if set(back) != set(row.legacy):
                problems.append(f"{loc}: backward {row.backward} returned keys {sorted(back)}, "
                                f"expected {sorted(row.legacy)}")
            else:
                for local, path in row.legacy.items():
                    if not _same_value(back[local], legacy[path].default):
                        problems.append(
                            f"{loc}: defaults disagree: backward gives {path}={back[local]!r} "
                            f"but its legacy default is {legacy[path].default!r}"
                        )
    if "canonical" in funcs:
        try:
            changes = _call(funcs["canonical"], legacy_defaults)
        except Exception as exc:  # noqa: BLE001 - reported with the row
            problems.append(f"{loc}: canonical {row.canonical}(legacy defaults) raised {exc!r}")
            changes = {}
        if changes:
            problems.append(f"{loc}: canonical {row.canonical} changes the legacy defaults "
                            f"({sorted(changes)}); defaults must be canonical")


def resolve(table: Table, src_root: Path) -> Resolved:
    """Check coverage and agreement; a :class:`CodegenError` lists every problem."""
    problems: list[str] = []
    legacy = introspect.legacy_fields()
    sections = introspect.legacy_sections()
    components: dict[str, dict[str, introspect.FieldInfo]] = {}
    for comp in table.components:
        try:
            components[comp.slot] = introspect.component_fields(src_root, comp.module, comp.owner)
            introspect.component_fields(src_root, comp.slot_module, comp.slot_owner)
        except CodegenError as exc:
            problems.extend(exc.problems)
            components[comp.slot] = {}
    _check_components(table, components, problems)
    new = _new_leaves(table, components)
    owner_legacy, owner_new = _check_ownership(table, legacy, new, problems)
    module = load_transforms(src_root)
    for row in table.rows:
        if row.kind == "rename":
            _check_rename(table, row, legacy, new, problems)
        elif row.kind == "transform":
            _check_transform(table, row, legacy, new, module, problems)
    if problems:
        raise CodegenError(problems)
    return Resolved(table, legacy, sections, new, components, module, owner_legacy, owner_new)
