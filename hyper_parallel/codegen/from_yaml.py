"""``--from-yaml``: a legacy YAML becomes a recipe module, proven equivalent before it is written.

The steps, each its own function:

1. :func:`read_legacy` -- the legacy parser reads the YAML (its errors: unknown keys with
   ``file:line`` and did-you-mean, wrong types, unsupported values), with the command-line
   overrides (``-- --train.max_steps=100``, or those of a pasted launch command, see
   :mod:`.launch`) applied on top; the document is loaded again with key lines and comments for
   provenance (an override's line says ``command line: --train.max_steps=100``).
2. ``canonicalize_legacy`` rewrites equivalent spellings (reported as normalisations) and the
   generated adapter converts the result to a ``HyperTrainer.Config`` (the *target*).
3. :func:`choose_baseline` -- :func:`~hyper_parallel.config.baselines.flavor_baseline` of the
   model and flavor the YAML names, or a registry recipe of the same model where one leaves
   fewer lines to write.
4. :func:`field_changes` -- the fields where target and baseline differ, one assignment each
   (dict entries one by one), commented with the legacy key and line they came from plus the
   user's own comments, in the order of the YAML.
5. The module is rendered from ``templates/recipe_from_yaml.py.j2`` and formatted by black.
6. :func:`prove` executes it in a fresh namespace and requires
   ``_trainer_config_to_legacy(NAME()) == canonicalize_legacy(legacy)`` (and ``NAME()`` equal to
   the target); nothing is written otherwise. :func:`prove_module` does it for every recipe of a
   module at once (the fleet of :mod:`.fleet` shares it).

The text depends only on the YAML's bytes, the path it is named by and the generator, so the
recipes of ``examples/yaml/`` are regenerated and checked like every other generated file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import keyword
import re
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyper_parallel.codegen import pyliteral
from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.yaml_comments import DocumentComments, find_comments

TEMPLATES = "templates"
TEMPLATE = "recipe_from_yaml.py.j2"
LINE_LENGTH = 100  # black's, see render.black_mode
BASELINE_FUNCTION = ("hyper_parallel.config.baselines", "flavor_baseline")
TRAINER = ("hyper_parallel.trainer.trainer_config", "HyperTrainer")


class ConversionError(CodegenError):
    """The YAML converts, but not exactly (the proof failed) or not as asked (``--strict``)."""


# ---------------------------------------------------------------------------------------------
# 1. reading
# ---------------------------------------------------------------------------------------------


@dataclass
class LegacySource:
    """A legacy YAML as read: the config, the key lines, the comments and the file's hash."""

    path: Path
    display: str
    """The path as shown in the recipe (relative to the working directory when inside it)."""
    legacy: Any
    lines: dict[tuple, int]
    comments: DocumentComments
    sha256: str
    overrides: tuple[str, ...] = ()
    """The command-line overrides applied on top of the file (``--train.max_steps=100``)."""
    cli: dict[tuple, tuple[str, Any]] = field(default_factory=dict)
    """Key path of each override -> (the override as written, its parsed value); the last of a
    repeated key wins, as in the legacy parser."""


def display_path(path: Path, base: Path | None = None) -> str:
    """``path`` relative to ``base`` (default: the working directory) when it lies inside it,
    else absolute."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to((base or Path.cwd()).resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def _override_paths(overrides: tuple[str, ...]) -> dict[tuple, tuple[str, Any]]:
    """Key path -> (as written, parsed value) of each override, read with the legacy parser's
    own syntax (its errors are reported by ``load_config``, which reads them again)."""
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
                        overrides, _override_paths(overrides) if overrides else {})


# ---------------------------------------------------------------------------------------------
# 3. the baseline
# ---------------------------------------------------------------------------------------------


@dataclass
class Baseline:
    """Where a recipe starts: the call, its import and the config it returns."""

    code: str
    imports: set[tuple[str, str]]
    config: Any
    described: str
    keys: tuple[str, ...] = ()
    """The legacy keys the baseline expresses (for provenance)."""


def _flavor_baseline(legacy: Any) -> Baseline:
    from hyper_parallel.config.baselines import flavor_baseline

    name = legacy.model.name
    overrides = legacy.model.config_overrides or {}
    flavor = overrides.get("flavor")
    args = [pyliteral.literal(name, "model.name").text]
    if flavor is not None:
        args.append(pyliteral.literal(flavor, "model.config_overrides.flavor").text)
    keys = ("model.name",) + (("model.config_overrides.flavor",) if flavor is not None else ())
    what = f"model {name!r}" + (f", flavor {flavor!r}" if flavor is not None else
                                 " (its default flavor)")
    return Baseline(f"{BASELINE_FUNCTION[1]}({', '.join(args)})", {BASELINE_FUNCTION},
                    flavor_baseline(name, flavor), f"flavor_baseline: {what}", keys)


def _registry_baselines(legacy: Any) -> list[Baseline]:
    """The registry recipes of the model the YAML names (``hyper_parallel.models.<name>.
    config_registry``), when that module exists."""
    from hyper_parallel import models
    from hyper_parallel.config.recipes import available_recipes

    name = legacy.model.name
    module_name = f"hyper_parallel.models.{name}.config_registry"
    # Look for the file rather than find_spec(): that would import the model package (torch,
    # DTensor) only to learn that it has no registry.
    if "." in name or not any((Path(folder) / name / "config_registry.py").is_file()
                              for folder in models.__path__):
        return []
    module = importlib.import_module(module_name)
    keys = ("model.name",) + (("model.config_overrides.flavor",)
                              if (legacy.model.config_overrides or {}).get("flavor") else ())
    found = []
    for recipe in available_recipes(module):
        found.append(Baseline(f"{recipe}()", {(module_name, recipe)}, getattr(module, recipe)(),
                              f"registry recipe {module_name}.{recipe}", keys))
    return found


def choose_baseline(legacy: Any, target: Any) -> Baseline:
    """The candidate leaving the fewest lines to write; the flavor baseline on a tie."""
    candidates = [_flavor_baseline(legacy)] + _registry_baselines(legacy)
    scored = [(len(field_changes(c.config, target)), i, c) for i, c in enumerate(candidates)]
    return min(scored, key=lambda item: item[:2])[2]


# ---------------------------------------------------------------------------------------------
# 4. the lines
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """``config<path> = value`` (or ``del config<path>`` when ``delete``); ``path`` holds
    ``("attr", name)`` and ``("key", dict key)`` steps."""

    path: tuple[tuple[str, Any], ...]
    value: Any = None
    delete: bool = False

    @property
    def dotted(self) -> str:
        """The path as the new tree's field name, dict keys joined with dots."""
        return ".".join(str(step) for _, step in self.path)

    @property
    def attr_path(self) -> str:
        """The dataclass part of the path (no dict keys)."""
        return ".".join(step for kind, step in self.path if kind == "attr")

    @property
    def dict_keys(self) -> tuple[Any, ...]:
        return tuple(step for kind, step in self.path if kind == "key")


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def field_changes(base: Any, target: Any, path: tuple = ()) -> list[Change]:
    """The assignments that turn ``base`` into ``target``, in field order."""
    if dataclasses.is_dataclass(target) and type(base) is type(target):
        changes = []
        for f in dataclasses.fields(target):
            changes += field_changes(getattr(base, f.name), getattr(target, f.name),
                                     path + (("attr", f.name),))
        return changes
    if isinstance(base, dict) and isinstance(target, dict) and path:
        changes = [Change(path + (("key", k),), v) for k, v in target.items()
                   if k not in base or not _same(base[k], v)]
        changes += [Change(path + (("key", k),), delete=True) for k in base if k not in target]
        return changes
    return [] if _same(base, target) else [Change(path, target)]


def _on_baseline_spec(target: Any, baseline: Baseline) -> Any:
    """``target`` (converted from the YAML: no ``model_spec``, the legacy schema has none) on the
    baseline's spec when that spec trains the same model (see
    ``transforms.registered_spec_equivalent``): the recipe stays on the v2 spec and no line
    resets it."""
    from hyper_parallel.config.transforms import registered_spec_equivalent

    spec = baseline.config.model_spec
    if target.model_spec is not None or spec is None:
        return target
    candidate = dataclasses.replace(target, model_spec=spec)
    return candidate if registered_spec_equivalent(candidate) else target


def _code(change: Change, imports: set[tuple[str, str]]) -> str:
    target = "config"
    for kind, step in change.path:
        if kind == "attr":
            target += f".{step}"
        else:
            target += f"[{pyliteral.literal(step, change.dotted + ' (key)').text}]"
    if change.delete:
        return f"del {target}"
    expression = pyliteral.literal(change.value, change.dotted)
    imports |= expression.imports
    return f"{target} = {expression.text}"


def comment_text(text: str) -> str:
    """One printable line (non-printable characters escaped), safe after ``#``."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text).rstrip()


@dataclass
class RecipeLine:
    """One line of the recipe body and what the template prints around it."""

    code: str
    provenance: str
    anchor: float
    """The YAML line it comes from (ordering; ``inf`` when derived from defaults only)."""
    keys: tuple[tuple, ...] = ()
    comments: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        """Whether ``code  # provenance`` fits black's line length (else the provenance goes on
        a line of its own above the code, and black never has to wrap a value around it)."""
        return "\n" not in self.code and len(f"    {self.code}  # {self.provenance}") <= LINE_LENGTH


#: Where lines that come from the command line only sort (after the YAML's lines, in the order
#: the overrides were written).
CLI_ANCHOR = 1_000_000


def _covers(cli_path: tuple, value: Any, key: tuple) -> bool:
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


class _Provenance:
    """New-tree paths -> the legacy keys (and their lines, or the overrides) they come from."""

    def __init__(self, source: LegacySource):
        from hyper_parallel.config.legacy_adapter import FIELD_MAP

        self.source = source
        self.rows = FIELD_MAP
        self.file = Path(source.display).name
        self.order = list(source.cli)

    def legacy_keys(self, change: Change) -> list[str]:
        attr = change.attr_path
        keys: list[str] = []
        for row in self.rows:
            if any(new == attr or new.startswith(attr + ".") or attr.startswith(new + ".")
                   for new in row.new):
                keys += [k for k in row.legacy if k not in keys]
        if change.dict_keys and len(keys) == 1:
            keys = [".".join([keys[0], *map(str, change.dict_keys)])]
        return keys

    def line(self, key: str) -> int | None:
        return self.source.lines.get(tuple(key.split(".")))

    def overrides_of(self, key: str) -> list[tuple[int, str, bool]]:
        """``(position, as written, decides)`` of each override that sets ``key`` or a part of
        it (``decides``: the override, not the YAML, gives the key its value)."""
        parts = tuple(key.split("."))
        found = []
        for position, (path, (written, value)) in enumerate(self.source.cli.items()):
            if _covers(path, value, parts):
                found.append((position, written, True))
            elif path[:len(parts)] == parts:
                found.append((position, written, False))
        return found

    def locate(self, keys: list[str]) -> tuple[list[tuple[int, str]], list[tuple[int, str]],
                                              list[tuple[int, str]]]:
        """``(written, overridden, cli)``: ``(line, key)`` of the keys the YAML gives their
        value, ``(line, key)`` of the YAML's keys an override replaces, and ``(position, as
        written)`` of those overrides, in the order written."""
        written, overridden, cli = [], [], []
        for k in keys:
            line = self.line(k)
            decided = False
            for position, text, decides in self.overrides_of(k):
                decided = decided or decides
                if (position, text) not in cli:
                    cli.append((position, text))
            if line is not None:
                (overridden if decided else written).append((line, k))
        return sorted(written), sorted(overridden), sorted(cli)

    def describe(self, keys: list[str], what: str) -> tuple[str, float, tuple[tuple, ...]]:
        written, overridden, cli = self.locate(keys)
        if not written and not cli and not keys:
            return (comment_text(f"{what}: new-only, at its default in every legacy YAML"),
                    float("inf"), ())
        if not written and not cli:
            return (comment_text(f"{what}: follows from the legacy default of {', '.join(keys)} "
                                 "and the YAML's other keys"), float("inf"), ())
        parts = []
        if written:
            parts.append(f"{self.file}:{_key_list(written)}")
        if cli:
            parts.append("command line: " + " ".join(text for _, text in cli))
        anchors = [line for line, _ in written + overridden]
        anchor = min(anchors) if anchors else CLI_ANCHOR + cli[0][0]
        paths = tuple(tuple(k.split(".")) for _, k in sorted(written + overridden))
        return comment_text(", ".join(parts)), anchor, paths


def _key_list(written: list[tuple[int, str]]) -> str:
    """``LINE key`` / ``FIRST-LAST section.{a, b}`` / ``FIRST-LAST a, b`` of sorted ``(line,
    key)`` pairs."""
    first, last = written[0][0], written[-1][0]
    span = f"{first}" if first == last else f"{first}-{last}"
    if len(written) == 1:
        return f"{first} {written[0][1]}"
    # One row reading several keys of a section (mixed precision, say).
    parents = {k.rsplit(".", 1)[0] for _, k in written}
    if len(parents) == 1:
        names = ", ".join(k.rsplit(".", 1)[1] for _, k in written)
        return f"{span} {parents.pop()}.{{{names}}}"
    return f"{span} " + ", ".join(k for _, k in written)


def _attach_comments(source: LegacySource, lines: list[RecipeLine],
                     inherited: list[RecipeLine] = ()) -> list[str]:
    """Give each line the comments of its keys; a comment of a key without a line of its own
    goes to the next line below it in the YAML. Returns the comments left for the end.

    ``inherited``: the lines of the functions this recipe calls (a fleet's family, a sibling):
    a key one of them sets keeps its comment there (added once, when that line lacks it), and
    such a line stands at its key's row of this YAML, so a comment whose next line below is one
    of them goes to the recipe's first line (the call), after that line's own comments -- not
    to a later line of the recipe that it does not describe."""
    owner = {key: line for line in inherited for key in line.keys}
    owner.update({key: line for line in lines for key in line.keys})
    mine = {id(line) for line in lines}

    def owner_of(path: tuple) -> RecipeLine | None:
        # A line that sets a whole dict (config_overrides) owns the comments of its entries.
        for end in range(len(path), 0, -1):
            if path[:end] in owner:
                return owner[path[:end]]
        return None

    stand_ins = []
    for line in inherited:
        rows = [source.lines[path] for path in line.keys if path in source.lines]
        if rows:
            stand_ins.append(RecipeLine("", "", min(rows)))
    standing = {id(line) for line in stand_ins}
    ordered = sorted((source.lines.get(path, 0), path, c) for path, c in
                     source.comments.keys.items())
    by_anchor = sorted(lines + stand_ins, key=lambda line: line.anchor)
    tail: list[str] = []
    to_call: list[str] = []
    for key_line, path, comments in ordered:
        text = [comment_text(c) for c in comments.all()]
        line = owner_of(path)
        if line is not None:
            line.comments += text if id(line) in mine else [
                t for t in text if t not in line.comments]
            continue
        after = next((line for line in by_anchor if line.anchor > key_line), None)
        if after is None:
            tail.extend(text)
        elif id(after) in standing:
            to_call.extend(text)
        else:
            after.comments.extend(text)
    lines[0].comments += to_call
    return tail + [comment_text(c) for c in source.comments.tail]


# ---------------------------------------------------------------------------------------------
# 5. rendering
# ---------------------------------------------------------------------------------------------


RESERVED_NAMES = frozenset({BASELINE_FUNCTION[1], TRAINER[1], "config", "annotations"})


def name_problem(name: str) -> tuple[str, str] | None:
    """``(why, a usable name)`` when ``name`` cannot be a recipe function's name, else None."""
    reserved = RESERVED_NAMES
    if not name.isidentifier() or keyword.iskeyword(name) or name in reserved \
            or name.startswith("_"):
        fixed = re.sub(r"\W", "_", name).strip("_") or "recipe"
        if fixed[0].isdigit() or keyword.iskeyword(fixed) or fixed in reserved:
            fixed = f"recipe_{fixed}"
        why = ("is a Python keyword" if keyword.iskeyword(name) else
               "is a name the recipe module uses itself" if name in reserved else
               "starts with an underscore (private names are not recipes)"
               if name.startswith("_") and name.isidentifier() else
               "is not a Python identifier")
        return why, fixed
    return None


def check_name(name: str, stem_hint: str | None = None) -> str:
    """``name`` when it is a usable function name; else a ``CodegenError`` with the fix."""
    problem = name_problem(name)
    if problem is not None:
        origin = f" (from the file name {stem_hint!r})" if stem_hint else ""
        raise CodegenError(f"recipe name {name!r}{origin} {problem[0]}; pass --name {problem[1]}")
    return name


def _docstring_text(text: str) -> str:
    """``text`` as the body of a ``\"\"\"`` string literal that evaluates back to ``text``."""
    out = []
    for c in text:
        if c in '\\"':
            out.append("\\" + c)
        elif c.isprintable() or c == "\n":
            out.append(c)
        else:
            out.append(ascii(c)[1:-1])
    return "".join(out)


def module_name_for(output: Path, base: Path | None = None) -> str | None:
    """``recipes/x.py`` -> ``recipes.x`` (relative to ``base``, default the working directory),
    or None."""
    shown = display_path(output, base)
    if shown.startswith("/") or not shown.endswith(".py"):
        return None
    parts = shown[:-3].split("/")
    return ".".join(parts) if all(p.isidentifier() for p in parts) else None


def parallel_size(legacy: Any) -> tuple[int, bool]:
    """``(product of the parallel degrees, whether one of them is inferred (-1))``: the ranks a
    run of ``legacy`` needs (any multiple of it when a degree is inferred)."""
    acc = legacy.train.accelerator
    size, inferred = 1, False
    for degree in (acc.dp_replicate, acc.dp_shard, acc.tp, acc.cp, acc.pp):
        size *= degree if degree and degree > 0 else 1
        inferred = inferred or degree == -1
    return size, inferred


def nproc_of(legacy: Any, launch: Any = None) -> int:
    """The ``--nproc_per_node`` of the recipe's ``torchrun`` line: the launch command's when it
    gives one that fits the config (a degree of -1 takes what the launch gives), else the
    product of the degrees."""
    from hyper_parallel.codegen.launch import nproc_problem

    size, inferred = parallel_size(legacy)
    nproc = getattr(launch, "nproc", None)
    if nproc is not None and nproc_problem(nproc, size, inferred) is None:
        return int(nproc)
    return size


def launch_warnings(source: LegacySource, launch: Any) -> list[str]:
    """The report's warning lines about ``launch`` (None: no launch command) for ``source``."""
    from hyper_parallel.codegen.launch import nproc_problem

    if launch is None:
        return []
    problem = nproc_problem(launch.nproc, *parallel_size(source.legacy))
    return [f"{source.display}: {problem}"] if problem else []


def codegen_command(display: str, overrides: tuple[str, ...] = (), launch: Any = None) -> str:
    """The ``--from-yaml`` command that converts ``display`` with ``overrides`` (the launch
    command's own overrides come first in them) as one line."""
    import shlex

    head = "python -m hyper_parallel.codegen --from-yaml"
    if launch is not None:
        extra = tuple(overrides[len(launch.overrides):])
        text = f"{head} {shlex.quote(launch.text)}"
    else:
        extra = tuple(overrides)
        text = f"{head} {shlex.quote(display)}"
    return text + (f" -- {shlex.join(extra)}" if extra else "")


def _docstring(source: LegacySource, name: str, module: str | None, output: Path,
               baseline: Baseline, launch: Any = None) -> str:
    module = module or f"<the module path of {output.name[:-3]}>"
    nproc = nproc_of(source.legacy, launch)
    if source.overrides or launch is not None:
        command = codegen_command(source.display, source.overrides, launch)
        about = (
            f"Written by ``{command}``. It starts from {baseline.described} and sets, one line "
            "each, the fields the YAML and the command-line overrides change, commented with the "
            "legacy key and the line they come from (``command line: --a.b=c`` for an override). "
            "Before writing, the converter executed this module and checked that "
            f"``_trainer_config_to_legacy({name}())`` equals the canonical form of the YAML with "
            "the overrides applied."
        )
        overridden = ("\n" + textwrap.fill(
            f"with the command-line overrides {' '.join(source.overrides)}",
            width=LINE_LENGTH - 4, break_on_hyphens=False, break_long_words=False)
            if source.overrides else "")
    else:
        about = (
            f"Written by ``python -m hyper_parallel.codegen --from-yaml {source.display}``. It "
            f"starts from {baseline.described} and sets, one line each, the fields the YAML "
            "changes, commented with the legacy key and the line they come from. Before writing, "
            "the converter executed this module and checked that "
            f"``_trainer_config_to_legacy({name}())`` equals the canonical form of the YAML."
        )
        overridden = ""
    about = textwrap.fill(about, width=LINE_LENGTH - 4, break_on_hyphens=False,
                          break_long_words=False)
    text = (
        f"Recipe {name}, converted from {source.display}\n"
        f"(sha256 {source.sha256}){',' if overridden else ''}{overridden}.\n\n"
        f"Train it with\n\n"
        f"    torchrun --nproc_per_node {nproc} -m hyper_parallel.train "
        f"--module {module} --config {name}\n\n"
        f"{about}\n"
    )
    return _docstring_text(text)


def _import_lines(imports: set[tuple[str, str]]) -> list[str]:
    by_module: dict[str, set[str]] = {}
    for module, name in imports:
        by_module.setdefault(module, set()).add(name)
    return [f"from {module} import {', '.join(sorted(names))}"
            for module, names in sorted(by_module.items())]


@dataclass
class Recipe:
    """A converted YAML: the module text and what the report says about it."""

    name: str
    text: str
    source: LegacySource
    baseline: Baseline
    lines: int
    keys_written: int
    keys_mapped: int
    normalisations: list
    unmapped: list[str] = field(default_factory=list)
    """``key (reason)`` for each key the YAML writes that has no new field: an ``unsupported``
    row at its legacy default (any other value is refused), so nothing is lost."""
    canonical: Any = None
    """``canonicalize_legacy(legacy)``: what the recipe must convert back to."""
    target: Any = None
    """``_legacy_to_trainer_config(canonical)``: what the recipe must build."""
    proof_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    """Lines the report prints as warnings (a launch command's ``--nproc_per_node`` that does
    not fit the config)."""


def _leaf_keys(data_lines: dict[tuple, int]) -> list[tuple]:
    """The YAML's keys that hold values: sections are left out, while config_overrides (a
    value) counts along with each of its entries."""
    paths = set(data_lines)
    leaves = [path for path in paths
              if path[-1] == "config_overrides"
              or not any(len(other) > len(path) and other[:len(path)] == path for other in paths)]
    return sorted(leaves, key=lambda p: data_lines[p])


def _located(source: LegacySource, fn: Any, *args: Any) -> Any:
    """``fn(source.legacy)`` (or ``fn(*args)``); a ``ConfigError`` naming a legacy key gets the
    key's ``file:line``."""
    from hyper_parallel.trainer.config import ConfigError

    def locate(error: ConfigError) -> ConfigError:
        if error.location or not error.path:
            return error
        key = tuple(error.path.split("."))
        written = [text for path, (text, value) in source.cli.items() if _covers(path, value, key)]
        if written:
            return ConfigError(error.message, path=error.path,
                               location=f"command line ({written[-1]})")
        line = source.lines.get(key)
        if line is None:
            return error
        return ConfigError(error.message, path=error.path, location=f"{source.display}:{line}")

    try:
        return fn(*(args or (source.legacy,)))
    except ConfigError as exc:
        located = [locate(problem) for problem in exc.problems]
        if all(new is old for new, old in zip(located, exc.problems)):
            raise
        # In file order, as the legacy parser reports a file's problems.
        order = {id(e): source.lines.get(tuple((e.path or "").split(".")), float("inf"))
                 for e in located}
        located.sort(key=lambda e: order[id(e)])
        raise ConfigError.combine(located, source.display) from None


def target_of(source: LegacySource) -> tuple[Any, list, Any]:
    """``(canonical legacy config, normalisations, HyperTrainer.Config)`` of ``source``."""
    from hyper_parallel.config.legacy_adapter import _legacy_to_trainer_config, canonicalize_legacy

    canon, notes = _located(source, canonicalize_legacy)
    return canon, notes, _located(source, _legacy_to_trainer_config, canon)


def key_counts(source: LegacySource) -> tuple[int, int, list[str]]:
    """``(keys the YAML writes, keys with a new field, 'key (reason)' of the others)``."""
    from hyper_parallel.config.legacy_adapter import FIELD_MAP

    leaves = _leaf_keys(source.lines)
    mapped_paths = {k for row in FIELD_MAP if row.new for k in row.legacy}
    mapped = [p for p in leaves
              if ".".join(p) in mapped_paths or ".".join(p[:2]) == "model.config_overrides"]
    reasons = {k: row.detail for row in FIELD_MAP if not row.new for k in row.legacy}
    unmapped = [f"{'.'.join(p)} ({reasons.get('.'.join(p), 'no row in the field table')})"
                for p in leaves if p not in mapped]
    return len(leaves), len(mapped), unmapped


def render_template(repo: Path, template: str, context: dict[str, Any], what: str) -> str:
    """``templates/<template>`` rendered with ``context`` and formatted by black."""
    from hyper_parallel.codegen import render as render_module
    from hyper_parallel.codegen.pipeline import _environment

    if not (repo / TEMPLATES / template).is_file():
        raise CodegenError(f"{TEMPLATES}/{template} not found under {repo}: the converter runs "
                           "from a checkout of hyper_parallel (pip install -e .)")
    raw = _environment(repo).get_template(template).render(**context)
    try:
        return render_module.format_python(raw)
    except Exception as exc:  # a bug here, never the user's input: values are checked literals
        raise CodegenError(f"{template}: the rendered {what} is not valid Python ({exc})") from exc


def render(source: LegacySource, name: str, output: Path, repo: Path,
           base: Path | None = None, launch: Any = None) -> Recipe:
    """Canonicalise, convert, pick the baseline, render and format (nothing is executed)."""
    canon, notes, target = target_of(source)
    baseline = choose_baseline(canon, target)
    target = _on_baseline_spec(target, baseline)
    if name in {imported for _, imported in baseline.imports}:
        raise CodegenError(f"recipe name {name!r} is the name of its baseline recipe, which the "
                           f"module imports; pass another --name (e.g. --name my_{name})")
    provenance = _Provenance(source)
    imports = set(baseline.imports) | {TRAINER}
    lines = []
    for change in field_changes(baseline.config, target):
        code = _code(change, imports)
        text, anchor, keys = provenance.describe(provenance.legacy_keys(change), change.dotted)
        lines.append(RecipeLine(code, text, anchor, keys))
    lines.sort(key=lambda line: (line.anchor, line.code))
    base_keys = [k for k in baseline.keys if provenance.line(k) is not None]
    base_text, base_anchor, base_paths = provenance.describe(list(baseline.keys), "baseline")
    if not base_keys:
        base_text, base_anchor = comment_text(baseline.described), 0
    head = RecipeLine(f"config = {baseline.code}", base_text, base_anchor, base_paths)
    tail = _attach_comments(source, [head] + lines)
    context = {
        "docstring": _docstring(source, name, module_name_for(output, base), output, baseline,
                                launch),
        "imports": _import_lines(imports),
        "name": name,
        "baseline": head,
        "lines": lines,
        "tail": tail,
    }
    text = render_template(repo, TEMPLATE, context, "recipe")
    written, mapped, unmapped = key_counts(source)
    return Recipe(name, text, source, baseline, len(lines), written, mapped, notes,
                  unmapped, canon, target, warnings=launch_warnings(source, launch))


# ---------------------------------------------------------------------------------------------
# 6. the proof
# ---------------------------------------------------------------------------------------------


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            out.update(_flat(getattr(value, f.name), f"{prefix}{f.name}."))
        return out
    return {prefix[:-1]: value}


def differences(expected: Any, actual: Any) -> list[str]:
    """``field: expected X, got Y`` for every leaf that differs."""
    a, b = _flat(expected), _flat(actual)
    return [f"{k}: expected {a.get(k)!r}, the recipe gives {b.get(k)!r}"
            for k in sorted(set(a) | set(b)) if not _same(a.get(k), b.get(k))]


@dataclass(frozen=True)
class Obligation:
    """What one recipe function of a module must build: ``target`` (the YAML's
    ``HyperTrainer.Config``), converting back to ``canonical`` (the YAML's canonical form)."""

    name: str
    display: str
    target: Any
    canonical: Any


def recipe_problems(config: Any, target: Any, canonical: Any) -> list[str]:
    """Every way ``config`` (what a recipe built) falls short of ``target`` and ``canonical``."""
    from hyper_parallel.config.legacy_adapter import _trainer_config_to_legacy
    from hyper_parallel.trainer.config import ConfigError

    problems = differences(target, config)
    try:
        back = _trainer_config_to_legacy(config)
    except ConfigError as exc:
        problems.append(f"converting the recipe back to the legacy schema failed: {exc}")
    else:
        problems += differences(canonical, back)
    return problems


def prove_module(text: str, filename: str, obligations: list[Obligation],
                 module: str = "_hyper_parallel_from_yaml_") -> float:
    """Execute ``text`` once in a fresh namespace, call every recipe of ``obligations`` (all of
    them before checking any: one recipe changing what another returned would show), and
    raise :class:`ConversionError` naming every field of every recipe that does not reproduce
    its YAML exactly. Returns the seconds it took."""
    start = time.perf_counter()
    namespace: dict[str, Any] = {"__name__": module, "__file__": filename}
    exec(compile(text, filename, "exec"), namespace)  # noqa: S102 -- our own output
    built = [(item, namespace[item.name]()) for item in obligations]
    failed = []
    for item, config in built:
        problems = recipe_problems(config, item.target, item.canonical)
        if problems:
            failed.append(
                f"{item.display}: the emitted recipe{'' if len(obligations) == 1 else ' ' + item.name}"
                " does not reproduce the YAML, so nothing was written (this is a bug in the "
                "converter or the field table; please report it):\n"
                + "\n".join(f"  {p}" for p in problems))
    if failed:
        raise ConversionError("\n".join(failed))
    return time.perf_counter() - start


def prove(recipe: Recipe, filename: str) -> None:
    """Execute the module text in a fresh namespace; raise :class:`ConversionError` naming every
    field unless it reproduces the YAML exactly."""
    recipe.proof_seconds = prove_module(
        recipe.text, filename,
        [Obligation(recipe.name, recipe.source.display, recipe.target, recipe.canonical)],
        f"_hyper_parallel_from_yaml_.{recipe.name}")


def strict_error(source: LegacySource, normalisations: list) -> ConversionError:
    """``--strict``'s refusal of a YAML that needs ``normalisations``."""
    return ConversionError(
        f"{source.display}: --strict refuses the conversion; the YAML needs "
        f"{len(normalisations)} normalisation(s):\n"
        + "\n".join(f"  {n.field}: {n.old!r} -> {n.new!r} ({n.why})" for n in normalisations)
        + "\nwrite those keys as shown (the new value) and convert again, or drop --strict"
    )


def convert(path: Path, name: str | None = None, output: Path | None = None,
            repo: Path | None = None, strict: bool = False,
            base: Path | None = None, overrides: tuple[str, ...] | list[str] = (),
            launch: Any = None) -> tuple[Recipe, Path]:
    """Read, convert, render and prove ``path``; returns the recipe and its output path
    (``recipes/<name>.py`` under ``base`` by default). Writes nothing.

    ``base`` (default: the working directory) is what the paths in the recipe are shown
    relative to -- the source YAML, and the module path of the output in the ``torchrun`` line
    -- so that the text does not depend on where the command runs from.

    ``overrides``: legacy ``--a.b=c`` tokens applied on top of the YAML (their lines say
    ``command line: --a.b=c``); ``launch``: the :class:`~hyper_parallel.codegen.launch.Launch`
    they came from, if any (its own overrides first in ``overrides``), recorded in the docstring
    and checked against the config's world size.
    """
    repo = repo or Path(__file__).resolve().parents[2]
    stem = Path(path).name.rsplit(".", 1)[0]
    name = check_name(name, None) if name is not None else check_name(stem, Path(path).name)
    output = Path(output) if output is not None else (base or Path()) / "recipes" / f"{name}.py"
    source = read_legacy(Path(path), base, overrides)
    recipe = render(source, name, output, repo, base, launch)
    if strict and recipe.normalisations:
        raise strict_error(source, recipe.normalisations)
    prove(recipe, str(output))
    return recipe, output


def report(recipe: Recipe, output: Path, wrote: bool = True, base: Path | None = None) -> str:
    """The short human report printed after a conversion (paths relative to ``base``)."""
    lines = [
        f"from-yaml: {recipe.source.display} -> {display_path(output, base)}"
        + ("" if wrote else " (not written)"),
        f"  baseline: {recipe.baseline.described}",
        (f"  fields mapped: {recipe.keys_mapped} of {recipe.keys_written} keys set in the YAML "
         f"({recipe.lines} differ from the baseline and got a line)"),
    ]
    if recipe.unmapped:
        lines.append("  keys at their legacy default with no new field (nothing lost):")
        lines += [f"    {key}" for key in recipe.unmapped]
    if recipe.normalisations:
        lines.append(f"  normalisations ({len(recipe.normalisations)}):")
        lines += [f"    {n.field}: {n.old!r} -> {n.new!r} ({n.why})" for n in recipe.normalisations]
    else:
        lines.append("  normalisations: none")
    if recipe.source.overrides:
        lines.append(f"  command-line overrides: {' '.join(recipe.source.overrides)}")
    lines.append(f"  proof: _trainer_config_to_legacy({recipe.name}()) == canonicalize(YAML): "
                 "nothing lost")
    lines += [f"  warning: {w}" for w in recipe.warnings]
    return "\n".join(lines)
