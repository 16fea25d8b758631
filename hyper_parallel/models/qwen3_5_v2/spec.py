"""The ``qwen3_5_v2`` model spec (v2 ``ModelSpec``) and its factory.

``qwen3_5_v2_spec_factory(flavor)`` is what recipes call; importing ``hyper_parallel.models.
qwen3_5_v2`` registers one default spec (flavor ``0.8b``, the legacy default) under
``"qwen3_5_v2"`` in the v2 registry (``hyper_parallel.protocols.get_spec``), once.
"""

from __future__ import annotations

from hyper_parallel.models.qwen3_5.state_dict_adapter import Qwen3_5StateDictAdapter
from hyper_parallel.protocols.model_spec import ModelSpec, register_spec, registered_names
from hyper_parallel.trainer.optim import clip_grad_norm_

from .model import DEFAULT_FLAVOR, flavor_config
from .parallelize import parallelize_qwen3_5_v2

__all__ = ["SPEC_NAME", "qwen3_5_v2_spec_factory", "register_default_spec"]

SPEC_NAME = "qwen3_5_v2"


def qwen3_5_v2_spec_factory(flavor: str) -> ModelSpec:
    """A fresh spec of the named Qwen3.5 size.

    * ``model``: ``flavor_config(flavor)`` -- the trainer runs ``model.update_from_config(...)``
      and builds it with ``model.build()`` (on the meta device).
    * ``build_model_fn``: ``None``. With ``model`` set, the new trainer builds from the config;
      the legacy trainer (``(legacy_config) -> module``) keeps using the legacy ``qwen3_5`` spec.
    * ``parallelize_fn``: :func:`parallelize_qwen3_5_v2` (keyword sections, CP -> TP -> AC ->
      compile -> FSDP).
    * ``state_dict_adapter``: the legacy ``Qwen3_5StateDictAdapter`` class (static
      ``to_hf(state_dict, config)`` / ``from_hf(state_dict, config)``; the parameter names are the
      legacy ones, and ``Qwen3_5Model.Config`` has the attributes it reads).
    * ``clip_grad_fn``: the trainer's DTensor-aware ``hyper_parallel.trainer.optim.clip_grad_norm_``.
    * ``pipelining_fn`` / ``post_optimizer_build_fn``: ``None`` (no pipeline parallelism, no
      optimizer hooks).

    An unknown flavor is a ``ValueError`` listing the valid ones.
    """
    return ModelSpec(
        name=SPEC_NAME,
        flavor=flavor,
        model=flavor_config(flavor),
        build_model_fn=None,
        parallelize_fn=parallelize_qwen3_5_v2,
        state_dict_adapter=Qwen3_5StateDictAdapter,
        clip_grad_fn=clip_grad_norm_,
    )


def register_default_spec() -> None:
    """Register ``qwen3_5_v2_spec_factory(DEFAULT_FLAVOR)`` as ``"qwen3_5_v2"`` unless a spec of
    that name is registered already (so re-importing, or a test that registered its own, is
    left alone)."""
    if SPEC_NAME not in registered_names():
        register_spec(qwen3_5_v2_spec_factory(DEFAULT_FLAVOR))


register_default_spec()
