"""Qwen3.5 dense text model: config, flavors, model and HF state-dict adapter.

Importing this package registers the legacy ``qwen3_5`` model spec.
"""

from .configuration import FLAVORS, Qwen3_5Config, config_from_legacy
from .model import Qwen3_5ForCausalLM
from .state_dict_adapter import Qwen3_5StateDictAdapter
from .spec import QWEN3_5_SPEC  # noqa: F401 - registers the spec

__all__ = [
    "FLAVORS",
    "Qwen3_5Config",
    "Qwen3_5ForCausalLM",
    "Qwen3_5StateDictAdapter",
    "config_from_legacy",
]
