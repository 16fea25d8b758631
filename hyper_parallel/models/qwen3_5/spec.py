"""The Qwen3.5 model spec, registered as ``qwen3_5`` (the legacy ``model.name``).

``qwen3_5_spec_factory(flavor)`` is the one description of the model family the engine trains:
the architecture as a :class:`~hyper_parallel.models.qwen3_5.protocol.Qwen3_5Model.Config`, the
keyword-section parallelisation, the Hugging Face state-dict adapter and the DTensor-aware clip.
``hyper_parallel.models.qwen3_5_v2`` registers the same spec under ``qwen3_5_v2`` (the name its
recipes use), so a legacy YAML (``model.name: qwen3_5``) and a recipe resolve to the same code.
"""

from __future__ import annotations

from hyper_parallel.protocols.model_spec import ModelSpec, register_spec, registered_names
from hyper_parallel.runtime.optim import clip_grad_norm_

from .configuration import DEFAULT_FLAVOR
from .parallelize_v2 import parallelize_qwen3_5_v2
from .protocol import flavor_config
from .state_dict_adapter import Qwen3_5StateDictAdapter

__all__ = ["SPEC_NAME", "qwen3_5_spec_factory", "register_default_spec"]

SPEC_NAME = "qwen3_5"


def qwen3_5_spec_factory(flavor: str, *, name: str = SPEC_NAME) -> ModelSpec:
    """A fresh spec of the named Qwen3.5 size, registered (or registrable) as ``name``.

    * ``model``: ``flavor_config(flavor)`` -- the engine runs ``model.update_from_config(...)``
      (which applies the ``model`` section: ``config_overrides['flavor']`` re-bases it) and
      builds it with ``model.build()`` on ``training.init_device``.
    * ``parallelize_fn``: :func:`parallelize_qwen3_5_v2` (keyword sections, CP -> TP -> AC ->
      compile -> FSDP).
    * ``state_dict_adapter``: :class:`Qwen3_5StateDictAdapter` (the engine builds it with the
      model config and ``hf_assets_path``).
    * ``clip_grad_fn``: the DTensor-aware ``hyper_parallel.runtime.optim.clip_grad_norm_``.
    * ``pipelining_fn`` / ``post_optimizer_build_fn``: ``None`` (no pipeline parallelism, no
      optimizer hooks).

    An unknown flavor is a ``ValueError`` listing the valid ones.
    """
    return ModelSpec(
        name=name,
        flavor=flavor,
        model=flavor_config(flavor),
        parallelize_fn=parallelize_qwen3_5_v2,
        state_dict_adapter=Qwen3_5StateDictAdapter,
        clip_grad_fn=clip_grad_norm_,
    )


def register_default_spec(name: str = SPEC_NAME) -> None:
    """Register ``qwen3_5_spec_factory(DEFAULT_FLAVOR, name=name)`` unless ``name`` is taken
    (so re-importing, or a test that registered its own, is left alone)."""
    if name not in registered_names():
        register_spec(qwen3_5_spec_factory(DEFAULT_FLAVOR, name=name))


register_default_spec()
