"""``ModelSpec`` (v2): one model family as the trainer sees it, and the registry of specs.

A spec pairs a model -- preferably as a ``BaseModel.Config`` tree in ``model`` -- with the
functions that parallelise, pipeline and convert it. It is a plain dataclass, not a
``Configurable`` (there is nothing to build from it), but its ``traverse`` bridges into
``model`` so ``Trainer.Config.traverse(...)`` reaches the model's sub-configs (their paths start
with ``<field holding the spec>.model.``).

Relation to the legacy ``hyper_parallel.models.spec.ModelSpec``: every legacy field (``name``,
``build_model_fn``, ``parallelize_fn``, ``clip_grad_fn``, ``pipelining_fn``,
``state_dict_adapter``, ``model_config_fn``) exists here with the same meaning, so the legacy
registration moves over by constructing this class with the same keyword arguments; legacy
``register_spec(name, spec)`` becomes ``register_spec(spec)`` (the name is ``spec.name``). New
here: ``flavor``, ``model`` and ``post_optimizer_build_fn``.

The registry is keyed by ``name`` (one spec per model family; ``flavor`` records which preset
``model`` holds). ``get_spec`` returns a copy whose ``model`` tree is a deep copy, so a recipe
may edit what it gets without changing the registered spec.

A hook or the adapter may be a :class:`~hyper_parallel.protocols.lazy.LazyRef` (an import path
resolved on first use), so a spec -- and every recipe holding one -- is built without importing
the framework its hooks need; :meth:`ModelSpec.resolved` swaps the references for their targets
before a trainer uses them.

This module imports no deep-learning framework.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hyper_parallel.protocols.configurable import to_plain, traverse_value
from hyper_parallel.protocols.lazy import LazyRef, resolve_ref
from hyper_parallel.protocols.model_config import BaseModelConfig
from hyper_parallel.utils.suggest import did_you_mean

_CALLABLE_FIELDS = (
    "build_model_fn",
    "parallelize_fn",
    "pipelining_fn",
    "post_optimizer_build_fn",
    "clip_grad_fn",
    "model_config_fn",
)


@dataclass(kw_only=True)
class ModelSpec:
    """A model family: its architecture config and the hooks the trainer calls around it."""

    name: str
    """Registry key (``model.name`` in the legacy YAML, e.g. ``qwen3_5``)."""

    flavor: str | None = None
    """Which size preset ``model`` was made from (e.g. ``0.8b``); informational."""

    model: BaseModelConfig | None = None
    """The architecture; the trainer builds it with ``model.build()`` (on the meta device)."""

    build_model_fn: Callable[..., Any] | None = None
    """Builds a model that is not (only) described by ``model``; the legacy trainer calls it as
    ``(legacy_config) -> module``. When ``model`` is set, the new trainer uses ``model.build()``."""

    parallelize_fn: Callable[..., Any] | None = None
    """Applies TP, activation checkpointing and FSDP to the built model and returns it."""

    pipelining_fn: Callable[..., Any] | None = None
    """Under pipeline parallelism, ``(model, parallel_dims, *, device, parallelize_fn, loss_fn,
    num_microbatches, parallelism, **sections) -> Pipeline``: cuts the model (built whole, on
    ``meta``) into this rank's stages, parallelizes and initializes them and builds the schedule
    (Qwen3.5: :func:`hyper_parallel.models.pipelining.pipeline_decoder_lm`)."""

    post_optimizer_build_fn: Callable[..., Any] | None = None
    """``(optimizers, model_parts, parallel_dims) -> None``: hooks to run once the optimizers
    exist (e.g. registering optimizer-step hooks)."""

    state_dict_adapter: Any = None
    """Converts state dicts to / from Hugging Face names (``to_hf`` / ``from_hf``)."""

    clip_grad_fn: Callable[..., Any] | None = None
    """``(parameters, max_norm) -> total_norm``; ``None`` uses the trainer's DTensor-aware clip."""

    model_config_fn: Callable[..., Any] | None = None
    """Legacy: ``(legacy_config) -> model config`` (Hugging Face export, FLOP counts)."""

    def __post_init__(self) -> None:
        where = f"ModelSpec(name={self.name!r})"
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"ModelSpec.name must be a non-empty string, got {self.name!r}")
        if self.flavor is not None and not isinstance(self.flavor, str):
            raise TypeError(f"{where}.flavor must be a string or None, got {self.flavor!r}")
        if self.model is not None:
            if not isinstance(self.model, BaseModelConfig):
                raise TypeError(
                    f"{where}.model must be a BaseModel.Config (a model's architecture config), "
                    f"got {type(self.model).__qualname__}"
                )
        for field_name in _CALLABLE_FIELDS:
            value = getattr(self, field_name)
            if value is not None and not callable(value):
                raise TypeError(
                    f"{where}.{field_name} must be callable or None, got "
                    f"{type(value).__qualname__} {value!r}"
                )
        if self.model is None and self.build_model_fn is None:
            raise ValueError(
                f"{where} cannot build a model: set model=<YourModel>.Config(...) or "
                "build_model_fn"
            )

    def resolved(self) -> ModelSpec:
        """This spec with every :class:`~hyper_parallel.protocols.lazy.LazyRef` hook (and the
        adapter) replaced by its target, importing their modules; ``self`` when there is none.
        The ``model`` tree is shared, not copied."""
        changes = {
            name: resolve_ref(getattr(self, name))
            for name in (*_CALLABLE_FIELDS, "state_dict_adapter")
            if isinstance(getattr(self, name), LazyRef)
        }
        return dataclasses.replace(self, **changes) if changes else self

    def traverse(
        self,
        config_cls: type | tuple[type, ...],
        *,
        recurse: bool = False,
        _prefix: str = "",
    ) -> Iterator[tuple[str, Any, Any, str | int | None]]:
        """Yield the ``config_cls`` nodes of ``model`` as ``(fqn, config, parent, field_name)``.

        Paths start with ``model`` (``model.layers.0``); ``model`` itself, when it matches, is
        yielded with ``parent=self, field_name="model"``. The spec itself is never yielded.
        """
        return traverse_value(
            self.model,
            config_cls,
            recurse=recurse,
            fqn=f"{_prefix}.model" if _prefix else "model",
            parent=self,
            attr="model",
        )

    def to_dict(self) -> dict[str, Any]:
        """``{name, flavor, model, <hooks>}`` for logging: ``model`` via its ``to_dict``, the
        hooks and the adapter as ``repr`` (one-way, like ``Configurable.Config.to_dict``)."""
        return {
            f.name: to_plain(getattr(self, f.name), f"ModelSpec.{f.name}")
            for f in dataclasses.fields(self)
        }


_REGISTRY: dict[str, ModelSpec] = {}


def register_spec(spec: ModelSpec) -> None:
    """Register ``spec`` under ``spec.name``; a name already taken is a ``ValueError``."""
    if not isinstance(spec, ModelSpec):
        raise TypeError(
            f"register_spec expects a hyper_parallel.protocols.ModelSpec, got "
            f"{type(spec).__qualname__}"
        )
    if spec.name in _REGISTRY:
        raise ValueError(
            f"model spec {spec.name!r} is already registered; pick another name or call "
            f"unregister_spec({spec.name!r}) first"
        )
    _REGISTRY[spec.name] = spec


def unregister_spec(name: str) -> ModelSpec:
    """Remove and return the spec registered as ``name`` (tests, plugin reloads)."""
    if name not in _REGISTRY:
        raise ValueError(_unknown(name))
    return _REGISTRY.pop(name)


def get_spec(name: str) -> ModelSpec:
    """A copy of the spec registered as ``name`` (its ``model`` tree deep-copied).

    An unknown name is a ``ValueError`` that suggests the closest name and lists the known ones.
    """
    try:
        spec = _REGISTRY[name]
    except KeyError:
        raise ValueError(_unknown(name)) from None
    return dataclasses.replace(spec, model=copy.deepcopy(spec.model))


def registered_specs() -> dict[str, ModelSpec]:
    """``{name: spec}`` of every registered spec, sorted by name (the registered objects
    themselves: read them, use ``get_spec`` for a copy to edit)."""
    return {name: _REGISTRY[name] for name in sorted(_REGISTRY)}


def registered_names() -> list[str]:
    """The registered names, sorted."""
    return sorted(_REGISTRY)


def _unknown(name: str) -> str:
    known = ", ".join(sorted(_REGISTRY)) or "(none registered)"
    return f"unknown model spec {name!r}{did_you_mean(str(name), _REGISTRY)}; registered: {known}"


__all__ = [
    "ModelSpec",
    "get_spec",
    "register_spec",
    "registered_names",
    "registered_specs",
    "unregister_spec",
]
