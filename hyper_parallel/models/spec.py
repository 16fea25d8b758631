"""Model discovery for the legacy path, on top of the ModelSpec v2 registry.

A model package registers its spec when imported (``hyper_parallel.models.<name>``), so
``discover_model_spec(name)`` imports the package and then looks the spec up. The specs
themselves live in the one registry of :mod:`hyper_parallel.protocols.model_spec`; this module
keeps the legacy ``register_spec(name, spec)`` signature.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re

from hyper_parallel.protocols.model_spec import ModelSpec, get_spec, registered_names
from hyper_parallel.protocols.model_spec import register_spec as _register
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.suggest import did_you_mean

__all__ = [
    "ModelSpec",
    "builtin_model_packages",
    "discover_model_spec",
    "get_spec",
    "known_model_names",
    "model_name_problem",
    "register_spec",
    "registered_names",
    "resolve_model_spec",
]


def register_spec(name: str, spec: ModelSpec) -> None:
    """Legacy signature of :func:`hyper_parallel.protocols.model_spec.register_spec`.

    ``name`` must equal ``spec.name``; a duplicate name is an error.
    """
    if name != spec.name:
        raise ValueError(f"register_spec: name {name!r} differs from spec.name {spec.name!r}")
    _register(spec)


def builtin_model_packages() -> list[str]:
    """Subpackages of ``hyper_parallel.models`` that define models."""
    from hyper_parallel import models

    return sorted(
        m.name for m in pkgutil.iter_modules(models.__path__) if m.ispkg and m.name not in ("modules",)
    )


def known_model_names() -> list[str]:
    """Every name ``model.name`` may take without a module path: the registered specs and the
    built-in model packages (sorted)."""
    return sorted(set(registered_names()) | set(builtin_model_packages()))


def _unknown_model_message(name: str, why: str) -> str:
    known = known_model_names()
    return (
        f"unknown model {name!r}{did_you_mean(str(name), known)}: {why}. Known models: "
        f"{', '.join(known)}; a custom model is given by its module path (the module must call "
        "register_spec on import)"
    )


def _unknown_model(name: str, why: str) -> ConfigError:
    return ConfigError(_unknown_model_message(name, why), path="model.name")


#: A name that can be imported: dotted Python identifiers (``qwen3_5``, ``my_pkg.my_model``).
_MODULE_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def _module_of(name: str) -> str:
    """The module whose import registers model ``name``."""
    return name if "." in name else f"hyper_parallel.models.{name}"


def _is_missing(exc: ModuleNotFoundError, module: str) -> bool:
    """Whether ``exc`` says ``module`` (or a package above it) does not exist, rather than that
    something it imports is missing."""
    return bool(exc.name) and (module == exc.name or module.startswith(exc.name + "."))


def model_name_problem(name: str) -> str | None:
    """Why ``name`` (``model.name``) names no model, or None when it may name one: what
    :func:`discover_model_spec` refuses, decided without importing the model's module (a model
    package imports torch, and the legacy parser checks ``model.name`` without it).

    The module is only looked up; the packages above a custom module path are imported, as the
    run imports them. Whether the module registers a spec under ``name`` is known only once it
    is imported, so that (and a module that fails to import) is left to the run.
    """
    if name in registered_names() or name in builtin_model_packages():
        return None
    if not isinstance(name, str) or not _MODULE_PATH.fullmatch(name):
        return _unknown_model_message(str(name), "a model name is a registered name or a module path")
    module = _module_of(name)
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError as exc:
        found = not _is_missing(exc, module)
    except Exception:  # noqa: BLE001 - a package above it fails to import: the run says how
        found = True
    return None if found else _unknown_model_message(name, f"there is no module {module!r}")


def discover_model_spec(name: str) -> ModelSpec:
    """Import the package that registers ``name`` and return its spec.

    ``name`` is a built-in package (``qwen3_5`` -> ``hyper_parallel.models.qwen3_5``) or, when it
    contains a dot, a module path imported as given, which must register its spec under that
    same dotted name.

    A name that is neither registered nor importable, or whose module registers no spec under
    it, is a :class:`~hyper_parallel.utils.errors.ConfigError` for ``model.name`` suggesting
    the closest known name. A module that exists but fails to import raises its own error.
    """
    if name not in registered_names():
        if not isinstance(name, str) or not _MODULE_PATH.fullmatch(name):
            raise _unknown_model(str(name), "a model name is a registered name or a module path")
        module = _module_of(name)
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if _is_missing(exc, module):
                raise _unknown_model(name, f"there is no module {module!r}") from None
            raise
        if name not in registered_names():
            raise _unknown_model(name, f"importing {module!r} registered no spec under that name")
    return get_spec(name)


def resolve_model_spec(name: str, model_spec: ModelSpec | None = None) -> ModelSpec:
    """The spec a run trains: ``model_spec`` when given, else the one registered under ``name``
    (:func:`discover_model_spec`).

    ``name`` (``model.name``) must name a model either way. With ``model_spec`` set the spec
    names the model (``model_spec.name``, also what converting to the legacy schema writes), so
    a recipe on a spec leaves ``name`` at its default; ``name`` is then only checked, so that a
    typo is refused rather than silently ignored: it is accepted when it is ``model_spec.name``
    or a registered name (the default is one); otherwise it is looked up (imported) like
    ``discover_model_spec`` does, whose ``ConfigError`` names ``model.name``.

    The spec is returned :meth:`~hyper_parallel.protocols.model_spec.ModelSpec.resolved`: hooks
    named by import path are imported here, where a run is about to use them.
    """
    if model_spec is None:
        return discover_model_spec(name).resolved()
    if name != model_spec.name and name not in registered_names():
        discover_model_spec(name)
    return model_spec.resolved()
