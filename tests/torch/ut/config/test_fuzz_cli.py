"""Fuzz the new command line: any argv after ``--module qwen3_5_v2 --config
qwen3_5_v2_debugmodel`` parses to a ``HyperTrainer.Config`` or is refused with a
``ConfigError`` / ``RecipeError`` whose message is one line naming what to fix -- never another
exception, never a ``SystemExit`` (tyro's refusals are converted), never tyro's error box.

The argv are built from the real field paths of the debug recipe: every form of a flag
(``--x=v``, ``--x v``, bare ``--x``, ``--no-x``, ``--section.no-x``, hyphens for underscores),
values of every type (numbers, floats with nan/inf, booleans in any spelling, none/null, comma
lists, YAML mappings, arbitrary text), misspelled and unknown flags, sections used as flags,
repeated flags and stray words.

Two properties share the strategy: the whole parse (``ConfigManager().parse_args``, through
tyro, ~20-40 ms an example) and the override syntax alone (``normalize_overrides``, where every
structural refusal is decided, well under 1 ms an example), which takes most of the examples.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from hyper_parallel.config.manager import ConfigManager
from hyper_parallel.config.overrides import cli_spec, normalize_overrides
from hyper_parallel.config.recipes import RecipeError, load_recipe
from hyper_parallel.trainer.config import ConfigError
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

pytest.importorskip("tyro")

BASE = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel"]
SPEC = cli_spec(load_recipe("qwen3_5_v2", "qwen3_5_v2_debugmodel"))
PATHS = sorted(SPEC.fields)
BOOLS = sorted(p for p, f in SPEC.fields.items() if f.boolean)
SECTIONS = sorted(SPEC.sections)
CHOICES = sorted({c for f in SPEC.fields.values() if f.choices for c in f.choices})
BOX = set("╭╮╰╯│─")
#: ``HYPER_PARALLEL_FUZZ_SCALE=10`` for a longer hunt (1: 4,800 examples, ~22 s on 2 cores).
SCALE = float(os.environ.get("HYPER_PARALLEL_FUZZ_SCALE", "1"))
PARSES = max(1, int(400 * SCALE))
SYNTAX = max(1, int(4400 * SCALE))

WORDS = ["true", "false", "True", "False", "TRUE", "yes", "no", "on", "off", "1", "0", "none",
         "null", "None", "NULL", "", " ", "a,b", "model,loss", "0.9,0.95", "0.9", "1,2,3",
         "{flavor: debugmodel}", "{a: 1, b: [2]}", "[1, 2]", "{", "}", "{a", "-1", "-100", "1e-3",
         "inf", "-inf", "nan", "1_000", "0x10", "abc", "--", "-", "=", "==", "--x", "a=b", ",",
         ",,", "\n", "\x00", "é", "🙂", "${HOME}", "*", "~/x", "../..", "/tmp/x"]


def _typo(args: tuple[str, int, int]) -> str:
    """A near miss of a path: one character dropped, doubled, swapped or changed."""
    path, i, how = args
    i %= len(path)
    return [path[:i] + path[i + 1:], path[:i] + path[i] + path[i:],
            path[:i] + path[i + 1:i + 2] + path[i:i + 1] + path[i + 2:],
            path[:i] + "x" + path[i + 1:]][how]


names = st.tuples(
    st.one_of(
        st.sampled_from(PATHS),
        st.sampled_from(BOOLS),
        st.sampled_from(SECTIONS),
        st.tuples(st.sampled_from(PATHS), st.integers(0, 60), st.integers(0, 3)).map(_typo),
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz_.-", min_size=0, max_size=20),
    ),
    st.booleans(),
).map(lambda nh: nh[0].replace("_", "-") if nh[1] else nh[0])  # hyphens for underscores, or not

values = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(CHOICES),
    st.integers(-10**12, 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=12),
    st.lists(st.sampled_from(["a", "b", "1", "0.5", "", " "]), max_size=4).map(",".join),
)


def _negated(name: str) -> list[str]:
    section, _, leaf = name.rpartition(".")
    return [f"--no-{name}", f"--{section}.no-{leaf}" if section else f"--no-{leaf}"]


def _typed(field) -> st.SearchStrategy[str]:
    """Values of the field's own type (mostly valid, some out of range)."""
    text = field.type_text
    if field.boolean:
        words = ["true", "false", "True", "False", "YES", "no", "on", "off", "1", "0"]
        typed = st.sampled_from(words + (["none", "null"] if field.optional else []))
    elif field.choices is not None:
        typed = st.sampled_from(list(field.choices))
    elif "dict" in text:
        typed = st.sampled_from(["{flavor: debugmodel}", "{}", "null", "{num_hidden_layers: 2}"])
    elif "list" in text or "tuple" in text:
        part = "0.9" if "float" in text else "x"
        typed = st.lists(st.sampled_from([part, "0.5", "a", "norm"]), max_size=3).map(",".join)
    elif "float" in text:
        typed = st.floats(-1, 100, allow_nan=False).map(repr)
    elif "int" in text:
        typed = st.integers(-2, 5000).map(str)
    else:
        typed = st.text(alphabet="abcxyz019_-./", min_size=1, max_size=8)
    return st.one_of(typed, st.just("none")) if field.optional else typed


def _render(args: tuple) -> list[str]:
    path, value, form, hyphens = args
    name = path.replace("_", "-") if hyphens else path
    if form == 0:
        return [f"--{name}={value}"]
    if form == 1 and not value.startswith("-"):
        return [f"--{name}", value]
    if SPEC.fields[path].boolean:
        return [f"--{name}"] if form == 1 else _negated(name)[form % 2]
    return [f"--{name}={value}"]


#: A token group naming a real field with a value of its type, in any of the accepted forms.
valid_tokens = st.one_of([
    st.tuples(st.just(path), _typed(field), st.integers(0, 3), st.booleans()).map(_render)
    for path, field in SPEC.fields.items()
]).map(list)

#: A token group that is probably refused: any name, any value, any form.
odd_tokens = st.one_of(
    st.tuples(names, values).map(lambda nv: [f"--{nv[0]}={nv[1]}"]),
    st.tuples(names, values).map(lambda nv: [f"--{nv[0]}", nv[1]]),
    names.map(lambda n: [f"--{n}"]),
    st.tuples(names, st.booleans()).map(lambda nb: [_negated(nb[0])[nb[1]]]),
    st.tuples(names, values).map(lambda nv: [f"--no-{nv[0]}={nv[1]}"]),
    values.map(lambda v: [v]),  # a stray word
).map(list)


def _argvs(tokens, max_groups: int) -> st.SearchStrategy[list[str]]:
    groups = st.lists(tokens, min_size=0, max_size=max_groups)
    return groups.map(lambda gs: [t for g in gs for t in g]).filter(
        lambda argv: not {"-h", "--help"} & set(argv))


#: Whole parses: mostly well-formed overrides (tyro parses them), some odd ones.
parse_argvs = _argvs(st.one_of(valid_tokens, valid_tokens.map(list), odd_tokens), 4)
#: The syntax alone: half odd tokens.
syntax_argvs = _argvs(st.one_of(valid_tokens, odd_tokens), 6)


def _refusal_is_one_line(exc: Exception, argv: list[str]) -> None:
    message = str(exc)
    assert message and not BOX & set(message), message
    assert "Traceback" not in message
    if not any("\n" in token for token in argv):
        assert "\n" not in message, message


@settings(max_examples=PARSES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(argv=parse_argvs)
def test_parse_is_a_config_or_a_config_error(argv):
    try:
        config = ConfigManager().parse_args([*BASE, *argv])
    except (ConfigError, RecipeError) as exc:
        event("refused")
        _refusal_is_one_line(exc, argv)
    else:
        event("config")
        assert isinstance(config, HyperTrainer.Config)


@settings(max_examples=SYNTAX, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(argv=syntax_argvs)
def test_override_syntax_is_canonical_or_a_config_error(argv):
    try:
        args = normalize_overrides(argv, SPEC)
    except ConfigError as exc:
        event("refused")
        _refusal_is_one_line(exc, argv)
        return
    event("passed on to tyro")
    # What tyro gets: one --<known path>=<value> per field, booleans spelled True/False/None.
    paths = [a[2:].split("=", 1)[0] for a in args]
    assert len(paths) == len(set(paths))
    for arg, path in zip(args, paths):
        assert arg.startswith(f"--{path}=") and path in SPEC.fields
        field = SPEC.fields[path]
        value = arg.split("=", 1)[1]
        if field.boolean:
            assert value in (("True", "False", "None") if field.optional else ("True", "False"))
        elif field.choices is not None:
            assert value in field.choices or (field.optional and value == "None")
