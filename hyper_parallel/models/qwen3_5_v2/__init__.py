"""Qwen3.5 on the new protocol: ``Qwen3_5Model`` (a ``BaseModel``), its flavors, the v2
parallelisation and the ``qwen3_5_v2`` model spec.

Importing this package registers the ``qwen3_5_v2`` spec (flavor ``0.8b``) in the v2 registry
(``hyper_parallel.protocols.get_spec("qwen3_5_v2")``); recipes call ``qwen3_5_v2_spec_factory``.
The model itself is the legacy ``qwen3_5`` implementation (same modules, same parameter names).
"""

from .model import (
    DEFAULT_FLAVOR,
    FLAVOR_NAMES,
    Qwen3_5Model,
    config_from_model_section,
    flavor_config,
    tp_divisibility_problems,
)
from .parallelize import (
    apply_compile,
    compiled_layers,
    mp_policy_from_training,
    parallelize_qwen3_5_dispatch,
    parallelize_qwen3_5_v2,
)
from .spec import SPEC_NAME, qwen3_5_v2_spec_factory  # importing spec registers it

__all__ = [
    "DEFAULT_FLAVOR",
    "FLAVOR_NAMES",
    "SPEC_NAME",
    "Qwen3_5Model",
    "apply_compile",
    "compiled_layers",
    "config_from_model_section",
    "flavor_config",
    "mp_policy_from_training",
    "parallelize_qwen3_5_dispatch",
    "parallelize_qwen3_5_v2",
    "qwen3_5_v2_spec_factory",
    "tp_divisibility_problems",
]
