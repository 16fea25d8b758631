"""The new (torchtitan-style) configuration: sections, ``ConfigManager``, dtype map, ``Function``.

Importing this package imports neither torch nor tyro: the generated section dataclasses are
plain dataclasses, the dtype map resolves through the platform on first use, and tyro is
imported only when ``ConfigManager`` parses a ``--module`` command line. ``ConfigManager`` and
the section classes are loaded on first attribute access.

``hyper_parallel/__init__.py`` deliberately does not re-export any of this.
"""

from __future__ import annotations

from hyper_parallel.config.dtype_map import TORCH_DTYPE_MAP
from hyper_parallel.config.function import Function
from hyper_parallel.protocols.configurable import Configurable
from hyper_parallel.protocols.lazy import lazy_exports

#: Generated section dataclasses (hyper_parallel/config/configs.py), loaded lazily.
_SECTIONS = (
    "ActivationCheckpointConfig",
    "CommConfig",
    "CompileConfig",
    "DebugConfig",
    "ModelConfig",
    "ParallelismConfig",
    "TrainingConfig",
    "ValidationConfig",
)

__all__ = ["ConfigManager", "Configurable", "Function", "TORCH_DTYPE_MAP", *_SECTIONS]


# Lazy too, so that `python -m hyper_parallel.config.manager` does not find its own module
# imported by the package first (runpy warns about that).
__getattr__, __dir__ = lazy_exports(
    __name__,
    globals(),
    {"ConfigManager": "hyper_parallel.config.manager"}
    | {name: "hyper_parallel.config.configs" for name in _SECTIONS},
)
