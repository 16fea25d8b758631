"""``--from-yaml``: a legacy YAML becomes a recipe module, proven equivalent before it is written.

The steps, each its own function:

1. :func:`read_legacy` -- the legacy parser reads the YAML (its errors: unknown keys with
   ``file:line`` and did-you-mean, wrong types, unsupported values); the document is loaded
   again with key lines and comments for provenance.
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
   the target); nothing is written otherwise.

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


def display_path(path: Path, base: Path | None = None) -> str:
    """``path`` relative to ``base`` (default: the working directory) when it lies inside it,
    else absolute."""
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to((base or Path.cwd()).resolve()).as_posix()
    except ValueError:
        return resolved.as_posix()


def read_legacy(path: Path, base: Path | None = None) -> LegacySource:
    """Parse ``path`` with the legacy parser (raises its ``ConfigError``); ``base`` as in
    :func:`display_path`."""
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
    legacy = load_config(HyperTrainerConfig, text, source=display, allow_empty=False)
    # The launcher sets the local rank (LOCAL_RANK); it is never part of a recipe.
    legacy.train.local_rank = 0
    located = load_yaml_with_lines(text)
    return LegacySource(path, display, legacy, located.lines,
                        find_comments(text, located.lines), hashlib.sha256(data).hexdigest())


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


class _Provenance:
    """New-tree paths -> the legacy keys (and their lines) they come from."""

    def __init__(self, source: LegacySource):
        from hyper_parallel.config.legacy_adapter import FIELD_MAP

        self.source = source
        self.rows = FIELD_MAP
        self.file = Path(source.display).name

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

    def describe(self, keys: list[str], what: str) -> tuple[str, float, tuple[tuple, ...]]:
        written = [(self.line(k), k) for k in keys if self.line(k) is not None]
        if not written and not keys:
            return (comment_text(f"{what}: new-only, at its default in every legacy YAML"),
                    float("inf"), ())
        if not written:
            return (comment_text(f"{what}: follows from the legacy default of {', '.join(keys)} "
                                 "and the YAML's other keys"), float("inf"), ())
        written.sort()
        first, last = written[0][0], written[-1][0]
        span = f"{first}" if first == last else f"{first}-{last}"
        if len(written) == 1:
            text = f"{self.file}:{first} {written[0][1]}"
        else:
            # One row reading several keys of a section (mixed precision, say).
            parents = {k.rsplit(".", 1)[0] for _, k in written}
            if len(parents) == 1:
                names = ", ".join(k.rsplit(".", 1)[1] for _, k in written)
                text = f"{self.file}:{span} {parents.pop()}.{{{names}}}"
            else:
                text = f"{self.file}:{span} " + ", ".join(k for _, k in written)
        return comment_text(text), first, tuple(tuple(k.split(".")) for _, k in written)


def _attach_comments(source: LegacySource, lines: list[RecipeLine]) -> list[str]:
    """Give each line the comments of its keys; a comment of a key without a line of its own
    goes to the next line below it in the YAML. Returns the comments left for the end."""
    owner = {key: line for line in lines for key in line.keys}

    def owner_of(path: tuple) -> RecipeLine | None:
        # A line that sets a whole dict (config_overrides) owns the comments of its entries.
        for end in range(len(path), 0, -1):
            if path[:end] in owner:
                return owner[path[:end]]
        return None

    ordered = sorted((source.lines.get(path, 0), path, c) for path, c in
                     source.comments.keys.items())
    by_anchor = sorted(lines, key=lambda line: line.anchor)
    tail: list[str] = []
    for key_line, path, comments in ordered:
        text = [comment_text(c) for c in comments.all()]
        line = owner_of(path)
        if line is not None:
            line.comments += text
            continue
        after = next((line for line in by_anchor if line.anchor > key_line), None)
        (after.comments if after is not None else tail).extend(text)
    return tail + [comment_text(c) for c in source.comments.tail]


# ---------------------------------------------------------------------------------------------
# 5. rendering
# ---------------------------------------------------------------------------------------------


def check_name(name: str, stem_hint: str | None = None) -> str:
    """``name`` when it is a usable function name; else a ``CodegenError`` with the fix."""
    reserved = {BASELINE_FUNCTION[1], TRAINER[1], "config", "annotations"}
    if not name.isidentifier() or keyword.iskeyword(name) or name in reserved \
            or name.startswith("_"):
        fixed = re.sub(r"\W", "_", name).strip("_") or "recipe"
        if fixed[0].isdigit() or keyword.iskeyword(fixed) or fixed in reserved:
            fixed = f"recipe_{fixed}"
        origin = f" (from the file name {stem_hint!r})" if stem_hint else ""
        why = ("is a Python keyword" if keyword.iskeyword(name) else
               "is a name the recipe module uses itself" if name in reserved else
               "starts with an underscore (private names are not recipes)"
               if name.startswith("_") and name.isidentifier() else
               "is not a Python identifier")
        raise CodegenError(f"recipe name {name!r}{origin} {why}; pass --name {fixed}")
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


def _world_size(legacy: Any) -> int:
    acc = legacy.train.accelerator
    size = 1
    for degree in (acc.dp_replicate, acc.dp_shard, acc.tp, acc.cp, acc.pp):
        size *= degree if degree and degree > 0 else 1
    return size


def _docstring(source: LegacySource, name: str, module: str | None, output: Path,
               baseline: Baseline) -> str:
    module = module or f"<the module path of {output.name[:-3]}>"
    nproc = _world_size(source.legacy)
    about = textwrap.fill(
        f"Written by ``python -m hyper_parallel.codegen --from-yaml {source.display}``. It starts "
        f"from {baseline.described} and sets, one line each, the fields the YAML changes, "
        "commented with the legacy key and the line they come from. Before writing, the "
        f"converter executed this module and checked that ``_trainer_config_to_legacy({name}())`` "
        "equals the canonical form of the YAML.",
        width=LINE_LENGTH - 4, break_on_hyphens=False, break_long_words=False,
    )
    text = (
        f"Recipe {name}, converted from {source.display}\n"
        f"(sha256 {source.sha256}).\n\n"
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

    try:
        return fn(*(args or (source.legacy,)))
    except ConfigError as exc:
        line = source.lines.get(tuple(exc.path.split("."))) if exc.path else None
        if line is None or exc.location:
            raise
        raise ConfigError(exc.message, path=exc.path, location=f"{source.display}:{line}") from None


def render(source: LegacySource, name: str, output: Path, repo: Path,
           base: Path | None = None) -> Recipe:
    """Canonicalise, convert, pick the baseline, render and format (nothing is executed)."""
    from hyper_parallel.codegen import render as render_module
    from hyper_parallel.codegen.pipeline import _environment
    from hyper_parallel.config.legacy_adapter import (
        FIELD_MAP,
        _legacy_to_trainer_config,
        canonicalize_legacy,
    )

    canon, notes = _located(source, canonicalize_legacy)
    target = _located(source, _legacy_to_trainer_config, canon)
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
        "docstring": _docstring(source, name, module_name_for(output, base), output, baseline),
        "imports": _import_lines(imports),
        "name": name,
        "baseline": head,
        "lines": lines,
        "tail": tail,
    }
    if not (repo / TEMPLATES / TEMPLATE).is_file():
        raise CodegenError(f"{TEMPLATES}/{TEMPLATE} not found under {repo}: the converter runs "
                           "from a checkout of hyper_parallel (pip install -e .)")
    raw = _environment(repo).get_template(TEMPLATE).render(**context)
    try:
        text = render_module.format_python(raw)
    except Exception as exc:  # a bug here, never the user's input: values are checked literals
        raise CodegenError(f"{TEMPLATE}: the rendered recipe is not valid Python ({exc})") from exc
    leaves = _leaf_keys(source.lines)
    mapped_paths = {k for row in FIELD_MAP if row.new for k in row.legacy}
    mapped = [p for p in leaves
              if ".".join(p) in mapped_paths or ".".join(p[:2]) == "model.config_overrides"]
    reasons = {k: row.detail for row in FIELD_MAP if not row.new for k in row.legacy}
    unmapped = [f"{'.'.join(p)} ({reasons.get('.'.join(p), 'no row in the field table')})"
                for p in leaves if p not in mapped]
    return Recipe(name, text, source, baseline, len(lines), len(leaves), len(mapped), notes,
                  unmapped, canon, target)


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


def prove(recipe: Recipe, filename: str) -> None:
    """Execute the module text in a fresh namespace; raise :class:`ConversionError` naming every
    field unless it reproduces the YAML exactly."""
    from hyper_parallel.config.legacy_adapter import _trainer_config_to_legacy
    from hyper_parallel.trainer.config import ConfigError

    start = time.perf_counter()
    namespace: dict[str, Any] = {"__name__": f"_hyper_parallel_from_yaml_.{recipe.name}",
                                 "__file__": filename}
    exec(compile(recipe.text, filename, "exec"), namespace)  # noqa: S102 -- our own output
    config = namespace[recipe.name]()
    problems = differences(recipe.target, config)
    try:
        back = _trainer_config_to_legacy(config)
    except ConfigError as exc:
        problems.append(f"converting the recipe back to the legacy schema failed: {exc}")
    else:
        problems += differences(recipe.canonical, back)
    recipe.proof_seconds = time.perf_counter() - start
    if problems:
        raise ConversionError(
            f"{recipe.source.display}: the emitted recipe does not reproduce the YAML, so nothing "
            "was written (this is a bug in the converter or the field table; please report it):\n"
            + "\n".join(f"  {p}" for p in problems)
        )


def convert(path: Path, name: str | None = None, output: Path | None = None,
            repo: Path | None = None, strict: bool = False,
            base: Path | None = None) -> tuple[Recipe, Path]:
    """Read, convert, render and prove ``path``; returns the recipe and its output path
    (``recipes/<name>.py`` under ``base`` by default). Writes nothing.

    ``base`` (default: the working directory) is what the paths in the recipe are shown
    relative to -- the source YAML, and the module path of the output in the ``torchrun`` line
    -- so that the text does not depend on where the command runs from.
    """
    repo = repo or Path(__file__).resolve().parents[2]
    stem = Path(path).name.rsplit(".", 1)[0]
    name = check_name(name, None) if name is not None else check_name(stem, Path(path).name)
    output = Path(output) if output is not None else (base or Path()) / "recipes" / f"{name}.py"
    source = read_legacy(Path(path), base)
    recipe = render(source, name, output, repo, base)
    if strict and recipe.normalisations:
        raise ConversionError(
            f"{source.display}: --strict refuses the conversion; the YAML needs "
            f"{len(recipe.normalisations)} normalisation(s):\n"
            + "\n".join(f"  {n.field}: {n.old!r} -> {n.new!r} ({n.why})"
                        for n in recipe.normalisations)
            + "\nwrite those keys as shown (the new value) and convert again, or drop --strict"
        )
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
    lines.append(f"  proof: _trainer_config_to_legacy({recipe.name}()) == canonicalize(YAML): "
                 "nothing lost")
    return "\n".join(lines)
