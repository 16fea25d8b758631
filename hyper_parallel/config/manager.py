"""``ConfigManager``: one command line, two configuration worlds.

* ``--module M --config F [--section.field=value ...]`` (argv starts with ``--module``): import
  the recipe module, call the zero-argument recipe ``F()`` for a ``HyperTrainer.Config``, apply
  the overrides with tyro, then re-run every ``__post_init__`` validation of the tree (tyro's
  handling of validation errors differs between versions; this makes it uniform).
  The module is searched as ``hyper_parallel.models.<M>.config_registry``, then
  ``<M>.config_registry``, then ``<M>`` itself — so ``--module recipes.my_run`` works.
* anything else is the legacy command line, ``old.yaml [--a.b.c=value ...]``: the legacy parser
  (same rules, same errors) and then ``_legacy_to_trainer_config``.

Precedence on the new path: command line > recipe > dataclass defaults.

Bad input on the new path is a :class:`RecipeError` (the ``--module`` / ``--config`` pair: a
module that is missing or fails to import, a recipe that is missing, private, needs arguments,
raises, exits or returns something else than a config) or a
:class:`~hyper_parallel.trainer.config.ConfigError` (an override: unknown flag, bad value, a
value a ``__post_init__`` refuses), each one message naming the flag, never a traceback or
tyro's own error box: see :func:`normalize_overrides` for the rules of the override syntax.

``python -m hyper_parallel.config.manager --module M --config F [overrides]`` prints the resolved
config; ``--help`` after ``--config F`` lists every CLI field with its docstring.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import inspect
import io
import os
import re
import sys
import traceback
import types
import typing
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from hyper_parallel.utils.suggest import closest, did_you_mean

TYRO_HINT = "The --module/--config command line needs tyro: pip install tyro (or hyper_parallel[config-cli])"
EXAMPLE = "--module qwen3_5_v2 --config qwen3_5_v2_debugmodel --training.steps=10"

#: How the overrides are written; the ``--help`` description and the README say the same.
SYNTAX_HELP = (
    "Override any field below with --section.field=VALUE (or --section.field VALUE); the last "
    "of a repeated flag wins. Booleans: --x, --no-x (or --section.no-x), --x=true|false. "
    "Optional fields: none (or null) for None. Lists and tuples: one comma-separated value "
    "(--compile.components=model,loss; empty for an empty list). Mappings: one YAML flow "
    "mapping (--model.config_overrides='{flavor: debugmodel}')."
)


class RecipeError(ValueError):
    """The ``--module`` / ``--config`` pair does not name a usable recipe."""


def _import_tyro() -> Any:
    try:
        import tyro
    except ImportError as exc:
        raise ImportError(TYRO_HINT) from exc
    return tyro


def _config_error(message: str, path: str | None = None) -> Exception:
    """A :class:`ConfigError` with ``message`` as its whole text; ``path`` (the dotted field)
    is kept on the error for callers that want it."""
    from hyper_parallel.trainer.config import ConfigError

    error = ConfigError(message)
    error.path = path
    return error


def extract_module_and_config(argv: Sequence[str]) -> tuple[str, str, list[str]]:
    """Pull ``--module X`` / ``--module=X`` and ``--config Y`` / ``--config=Y`` out of ``argv``."""
    found: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        key = next((k for k in ("module", "config") if token == f"--{k}" or token.startswith(f"--{k}=")), None)
        if key is None:
            rest.append(token)
            i += 1
            continue
        if key in found:
            raise RecipeError(f"--{key} is given twice")
        if "=" in token:
            value = token.split("=", 1)[1]
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            value = argv[i + 1]
            i += 1
        else:
            value = ""
        if not value:
            raise RecipeError(f"--{key} needs a value, e.g. {EXAMPLE}")
        found[key] = value
        i += 1
    missing = [k for k in ("module", "config") if k not in found]
    if missing:
        raise RecipeError(f"missing {' and '.join('--' + k for k in missing)}; e.g. {EXAMPLE}")
    return found["module"], found["config"], rest


def is_recipe_command_line(argv: Sequence[str]) -> bool:
    """Whether ``argv`` picks a recipe: it starts with an option (the legacy command line starts
    with the YAML path) and names ``--module`` or ``--config`` anywhere, in either order."""
    return bool(argv) and argv[0].startswith("--") and any(
        token in ("--module", "--config") or token.startswith(("--module=", "--config="))
        for token in argv
    )


# ---------------------------------------------------------------------------------------------
# recipes
# ---------------------------------------------------------------------------------------------


def _candidates(module: str) -> list[str]:
    names = []
    if "." not in module:
        names.append(f"hyper_parallel.models.{module}.config_registry")
    names += [f"{module}.config_registry", module]
    return names


def _shown(filename: str) -> str:
    """``filename`` relative to the working directory when it is below it."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive (Windows)
        return filename
    return filename if relative.startswith("..") else relative


def _is_ours(filename: str) -> bool:
    """Frames of this module and of the import machinery: never the place to fix."""
    return (filename.startswith("<") or os.path.abspath(filename) == os.path.abspath(__file__)
            or os.sep + "importlib" + os.sep in filename)


def _import_location(exc: BaseException) -> str:
    """`` (file:line)`` of an import failure: where a ``SyntaxError`` is, else the last frame in
    the file of the module being imported (the first module-level frame of the traceback), and
    the deepest frame too when that is in another file (a helper the module imports)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" ({_shown(exc.filename)}:{exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_ours(f.filename)]
    if not frames:
        return ""
    top = next((f for f in frames if f.name == "<module>"), frames[0]).filename
    in_module = [f for f in frames if f.filename == top][-1]
    where = f" ({_shown(in_module.filename)}:{in_module.lineno}"
    deepest = frames[-1]
    if deepest.filename != top:
        where += f", raised in {_shown(deepest.filename)}:{deepest.lineno}"
    return where + ")"


def resolve_recipe_module(module: str) -> ModuleType:
    """Import the first existing candidate; an import that fails *inside* a module is re-raised
    with its real cause and the file:line where it failed, never reported as 'not found'."""
    for name in _candidates(module):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # Not found is only "this candidate does not exist" when the missing module is the
            # candidate itself or one of its parent packages.
            if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
                continue
            raise RecipeError(
                f"--module {module}: importing {name!r} failed: {type(exc).__name__}: {exc}"
                f"{_import_location(exc)}"
            ) from None
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure inside the module
            detail = exc.msg if isinstance(exc, SyntaxError) else exc
            raise RecipeError(
                f"--module {module}: importing {name!r} failed: {type(exc).__name__}: {detail}"
                f"{_import_location(exc)}"
            ) from None
    builtin = _builtin_registries()
    raise RecipeError(
        f"--module {module}: no such module (tried {', '.join(_candidates(module))})"
        f"{did_you_mean(module, builtin)}. Built-in recipe modules: {', '.join(builtin) or '(none)'}"
    )


def _builtin_registries() -> list[str]:
    import pkgutil

    from hyper_parallel import models

    found = []
    for info in pkgutil.iter_modules(models.__path__):
        if info.ispkg:
            try:
                spec = importlib.util.find_spec(f"hyper_parallel.models.{info.name}.config_registry")
            except Exception:  # noqa: BLE001 - a model package that fails to import has no registry
                spec = None
            if spec is not None:
                found.append(info.name)
    return sorted(found)


def _required_parameters(fn: Callable[..., Any]) -> list[str]:
    """The parameters ``fn`` cannot be called without (none for a recipe)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read (some builtins): let the call tell
        return []
    return [p.name for p in signature.parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]


def available_recipes(module: ModuleType) -> list[str]:
    """The recipes of ``module``: public (no leading ``_``), lower-case, callable without
    arguments, and defined by the module itself (imported helpers are not its recipes)."""
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or not name[:1].islower() or not callable(value):
            continue
        if isinstance(value, type) or getattr(value, "__module__", None) != module.__name__:
            continue  # classes and imported helpers are not recipes
        if _required_parameters(value):
            continue
        names.append(name)
    return sorted(names)


def _raise_location(exc: BaseException, module_file: str | None) -> str:
    """`` (file:line)`` of the deepest frame of ``exc`` in the recipe module's file, else of
    the deepest frame outside this module."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_ours(f.filename)]
    if module_file:
        mine = [f for f in frames
                if os.path.abspath(f.filename) == os.path.abspath(module_file)]
        frames = mine or frames
    return f" (at {_shown(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""


def load_recipe(module: str, config: str, root_type: type | None = None) -> Any:
    """Call recipe ``config`` of ``module`` and return the config it builds.

    ``root_type``: the class the caller builds from the config (``train`` passes
    ``HyperTrainer.Config``); unset, any dataclass instance is a config. Every way the recipe
    can be unusable is a :class:`RecipeError` naming ``module.config()``: not found, private,
    a class, needs arguments, raises (with the file:line of the raising frame in the recipe
    module), calls ``sys.exit`` or returns something else than a ``root_type`` instance."""
    mod = resolve_recipe_module(module)
    recipes = available_recipes(mod)
    listing = f"Available: {', '.join(recipes) or '(none)'}"
    where = f"--config {config}: {mod.__name__}.{config}"
    if config.startswith("_"):
        raise RecipeError(f"{where} is private (a leading '_' marks a helper, never a recipe); "
                          f"{listing}")
    fn: Callable[[], Any] | None = getattr(mod, config, None)
    if fn is None or not callable(fn):
        what = "has no recipe" if fn is None else "is not a recipe (not callable):"
        raise RecipeError(
            f"--config {config}: {mod.__name__} {what} {config!r}"
            f"{did_you_mean(config, recipes)}. {listing}"
        )
    if isinstance(fn, type):
        raise RecipeError(f"{where} is a class, not a recipe (a recipe is a zero-argument "
                          f"function returning a config); {listing}")
    where = f"--config {config}: recipe {mod.__name__}.{config}"
    required = _required_parameters(fn)
    if required:
        raise RecipeError(
            f"{where}() needs argument(s) {', '.join(required)}: a recipe takes none (write a "
            f"recipe that calls it with its arguments); {listing}"
        )
    try:
        result = fn()
    except SystemExit as exc:
        raise RecipeError(f"{where}() called sys.exit({exc.code!r}) instead of returning a "
                          f"config{_raise_location(exc, getattr(mod, '__file__', None))}") from None
    except Exception as exc:  # noqa: BLE001 - a recipe is user code: whatever it raises
        raise RecipeError(
            f"{where}() raised {type(exc).__name__}: {exc}"
            f"{_raise_location(exc, getattr(mod, '__file__', None))}"
        ) from None
    if root_type is not None:
        ok, expected = isinstance(result, root_type), root_type.__qualname__
    else:
        ok = dataclasses.is_dataclass(result) and not isinstance(result, type)
        expected = "config dataclass (e.g. a HyperTrainer.Config)"
    if not ok:
        got = ("None" if result is None
               else f"the class {result.__qualname__} (not an instance)" if isinstance(result, type)
               else f"a {type(result).__qualname__}")
        raise RecipeError(f"{where}() returned {got}; a recipe must return a fresh {expected}")
    return result


def revalidate(config: Any) -> Any:
    """Run ``__post_init__`` of every dataclass in the tree again, leaves first."""
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        for f in dataclasses.fields(config):
            value = getattr(config, f.name)
            if isinstance(value, (list, tuple)):
                for item in value:
                    revalidate(item)
            else:
                revalidate(value)
        post_init = getattr(config, "__post_init__", None)
        if post_init is not None:
            post_init()
    return config


# ---------------------------------------------------------------------------------------------
# the override syntax
# ---------------------------------------------------------------------------------------------

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_NONE = frozenset({"none", "null"})


@dataclasses.dataclass(frozen=True)
class CliField:
    """One command-line field: its dotted ``path`` (``optimizer.fused``), whether it is a
    boolean (``bool`` or ``bool | None``), whether ``None`` is allowed, the choices of a
    ``Literal`` of strings, and its annotation as text (for messages)."""

    path: str
    boolean: bool
    optional: bool
    choices: tuple[str, ...] | None
    type_text: str


@dataclasses.dataclass
class CliSpec:
    """The fields of one config tree as the command line sees them."""

    fields: dict[str, CliField]
    sections: set[str]
    #: class qualname -> the section paths holding an instance of it ("" is the root).
    owners: dict[str, list[str]]


def _strip_annotated(tp: Any) -> tuple[Any, tuple]:
    if typing.get_origin(tp) is typing.Annotated:
        return typing.get_args(tp)[0], tuple(tp.__metadata__)
    return tp, ()


def _leaf(path: str, tp: Any) -> CliField:
    members = (typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType)
               else (tp,))
    optional = type(None) in members
    rest = [m for m in members if m is not type(None)]
    inner = rest[0] if len(rest) == 1 else None
    choices = None
    if inner is not None and typing.get_origin(inner) is typing.Literal:
        values = typing.get_args(inner)
        if all(isinstance(v, str) for v in values):
            choices = tuple(values)
    text = getattr(tp, "__name__", None) if isinstance(tp, type) else None
    return CliField(path, inner is bool, optional, choices,
                    text or str(tp).replace("typing.", ""))


def cli_spec(config: Any) -> CliSpec:
    """Walk ``config`` (an instance: a slot holding a subclass's Config shows that subclass's
    fields, as tyro does) for every field the command line can set. Fields annotated
    ``Annotated[..., tyro.conf.Suppress]`` are hidden, as from tyro."""
    try:
        from tyro.conf import Suppress
    except ImportError:  # pragma: no cover - the new command line needs tyro anyway
        Suppress = object()
    spec = CliSpec({}, set(), {})

    def walk(node: Any, prefix: str) -> None:
        spec.owners.setdefault(type(node).__qualname__, []).append(prefix.rstrip("."))
        try:
            hints = typing.get_type_hints(type(node), include_extras=True)
        except Exception:  # noqa: BLE001 - an annotation that does not resolve: one value
            hints = {}
        for f in dataclasses.fields(node):
            if not f.init:
                continue
            tp, metadata = _strip_annotated(hints.get(f.name, Any))
            if any(m is Suppress for m in metadata):
                continue
            path = prefix + f.name
            value = getattr(node, f.name, None)
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                spec.sections.add(path)
                walk(value, path + ".")
            else:
                spec.fields[path] = _leaf(path, tp)

    walk(config, "")
    return spec


def _unknown_flag(token: str, key: str, spec: CliSpec) -> Exception:
    if key in spec.sections:
        example = next((p for p in spec.fields if p.startswith(key + ".")), key + ".FIELD")
        return _config_error(f"{token}: {key} is a section, not a field; set one of its fields, "
                             f"e.g. --{example}=VALUE (see --help)")
    suggestion = did_you_mean("--" + key, ["--" + p for p in spec.fields])
    section, _, leaf = key.rpartition(".")
    negated = key[3:] if key.startswith("no_") else (
        f"{section}.{leaf[3:]}" if section else leaf[3:]) if leaf.startswith("no_") else None
    if negated is not None:  # a misspelled --no-x: suggest the --no- form of a boolean
        match = closest(negated, list(spec.fields))
        if match is not None:
            shown = f"--no-{match}" if spec.fields[match].boolean else f"--{match}"
            suggestion = f" (did you mean {shown!r}?)"
    return _config_error(f"{token}: unknown option{suggestion}; see --help for every field")


def _negated(key: str, spec: CliSpec) -> CliField | None:
    """The field ``--no-<path>`` / ``--<section>.no-<field>`` negates, or None when ``key``
    has neither form; a non-boolean target is returned too (the caller refuses it)."""
    section, _, leaf = key.rpartition(".")
    targets = []
    if key.startswith("no_"):
        targets.append(key[3:])
    if leaf.startswith("no_"):
        targets.append(f"{section}.{leaf[3:]}" if section else leaf[3:])
    for target in targets:
        if target in spec.fields:
            return spec.fields[target]
    return None


def _bool_word(word: str, field: CliField) -> str | None:
    """``True`` / ``False`` / ``None`` (tyro's spelling) for a boolean word, else None."""
    lowered = word.strip().lower()
    if lowered in _TRUE:
        return "True"
    if lowered in _FALSE:
        return "False"
    if field.optional and lowered in _NONE:
        return "None"
    return None


def normalize_overrides(argv: Sequence[str], spec: CliSpec) -> list[str]:
    """Check the overrides against the config's fields and rewrite them as one
    ``--<path>=<value>`` token per field, the form handed to tyro (which then parses booleans
    as ``True``/``False`` values, ``tyro.conf.FlagConversionOff``).

    Rules (the ``--help`` description, :data:`SYNTAX_HELP`, says the same):

    * a field is ``--section.field=VALUE`` or ``--section.field VALUE`` (``-`` and ``_`` are the
      same in names); a value that starts with ``--`` needs the ``=`` form;
    * a boolean (``bool`` or ``bool | None``) is ``--x`` (true), ``--no-x`` or
      ``--section.no-x`` (false), or ``--x=V`` / ``--x V`` with V one of true/false/yes/no/on/
      off/1/0 in any case (and none/null when the field may be None);
    * ``none`` / ``null`` (any case) is ``None`` for a field that may be None;
    * a ``Literal`` field takes one of its choices (a near miss gets a suggestion);
    * a repeated field: the last one wins;
    * ``-h`` / ``--help`` are passed on to tyro.

    Everything else is a :class:`ConfigError` naming the token: an unknown flag (with the
    closest field), a section used as a field, ``--no-`` on a field that is not a boolean or
    with a value, a missing value, a stray word.
    """
    values: dict[str, str] = {}
    passthrough: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token in ("-h", "--help"):
            passthrough.append(token)
            continue
        if not token.startswith("--") or len(token) == 2:
            raise _config_error(f"unexpected argument {token!r}: an override is "
                                "--section.field=VALUE (see --help)")
        name, has_value, value = token[2:].partition("=")
        key = name.replace("-", "_")
        field = spec.fields.get(key)
        if field is None:
            field = _negated(key, spec)
            if field is None:
                raise _unknown_flag(token, key, spec)
            if not field.boolean:
                raise _config_error(
                    f"{token}: --no- only negates a boolean and {field.path} is "
                    f"{field.type_text}; set it with --{field.path}=VALUE")
            if has_value:
                raise _config_error(f"{token}: --no-{field.path} takes no value; write "
                                    f"--{field.path}={value} to give one")
            values[field.path] = "False"
            continue
        if field.boolean:
            if has_value:
                word = _bool_word(value, field)
                if word is None:
                    allowed = "true or false" + (" (or none)" if field.optional else "")
                    raise _config_error(
                        f"{token}: {field.path} is a boolean, {value!r} is not {allowed}; "
                        f"write --{field.path}, --no-{field.path} or --{field.path}=true|false",
                        field.path)
            elif i < len(argv) and _bool_word(argv[i], field) is not None:
                word = _bool_word(argv[i], field)
                i += 1
            else:
                word = "True"
            values[field.path] = word
            continue
        if not has_value:
            if i >= len(argv) or argv[i].startswith("--") or argv[i] in ("-h",):
                raise _config_error(f"{token} needs a value: --{field.path}=VALUE "
                                    f"({field.type_text})", field.path)
            value = argv[i]
            i += 1
        if field.optional and value.strip().lower() in _NONE:
            value = "None"
        elif field.choices is not None and value not in field.choices:
            raise _config_error(
                f"--{field.path}={value}: not one of {', '.join(field.choices)}"
                f"{did_you_mean(value, field.choices)}", field.path)
        values[field.path] = value
    return [f"--{path}={value}" for path, value in values.items()] + passthrough


# ---------------------------------------------------------------------------------------------
# errors from tyro and from __post_init__
# ---------------------------------------------------------------------------------------------

#: ``<Owner>.<field>=<value>: <reason>``, the message of every field check (ConfigFieldError,
#: the components' validators).
_FIELD_MESSAGE = re.compile(
    r"^(?P<owner>[A-Za-z_][\w.]*)\.(?P<field>[A-Za-z_]\w*)=(?P<value>.*?): (?P<reason>.*)$",
    re.DOTALL,
)


def _validation_error(exc: BaseException, spec: CliSpec, given: dict[str, str],
                      recipe: str) -> Exception | None:
    """A ``__post_init__`` error as a ConfigError naming the flag, when it names its field
    (``ConfigFieldError.owner/.field``, or a message ``<Owner>.<field>=<value>: <reason>``);
    None when it does not."""
    match = _FIELD_MESSAGE.match(str(exc))
    owner = getattr(exc, "owner", None) or (match and match.group("owner"))
    name = getattr(exc, "field", None) or (match and match.group("field"))
    if not (isinstance(owner, str) and isinstance(name, str)):
        return None
    reason = match.group("reason") if match else str(exc)
    value = match.group("value") if match else repr(getattr(exc, "value", "?"))
    paths = [f"{section}.{name}" if section else name for section in spec.owners.get(owner, [])]
    paths = [p for p in paths if p in spec.fields] or paths
    if not paths:
        return None
    path = next((p for p in paths if p in given), paths[0])
    if path in given:
        return _config_error(f"--{path}={given[path]}: {reason}", path)
    return _config_error(f"{path}={value} (set by the recipe {recipe}()): {reason}; fix the "
                         f"recipe or override it with --{path}=VALUE", path)


def _chain(exc: BaseException | None) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


_BOX_RULE = set("─━═-┄┈╌ ")


def condense_tyro_error(text: str) -> str:
    """The first section of tyro's error box as one line (its title, help text and footer
    dropped); the text itself, squeezed, when it is not a box."""
    lines: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line[:1] in ("╭", "┌", "+"):
            continue  # the top border with the title
        if line[:1] in ("╰", "└"):
            break
        line = line.strip("│┃|").strip()
        if not line:
            continue
        if set(line) <= _BOX_RULE:
            if lines:
                break
            continue
        lines.append(line)
    return re.sub(r"\s+", " ", " ".join(lines)).strip()


def _flag_of(arg: Any) -> str | None:
    """The dotted field path of tyro's argument object (or of a field-prefix string)."""
    flags = getattr(getattr(arg, "lowered", None), "name_or_flags", None)
    name = flags[0] if flags else arg if isinstance(arg, str) else None
    return name.lstrip("-").replace("-", "_") if isinstance(name, str) else None


def _one_line(detail: str) -> str:
    """tyro's message as one line: its rich markup dropped, and for a union (``int | None``)
    only the errors of the members other than ``None`` ("no type matching ... Got errors: -
    NoneType: ... - int: ...")."""
    detail = re.sub(r"\[/?[a-z ]+\]", "", detail)
    head, found, errors = detail.partition("Got errors:")
    if found:
        items = [item.strip() for item in errors.split("\n- ") if item.strip()]
        member = r"^(<class '[^']*'>|[\w.\[\], |]+): "
        items = [i for i in items if not re.match(r"^(<class 'NoneType'>|NoneType|None): ", i)] \
            or items
        detail = "; ".join(re.sub(member, "", i, count=1) for i in items) or head
    return re.sub(r"\s+", " ", detail).strip()


def _tyro_refusal(exc: SystemExit, printed: str, spec: CliSpec, given: dict[str, str],
                  recipe: str) -> Exception:
    """A refusal of tyro (its SystemExit(2) and the box it printed) as one ConfigError: from
    the exception tyro was handling when it exited when there is one (a ``__post_init__``
    error, or tyro's instantiation error with its message and argument), else from the first
    section of the box it printed."""
    path, detail = None, None
    for cause in _chain(exc.__context__):
        converted = _validation_error(cause, spec, given, recipe)
        if converted is not None:
            return converted
        if detail is None and isinstance(getattr(cause, "message", None), str) \
                and hasattr(cause, "arg"):
            path, detail = _flag_of(cause.arg), cause.message
    if detail is None:
        detail = condense_tyro_error(printed) or f"the command line was refused (exit {exc.code})"
        flag = re.search(r"--([\w.-]+)", detail)
        path = flag.group(1).replace("-", "_") if flag else None
        detail = re.sub(r"^Error parsing --[\w.-]+:\s*", "", detail)
    detail = _one_line(detail)
    if path in spec.fields:
        field = spec.fields[path]
        shown = f"--{path}={given[path]}" if path in given else f"--{path}"
        return _config_error(f"{shown}: {detail} ({path} takes {field.type_text}; see --help)",
                             path)
    return _config_error(f"{detail} (see --help)")


class ConfigManager:
    """Parse a command line into a ``HyperTrainer.Config`` (either entry path).

    ``root_type``: the class a recipe must return an instance of (``train`` passes
    ``HyperTrainer.Config``, the class it builds); unset, any config dataclass."""

    def __init__(self, root_type: type | None = None) -> None:
        self.root_type = root_type

    def parse_args(self, argv: Sequence[str] | None = None) -> Any:
        args = list(sys.argv[1:] if argv is None else argv)  # read at call time
        if is_recipe_command_line(args):
            return self._parse_new(args)
        return self._parse_legacy(args)

    def _parse_new(self, argv: list[str]) -> Any:
        tyro = _import_tyro()
        from hyper_parallel.config.tyro_rules import install_tyro_rules

        registry = install_tyro_rules()
        module, config, rest = extract_module_and_config(argv)
        default = load_recipe(module, config, self.root_type)
        recipe = f"{module}.{config}"
        spec = cli_spec(default)
        args = normalize_overrides(rest, spec)
        given = {a[2:].split("=", 1)[0]: a.split("=", 1)[1] for a in args if "=" in a}
        printed = io.StringIO()
        try:
            with contextlib.redirect_stderr(printed):
                parsed = tyro.cli(
                    type(default),
                    args=args,
                    default=default,
                    registry=registry,
                    config=(tyro.conf.FlagConversionOff,),
                    prog=f"--module {module} --config {config}",
                    description=f"Recipe {config} of {module}. {SYNTAX_HELP}",
                )
        except SystemExit as exc:
            if exc.code in (0, None):  # --help
                sys.stderr.write(printed.getvalue())
                raise
            raise _tyro_refusal(exc, printed.getvalue(), spec, given, recipe) from None
        except (ValueError, TypeError) as exc:  # raised by the root's __post_init__
            raise (_validation_error(exc, spec, given, recipe)
                   or _config_error(f"{type(exc).__name__}: {exc}")) from None
        sys.stderr.write(printed.getvalue())  # warnings tyro printed on the way
        try:
            return revalidate(parsed)
        except (ValueError, TypeError) as exc:
            raise (_validation_error(exc, spec, given, recipe)
                   or _config_error(f"invalid configuration: {type(exc).__name__}: {exc}")) from None

    def _parse_legacy(self, argv: list[str]) -> Any:
        from hyper_parallel.config.legacy_adapter import _legacy_to_trainer_config
        from hyper_parallel.trainer.config import HyperTrainerConfig, parse_args

        return _legacy_to_trainer_config(parse_args(HyperTrainerConfig, argv))


def _print_config(config: Any) -> None:
    from hyper_parallel.utils.yaml_lines import dump

    to_dict = getattr(config, "to_dict", None)
    data = to_dict() if callable(to_dict) else dataclasses.asdict(config)
    print(dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True), end="")


def main(argv: Sequence[str] | None = None) -> int:
    from hyper_parallel.trainer.config import ConfigError

    try:
        config = ConfigManager().parse_args(argv)
    except (ConfigError, RecipeError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _print_config(config)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
