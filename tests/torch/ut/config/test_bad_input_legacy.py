"""Bad input to the legacy command line: every user error is one ``ConfigError`` (exit 2) naming
the field by its dotted path, ``file:line`` when the value came from the file, the fix and a
"did you mean" where one fits -- every problem of a file at once, nothing silently defaulted.

One group per rule of ``hyper_parallel.trainer.config_parser``:

1. several independent problems are reported together, in the file's order;
2. YAML semantics: merge keys, YAML 1.2 integers, bounded aliases, empty / non-mapping files;
3. values that cannot train (non-finite, too large, negative, ``lr_min > lr``);
4. ``model.config_overrides`` keys are the model config's fields (read without torch);
5. the two collective timeouts.

Fast: nothing trains; the YAML fixtures are inline.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hyper_parallel.trainer.config import (
    MAX_INT,
    ConfigError,
    ConfigValueError,
    HyperTrainerConfig,
    OptimizerConfig,
    TrainConfig,
    parse_args,
)
from hyper_parallel.trainer.config_parser import load_config, model_override_keys

REPO = Path(__file__).resolve().parents[4]


def write(tmp_path: Path, text: str, name: str = "old.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return str(path)


def problems_of(tmp_path: Path, text: str, *overrides: str) -> tuple[str, ConfigError]:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        parse_args(HyperTrainerConfig, [path, *overrides])
    return path, info.value


def located(err: ConfigError) -> list[tuple[str | None, str | None]]:
    """``(dotted path, location)`` of every problem."""
    return [(p.path, p.location) for p in err.problems]


# ------------------------------------------------------------------ 1. every problem at once


def test_every_problem_of_a_file_is_reported_at_once(tmp_path):
    path, err = problems_of(tmp_path, """
        model:
          name: qwen3_5
          num_hidden_layer: 4
        data:
          max_seq_len: [1, 2]
        train:
          optimizer:
            lr: -1
          eval:
            eval_steps: 10
        """, "--train.sed=3", "--data.shuffle=maybe")
    assert located(err) == [
        ("model.num_hidden_layer", f"{path}:3"),   # unknown key (did you mean)
        ("data.max_seq_len", f"{path}:5"),         # wrong type
        ("train.optimizer.lr", f"{path}:8"),       # invalid value
        ("train.eval.eval_dataset", f"{path}:9"),  # a rule of another section (at the section)
        ("train.sed", "command line (--train.sed=3)"),  # then the command line, as written
        ("data.shuffle", "command line (--data.shuffle=maybe)"),
    ]
    text = str(err)
    assert text.startswith(f"6 problems in {path}:\n- ")
    assert f"- {path}:3: model.num_hidden_layer: unknown key 'num_hidden_layer' in model (did you " \
           "mean 'model.num_hidden_layers'?)" in text
    assert f"- {path}:5: data.max_seq_len: expected int, got list [1, 2]" in text
    assert f"- {path}:8: train.optimizer.lr: must be >= 0.0, got -1.0" in text
    assert "train.eval.eval_dataset: is required when eval_steps > 0" in text
    assert "- command line (--data.shuffle=maybe): data.shuffle: expected bool, got str 'maybe'" in text
    assert "did you mean 'train.seed'" in text
    assert len(text.splitlines()) == 7  # the head and one line per problem


def test_one_problem_keeps_the_single_error_format(tmp_path):
    path, err = problems_of(tmp_path, "train:\n  optimizer:\n    lr: -1\n")
    assert str(err) == f"{path}:3: train.optimizer.lr: must be >= 0.0, got -1.0"
    assert (err.path, err.location, err.problems) == ("train.optimizer.lr", f"{path}:3", [err])


def test_yaml_level_and_schema_problems_come_together(tmp_path):
    path, err = problems_of(tmp_path, """
        train:
          seed: 1
          seed: 2
          max_step: 3
        data:
          shuffle: !!binary eA==
        """)
    assert located(err) == [(None, f"{path}:3"), ("train.max_step", f"{path}:4"),
                            (None, f"{path}:6")]
    assert "duplicate key 'seed' (first at line 2)" in str(err)
    assert "unsupported tag !!binary" in str(err)


def test_bad_command_line_tokens_are_all_reported(tmp_path):
    _, err = problems_of(tmp_path, "{}\n", "extra.yaml", "--train.seed", "--=1",
                         "--train.max_steps=0")
    assert [p.location for p in err.problems] == ["command line"] * 3 + [
        "command line (--train.max_steps=0)"]
    text = str(err)
    assert "unexpected argument 'extra.yaml'" in text and "'--train.seed' has no value" in text
    assert "malformed override '--=1'" in text and "train.max_steps: must be >= 1" in text


@pytest.mark.parametrize(
    ("text", "reported"),
    [
        # micro_batch_size is wrong: "global_batch_size >= micro_batch_size" is not checked.
        ("train: {global_batch_size: 1, micro_batch_size: x}\n", ["train.micro_batch_size"]),
        # data.type is wrong: whether train_path is required is moot.
        ("data: {type: parquet}\n", ["data.type"]),
        # lr is wrong: lr_min <= lr is moot.
        ("train: {optimizer: {lr: -1, lr_min: 0.5}}\n", ["train.optimizer.lr"]),
        ("train: {eval: {eval_steps: -1, eval_dataset: x}}\n", ["train.eval.eval_steps"]),
        # one problem per field (-inf is neither finite nor >= 0)
        ("train: {optimizer: {weight_decay: -.inf}}\n", ["train.optimizer.weight_decay"]),
    ],
)
def test_a_rule_reading_a_wrong_field_is_skipped(tmp_path, text, reported):
    _, err = problems_of(tmp_path, text)
    assert [p.path for p in err.problems] == reported


def test_module_main_prints_every_problem_without_a_traceback(tmp_path):
    path = write(tmp_path, "train:\n  max_step: 3\n  optimizer: {lr: .inf}\n")
    proc = subprocess.run(
        [sys.executable, "-m", "hyper_parallel.trainer.config", path, "--data.x=1"],
        capture_output=True, text=True, cwd=REPO, check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: 3 problems in {path}:\n")
    assert f"{path}:2: train.max_step" in proc.stderr and f"{path}:3: train.optimizer.lr" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------ 2. YAML semantics


def test_merge_key_explicit_keys_win_and_lines_follow(tmp_path):
    text = """
        model:
          config_overrides:
            <<: &small {flavor: debugmodel, num_hidden_layers: 2, head_dim: 32}
            head_dim: 64
        train:
          optimizer:
            <<: &opt {lr: 1.0e-3, eps: -1.0}
            lr: -1
        """
    path, err = problems_of(tmp_path, text)
    # eps comes from the merged mapping (its line), lr from the key that overrides it.
    assert located(err) == [("train.optimizer.eps", f"{path}:7"), ("train.optimizer.lr", f"{path}:8")]
    fixed = text.replace("eps: -1.0", "eps: 1.0e-6").replace("lr: -1", "lr: 2.0e-3")
    cfg = parse_args(HyperTrainerConfig, [write(tmp_path, fixed)])
    assert cfg.model.config_overrides == {"flavor": "debugmodel", "num_hidden_layers": 2,
                                          "head_dim": 64}
    assert (cfg.train.optimizer.lr, cfg.train.optimizer.eps) == (2e-3, 1e-6)


def test_a_merged_key_is_checked_where_it_is_merged(tmp_path):
    path, err = problems_of(tmp_path, """
        train:
          optimizer: &opt
            lr: 0.5
          eval:
            <<: *opt
            eval_steps: 0
        """)
    assert located(err) == [("train.eval.lr", f"{path}:3")]
    assert "unknown key 'lr' in train.eval" in str(err)


def test_merge_of_several_mappings_the_earlier_wins():
    text = """
    train:
      optimizer:
        <<: [{lr: 0.5, eps: 0.25}, {lr: 0.75, weight_decay: 0.125}]
        eps: 0.5
    """
    cfg = load_config(HyperTrainerConfig, textwrap.dedent(text), source="x.yaml")
    o = cfg.train.optimizer
    assert (o.lr, o.eps, o.weight_decay) == (0.5, 0.5, 0.125)


def test_explicit_duplicate_still_an_error_next_to_a_merge():
    text = "train:\n  optimizer:\n    <<: {lr: 0.5}\n    lr: 0.25\n    lr: 0.125\n"
    with pytest.raises(ConfigError) as info:
        load_config(HyperTrainerConfig, text, source="x.yaml")
    assert located(info.value) == [(None, "x.yaml:5")]
    assert "duplicate key 'lr' (first at line 4)" in str(info.value)


@pytest.mark.parametrize(
    ("written", "value"),
    [("010", 10), ("0o10", 8), ("0x10", 16), ("+1", 1), ("-0", 0), ("'12'", 12), ("007", 7)],
)
def test_integers_follow_yaml_1_2(written, value):
    cfg = load_config(HyperTrainerConfig, f"train:\n  seed: {written}\n", source="x.yaml")
    assert cfg.train.seed == value and type(cfg.train.seed) is int


@pytest.mark.parametrize("written", ["1_000", "0b11", "1:30", "12.0", "'1_000'", "0x1_0"])
def test_yaml_1_1_integers_are_strings_then_type_errors(written):
    with pytest.raises(ConfigError) as info:
        load_config(HyperTrainerConfig, f"train:\n  seed: {written}\n", source="x.yaml")
    assert (info.value.path, info.value.location) == ("train.seed", "x.yaml:2")
    assert "expected int, got" in str(info.value)


def test_floats_follow_yaml_1_2():
    cfg = load_config(HyperTrainerConfig, "train: {optimizer: {lr: 1e-3, eps: 1E-9}}\n",
                      source="x.yaml")
    assert (cfg.train.optimizer.lr, cfg.train.optimizer.eps) == (1e-3, 1e-9)
    cfg = load_config(HyperTrainerConfig, "model: {config_overrides: {rope_theta: 1e7}}\n",
                      source="x.yaml")
    assert cfg.model.config_overrides == {"rope_theta": 1e7}  # a number, not the string '1e7'


def _billion_laughs() -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 9):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 9) + "]")
    return "\n".join(lines) + "\nmodel:\n  freeze_modules: *i\n"


def test_billion_laughs_fails_fast_naming_the_file(tmp_path):
    path = write(tmp_path, _billion_laughs(), name="laughs.yaml")
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        parse_args(HyperTrainerConfig, [path])
    assert time.perf_counter() - start < 0.5
    assert str(info.value).startswith(f"{path}:")
    assert "expands to more than 100000 values through its aliases" in str(info.value)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a: &a [*a]\n", "recursive alias"),
        ("model:\n  config_overrides: &c {x: *c}\n", "recursive alias"),
        ("model: {config_overrides: {x: " + "[" * 200 + "]" * 200 + "}}\n", "levels deep"),
        ("model: {config_overrides: {x: " + "[" * 5000 + "]" * 5000 + "}}\n", "nest"),
    ],
)
def test_alias_and_nesting_bombs_are_config_errors(tmp_path, text, words):
    path, err = problems_of(tmp_path, text)
    assert str(err).startswith(path) and words in str(err)


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "null\n", "~\n", "---\n",
                                  "--- null\n...\n"])
def test_an_empty_file_is_an_error(tmp_path, text):
    path, err = problems_of(tmp_path, text)
    assert err.location == path
    assert "empty configuration" in str(err) and "`{}` to train with every default" in str(err)


def test_an_explicit_empty_mapping_is_every_default(tmp_path):
    assert parse_args(HyperTrainerConfig, [write(tmp_path, "{}\n")]) == HyperTrainerConfig()


@pytest.mark.parametrize(("text", "kind"), [("- a\n", "list"), ("3\n", "int"), ("'x'\n", "str"),
                                            ("true\n", "bool")])
def test_a_top_level_that_is_not_a_mapping_is_an_error(tmp_path, text, kind):
    path, err = problems_of(tmp_path, text)
    assert err.location == path
    assert f"the document must be a mapping with the keys model, data, train; got {kind}" in str(err)


# ------------------------------------------------------------------ 3. values that cannot train


@pytest.mark.parametrize(
    ("text", "path", "line", "words"),
    [
        ("train:\n  optimizer:\n    lr: .inf\n", "train.optimizer.lr", 3, "not a finite number"),
        ("train:\n  optimizer:\n    lr: .nan\n", "train.optimizer.lr", 3, "not a finite number"),
        ("train:\n  optimizer:\n    lr: 1e400\n", "train.optimizer.lr", 3, "not a finite number"),
        ("train:\n  optimizer:\n    lr: '-inf'\n", "train.optimizer.lr", 3, "expected float"),
        ("train:\n  optimizer:\n    max_grad_norm: .inf\n", "train.optimizer.max_grad_norm", 3,
         "not a finite number"),
        ("train:\n  optimizer:\n    betas: [0.9, .nan]\n", "train.optimizer.betas", 3,
         "not a finite number"),
        ("train:\n  logging:\n    peak_tflops: .inf\n", "train.logging.peak_tflops", 3,
         "not a finite number"),
        ("train:\n  optimizer:\n    lr: " + "9" * 400 + "\n", "train.optimizer.lr", 3,
         "too large for a float"),
        ("train:\n  optimizer:\n    lr: 1.0e-5\n    lr_min: 1.0e-3\n", "train.optimizer.lr_min", 4,
         "must be <= lr (1e-05): the cosine decay goes from lr down to lr_min"),
        ("train:\n  max_steps: 99999999999999999999999\n", "train.max_steps", 2,
         f"must be <= {MAX_INT} (2**53 - 1)"),
        ("train:\n  global_batch_size: 9007199254740992\n", "train.global_batch_size", 2,
         "far beyond any real run"),
        ("data:\n  max_seq_len: 9007199254740992\n", "data.max_seq_len", 2, "(2**53 - 1)"),
        ("train:\n  accelerator:\n    dp_shard: -99999999999999999999\n",
         "train.accelerator.dp_shard", 3, "in magnitude"),
        ("model:\n  freeze_modules: [a, b]\n  vocab_size: 99999999999999999999\n",
         "model.vocab_size", 3, "(2**53 - 1)"),
        ("train:\n  seed: " + "1" * 5000 + "\n", None, 2, "invalid value"),
        ("train:\n  seed: -1\n", "train.seed", 2, "must be >= 0"),
        ("data:\n  num_workers: -1\n", "data.num_workers", 2, "must be >= 0"),
        ("train:\n  checkpoint:\n    save_steps: -5\n", "train.checkpoint.save_steps", 3,
         "must be >= 0"),
        ("train:\n  debug:\n    gc_steps: -1\n", "train.debug.gc_steps", 3, "must be >= 0"),
    ],
)
def test_values_that_cannot_train_are_refused(tmp_path, text, path, line, words):
    file, err = problems_of(tmp_path, text)
    assert len(err.problems) == 1, str(err)
    assert (err.path, err.location) == (path, f"{file}:{line}")
    assert words in str(err)


def test_lr_min_above_lr_is_fine_for_a_constant_schedule():
    text = "train:\n  optimizer: {lr: 1.0e-5, lr_min: 1.0e-3, lr_decay_style: constant}\n"
    assert load_config(HyperTrainerConfig, text).train.optimizer.lr_min == 1e-3


def test_command_line_values_that_cannot_train(tmp_path):
    _, err = problems_of(tmp_path, "{}\n", "--train.optimizer.lr=.inf",
                         "--train.max_steps=1e30", "--train.seed=99999999999999999999",
                         "--train.optimizer.lr_min=0")
    assert located(err) == [  # in the order they were written
        ("train.optimizer.lr", "command line (--train.optimizer.lr=.inf)"),
        ("train.max_steps", "command line (--train.max_steps=1e30)"),
        ("train.seed", "command line (--train.seed=99999999999999999999)"),
    ]
    assert "expected int, got float 1e+30" in str(err)


@pytest.mark.parametrize(
    ("section", "kwargs", "field", "words"),
    [
        (OptimizerConfig, {"lr": float("inf")}, "lr", "must be a finite number"),
        (OptimizerConfig, {"eps": float("nan")}, "eps", "must be a finite number"),
        (OptimizerConfig, {"betas": (0.9, float("inf"))}, "betas", "must be a finite number"),
        (OptimizerConfig, {"lr": 1e-5, "lr_min": 1e-3}, "lr_min", "must be <= lr"),
        (TrainConfig, {"max_steps": 2**60}, "max_steps", "(2**53 - 1)"),
        (TrainConfig, {"init_timeout_seconds": 0}, "init_timeout_seconds", "must be >= 1"),
        (TrainConfig, {"train_timeout_seconds": 10**6}, "train_timeout_seconds", "must be <= 604800"),
    ],
)
def test_the_schema_refuses_them_without_the_parser(section, kwargs, field, words):
    with pytest.raises(ConfigValueError) as info:
        section(**kwargs)
    assert info.value.field == field and words in str(info.value)


def test_a_section_reports_every_field_at_once():
    with pytest.raises(ConfigValueError) as info:
        OptimizerConfig(type="sgd", lr=-1.0, eps=0.0, betas=(0.9, 1.5))
    assert [p.field for p in info.value.problems] == ["type", "lr", "eps", "betas"]


# ------------------------------------------------------------------ 4. model.config_overrides


@pytest.mark.parametrize(
    ("lines", "path", "line", "words"),
    [
        ("    head_dimm: 64\n", "model.config_overrides.head_dimm", 4,
         ("unknown key 'head_dimm' in model.config_overrides of model 'qwen3_5' (did you mean "
          "'head_dim'?). Valid keys: vocab_size, ")),
        ("    flavour: 2b\n", "model.config_overrides.flavour", 4, "(did you mean 'flavor'?)"),
        ("    flavor: debugmodle\n", "model.config_overrides.flavor", 4,
         ("unknown flavor 'debugmodle' (did you mean 'debugmodel'?) of model 'qwen3_5'; valid "
          "flavors: debugmodel, tiny, 0.8b, 2b, 4b, 9b, 27b")),
        ("    head_dim: abc\n", "model.config_overrides.head_dim", 4, "expected int, got str 'abc'"),
        ("    tie_word_embeddings: 1\n", "model.config_overrides.tie_word_embeddings", 4,
         "expected bool"),
        ("    layer_types: [full_attention, 3]\n", "model.config_overrides.layer_types", 4,
         "expected list[str] | None"),
        ("    rope_theta: .inf\n", "model.config_overrides.rope_theta", 4,
         "must be a finite number, got inf"),
        ("    eos_token_id: [1, 99999999999999999999]\n", "model.config_overrides.eos_token_id", 4,
         "(2**53 - 1)"),
    ],
)
def test_config_overrides_keys_are_the_model_config_fields(tmp_path, lines, path, line, words):
    file, err = problems_of(tmp_path, "model:\n  name: qwen3_5\n  config_overrides:\n" + lines)
    assert located(err) == [(path, f"{file}:{line}")]
    assert words in str(err)


def test_config_overrides_typo_on_the_command_line(tmp_path):
    path = write(tmp_path, "model:\n  config_overrides: {flavor: debugmodel}\n")
    for override in ("--model.config_overrides.head_dimm=64", "--model.config_overrides={head_dimm: 64}"):
        with pytest.raises(ConfigError) as info:
            parse_args(HyperTrainerConfig, [path, override])
        assert located(info.value) == [("model.config_overrides.head_dimm", f"command line ({override})")]
        assert "did you mean 'head_dim'" in str(info.value)


def test_config_overrides_of_every_qwen_name_and_of_other_models(tmp_path, monkeypatch):
    text = "model:\n  name: {}\n  config_overrides: {{head_dimm: 64}}\n"
    with pytest.raises(ConfigError, match="did you mean 'head_dim'"):
        load_config(HyperTrainerConfig, text.format("qwen3_5_v2"))
    # A custom model module (found, not imported) checks its own overrides when the run builds it.
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_pkg" / "my_model.py").write_text("raise AssertionError('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = load_config(HyperTrainerConfig, text.format("my_pkg.my_model"))
    assert cfg.model.config_overrides == {"head_dimm": 64}


def test_config_overrides_problems_join_the_others(tmp_path):
    path, err = problems_of(tmp_path, """
        model:
          config_overrides:
            flavor: debugmodel
            num_hidden_layer: 2
        train:
          max_step: 3
        """)
    assert located(err) == [("model.config_overrides.num_hidden_layer", f"{path}:4"),
                            ("train.max_step", f"{path}:6")]


def test_an_unknown_model_name_comes_with_the_overrides_of_its_closest_model(tmp_path):
    """One pass: the name, and the overrides as the model the did-you-mean offers reads them
    (fixing the name then reveals nothing new)."""
    path, err = problems_of(tmp_path, """
        model:
          name: qwen3_6
          config_overrides: {flavor: debugmodel, head_dimm: 64}
        train:
          max_step: 3
        """)
    assert located(err) == [("model.name", f"{path}:2"),
                            ("model.config_overrides.head_dimm", f"{path}:3"),
                            ("train.max_step", f"{path}:5")]
    text = str(err)
    assert (f"{path}:2: model.name: unknown model 'qwen3_6' (did you mean 'qwen3_5'?): there is "
            "no module 'hyper_parallel.models.qwen3_6'. Known models: qwen3_5, ") in text
    assert ("unknown key 'head_dimm' in model.config_overrides of model 'qwen3_5', the closest to "
            "the unknown 'qwen3_6' (did you mean 'head_dim'?)") in text


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("my_pkg.nope", "there is no module 'my_pkg.nope'"),
        ("my model!", "a model name is a registered name or a module path"),
    ],
)
def test_a_name_that_names_no_model_is_refused_alone(tmp_path, name, words):
    # Nothing known is close: the overrides cannot be read as any model's, so only the name.
    path, err = problems_of(tmp_path, f"model:\n  name: {name}\n  config_overrides: {{a: 1}}\n")
    assert located(err) == [("model.name", f"{path}:2")]
    assert words in str(err)


def test_the_key_lookup_agrees_with_the_model_config():
    from hyper_parallel.models.qwen3_5.configuration import FLAVOR_KEY, FLAVORS, Qwen3_5Config

    for name in ("qwen3_5", "qwen3_5_v2"):
        keys = model_override_keys(name)
        assert list(keys.fields) == [f.name for f in dataclasses.fields(Qwen3_5Config)]
        assert keys.flavors == tuple(FLAVORS) and keys.flavor_key == FLAVOR_KEY
    assert model_override_keys("unknown_model") is None


def test_the_key_lookup_imports_no_framework():
    code = (
        "import sys\n"
        "from hyper_parallel.trainer.config import HyperTrainerConfig, ConfigError\n"
        "from hyper_parallel.trainer.config_parser import load_config\n"
        "try:\n"
        "    load_config(HyperTrainerConfig, 'model: {config_overrides: {head_dimm: 1}}')\n"
        "except ConfigError as exc:\n"
        "    assert \"did you mean 'head_dim'\" in str(exc)\n"
        "else:\n"
        "    raise SystemExit('not refused')\n"
        "try:\n"
        "    load_config(HyperTrainerConfig, 'model: {name: qwen3_6}')\n"
        "except ConfigError as exc:\n"
        "    assert \"unknown model 'qwen3_6'\" in str(exc)\n"
        "else:\n"
        "    raise SystemExit('unknown model not refused')\n"
        # Model discovery (models.spec, which checks model.name) is torch-free; a model
        # package is not.
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('torch', 'mindspore')\n"
        "         or m.startswith('hyper_parallel.models.') and m != 'hyper_parallel.models.spec']\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# ------------------------------------------------------------------ 5. the collective timeouts


def test_timeouts_default_and_bounds(tmp_path):
    cfg = HyperTrainerConfig()
    assert (cfg.train.init_timeout_seconds, cfg.train.train_timeout_seconds) == (300, 100)
    cfg = load_config(HyperTrainerConfig, "train: {init_timeout_seconds: 60, train_timeout_seconds: 30}\n")
    assert (cfg.train.init_timeout_seconds, cfg.train.train_timeout_seconds) == (60, 30)
    path, err = problems_of(tmp_path, "train:\n  init_timeout_seconds: 0\n  train_timeout_seconds: -3\n")
    assert located(err) == [("train.init_timeout_seconds", f"{path}:2"),
                            ("train.train_timeout_seconds", f"{path}:3")]
    assert "must be >= 1, got 0" in str(err) and "must be >= 1, got -3" in str(err)
