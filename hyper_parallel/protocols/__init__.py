"""The protocol layer of the torchtitan-style configuration.

* :class:`Configurable` -- a class built from its nested ``Config`` dataclass
  (``configurable.py``); :class:`Function` wraps a callable as one (``function.py``).
* :class:`Module` / :class:`BaseModel` -- the framework's module base plus ``Configurable``, with
  the ``init_weights`` protocol and ``verify_module_protocol`` (``module.py``, ``model.py``).
* :class:`ModelSpec` and its registry (``model_spec.py``); :class:`MeshAxisName` (``types.py``).
* :class:`LazyRef` / :class:`LazyOwner` -- code named by import path, imported on first use
  (``lazy.py``), so specs and model Configs need no framework (``model_config.py``).

Importing this package imports no framework: ``Module``, ``BaseModel`` and
``ModuleProtocolError`` are loaded on first attribute access (which imports the platform's
framework, torch by default).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hyper_parallel.protocols.configurable import Configurable, to_plain, traverse_value
from hyper_parallel.protocols.function import Function
from hyper_parallel.protocols.lazy import LazyOwner, LazyRef
from hyper_parallel.protocols.model_spec import (
    ModelSpec,
    get_spec,
    register_spec,
    registered_names,
    registered_specs,
    unregister_spec,
)
from hyper_parallel.protocols.types import BASE_MESH_AXES, FLATTENED_MESH_AXES, MeshAxisName

if TYPE_CHECKING:
    from hyper_parallel.protocols.model import BaseModel, ModuleProtocolError
    from hyper_parallel.protocols.module import Module

# Names that need the framework -> the submodule defining them.
_LAZY = {
    "Module": "hyper_parallel.protocols.module",
    "BaseModel": "hyper_parallel.protocols.model",
    "ModuleProtocolError": "hyper_parallel.protocols.model",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip this hook
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "BASE_MESH_AXES",
    "FLATTENED_MESH_AXES",
    "BaseModel",
    "Configurable",
    "Function",
    "LazyOwner",
    "LazyRef",
    "MeshAxisName",
    "ModelSpec",
    "Module",
    "ModuleProtocolError",
    "get_spec",
    "register_spec",
    "registered_names",
    "registered_specs",
    "to_plain",
    "traverse_value",
    "unregister_spec",
]
