"""The override syntax of the ``--module`` / ``--config`` command line, and its errors.

:func:`cli_spec` lists the fields of a config tree as the command line sees them and
:func:`normalize_overrides` checks ``--section.field=value`` overrides against them and rewrites
them for tyro (see its docstring, and :data:`SYNTAX_HELP`, for the rules). A bad override (unknown
flag, bad value, a value a ``__post_init__`` refuses) and tyro's own refusals become one
:class:`~hyper_parallel.utils.errors.ConfigError` naming the flag, never a traceback or tyro's
own error box.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Sequence
from typing import Any

from hyper_parallel.utils.data_types import DATA_TYPES, REFUSED_DATA_TYPES
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.suggest import closest, did_you_mean

#: How the overrides are written; the ``--help`` description and the README say the same.
SYNTAX_HELP = (
    "Override any field below with --section.field=VALUE (or --section.field VALUE); the last "
    "of a repeated flag wins. Booleans: --x, --no-x (or --section.no-x), --x=true|false. "
    "Optional fields: none (or null) for None. Lists and tuples: one comma-separated value "
    "(--compile.components=model,loss; empty for an empty list). Mappings: one YAML flow "
    "mapping (--model.config_overrides='{flavor: debugmodel}')."
)


def _config_error(message: str, path: str | None = None) -> Exception:
    """A :class:`ConfigError` with ``message`` as its whole text; ``path`` (the dotted field)
    is kept on the error for callers that want it."""
    error = ConfigError(message)
    error.path = path
    return error


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
            refused = (REFUSED_DATA_TYPES.get(value)
                       if tuple(field.choices) == DATA_TYPES else None)
            why = f" ({value} is not supported: {refused})" if refused else ""
            raise _config_error(
                f"--{field.path}={value}: not one of {', '.join(field.choices)}"
                f"{did_you_mean(value, field.choices)}{why}", field.path)
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
