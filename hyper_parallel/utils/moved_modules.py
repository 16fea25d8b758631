"""Old import paths of modules that moved, each answered with the module at its new path.

A package whose modules moved keeps one table of them and calls :func:`alias_moved_modules` from
its ``__init__``; from then on ``import pkg.old``, ``from pkg.old import X`` and
``from pkg import old`` give the very module object at the new path (``pkg.old.X is new.X``),
the submodules of a moved package too (``pkg.old.sub`` is ``new.sub``), and
``python -m pkg.old`` runs the new module. Nothing is imported before an old path is used. The
old paths are no files, so ``tests/test_import_layers.py``, which reads imports from the
source, sees each importer depend on the path it names (the new one: nothing in the package
imports an old path).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import CodeType, ModuleType

__all__ = ["alias_moved_modules", "moved_target"]


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The meta path finder (and loader) of every moved module: ``{old name: new name}``."""

    def __init__(self) -> None:
        self.moved: dict[str, str] = {}

    def target(self, fullname: str) -> str | None:
        """The new name of ``fullname``: a moved module, or a submodule of a moved package."""
        head, rest = fullname, ""
        while head:
            if head in self.moved:
                return self.moved[head] + rest
            head, dot, last = head.rpartition(".")
            rest = f"{dot}{last}{rest}"
        return None

    def find_spec(self, fullname, path=None, target=None):
        new = self.target(fullname)
        if new is None:
            return None
        found = importlib.util.find_spec(new)
        if found is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, self, origin=found.origin,
            is_package=found.submodule_search_locations is not None,
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target(spec.name))
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system has set the old name's spec on the module: it keeps its own.
        spec = module.__spec__
        if spec is not None and spec.loader is self:
            module.__spec__ = spec.loader_state

    def get_code(self, fullname: str) -> CodeType | None:
        """For ``python -m old.path``: the code of the module at the new path."""
        new = self.target(fullname)
        spec = importlib.util.find_spec(new)
        return spec.loader.get_code(new)


def _finder() -> MovedModules:
    for finder in sys.meta_path:
        if type(finder).__name__ == MovedModules.__name__ and hasattr(finder, "moved"):
            return finder
    finder = MovedModules()
    sys.meta_path.insert(0, finder)
    return finder


def alias_moved_modules(package: str, moved: dict[str, str]) -> None:
    """Answer ``<package>.<old>`` with the module ``moved[old]`` (a full dotted name), for every
    entry of ``moved``."""
    _finder().moved.update({f"{package}.{old}": new for old, new in moved.items()})


def moved_target(name: str) -> str | None:
    """The new name of the old module path ``name`` (None when it did not move)."""
    return _finder().target(name)
