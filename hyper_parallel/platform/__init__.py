"""Framework backends, chosen by the ``HYPER_PARALLEL_PLATFORM`` environment variable.

``get_platform()`` resolves the backend on first use (never at import time), so importing
``hyper_parallel`` stays free of torch and mindspore.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

from hyper_parallel.platform.dtypes import DTYPE_ALIASES, DTYPE_NAMES, canonical_dtype_name

if TYPE_CHECKING:
    from hyper_parallel.platform.base import Platform

ENV_VAR = "HYPER_PARALLEL_PLATFORM"
DEFAULT_PLATFORM = "torch"

#: Platform name -> "module:class" implementing it.
PLATFORMS: dict[str, str] = {
    "torch": "hyper_parallel.platform.torch_platform:TorchPlatform",
    "mindspore": "hyper_parallel.platform.mindspore_platform:MindSporePlatform",
}

_instances: dict[str, "Platform"] = {}


class UnknownPlatformError(ValueError):
    """Raised for a platform name that is not in :data:`PLATFORMS`."""


def get_platform(name: str | None = None) -> "Platform":
    """Return the backend called ``name`` (default: ``$HYPER_PARALLEL_PLATFORM`` or ``torch``).

    Instances are cached per name. A platform whose framework is not installed raises
    ``ImportError`` telling how to install it.
    """
    chosen = (name or os.environ.get(ENV_VAR) or DEFAULT_PLATFORM).strip().lower()
    if chosen not in PLATFORMS:
        source = "argument" if name else f"environment variable {ENV_VAR}"
        raise UnknownPlatformError(
            f"unknown platform {chosen!r} (from {source}); valid platforms: "
            f"{', '.join(sorted(PLATFORMS))}"
        )
    if chosen not in _instances:
        module_name, class_name = PLATFORMS[chosen].split(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            extra = "" if chosen == "torch" else f"[{chosen}]"
            raise ImportError(
                f"platform {chosen!r} needs its framework, which failed to import ({exc}); "
                f"install it with `pip install hyper_parallel{extra}`"
            ) from exc
        _instances[chosen] = getattr(module, class_name)()
    return _instances[chosen]


__all__ = [
    "DTYPE_ALIASES",
    "DTYPE_NAMES",
    "ENV_VAR",
    "PLATFORMS",
    "UnknownPlatformError",
    "canonical_dtype_name",
    "get_platform",
]
