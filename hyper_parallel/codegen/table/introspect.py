"""What the classes the table describes actually declare.

* The legacy schema (``HyperTrainerConfig``) is imported -- it is framework-free -- and walked
  with ``dataclasses.fields``: every leaf field's dotted path, canonical type, default and
  docstring.
* The component Configs are read from their *source* with ``ast``, not imported, so the
  generator never depends on what a component module imports at run time. The reader follows what the classes
  use: a ``Config`` subclassing another component's ``Config``, a component without a ``Config``
  of its own (it inherits its base's, as ``Configurable`` derives it), defaults that name
  module constants (also across ``from x import NAME``), annotations that name a type alias
  (``decay_style: DecayStyle``, a ``Literal`` of ``hyper_parallel.utils.choices``),
  ``field(default_factory=...)`` and the attribute docstrings. ``tests/codegen/test_introspect.py`` checks the result against the
  imported classes, so the two readings cannot drift apart.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.table import types as T
from hyper_parallel.utils.docstrings import attribute_docstrings
from hyper_parallel.utils.literal_keys import dict_literal_keys

MISSING: Any = dataclasses.MISSING


@dataclass(frozen=True)
class FieldInfo:
    """One leaf field: dotted ``path`` (relative to its class for components), canonical
    ``type``, ``default`` (``MISSING`` when required) and ``doc``."""

    path: str
    type: str
    default: Any
    doc: str


# ---------------------------------------------------------------------------------------------
# the legacy schema (runtime)
# ---------------------------------------------------------------------------------------------


def legacy_fields(root_cls: type | None = None) -> dict[str, FieldInfo]:
    """``{dotted path: FieldInfo}`` of every leaf field of the legacy schema, in field order.

    Also returns the section classes through :func:`legacy_sections`.
    """
    if root_cls is None:
        from hyper_parallel.trainer.config import HyperTrainerConfig as root_cls
    all_docs = _module_field_docs(sys.modules[root_cls.__module__].__file__)

    out: dict[str, FieldInfo] = {}

    def walk(cls: type, instance: Any, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        docs = all_docs.get(cls.__name__, {})
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            path = f"{prefix}{f.name}"
            value = getattr(instance, f.name)
            if dataclasses.is_dataclass(tp):
                walk(tp, value, path + ".")
                continue
            out[path] = FieldInfo(path, T.canonical_runtime(tp), value, docs.get(f.name, ""))

    walk(root_cls, root_cls(), "")
    return out


def _module_field_docs(path: str) -> dict[str, dict[str, str]]:
    """``{class name: {field: docstring}}`` for the top-level classes of one source file, read
    with one parse (``inspect.getsource`` per class would re-parse the module every time)."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    out: dict[str, dict[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = attribute_docstrings(node.body)
    return out


def legacy_sections(root_cls: type | None = None) -> dict[str, type]:
    """``{dotted section path: class}``, the root as ``""``, in field order."""
    if root_cls is None:
        from hyper_parallel.trainer.config import HyperTrainerConfig as root_cls
    out: dict[str, type] = {"": root_cls}

    def walk(cls: type, prefix: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            if dataclasses.is_dataclass(tp):
                out[prefix + f.name] = tp
                walk(tp, prefix + f.name + ".")

    walk(root_cls, "")
    return out


# ---------------------------------------------------------------------------------------------
# component Configs (static)
# ---------------------------------------------------------------------------------------------


@dataclass
class _Module:
    name: str
    path: Path
    classes: dict[str, ast.ClassDef]
    constants: dict[str, ast.AST]
    imports: dict[str, tuple[str, str]]  # local name -> (module, name)
    functions: dict[str, ast.FunctionDef]


@functools.cache
def _read_module(src_root: Path, name: str) -> _Module:
    path = src_root / (name.replace(".", "/") + ".py")
    if not path.is_file():
        path = src_root / name.replace(".", "/") / "__init__.py"
    if not path.is_file():
        raise CodegenError(f"cannot find the source of module {name!r} under {src_root}")
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    classes: dict[str, ast.ClassDef] = {}
    constants: dict[str, ast.AST] = {}
    imports: dict[str, tuple[str, str]] = {}
    functions: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            classes[node.name] = node
        elif isinstance(node, ast.FunctionDef):
            functions[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                constants[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            constants[node.target.id] = node.value
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                imports[alias.asname or alias.name] = (node.module, alias.name)
    return _Module(name, path, classes, constants, imports, functions)


def _resolve_class(src_root: Path, module: _Module, name: str) -> tuple[_Module, ast.ClassDef] | None:
    """The class ``name`` as seen from ``module`` (defined there or imported), or None for
    ``Configurable`` and names outside the source tree (``abc.ABC``, ``Generic``)."""
    if name in module.classes:
        return module, module.classes[name]
    if name in module.imports:
        target_module, target_name = module.imports[name]
        if not target_module.startswith("hyper_parallel.") or target_name == "Configurable":
            return None
        other = _read_module(src_root, target_module)
        return _resolve_class(src_root, other, target_name)
    return None


def _eval_constant(src_root: Path, module: _Module, node: ast.AST, where: str, depth: int = 0) -> Any:
    if depth > 8:
        raise CodegenError(f"{where}: default refers to constants too deeply")
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if isinstance(node, ast.Name):
        if node.id in module.constants:
            return _eval_constant(src_root, module, module.constants[node.id], where, depth + 1)
        if node.id in module.imports:
            target_module, target_name = module.imports[node.id]
            other = _read_module(src_root, target_module)
            if target_name in other.constants:
                return _eval_constant(
                    src_root, other, other.constants[target_name], where, depth + 1
                )
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("field", "dataclasses.field"):
        for kw in node.keywords:
            if kw.arg == "default":
                return _eval_constant(src_root, module, kw.value, where, depth + 1)
            if kw.arg == "default_factory":
                factory = kw.value
                if isinstance(factory, ast.Name) and factory.id in ("list", "dict", "tuple"):
                    return {"list": [], "dict": {}, "tuple": ()}[factory.id]
                if isinstance(factory, ast.Lambda):
                    return _eval_constant(src_root, module, factory.body, where, depth + 1)
    raise CodegenError(
        f"{where}: cannot read the default {ast.unparse(node)!r} without importing the module; "
        "use a literal or a module-level constant"
    )


def _type_alias(src_root: Path, module: _Module, annotation: ast.AST) -> ast.AST:
    """The annotation a bare name stands for when it is a module-level alias of a subscripted
    type (``DecayStyle = Literal[...]``, defined in the module or imported from another
    ``hyper_parallel`` module, as the choice lists of ``hyper_parallel.utils.choices`` are);
    any other annotation as it is."""
    if not isinstance(annotation, ast.Name):
        return annotation
    owner, name = module, annotation.id
    if name not in owner.constants and name in owner.imports:
        target_module, name = owner.imports[name]
        if not target_module.startswith("hyper_parallel."):
            return annotation
        owner = _read_module(src_root, target_module)
    value = owner.constants.get(name)
    return value if isinstance(value, ast.Subscript) else annotation


def _is_classvar(annotation: ast.AST) -> bool:
    text = ast.unparse(annotation)
    return text.startswith(("ClassVar", "typing.ClassVar"))


def _config_fields(
    src_root: Path, module: _Module, owner: ast.ClassDef, seen: tuple[str, ...] = ()
) -> dict[str, FieldInfo]:
    """Fields of ``owner.Config`` (inherited first), as ``dataclasses.fields`` would list them."""
    if owner.name in seen:
        raise CodegenError(f"{module.name}.{owner.name}: cyclic Config inheritance")
    seen = seen + (owner.name,)
    config = next(
        (n for n in owner.body if isinstance(n, ast.ClassDef) and n.name == "Config"), None
    )
    fields: dict[str, FieldInfo] = {}
    if config is None:
        # Configurable derives `class Config(Base.Config): pass` for the first Configurable base.
        for base in owner.bases:
            resolved = _resolve_class(src_root, module, ast.unparse(base))
            if resolved is not None:
                return _config_fields(src_root, resolved[0], resolved[1], seen)
        return fields
    for base in config.bases:
        text = ast.unparse(base)
        if text.endswith(".Config") and text != "Configurable.Config":
            resolved = _resolve_class(src_root, module, text[: -len(".Config")])
            if resolved is None:
                raise CodegenError(f"{module.name}.{owner.name}.Config: cannot resolve base {text}")
            fields.update(_config_fields(src_root, resolved[0], resolved[1], seen))
    body = config.body
    docs = attribute_docstrings(body)
    for node in body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        if _is_classvar(node.annotation):
            continue
        name = node.target.id
        where = f"{module.path}:{node.lineno} ({owner.name}.Config.{name})"
        try:
            type_text = T.canonical(ast.unparse(_type_alias(src_root, module, node.annotation)))
        except T.TypeSyntaxError as exc:
            raise CodegenError(f"{where}: {exc}") from None
        default = MISSING if node.value is None else _eval_constant(
            src_root, module, node.value, where
        )
        fields[name] = FieldInfo(name, type_text, default, docs.get(name, ""))
    return fields


def component_fields(src_root: Path, module: str, owner: str) -> dict[str, FieldInfo]:
    """``{field name: FieldInfo}`` of ``<module>.<owner>.Config``, read from source."""
    mod = _read_module(src_root, module)
    if owner not in mod.classes:
        raise CodegenError(f"{mod.path}: no class {owner!r} (named by the table's components)")
    return _config_fields(src_root, mod, mod.classes[owner])


# ---------------------------------------------------------------------------------------------
# model packages (static): the flavor table and the spec factory a model descriptor names
# ---------------------------------------------------------------------------------------------


def mapping_keys(src_root: Path, module: str, name: str) -> list[str]:
    """The keys, in order, of the module-level dict literal ``<module>.<name>`` (a flavor table),
    read from source: the model packages import torch, the generator must not."""
    mod = _read_module(src_root, module)
    node = mod.constants.get(name)
    if not isinstance(node, ast.Dict):
        raise CodegenError(
            f"{mod.path}: {name} is not a module-level dict literal "
            f"({'not defined' if node is None else ast.unparse(node)[:40] + '...'}); the generator "
            "reads the flavor names from its keys"
        )
    try:
        keys = dict_literal_keys(ast.parse(mod.path.read_text(encoding="utf-8")), name)
    except ValueError as exc:
        raise CodegenError(f"{mod.path}: {exc}") from None
    return list(keys or ())


def function_parameters(src_root: Path, module: str, name: str) -> list[str]:
    """The positional parameter names of the module-level function ``<module>.<name>``, read
    from source (``CodegenError`` when the module defines no such function)."""
    mod = _read_module(src_root, module)
    fn = mod.functions.get(name)
    if fn is None:
        raise CodegenError(
            f"{mod.path}: no function {name!r}"
            + (f" (it defines: {', '.join(sorted(mod.functions))})" if mod.functions else "")
        )
    return [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]


def clear_cache() -> None:
    """Forget parsed sources (tests edit them)."""
    _read_module.cache_clear()
