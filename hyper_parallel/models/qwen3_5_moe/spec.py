"""The Qwen3.5 mixture-of-experts model spec, registered as ``qwen3_5_moe`` (the legacy
``model.name``; also ``--module qwen3_5_moe``, whose recipes call the factory).

``qwen3_5_moe_spec_factory(flavor)`` describes the family the engine trains: the architecture as
a :class:`~hyper_parallel.models.qwen3_5_moe.model_config.Qwen3_5MoeModelConfig`, the
keyword-section parallelisation (the dense model's plus expert parallelism) and the Hugging Face
state-dict adapter. Framework-free: the hooks are named by import path
(:class:`~hyper_parallel.protocols.lazy.LazyRef`) and resolved when a run trains.
"""

from __future__ import annotations

from hyper_parallel.protocols.lazy import LazyRef
from hyper_parallel.protocols.model_spec import ModelSpec, register_spec, registered_names

from hyper_parallel.models.qwen3_5.spec import PIPELINING_FN

from .configuration import DEFAULT_FLAVOR
from .model_config import flavor_config

__all__ = [
    "PARALLELIZE_FN",
    "SPEC_NAME",
    "STATE_DICT_ADAPTER",
    "qwen3_5_moe_spec_factory",
    "register_default_spec",
]

SPEC_NAME = "qwen3_5_moe"

#: The spec's hooks, by import path (each module imports torch).
PARALLELIZE_FN = "hyper_parallel.models.qwen3_5_moe.parallelize:parallelize_qwen3_5_moe"
STATE_DICT_ADAPTER = (
    "hyper_parallel.models.qwen3_5_moe.state_dict_adapter:Qwen3_5MoeStateDictAdapter"
)


def qwen3_5_moe_spec_factory(flavor: str) -> ModelSpec:
    """A fresh spec of the named Qwen3.5 MoE size (``debugmodel``, ``35b_a3b``, ``122b_a10b``,
    ``397b_a17b``); an unknown flavor is a ``ValueError`` listing the valid ones.

    * ``model``: ``flavor_config(flavor)`` (the engine fits it to the run with
      ``update_from_config`` and builds it on ``training.init_device``);
    * ``parallelize_fn``: :func:`~hyper_parallel.models.qwen3_5_moe.parallelize.
      parallelize_qwen3_5_moe` (TP -> EP -> AC -> compile -> FSDP);
    * ``state_dict_adapter``: :class:`~hyper_parallel.models.qwen3_5_moe.state_dict_adapter.
      Qwen3_5MoeStateDictAdapter`.
    """
    return ModelSpec(
        name=SPEC_NAME,
        flavor=flavor,
        model=flavor_config(flavor),
        parallelize_fn=LazyRef(PARALLELIZE_FN),
        pipelining_fn=LazyRef(PIPELINING_FN),
        state_dict_adapter=LazyRef(STATE_DICT_ADAPTER),
    )


def register_default_spec() -> None:
    """Register ``qwen3_5_moe_spec_factory(DEFAULT_FLAVOR)`` unless the name is taken."""
    if SPEC_NAME not in registered_names():
        register_spec(qwen3_5_moe_spec_factory(DEFAULT_FLAVOR))


register_default_spec()
