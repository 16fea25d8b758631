"""A legacy YAML as ``--from-yaml`` reads it: the config, where each key is written, its comments.

:func:`read_legacy` parses the file with the legacy parser (its errors: unknown keys with
``file:line`` and did-you-mean, wrong types, unsupported values), the command-line overrides
(``-- --train.max_steps=100``, or those of a pasted launch command, see :mod:`.launch`) applied
on top, and loads the document again for the line of every key and the comments attached to it
(:mod:`.yaml_comments`). :func:`target_of` canonicalises and converts the result to the
``HyperTrainer.Config`` a recipe must build, an error naming a legacy key pointing at the line
(or the override) that wrote it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyper_parallel.codegen.migration.yaml_comments import DocumentComments, find_comments


@dataclass
class LegacySource:
    """A legacy YAML as read: the config, the key lines, the comments and the file's hash."""

    path: Path
    display: str
    """The path as shown in the recipe (relative to the working directory when inside it)."""
    legacy: Any
    lines: dict[tuple, int]
    """Key path -> the 1-based line it is written on."""
    comments: DocumentComments
    sha256: str
    overrides: tuple[str, ...] = ()
    """The command-line overrides applied on top of the file (``--train.max_steps=100``)."""
    cli: dict[tuple, tuple[str, Any]] = field(default_factory=dict)
    """Key path of each override -> (the override as written, its parsed value); the last of a
    repeated key wins, as in the legacy parser."""

    @property
    def file(self) -> str:
        """The file's name (without its folder)."""
        return Path(self.display).name


def display_path(path: Path, base: Path | None = None) -> str:
    """``path`` relative to ``base`` (default: the working directory) when it lies inside it,
    else absolute."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to((base or Path.cwd()).resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def override_paths(overrides: tuple[str, ...]) -> dict[tuple, tuple[str, Any]]:
    """Key path -> (as written, parsed value) of each override, read with the legacy parser's
    own syntax (its errors are reported by ``load_config``, which reads them again)."""
    # The legacy parser's tokenizer has no public name yet (its module is being split); it is
    # imported here only, as it always was.
    from hyper_parallel.trainer.config_parser import _Context, _split_overrides
    from hyper_parallel.utils.yaml_lines import parse_scalar

    found: dict[tuple, tuple[str, Any]] = {}
    for key, value, written in _split_overrides(overrides, _Context("command line")):
        path = tuple(key.split("."))
        found.pop(path, None)  # a repeated key: the last one wins, in its place
        found[path] = (written, parse_scalar(value))
    return found


def read_legacy(path: Path, base: Path | None = None,
                overrides: tuple[str, ...] | list[str] = ()) -> LegacySource:
    """Parse ``path`` with the legacy parser, ``overrides`` (``--a.b=c`` tokens, as
    ``scripts/train_lm.py`` takes them) applied on top (raises its ``ConfigError``); ``base`` as
    in :func:`display_path`."""
    from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig
    from hyper_parallel.trainer.config_parser import load_config
    from hyper_parallel.utils.yaml_lines import load_yaml_with_lines

    display = display_path(path, base)
    if not path.is_file():
        raise ConfigError(
            f"{display!r} does not exist" if not path.exists() else f"{display!r} is not a file",
            location="--from-yaml",
        )
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{display!r} is not UTF-8 text: {exc}", location="--from-yaml") from None
    # Every problem of the file at once (one ConfigError), and an empty file is one too.
    overrides = tuple(overrides)
    legacy = load_config(HyperTrainerConfig, text, source=display, overrides=overrides,
                         allow_empty=False)
    # The launcher sets the local rank (LOCAL_RANK); it is never part of a recipe.
    legacy.train.local_rank = 0
    located = load_yaml_with_lines(text)
    return LegacySource(path, display, legacy, located.lines,
                        find_comments(text, located.lines), hashlib.sha256(data).hexdigest(),
                        overrides, override_paths(overrides) if overrides else {})


def covers(cli_path: tuple, value: Any, key: tuple) -> bool:
    """Whether an override of ``cli_path`` (with parsed ``value``) decides the value of the
    legacy key ``key``: the same key, or a section or dict above it that the override replaces
    (a mapping override merges into the YAML's, so the YAML's other entries stay its own)."""
    if cli_path == key:
        return True
    if key[:len(cli_path)] != cli_path:
        return False
    for step in key[len(cli_path):]:
        if not isinstance(value, dict):
            return True
        if step not in value:
            return False
        value = value[step]
    return True


def located(source: LegacySource, fn: Any, *args: Any) -> Any:
    """``fn(source.legacy)`` (or ``fn(*args)``); a ``ConfigError`` naming a legacy key gets the
    key's ``file:line`` (or the override that set it). Located only: the adapter's errors
    already name the YAML's keys, and the converter imports no framework, while the renaming
    of :func:`in_yaml_terms` lives beside the engine."""
    from hyper_parallel.trainer.config import ConfigError

    try:
        return fn(*(args or (source.legacy,)))
    except ConfigError as exc:
        found = locate_problems(exc, source.display, source.lines, source.cli)
        if found is exc:
            raise
        raise found from None


def in_yaml_terms(error: Any, display: str, lines: dict[tuple, int],
                  cli: dict[tuple, tuple[str, Any]]) -> Any:
    """``error``, a ``ConfigError`` met while the run a legacy YAML (``display``) describes is
    converted, built or preflighted, as the YAML's user reads it: every problem's recipe fields
    renamed to the YAML's keys (:func:`~hyper_parallel.trainer.llm_trainer.legacy_config_error`:
    a legacy key is left as it is) and located at the key's line or at the override that set it
    (:func:`locate_problems`), all of them at once, in file order; ``error`` itself when nothing
    changes. The one way the entries that take a legacy YAML report such an error:
    ``--from-yaml ... --preflight``, ``python -m hyper_parallel.preflight old.yaml`` and the
    training entry's conversion (:func:`located_in_file`)."""
    from hyper_parallel.trainer.config import ConfigError
    from hyper_parallel.trainer.llm_trainer import legacy_config_error

    translated = [legacy_config_error(problem) for problem in error.problems]
    if any(new is not old for new, old in zip(translated, error.problems)):
        error = ConfigError.combine(translated, display)
    return locate_problems(error, display, lines, cli)


def locate_problems(error: Any, display: str, lines: dict[tuple, int],
                    cli: dict[tuple, tuple[str, Any]]) -> Any:
    """``error`` (a ``ConfigError`` about a legacy config read from ``display``) with each
    problem naming a legacy key located at the key's line (``lines``) or at the override that
    set it (``cli``, as :func:`override_paths` reads them), in file order; ``error`` itself
    when none gets a place."""
    from hyper_parallel.trainer.config import ConfigError

    def locate(problem: ConfigError) -> ConfigError:
        if problem.location or not problem.path:
            return problem
        key = tuple(problem.path.split("."))
        written = [text for path, (text, value) in cli.items() if covers(path, value, key)]
        if written:
            return ConfigError(problem.message, path=problem.path,
                               location=f"command line ({written[-1]})")
        line = lines.get(key)
        if line is None:
            return problem
        return ConfigError(problem.message, path=problem.path, location=f"{display}:{line}")

    found = [locate(problem) for problem in error.problems]
    if all(new is old for new, old in zip(found, error.problems)):
        return error
    # In file order, as the legacy parser reports a file's problems.
    order = {id(e): lines.get(tuple((e.path or "").split(".")), float("inf")) for e in found}
    found.sort(key=lambda e: order[id(e)])
    return ConfigError.combine(found, display)


def located_in_file(error: Any, path: Path, overrides: Sequence[str] = ()) -> Any:
    """:func:`in_yaml_terms` for the YAML file ``path`` (shown as given) read with the
    command-line ``overrides`` -- for an entry that parsed it without keeping its lines."""
    from hyper_parallel.utils.yaml_lines import load_yaml_with_lines

    lines = load_yaml_with_lines(path.read_text(encoding="utf-8")).lines
    return in_yaml_terms(error, str(path), lines, override_paths(tuple(overrides)))


def target_of(source: LegacySource) -> tuple[Any, list, Any]:
    """``(canonical legacy config, normalisations, HyperTrainer.Config)`` of ``source``: what
    ``canonicalize_legacy`` and ``legacy_to_trainer_config`` make of it."""
    from hyper_parallel.config import legacy_adapter

    canon, notes = located(source, legacy_adapter.canonicalize_legacy)
    return canon, notes, located(source, legacy_adapter.legacy_to_trainer_config, canon)


def leaf_keys(key_lines: dict[tuple, int]) -> list[tuple]:
    """The YAML's keys that hold values, in file order: sections are left out, while
    config_overrides (a value) counts along with each of its entries."""
    paths = set(key_lines)
    leaves = [path for path in paths
              if path[-1] == "config_overrides"
              or not any(len(other) > len(path) and other[:len(path)] == path for other in paths)]
    return sorted(leaves, key=lambda p: key_lines[p])


def key_counts(source: LegacySource) -> tuple[int, int, list[str]]:
    """``(keys the YAML writes, keys with a new field, 'key (reason)' of the others)``."""
    from hyper_parallel.config.legacy_adapter import FIELD_MAP

    leaves = leaf_keys(source.lines)
    mapped_paths = {k for row in FIELD_MAP if row.new for k in row.legacy}
    mapped = [p for p in leaves
              if ".".join(p) in mapped_paths or ".".join(p[:2]) == "model.config_overrides"]
    reasons = {k: row.detail for row in FIELD_MAP if not row.new for k in row.legacy}
    unmapped = [f"{'.'.join(p)} ({reasons.get('.'.join(p), 'no row in the field table')})"
                for p in leaves if p not in mapped]
    return len(leaves), len(mapped), unmapped


__all__ = ["LegacySource", "covers", "display_path", "in_yaml_terms", "key_counts", "leaf_keys",
           "locate_problems", "located", "located_in_file", "override_paths", "read_legacy",
           "target_of"]
