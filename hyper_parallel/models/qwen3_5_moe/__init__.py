"""Qwen3.5 mixture-of-experts text models (35B-A3B, 122B-A10B, 397B-A17B and a CPU debug size):
the dense hybrid decoder with a mixture-of-experts feed-forward in every layer.

Importing this package registers the ``qwen3_5_moe`` spec (the legacy ``model.name`` and the
``--module`` of its recipes, ``config_registry``) and imports no framework; the names below that
need torch are imported on first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hyper_parallel.protocols.lazy import lazy_exports

from .configuration import FLAVORS, Qwen3_5MoeConfig
from .model_config import FLAVOR_NAMES, Qwen3_5MoeModelConfig, flavor_config
from .spec import SPEC_NAME, qwen3_5_moe_spec_factory

if TYPE_CHECKING:
    from .model import Qwen3_5MoeForCausalLM, Qwen3_5MoeModel
    from .state_dict_adapter import Qwen3_5MoeStateDictAdapter

# Names that need torch -> the submodule defining them.
_LAZY = {
    "Qwen3_5MoeForCausalLM": "hyper_parallel.models.qwen3_5_moe.model",
    "Qwen3_5MoeModel": "hyper_parallel.models.qwen3_5_moe.model",
    "Qwen3_5MoeStateDictAdapter": "hyper_parallel.models.qwen3_5_moe.state_dict_adapter",
}

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)

__all__ = [
    "FLAVORS",
    "FLAVOR_NAMES",
    "SPEC_NAME",
    "Qwen3_5MoeConfig",
    "Qwen3_5MoeForCausalLM",
    "Qwen3_5MoeModel",
    "Qwen3_5MoeModelConfig",
    "Qwen3_5MoeStateDictAdapter",
    "flavor_config",
    "qwen3_5_moe_spec_factory",
]
