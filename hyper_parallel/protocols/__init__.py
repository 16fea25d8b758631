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

from typing import TYPE_CHECKING

from hyper_parallel.protocols.configurable import Configurable, to_plain, traverse_value
from hyper_parallel.protocols.function import Function
from hyper_parallel.protocols.lazy import LazyOwner, LazyRef, lazy_exports
from hyper_parallel.protocols.model_config import BaseModelConfig, ModuleConfig
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

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)

# The framework-free base Configs build their owners before the framework is imported: the
# owners are named here, above both modules, since module.py and model.py import
# model_config.py (the owner's class body replaces its lazy owner with the class itself). Only
# where no owner is set yet: a submodule imported while this package was loading has set it.
for _config, _class in ((ModuleConfig, "Module"), (BaseModelConfig, "BaseModel")):
    if "_owner" not in vars(_config):
        _config._owner = LazyOwner(f"{_LAZY[_class]}:{_class}")  # type: ignore[assignment]
del _config, _class


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
