"""The legacy ``qwen3_5`` model spec (registered when ``hyper_parallel.models.qwen3_5`` is imported)."""

from __future__ import annotations

from typing import Any

from hyper_parallel.models.spec import ModelSpec, register_spec, registered_names

from .configuration import Qwen3_5Config, config_from_legacy
from .model import Qwen3_5ForCausalLM
from .state_dict_adapter import Qwen3_5StateDictAdapter


def model_config_from_args(args: Any) -> Qwen3_5Config:
    """The model config a legacy ``HyperTrainerConfig`` describes (flavor + overrides)."""
    return config_from_legacy(args.model)


def build_qwen3_5(args: Any) -> Qwen3_5ForCausalLM:
    """``spec.build_model_fn``: the model of ``args.model`` (on the current default device)."""
    return Qwen3_5ForCausalLM(model_config_from_args(args))


def parallelize(model: Any, mesh: Any, args: Any) -> Any:
    """``spec.parallelize_fn``: TP -> AC -> FSDP (imported lazily: it pulls in the TP stack)."""
    from .parallelize import parallelize_qwen3_5

    return parallelize_qwen3_5(model, mesh, args)


QWEN3_5_SPEC = ModelSpec(
    name="qwen3_5",
    build_model_fn=build_qwen3_5,
    parallelize_fn=parallelize,
    state_dict_adapter=Qwen3_5StateDictAdapter,
    model_config_fn=model_config_from_args,
)

if "qwen3_5" not in registered_names():
    register_spec("qwen3_5", QWEN3_5_SPEC)
