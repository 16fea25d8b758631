"""The Qwen3.5 model spec, registered as ``qwen3_5`` (the legacy ``model.name``).

``qwen3_5_spec_factory(flavor)`` is the one description of the model family the engine trains:
the architecture as a :class:`~hyper_parallel.models.qwen3_5.model_config.Qwen3_5ModelConfig`
(``Qwen3_5Model.Config``), the keyword-section parallelisation and the Hugging Face state-dict
adapter; gradients are clipped by the engine's DTensor-aware default.
``hyper_parallel.models.qwen3_5_v2`` registers the same spec under ``qwen3_5_v2`` (the name its
recipes use), so a legacy YAML (``model.name: qwen3_5``) and a recipe resolve to the same code.

Framework-free: the hooks need torch, so the spec names them by import path
(:class:`~hyper_parallel.protocols.lazy.LazyRef`); recipes, the registry and the code generator
build specs without importing torch, and the engine resolves them
(:meth:`~hyper_parallel.protocols.model_spec.ModelSpec.resolved`) when it trains.
"""

from __future__ import annotations

from hyper_parallel.protocols.lazy import LazyRef
from hyper_parallel.protocols.model_spec import ModelSpec, register_spec, registered_names

from .configuration import DEFAULT_FLAVOR
from .model_config import flavor_config

__all__ = [
    "PARALLELIZE_FN",
    "PIPELINING_FN",
    "SPEC_NAME",
    "STATE_DICT_ADAPTER",
    "qwen3_5_spec_factory",
    "register_default_spec",
]

SPEC_NAME = "qwen3_5"

#: The spec's hooks, by import path (each module imports torch).
PARALLELIZE_FN = "hyper_parallel.models.qwen3_5.parallelize_v2:parallelize_qwen3_5_v2"
PIPELINING_FN = "hyper_parallel.models.pipelining:pipeline_decoder_lm"
STATE_DICT_ADAPTER = "hyper_parallel.models.qwen3_5.state_dict_adapter:Qwen3_5StateDictAdapter"


def qwen3_5_spec_factory(flavor: str, *, name: str = SPEC_NAME) -> ModelSpec:
    """A fresh spec of the named Qwen3.5 size, registered (or registrable) as ``name``.

    * ``model``: ``flavor_config(flavor)`` -- the engine runs ``model.update_from_config(...)``
      (which applies the ``model`` section: ``config_overrides['flavor']`` re-bases it) and
      builds it with ``model.build()`` on ``training.init_device``.
    * ``parallelize_fn``: :func:`~hyper_parallel.models.qwen3_5.parallelize_v2.
      parallelize_qwen3_5_v2` (keyword sections, CP -> TP -> AC -> compile -> FSDP).
    * ``state_dict_adapter``: :class:`~hyper_parallel.models.qwen3_5.state_dict_adapter.
      Qwen3_5StateDictAdapter` (the engine builds it with the model config and
      ``hf_assets_path``).
    * ``clip_grad_fn``: ``None``, the engine's own DTensor-aware
      ``hyper_parallel.runtime.optim.clip_grad_norm_`` (the model layer names nothing of the
      runtime above it).
    * ``pipelining_fn``: :func:`~hyper_parallel.models.pipelining.pipeline_decoder_lm` (stages
      cut at decoder-layer boundaries, parallelized one by one with ``parallelize_fn``).
    * ``post_optimizer_build_fn``: ``None`` (no optimizer hooks).

    The two hooks are :class:`~hyper_parallel.protocols.lazy.LazyRef` s, equal to what they
    name. An unknown flavor is a ``ValueError`` listing the valid ones.
    """
    return ModelSpec(
        name=name,
        flavor=flavor,
        model=flavor_config(flavor),
        parallelize_fn=LazyRef(PARALLELIZE_FN),
        pipelining_fn=LazyRef(PIPELINING_FN),
        state_dict_adapter=LazyRef(STATE_DICT_ADAPTER),
    )


def register_default_spec(name: str = SPEC_NAME) -> None:
    """Register ``qwen3_5_spec_factory(DEFAULT_FLAVOR, name=name)`` unless ``name`` is taken
    (so re-importing, or a test that registered its own, is left alone)."""
    if name not in registered_names():
        register_spec(qwen3_5_spec_factory(DEFAULT_FLAVOR, name=name))


register_default_spec()
