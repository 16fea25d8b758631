"""Qwen3.5 dense text model: config, flavors, the model, its parallelisation, the HF
state-dict adapter and the model spec.

``Qwen3_5Model`` (:mod:`.protocol`) is the model on the protocol layer (a ``BaseModel`` over
the ``Qwen3_5ForCausalLM`` modules). Importing this package registers the ``qwen3_5`` spec.
"""

from .configuration import FLAVORS, Qwen3_5Config, config_from_legacy
from .model import Qwen3_5ForCausalLM
from .protocol import Qwen3_5Model, flavor_config
from .spec import SPEC_NAME, qwen3_5_spec_factory  # noqa: F401 - registers the spec
from .state_dict_adapter import Qwen3_5StateDictAdapter

__all__ = [
    "FLAVORS",
    "Qwen3_5Config",
    "Qwen3_5ForCausalLM",
    "Qwen3_5Model",
    "Qwen3_5StateDictAdapter",
    "config_from_legacy",
    "flavor_config",
    "qwen3_5_spec_factory",
]
