"""What the example recipes (``recipes/<x>.py``) were last converted from: a local record.

A recipe is exactly what ``--from-yaml`` writes for a user, so it carries no generated header;
its docstring records only its YAML's hash. What else it depends on -- the converter, the
adapter, the recipe template, the model registries, the component Configs -- is what the
converting process imported. After converting every example YAML with the modules that are on
disk, :func:`snapshot` records each of those files (every module of the package that the process
had imported, wherever the package is, every template, every example YAML: size, modification
time, hash), black's and Python's versions, the package's location and each recipe's hash, in ``build/codegen/recipes.json`` (``build/`` is not
tracked). :func:`current` says, without converting, whether converting again could change
anything; ``make codegen`` then skips the conversion (and the imports it costs). A file whose
size and modification time are as recorded counts as unchanged, as ``make`` and ``git`` judge.

The record is a cache: deleting it costs one conversion, and a record that does not match is
simply ignored.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hyper_parallel.codegen.rendering.framing import sha

RECORD = "build/codegen/recipes.json"
#: The recipes depend on the package's modules; other imports (PyYAML, tyro) are pinned.
PACKAGE = "hyper_parallel"
_VERSION = 3


def _package_dir() -> Path:
    """Where the running ``hyper_parallel`` package is (the recipes are converted with it, which
    need not be the tree ``--root`` names)."""
    return Path(sys.modules[PACKAGE].__file__).resolve().parent


def _imported_files() -> list[str]:
    """Absolute paths of the source files of every imported module of the running package."""
    found = set()
    for name, module in list(sys.modules.items()):
        if name == PACKAGE or name.startswith(f"{PACKAGE}."):
            path = getattr(module, "__file__", None)
            if path:
                found.add(str(Path(path).resolve()))
    return sorted(found)


def _stamp(path: Path) -> list:
    """``[size, mtime_ns, sha256]`` of a file (``[-1, -1, ""]`` when it is missing)."""
    try:
        info = path.stat()
        return [info.st_size, info.st_mtime_ns, sha(path.read_bytes())]
    except OSError:
        return [-1, -1, ""]


def _unchanged(path: Path, stamp: list) -> bool:
    """Whether the file is still what ``stamp`` recorded; its content is hashed only when its
    size or modification time moved (as ``make`` and ``git`` judge files)."""
    try:
        info = path.stat()
    except OSError:
        return stamp[2] == ""
    if [info.st_size, info.st_mtime_ns] == stamp[:2]:
        return True
    return sha(path.read_bytes()) == stamp[2]


def _templates(repo: Path) -> list[str]:
    return sorted(p.relative_to(repo).as_posix() for p in (Path(repo) / "templates").glob("*.j2"))


def snapshot(repo: Path, recipes: dict[str, str], yamls: dict[str, str], black: str) -> str:
    """The record (the text of :data:`RECORD`) saying that ``recipes`` (``{path: text}``,
    converted from ``yamls``, ``{recipe path: yaml path}``) were converted by this process with
    the files now on disk."""
    repo = Path(repo)
    # Absolute paths for the modules, repo-relative ones for the templates and YAMLs: `repo / p`
    # is right for both.
    inputs = sorted({*_imported_files(), *_templates(repo), *yamls.values()})
    record = {"version": _VERSION, "black": black, "python": sys.version,
              "package": str(_package_dir()),
              "inputs": {rel: _stamp(repo / rel) for rel in inputs},
              "recipes": {rel: sha(text) for rel, text in sorted(recipes.items())}}
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


def current(repo: Path, yamls: dict[str, str], black: str) -> bool:
    """Whether the recipes of ``yamls`` are on disk as recorded and nothing they were converted
    from has changed since (False when there is no usable record)."""
    repo = Path(repo)
    try:
        record = json.loads((repo / RECORD).read_text(encoding="utf-8"))
        if [record["version"], record["black"], record["python"], record["package"]] != [
                _VERSION, black, sys.version, str(_package_dir())]:
            return False
        inputs, recipes = dict(record["inputs"]), dict(record["recipes"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if sorted(recipes) != sorted(yamls) or not set(yamls.values()) <= set(inputs):
        return False
    if set(_templates(repo)) != {rel for rel in inputs if rel.startswith("templates/")}:
        return False
    if not all(_unchanged(repo / rel, stamp) for rel, stamp in inputs.items()):
        return False
    return all(_unchanged(repo / rel, [-2, -2, digest]) for rel, digest in recipes.items())
