"""``--module qwen3_5_v2``: the recipes (``config_registry``) and the ``qwen3_5_v2`` spec of the
one Qwen3.5 model.

The model, its flavors and its parallelisation live in :mod:`hyper_parallel.models.qwen3_5`
(``Qwen3_5Model`` is the model on the protocol layer); importing this package registers the
same spec as ``qwen3_5`` under the name ``qwen3_5_v2`` (flavor ``0.8b``). Recipes call
``qwen3_5_v2_spec_factory(flavor)``.
"""

from hyper_parallel.models.qwen3_5.parallelize_v2 import (
    apply_compile,
    compiled_layers,
    mp_policy_from_training,
    parallelize_qwen3_5_v2,
)
from hyper_parallel.models.qwen3_5.protocol import (
    DEFAULT_FLAVOR,
    FLAVOR_NAMES,
    Qwen3_5Model,
    config_from_model_section,
    flavor_config,
    tp_divisibility_problems,
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
    "parallelize_qwen3_5_v2",
    "qwen3_5_v2_spec_factory",
    "tp_divisibility_problems",
]
