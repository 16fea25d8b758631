"""Qwen3.5 dense text model: config, flavors, the model, its parallelisation, the HF
state-dict adapter and the model spec.

``Qwen3_5Model`` (:mod:`.protocol`) is the model on the protocol layer (a ``BaseModel`` over
the ``Qwen3_5ForCausalLM`` modules). Importing this package registers the ``qwen3_5`` spec and
imports no framework: the configuration (``configuration``, ``model_config``) and the spec are
framework-free, and the names below that need torch (the modules, the adapter) are imported on
first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hyper_parallel.protocols.lazy import lazy_exports

from .configuration import FLAVORS, Qwen3_5Config
from .model_config import flavor_config
from .model_section import config_from_legacy
from .spec import SPEC_NAME, qwen3_5_spec_factory  # noqa: F401 - registers the spec

if TYPE_CHECKING:
    from .model import Qwen3_5ForCausalLM
    from .protocol import Qwen3_5Model
    from .state_dict_adapter import Qwen3_5StateDictAdapter

# Names that need torch -> the submodule defining them.
_LAZY = {
    "Qwen3_5ForCausalLM": "hyper_parallel.models.qwen3_5.model",
    "Qwen3_5Model": "hyper_parallel.models.qwen3_5.protocol",
    "Qwen3_5StateDictAdapter": "hyper_parallel.models.qwen3_5.state_dict_adapter",
}

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


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
