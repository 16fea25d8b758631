"""Model specs: how the trainer builds, parallelizes and converts one model family.

A model package registers its spec when imported (``hyper_parallel.models.<name>``), so
``discover_model_spec(name)`` imports the package and then looks the spec up.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hyper_parallel.utils.suggest import did_you_mean


@dataclass
class ModelSpec:
    """One model family as the legacy trainer sees it."""

    name: str
    """Registry key (``model.name`` in the legacy YAML)."""

    build_model_fn: Callable[[Any], Any]
    """``(legacy_config) -> nn.Module``; called under the ``init_device`` context."""

    parallelize_fn: Callable[[Any, Any, Any], Any] | None = None
    """``(model, mesh, legacy_config) -> model``: TP, AC and FSDP."""

    clip_grad_fn: Callable[..., Any] | None = None
    """``(parameters, max_norm) -> total_norm``; default: the trainer's DTensor-aware clip."""

    pipelining_fn: Callable[..., Any] | None = None
    """Pipeline-parallel split (not supported yet)."""

    state_dict_adapter: Any | None = None
    """Converts state dicts to / from Hugging Face names (``to_hf`` / ``from_hf``)."""

    model_config_fn: Callable[[Any], Any] | None = None
    """``(legacy_config) -> model config``, e.g. for Hugging Face export and FLOP counts."""


_REGISTRY: dict[str, ModelSpec] = {}


def register_spec(name: str, spec: ModelSpec) -> None:
    """Register ``spec`` under ``name``; a duplicate name is an error."""
    if name in _REGISTRY:
        raise ValueError(f"model spec {name!r} is already registered")
    _REGISTRY[name] = spec


def get_spec(name: str) -> ModelSpec:
    """The spec registered as ``name``; an unknown name lists the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "(none registered)"
        raise ValueError(
            f"unknown model spec {name!r}{did_you_mean(name, _REGISTRY)}; registered: {known}"
        ) from None


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


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
    if name not in _REGISTRY:
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
