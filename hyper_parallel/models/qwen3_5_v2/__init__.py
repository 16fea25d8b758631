"""``--module qwen3_5_v2``: the recipes (``config_registry``) and the ``qwen3_5_v2`` spec of the
one Qwen3.5 model.

The model, its flavors and its parallelisation live in :mod:`hyper_parallel.models.qwen3_5`
(``Qwen3_5Model`` is the model on the protocol layer); importing this package registers the
same spec as ``qwen3_5`` under the name ``qwen3_5_v2`` (flavor ``0.8b``). Recipes call
``qwen3_5_v2_spec_factory(flavor)``.

Importing it imports no framework (recipes are configuration): the names below that need torch
(the model class, the parallelisation helpers) are imported on first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hyper_parallel.models.qwen3_5.model_config import (
    DEFAULT_FLAVOR,
    FLAVOR_NAMES,
    config_from_model_section,
    flavor_config,
    tp_divisibility_problems,
)
from hyper_parallel.protocols.lazy import lazy_exports

from .spec import SPEC_NAME, qwen3_5_v2_spec_factory  # importing spec registers it

if TYPE_CHECKING:
    from hyper_parallel.models.qwen3_5.parallelize_v2 import (
        apply_compile,
        compiled_layers,
        mp_policy_from_training,
        parallelize_qwen3_5_v2,
    )
    from hyper_parallel.models.qwen3_5.protocol import Qwen3_5Model

_PARALLELIZE = "hyper_parallel.models.qwen3_5.parallelize_v2"
# Names that need torch -> the module defining them.
_LAZY = {
    "Qwen3_5Model": "hyper_parallel.models.qwen3_5.protocol",
    "apply_compile": _PARALLELIZE,
    "compiled_layers": _PARALLELIZE,
    "mp_policy_from_training": _PARALLELIZE,
    "parallelize_qwen3_5_v2": _PARALLELIZE,
}

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


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
