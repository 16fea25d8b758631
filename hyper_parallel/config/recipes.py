"""Recipes: turn the ``--module M --config F`` pair into a config.

Resolve ``--module`` to a module, list its recipes (:func:`available_recipes`), call the
zero-argument recipe ``F()`` (:func:`load_recipe`) and re-run every ``__post_init__`` of the
tree it returns (:func:`revalidate`).
The module is searched as ``hyper_parallel.models.<M>.config_registry``, then
``<M>.config_registry``, then ``<M>`` itself — so ``--module recipes.my_run`` works.

Every way the pair is unusable is one :class:`RecipeError` (a module that is missing or fails to
import, a recipe that is missing, private, needs arguments, raises, exits or returns something
else than a config), with the file:line where the import or the recipe failed, never a
traceback.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import os
import sys
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

from hyper_parallel.protocols.configurable import config_name
from hyper_parallel.utils.suggest import did_you_mean


class RecipeError(ValueError):
    """The ``--module`` / ``--config`` pair does not name a usable recipe."""


def _candidates(module: str) -> list[str]:
    names = []
    if "." not in module:
        names.append(f"hyper_parallel.models.{module}.config_registry")
    names += [f"{module}.config_registry", module]
    return names


def _shown(filename: str) -> str:
    """``filename`` relative to the working directory when it is below it."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive (Windows)
        return filename
    return filename if relative.startswith("..") else relative


def _is_ours(filename: str) -> bool:
    """Frames of this module and of the import machinery: never the place to fix."""
    return (filename.startswith("<") or os.path.abspath(filename) == os.path.abspath(__file__)
            or os.sep + "importlib" + os.sep in filename)


def _import_location(exc: BaseException) -> str:
    """`` (file:line)`` of an import failure: where a ``SyntaxError`` is, else the last frame in
    the file of the module being imported (the first module-level frame of the traceback), and
    the deepest frame too when that is in another file (a helper the module imports)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" ({_shown(exc.filename)}:{exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_ours(f.filename)]
    if not frames:
        return ""
    top = next((f for f in frames if f.name == "<module>"), frames[0]).filename
    in_module = [f for f in frames if f.filename == top][-1]
    where = f" ({_shown(in_module.filename)}:{in_module.lineno}"
    deepest = frames[-1]
    if deepest.filename != top:
        where += f", raised in {_shown(deepest.filename)}:{deepest.lineno}"
    return where + ")"


def resolve_recipe_module(module: str) -> ModuleType:
    """Import the first existing candidate; an import that fails *inside* a module is re-raised
    with its real cause and the file:line where it failed, never reported as 'not found'. A
    ``.py`` path is imported from that file (a run record's ``config.py``, say)."""
    if module.endswith(".py"):
        return _module_from_file(module)
    for name in _candidates(module):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # Not found is only "this candidate does not exist" when the missing module is the
            # candidate itself or one of its parent packages.
            if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
                continue
            raise RecipeError(
                f"--module {module}: importing {name!r} failed: {type(exc).__name__}: {exc}"
                f"{_import_location(exc)}"
            ) from None
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure inside the module
            detail = exc.msg if isinstance(exc, SyntaxError) else exc
            raise RecipeError(
                f"--module {module}: importing {name!r} failed: {type(exc).__name__}: {detail}"
                f"{_import_location(exc)}"
            ) from None
    builtin = _builtin_registries()
    raise RecipeError(
        f"--module {module}: no such module (tried {', '.join(_candidates(module))})"
        f"{did_you_mean(module, builtin)}. Built-in recipe modules: {', '.join(builtin) or '(none)'}"
    )


def _module_from_file(path: str) -> ModuleType:
    """The module of the file ``path``, under a name of its own (its path's hash), so two
    record files never share one module."""
    import hashlib

    file = os.path.abspath(path)
    if not os.path.isfile(file):
        raise RecipeError(f"--module {path}: no such file")
    name = "_hyper_parallel_recipe_" + hashlib.sha256(file.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure inside the module
        del sys.modules[name]
        detail = exc.msg if isinstance(exc, SyntaxError) else exc
        raise RecipeError(f"--module {path}: importing it failed: {type(exc).__name__}: "
                          f"{detail}{_import_location(exc)}") from None
    return module


def _builtin_registries() -> list[str]:
    import pkgutil

    from hyper_parallel import models

    found = []
    for info in pkgutil.iter_modules(models.__path__):
        if info.ispkg:
            try:
                spec = importlib.util.find_spec(f"hyper_parallel.models.{info.name}.config_registry")
            except Exception:  # noqa: BLE001 - a model package that fails to import has no registry
                spec = None
            if spec is not None:
                found.append(info.name)
    return sorted(found)


def _required_parameters(fn: Callable[..., Any]) -> list[str]:
    """The parameters ``fn`` cannot be called without (none for a recipe)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read (some builtins): let the call tell
        return []
    return [p.name for p in signature.parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]


def available_recipes(module: ModuleType) -> list[str]:
    """The recipes of ``module``: public (no leading ``_``), lower-case, callable without
    arguments, and defined by the module itself (imported helpers are not its recipes)."""
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or not name[:1].islower() or not callable(value):
            continue
        if isinstance(value, type) or getattr(value, "__module__", None) != module.__name__:
            continue  # classes and imported helpers are not recipes
        if _required_parameters(value):
            continue
        names.append(name)
    return sorted(names)


def _raise_location(exc: BaseException, module_file: str | None) -> str:
    """`` (file:line)`` of the deepest frame of ``exc`` in the recipe module's file, else of
    the deepest frame outside this module."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_ours(f.filename)]
    if module_file:
        mine = [f for f in frames
                if os.path.abspath(f.filename) == os.path.abspath(module_file)]
        frames = mine or frames
    return f" (at {_shown(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""


def load_recipe(module: str, config: str, root_type: type | None = None) -> Any:
    """Call recipe ``config`` of ``module`` and return the config it builds.

    ``root_type``: the class the caller builds from the config (``train`` passes
    ``HyperTrainer.Config``); unset, any dataclass instance is a config. Every way the recipe
    can be unusable is a :class:`RecipeError` naming ``module.config()``: not found, private,
    a class, needs arguments, raises (with the file:line of the raising frame in the recipe
    module), calls ``sys.exit`` or returns something else than a ``root_type`` instance."""
    mod = resolve_recipe_module(module)
    recipes = available_recipes(mod)
    listing = f"Available: {', '.join(recipes) or '(none)'}"
    where = f"--config {config}: {mod.__name__}.{config}"
    if config.startswith("_"):
        raise RecipeError(f"{where} is private (a leading '_' marks a helper, never a recipe); "
                          f"{listing}")
    fn: Callable[[], Any] | None = getattr(mod, config, None)
    if fn is None or not callable(fn):
        what = "has no recipe" if fn is None else "is not a recipe (not callable):"
        raise RecipeError(
            f"--config {config}: {mod.__name__} {what} {config!r}"
            f"{did_you_mean(config, recipes)}. {listing}"
        )
    if isinstance(fn, type):
        raise RecipeError(f"{where} is a class, not a recipe (a recipe is a zero-argument "
                          f"function returning a config); {listing}")
    where = f"--config {config}: recipe {mod.__name__}.{config}"
    required = _required_parameters(fn)
    if required:
        raise RecipeError(
            f"{where}() needs argument(s) {', '.join(required)}: a recipe takes none (write a "
            f"recipe that calls it with its arguments); {listing}"
        )
    try:
        result = fn()
    except SystemExit as exc:
        raise RecipeError(f"{where}() called sys.exit({exc.code!r}) instead of returning a "
                          f"config{_raise_location(exc, getattr(mod, '__file__', None))}") from None
    except Exception as exc:  # noqa: BLE001 - a recipe is user code: whatever it raises
        raise RecipeError(
            f"{where}() raised {type(exc).__name__}: {exc}"
            f"{_raise_location(exc, getattr(mod, '__file__', None))}"
        ) from None
    if root_type is not None:
        ok, expected = isinstance(result, root_type), config_name(root_type)
    else:
        ok = dataclasses.is_dataclass(result) and not isinstance(result, type)
        expected = "config dataclass (e.g. a HyperTrainer.Config)"
    if not ok:
        got = ("None" if result is None
               else f"the class {result.__qualname__} (not an instance)" if isinstance(result, type)
               else f"a {type(result).__qualname__}")
        raise RecipeError(f"{where}() returned {got}; a recipe must return a fresh {expected}")
    return result


def revalidate(config: Any) -> Any:
    """Run ``__post_init__`` of every dataclass in the tree again, leaves first."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        for f in dataclasses.fields(config):
            value = getattr(config, f.name)
            if isinstance(value, (list, tuple)):
                for item in value:
                    revalidate(item)
            else:
                revalidate(value)
        post_init = getattr(config, "__post_init__", None)
        if post_init is not None:
            post_init()
    return config
