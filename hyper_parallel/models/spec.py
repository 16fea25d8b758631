"""Model discovery for the legacy path, on top of the ModelSpec v2 registry.

A model package registers its spec when imported (``hyper_parallel.models.<name>``), so
``discover_model_spec(name)`` imports the package and then looks the spec up. The specs
themselves live in the one registry of :mod:`hyper_parallel.protocols.model_spec`; this module
keeps the legacy ``register_spec(name, spec)`` signature.
"""

from __future__ import annotations

import importlib
import pkgutil

from hyper_parallel.protocols.model_spec import ModelSpec, get_spec, registered_names
from hyper_parallel.protocols.model_spec import register_spec as _register
from hyper_parallel.utils.suggest import did_you_mean

__all__ = [
    "ModelSpec",
    "builtin_model_packages",
    "discover_model_spec",
    "get_spec",
    "register_spec",
    "registered_names",
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


def discover_model_spec(name: str) -> ModelSpec:
    """Import the package that registers ``name`` and return its spec.

    ``name`` is a built-in package (``qwen3_5`` -> ``hyper_parallel.models.qwen3_5``) or, when it
    contains a dot, a module path imported as given, which must register its spec under that
    same dotted name.
    """
    if name not in registered_names():
        module = name if "." in name else f"hyper_parallel.models.{name}"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and module.startswith(exc.name):
                builtin = builtin_model_packages()
                raise ImportError(
                    f"model.name={name!r}: cannot import {module!r}{did_you_mean(name, builtin)}. "
                    f"Built-in models: {', '.join(builtin)}; a custom model is given by its "
                    "module path (it must call register_spec on import)"
                ) from exc
            raise
    return get_spec(name)
