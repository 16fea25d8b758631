"""References to objects by import path, resolved on first use: how a config names code that
needs a framework without importing it.

A model spec, a registry recipe or a model Config must be importable (and buildable, compared,
copied) without torch, yet they name things that live in torch modules: the parallelize
function, the state-dict adapter, the class a model Config builds. They name them as
``"package.module:qualname"``:

* :class:`LazyRef` -- a callable stand-in for a function or class. Calling it or
  :meth:`LazyRef.resolve` imports the module (once) and uses the target; nothing else does
  (its other attributes are not forwarded, so logging, ``to_dict`` or copying a config never
  imports the framework: whoever needs the object itself resolves it). It equals its target and
  every ``LazyRef`` of the same path, so a spec built with the real function and one built with
  the reference compare equal; comparing never imports (an object whose module is not imported
  yet cannot be the target). Copying keeps the reference.
* :func:`lazy_exports` -- a package's ``__getattr__`` / ``__dir__`` (PEP 562) that import a name
  from its submodule on first access, so that importing the package needs no framework.
* :class:`LazyOwner` -- the ``_owner`` of a ``Configurable.Config`` declared outside its owner
  class (a model Config whose owner is a framework module). ``Config.build()`` reads ``_owner``;
  the descriptor imports the owner's module then. Defining the owner class (whose body says
  ``Config = TheConfig``) replaces the descriptor with the class itself.

A path that does not resolve is an ``ImportError`` / ``AttributeError`` naming the path.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

__all__ = ["LazyOwner", "LazyRef", "lazy_exports", "resolve_ref"]


def _split(path: str) -> tuple[str, str]:
    module, sep, qualname = path.partition(":")
    if not sep or not module or not qualname:
        raise ValueError(f"a lazy reference is 'package.module:qualname', got {path!r}")
    return module, qualname


def _import_target(path: str) -> Any:
    module_name, qualname = _split(path)
    target: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise AttributeError(
                f"lazy reference {path!r}: module {module_name!r} has no {qualname!r}"
            ) from None
    return target


class LazyRef:
    """A function or class named by ``"package.module:qualname"``, imported on first use."""

    __slots__ = ("path", "_target")

    def __init__(self, path: str) -> None:
        _split(path)  # malformed paths fail where they are written, not where they are used
        self.path = path
        self._target: Any = None

    def resolve(self) -> Any:
        """The target (imports its module the first time)."""
        if self._target is None:
            self._target = _import_target(self.path)
        return self._target

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    @property
    def __name__(self) -> str:  # what error messages print for a function or class
        return self.path.rpartition(":")[2].rpartition(".")[2]

    def _loaded_target(self) -> Any:
        """The target if its module is imported already, else a sentinel that equals nothing."""
        if self._target is None and _split(self.path)[0] not in sys.modules:
            return _NOT_LOADED
        return self.resolve()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyRef):
            return self.path == other.path
        return self._loaded_target() is other

    # Hashable by path for the spec's own use; a reference and its target are equal but do not
    # share a hash, so do not mix the two as keys of one dict.
    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"LazyRef({self.path!r})"

    def __copy__(self) -> LazyRef:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> LazyRef:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (LazyRef, (self.path,))


_NOT_LOADED = object()


def resolve_ref(value: Any) -> Any:
    """The target of a :class:`LazyRef`; any other value as it is."""
    return value.resolve() if isinstance(value, LazyRef) else value


class LazyOwner:
    """``Config._owner`` as an import path: the owner class, imported when first read."""

    def __init__(self, path: str) -> None:
        _split(path)
        self.path = path

    def __get__(self, instance: Any, owner: type | None = None) -> type:
        return _import_target(self.path)

    def __repr__(self) -> str:
        return f"LazyOwner({self.path!r})"


def lazy_exports(
    package: str, namespace: dict[str, Any], names: dict[str, str]
) -> tuple[Any, Any]:
    """``(__getattr__, __dir__)`` for the package ``package`` (its ``globals()`` is
    ``namespace``): each of ``names`` (name -> the module defining it) is imported on first
    access and then kept in ``namespace``, so later lookups skip the hook.

    ``__getattr__, __dir__ = lazy_exports(__name__, globals(), {"Module": "pkg.module"})``
    """

    def __getattr__(name: str) -> Any:
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
