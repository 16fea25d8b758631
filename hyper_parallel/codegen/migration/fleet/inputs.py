"""What a fleet conversion is given, and the names of the functions it writes.

``--from-yaml a.yaml b.yaml dir/`` (a folder stands for its ``*.yaml`` / ``*.yml`` files in name
order; a value that is no path and holds spaces is a pasted launch command, :mod:`.launch`)
resolves to :class:`Inputs`. Each YAML becomes a recipe named after its file
(:func:`recipe_names`); the shared functions are named after the recipes that call them
(:func:`family_names`, :func:`base_name`), never clashing with a recipe, an import or a name the
module uses itself.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.migration import launch as launch_mod
from hyper_parallel.codegen.migration.recipe.render import RESERVED_NAMES, name_problem
from hyper_parallel.codegen.migration.yaml_source import display_path

SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Input:
    """One YAML to convert: its path, the overrides applied on top, the launch command (if the
    YAML came from one)."""

    path: Path
    overrides: tuple[str, ...] = ()
    launch: launch_mod.Launch | None = None


@dataclass
class Inputs:
    """What ``--from-yaml`` was given, resolved to files."""

    files: list[Input]
    arguments: list[str]
    """The ``--from-yaml`` arguments as the written command shows them."""
    extra: tuple[str, ...] = ()
    """The overrides after ``--`` (applied to every file)."""
    folders: bool = False
    """Whether a folder was given (then the result is a registry, even of one file)."""
    dash_launch: launch_mod.Launch | None = None
    """The launch command given after ``--`` (``--from-yaml -- torchrun ...``)."""

    @property
    def single(self) -> bool:
        """One YAML, no folder: the single-file conversion of :mod:`.from_yaml`."""
        return len(self.files) == 1 and not self.folders

    def command(self) -> str:
        """The command line that converts these inputs."""
        text = "python -m hyper_parallel.codegen --from-yaml"
        if self.dash_launch is not None:
            return f"{text} -- {self.dash_launch.text}"
        text += "".join(f" {shlex.quote(a)}" for a in self.arguments)
        return text + (f" -- {shlex.join(self.extra)}" if self.extra else "")


def _has_space(text: str) -> bool:
    return any(c.isspace() for c in text)


def resolve_inputs(values: list[str], after_dash: list[str] | tuple[str, ...] = (),
                   base: Path | None = None) -> Inputs:
    """Resolve the ``--from-yaml`` values and the tokens after ``--``.

    A value is a YAML file, a folder (its ``*.yaml`` / ``*.yml`` files, in name order) or -- when
    no such path exists and it holds spaces -- a launch command (:mod:`.launch`). With values,
    the tokens after ``--`` are overrides for every file; without, they are a launch command.
    """
    after_dash = tuple(after_dash)
    if not values:
        if not after_dash:
            raise CodegenError("--from-yaml needs a YAML, a folder of YAMLs, or the launch "
                               "command that trained one (after --)")
        launch = launch_mod.parse(after_dash)
        return Inputs([Input(Path(launch.yaml), launch.overrides, launch)], [],
                      dash_launch=launch)
    files: list[Input] = []
    arguments: list[str] = []
    folders = False
    for value in values:
        path = Path(value)
        if path.is_dir():
            found = sorted((p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file()),
                           key=lambda p: p.name)
            if not found:
                raise CodegenError(f"{display_path(path, base)}: the folder holds no *.yaml "
                                   "or *.yml file")
            folders = True
            files += [Input(p, after_dash) for p in found]
            arguments.append(display_path(path, base))
        elif path.exists() or not _has_space(value):
            files.append(Input(path, after_dash))
            arguments.append(display_path(path, base) if path.exists() else value)
        else:
            launch = launch_mod.parse(launch_mod.split(value))
            files.append(Input(Path(launch.yaml), launch.overrides + after_dash, launch))
            arguments.append(launch.text)
    return Inputs(files, arguments, after_dash, folders)


def recipe_names(files: list[Input], base: Path | None = None) -> list[str]:
    """The recipe name of each file (its file name without the suffix); a name that is not a
    usable function name, or two files with the same name, are a CodegenError with the fix."""
    names, problems = [], []
    for item in files:
        stem = item.path.name.rsplit(".", 1)[0] if "." in item.path.name else item.path.name
        problem = name_problem(stem)
        if problem is not None:
            problems.append(f"recipe name {stem!r} (from the file name {item.path.name!r}) "
                            f"{problem[0]}; rename the file (e.g. to {problem[1]}.yaml): with "
                            "several YAMLs each recipe is named after its file")
        names.append(stem)
    by_name: dict[str, list[Input]] = {}
    for name, item in zip(names, files):
        by_name.setdefault(name, []).append(item)
    for name, items in by_name.items():
        if len(items) > 1:
            shown = [display_path(i.path, base) for i in items]
            same = len({i.path.resolve() for i in items}) < len(items)
            problems.append(
                f"{len(items)} YAMLs would become the recipe {name!r}: {', '.join(shown)}"
                + (" (the same file is given twice)" if same else "")
                + "; recipe names come from the file names, so rename all but one (e.g. "
                + ", ".join(f"{Path(s).parent.name or 'other'}_{name}.yaml" for s in shown[1:])
                + ")")
    if problems:
        raise CodegenError(problems)
    return names


def base_name(names: list[str], taken: set[str]) -> str:
    """``<common prefix of the names>_base`` (by ``_``-separated words; ``base`` when they share
    none), never one of ``names`` or ``taken``."""
    stem = _name_stem(names)
    blocked = set(names) | set(taken) | RESERVED_NAMES
    found = _free([f"{stem}base", f"{stem}shared"] + [f"{stem}base_{i}" for i in range(2, 100)],
                  blocked)
    if found is None:  # 100 names taken: not reachable
        raise CodegenError("no free name for the base recipe")
    return found


def _name_stem(names: list[str]) -> str:
    """The common ``_``-separated prefix of ``names`` with its trailing ``_`` ("" for none)."""
    common: list[str] = []
    for group in zip(*(n.split("_") for n in names)):
        if len(set(group)) != 1 or not group[0]:
            break
        common.append(group[0])
    return "_".join(common) + "_" if common else ""


def _free(candidates: list[str], blocked: set[str]) -> str | None:
    return next((c for c in candidates if name_problem(c) is None and c not in blocked), None)


def family_names(names: list[str], members: list[list[str]], base: int | None,
                 taken: set[str]) -> list[str]:
    """A name per family: ``base`` (an index, or None) gets :func:`base_name`; the others
    ``<prefix>_<member suffixes>_shared`` when they have at most 3 members (``members``: the
    names each family is named after), else ``<prefix>_shared_<k>``. Never a recipe name, an
    import, a reserved name or another family's."""
    stem = _name_stem(names)
    blocked = set(names) | set(taken) | RESERVED_NAMES
    found: list[str | None] = [None] * len(members)
    if base is not None:
        found[base] = base_name(names, taken)
        blocked.add(found[base])
    counter = 0
    for index, group in enumerate(members):
        if found[index] is not None:
            continue
        suffixes = [n[len(stem):] for n in group]
        candidates = []
        if len(group) <= 3 and all(suffixes):
            candidates.append(f"{stem}{'_'.join(suffixes)}_shared")
        name = _free(candidates, blocked)
        while name is None:
            counter += 1
            name = _free([f"{stem}shared_{counter}"], blocked)
            if counter > 10_000:  # pragma: no cover -- 10,000 names taken: not reachable
                raise CodegenError("no free name for a shared function")
        found[index] = name
        blocked.add(name)
    return [n for n in found if n is not None]


__all__ = ["SUFFIXES", "Input", "Inputs", "base_name", "family_names", "recipe_names",
           "resolve_inputs"]
