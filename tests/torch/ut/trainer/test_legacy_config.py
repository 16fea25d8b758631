"""The legacy schema and parser: every rule of hyper_parallel.trainer.config_parser."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hyper_parallel.trainer.config import (
    ConfigError,
    ConfigValueError,
    DataConfig,
    HyperTrainerConfig,
    OptimizerConfig,
    parse_args,
)
from hyper_parallel.trainer.config_parser import TRUE_WORDS, FALSE_WORDS, dump_yaml, load_config
from hyper_parallel.utils.docstrings import field_docstrings

REPO = Path(__file__).resolve().parents[4]
EXAMPLES = sorted((REPO / "examples" / "yaml").glob("*.yaml"))


def write(tmp_path: Path, text: str, name: str = "old.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def load(text: str, *overrides: str) -> HyperTrainerConfig:
    return load_config(HyperTrainerConfig, textwrap.dedent(text), source="old.yaml", overrides=overrides)


# ------------------------------------------------------------------------------ schema


def test_exactly_three_sections_and_the_keys_real_yamls_carry():
    """Known keys, honoured or refused off their defaults (test_legacy_schema_coverage.py has
    the whole list): never "unknown key" for a key of the legacy schema."""
    assert [f.name for f in dataclasses.fields(HyperTrainerConfig)] == ["model", "data", "train"]
    cfg = HyperTrainerConfig()
    known = {
        "model": ["tp_plan", "cp_modules", "ep_modules"],
        "data": ["subset", "train_size", "template", "image_key", "messages_key", "image_token_id",
                 "vl_grid_t", "vl_grid_h", "vl_grid_w", "streaming"],
        "train": ["moe_monitor", "wandb"],
        "train.accelerator": ["zero_stage", "async_cp", "comm_fusion", "ulysses_degree",
                              "cpu_offload"],
        "train.optimizer": ["bsz_warmup_ratio"],
        "train.logging": ["report_to", "report_global_loss"],
    }
    for section, names in known.items():
        obj = cfg
        for part in section.split("."):
            obj = getattr(obj, part)
        present = {f.name for f in dataclasses.fields(obj)}
        assert set(names) <= present, (section, set(names) - present)


def test_defaults_follow_the_legacy_schema():
    cfg = HyperTrainerConfig()
    assert cfg.model.name == "qwen3_5" and cfg.model.config_overrides is None
    assert (cfg.data.type, cfg.data.max_seq_len, cfg.data.text_key) == ("dummy", 2048, "text")
    assert (cfg.data.num_workers, cfg.data.pin_memory, cfg.data.shuffle) == (0, True, True)
    t = cfg.train
    assert (t.max_steps, t.num_train_epochs, t.global_batch_size, t.micro_batch_size, t.seed) == (
        100, 1, 8, 1, 42)
    assert (t.backend, t.init_device, t.comm_backend) == ("torch", "meta", None)
    assert t.accelerator.dp_shard is None and t.accelerator.reshard_after_forward is True
    o = t.optimizer
    assert (o.type, o.lr, o.lr_min, o.lr_decay_style, o.lr_warmup_ratio) == (
        "adamw", 1e-4, 1e-5, "cosine", 0.1)
    assert (o.weight_decay, o.max_grad_norm, o.eps, o.betas, o.foreach) == (
        0.01, 1.0, 1e-8, (0.9, 0.999), None)
    assert (t.checkpoint.output_dir, t.checkpoint.save_steps, t.checkpoint.save_hf_weights) == (
        "outputs", 500, True)
    assert t.mixed_precision.param_dtype == "bfloat16" and t.mixed_precision.enabled is False
    assert t.gradient_checkpointing.activation_checkpoint == "off"
    assert (t.profile.wait_steps, t.profile.warmup_steps, t.profile.active_steps) == (1, 1, 3)
    assert cfg.train_steps == 100


def test_every_field_has_a_docstring():
    def walk(cls):
        docs = field_docstrings(cls)
        for f in dataclasses.fields(cls):
            assert docs.get(f.name), f"{cls.__name__}.{f.name} has no docstring"
            if dataclasses.is_dataclass(f.type) or isinstance(f.default_factory, type):
                if dataclasses.is_dataclass(f.default_factory):
                    walk(f.default_factory)

    walk(HyperTrainerConfig)


@pytest.mark.parametrize(
    "section, kwargs, field, fragment",
    [
        (DataConfig, {"type": "parquet"}, "type", "choose one of: dummy, jsonl, text"),
        (DataConfig, {"type": "jsonl"}, "train_path", "is required"),
        (DataConfig, {"prefetch_factor": 2}, "prefetch_factor", "num_workers > 0"),
        (OptimizerConfig, {"lr": -1.0}, "lr", ">= 0"),
        (OptimizerConfig, {"lr_decay_style": "cosin"}, "lr_decay_style", "did you mean 'cosine'"),
        (OptimizerConfig, {"betas": (0.9, 1.5)}, "betas", "[0, 1)"),
        (OptimizerConfig, {"type": "sgd"}, "type", "adamw, adam"),
    ],
)
def test_post_init_validation_names_the_field(section, kwargs, field, fragment):
    with pytest.raises(ConfigValueError) as info:
        section(**kwargs)
    assert info.value.field == field
    assert fragment in str(info.value)


# ------------------------------------------------------------------------------ parser basics


def test_examples_parse(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert len(EXAMPLES) >= 6
    for path in EXAMPLES:
        cfg = parse_args(HyperTrainerConfig, [str(path)])
        assert isinstance(cfg, HyperTrainerConfig)


def test_yaml_and_cli_happy_path(tmp_path, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "3")
    path = write(tmp_path, """
        train:
          accelerator: {tp: 1}
          optimizer:
            lr: 1e-3          # PyYAML reads this as a string; the float field accepts it
    """)
    cfg = parse_args(HyperTrainerConfig, [
        path, "--train.accelerator.tp=2", "--train.mixed_precision.enabled", "yes",
        "--train.max_steps=99",
    ])
    assert cfg.train.accelerator.tp == 2
    assert cfg.train.mixed_precision.enabled is True
    assert cfg.train.max_steps == 99 and cfg.train_steps == 99
    assert cfg.train.optimizer.lr == 1e-3
    assert cfg.train.local_rank == 3


def test_missing_yaml_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        parse_args(HyperTrainerConfig, [str(tmp_path / "nope.yaml")])
    with pytest.raises(ConfigError, match="first argument must be the YAML"):
        parse_args(HyperTrainerConfig, ["--train.max_steps=3"])
    with pytest.raises(ConfigError, match="first argument must be the YAML"):
        parse_args(HyperTrainerConfig, [])


def test_space_separated_overrides_and_missing_value(tmp_path):
    path = write(tmp_path, "{}\n")
    cfg = parse_args(HyperTrainerConfig, [path, "--train.seed", "7", "--data.shuffle", "off"])
    assert cfg.train.seed == 7 and cfg.data.shuffle is False
    with pytest.raises(ConfigError, match="has no value"):
        parse_args(HyperTrainerConfig, [path, "--train.seed"])
    with pytest.raises(ConfigError, match="unexpected argument 'extra.yaml'"):
        parse_args(HyperTrainerConfig, [path, "extra.yaml"])


@pytest.mark.parametrize("word", sorted(TRUE_WORDS | {w.upper() for w in TRUE_WORDS}))
def test_true_aliases(word):
    assert load("{}", f"--data.shuffle={word}").data.shuffle is True
    assert load(f"data: {{shuffle: {word}}}").data.shuffle is True


@pytest.mark.parametrize("word", sorted(FALSE_WORDS | {w.upper() for w in FALSE_WORDS}))
def test_false_aliases(word):
    assert load("{}", f"--data.shuffle={word}").data.shuffle is False
    assert load(f"data: {{shuffle: {word}}}").data.shuffle is False


def test_invalid_bool_names_field_type_value_and_place():
    with pytest.raises(ConfigError) as info:
        load("{}", "--data.shuffle=maybe")
    msg = str(info.value)
    assert "data.shuffle" in msg and "expected bool" in msg and "'maybe'" in msg
    assert "command line (--data.shuffle=maybe)" in msg
    assert isinstance(info.value, ValueError)  # legacy callers caught ValueError


def test_yaml_off_stays_a_string_for_string_fields():
    cfg = load("train: {gradient_checkpointing: {activation_checkpoint: off}}")
    assert cfg.train.gradient_checkpointing.activation_checkpoint == "off"


def test_type_coercion_of_cli_values():
    cfg = load(
        "{}",
        "--train.optimizer.betas=[0.9,0.95]",
        "--train.optimizer.lr=3e-4",
        "--model.freeze_modules=[embed_tokens, norm]",
        "--model.config_overrides={flavor: debugmodel, num_hidden_layers: 2}",
        "--model.weights_path=null",
        "--train.optimizer.foreach=true",
        "--train.mixed_precision.output_dtype=bf16",
    )
    assert cfg.train.optimizer.betas == (0.9, 0.95)
    assert cfg.train.optimizer.lr == 3e-4
    assert cfg.model.freeze_modules == ["embed_tokens", "norm"]
    assert cfg.model.config_overrides == {"flavor": "debugmodel", "num_hidden_layers": 2}
    assert cfg.model.weights_path is None
    assert cfg.train.optimizer.foreach is True
    assert cfg.train.mixed_precision.output_dtype == "bf16"


def test_cli_dict_overrides_deep_merge_over_yaml():
    cfg = load(
        "model: {config_overrides: {flavor: debugmodel, head_dim: 64}}",
        "--model.config_overrides.num_hidden_layers=2",
        "--model.config_overrides={head_dim: 32}",
    )
    assert cfg.model.config_overrides == {"flavor": "debugmodel", "head_dim": 32, "num_hidden_layers": 2}


def test_cli_wins_over_yaml_and_keeps_siblings():
    cfg = load("train: {optimizer: {lr: 0.5, eps: 1.0e-6}}", "--train.optimizer.lr=0.25")
    assert cfg.train.optimizer.lr == 0.25 and cfg.train.optimizer.eps == 1e-6


# ------------------------------------------------------------------------------ strictness


def test_unknown_key_names_path_file_line_and_suggestion(tmp_path):
    path = write(tmp_path, """
        model:
          name: qwen3_5
        train:
          max_steps: 5
          optimizer:
            learning_rate: 0.1
    """)
    with pytest.raises(ConfigError) as info:
        parse_args(HyperTrainerConfig, [path])
    err = info.value
    assert err.path == "train.optimizer.learning_rate"
    assert err.location == f"{path}:7"
    assert "Valid keys here:" in str(err)


def test_typo_suggests_the_closest_field_and_does_not_bind():
    with pytest.raises(ConfigError, match=r"did you mean 'train.max_steps'\?"):
        load("train: {max_step: 3}")
    with pytest.raises(ConfigError, match=r"did you mean 'train.optimizer.lr'\?"):
        load("train:\n  lr: 0.1\n")


def test_unknown_cli_key_is_an_error():
    with pytest.raises(ConfigError) as info:
        load("{}", "--train.optimiser.lr=1")
    assert "did you mean 'train.optimizer'" in str(info.value)
    assert info.value.location == "command line (--train.optimiser.lr=1)"


@pytest.mark.parametrize(
    "key, target",
    [("parallel", "train.accelerator"), ("optim", "train.optimizer"), ("runtime", "train (flatten"),
     ("memory", "train.gradient_checkpointing"), ("profiler", "train.profile"), ("seed", "train.seed")],
)
def test_legacy_flat_keys_get_migration_hints(key, target):
    with pytest.raises(ConfigError) as info:
        load(f"{key}: {{}}\n")
    assert target in str(info.value) and "old.yaml:1" in str(info.value)


def test_wrong_type_in_yaml_names_line():
    with pytest.raises(ConfigError) as info:
        load("data:\n  max_seq_len: [1, 2]\n")
    assert info.value.location == "old.yaml:2"
    assert "expected int, got list [1, 2]" in str(info.value)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("data: {type: json}\n", "did you mean 'jsonl'"),
        ("train: {max_steps: 0}\n", "train.max_steps: must be >= 1"),
        ("train: {micro_batch_size: 0}\n", "train.micro_batch_size: must be >= 1"),
        ("train: {accelerator: {dp_shard: 0}}\n", "dp_shard: must be -1"),
        ("train: {optimizer: {lr: -0.1}}\n", "train.optimizer.lr: must be >= 0"),
        ("train: {mixed_precision: {param_dtype: bf8}}\n", "choose one of: bfloat16, bf16"),
        ("train: {gradient_checkpointing: {activation_checkpoint: partial}}\n", "off, none, full, selective"),
        ("train: {eval: {eval_steps: 10}}\n", "eval_dataset: is required"),
        # An unsupported key's refusal comes first: it names the one value that converts (the
        # legacy choices would offer mindspore, refused too).
        ("train: {backend: jax}\n", "remove train.backend or set it to torch"),
        ("train: {comm_backend: glo}\n", "gloo, nccl"),
        ("train: {optimizer: {lr_decay_style: step}}\n", "cosine, linear, constant"),
        ("train: {optimizer: {loss_aggregation: sum}}\n", "token_weighted, rank_average"),
        ("train: {optimizer: {betas: [0.9]}}\n", "expected [float, float]"),
        ("data: {text_key: 5}\n", "expected str, got int 5"),
        ("train: {seed: true}\n", "expected int, got bool True"),
        ("train: {optimizer: {lr: .nan}}\n", "expected float"),
    ],
)
def test_invalid_values_are_config_errors(text, fragment):
    with pytest.raises(ConfigError) as info:
        load(text)
    assert fragment in str(info.value)
    assert str(info.value).startswith("old.yaml")


def test_validation_error_points_at_the_field_line():
    with pytest.raises(ConfigError) as info:
        load("train:\n  seed: 1\n  optimizer:\n    eps: 1\n    lr: -2\n")
    assert info.value.path == "train.optimizer.lr" and info.value.location == "old.yaml:5"


def test_local_rank_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert load("{}").train.local_rank == 1
    with pytest.raises(ConfigError, match="LOCAL_RANK environment variable"):
        load("train: {local_rank: 2}\n")
    monkeypatch.setenv("LOCAL_RANK", "x")
    with pytest.raises(ConfigError, match="LOCAL_RANK must be an integer"):
        load("{}")


def test_train_steps_is_not_a_key():
    with pytest.raises(ConfigError, match="computed from train.max_steps"):
        load("train_steps: 3\n")


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("- a\n- b\n", "the document must be a mapping"),
        ("just a string\n", "the document must be a mapping"),
        ("model: [1]\n", "model must be a mapping of ModelConfig fields"),
        ("model: {name: a\n", "invalid YAML"),
        ("train:\n  seed: 1\n  seed: 2\n", "duplicate key 'seed'"),
        ("train: {seed: 1}\n", None),
    ],
)
def test_document_shape(text, fragment):
    if fragment is None:
        assert load(text).train.seed == 1
        return
    with pytest.raises(ConfigError, match=fragment):
        load(text)


def test_empty_document_and_empty_sections_are_defaults():
    assert load("") == load("model:\ndata:\ntrain:\n")
    assert load("").train.max_steps == 100


def test_override_into_a_scalar_is_a_clear_error():
    with pytest.raises(ConfigError, match="train is 5, not a mapping"):
        load("train: 5\n", "--train.seed=1")


def test_safe_loader_only():
    with pytest.raises(ConfigError):
        load("model: !!python/object/apply:os.system ['echo hacked']\n")


# ------------------------------------------------------------------------------ printing


def test_dump_round_trips(tmp_path):
    for path in EXAMPLES:
        cfg = parse_args(HyperTrainerConfig, [str(path)])
        again = load_config(HyperTrainerConfig, dump_yaml(cfg), source="dump")
        assert again == cfg, path


def test_module_main_prints_resolved_config(tmp_path):
    path = write(tmp_path, "train: {max_steps: 7}\n")
    out = subprocess.run(
        [sys.executable, "-m", "hyper_parallel.trainer.config", path, "--train.seed=5"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "max_steps: 7" in out and "seed: 5" in out
    bad = subprocess.run(
        [sys.executable, "-m", "hyper_parallel.trainer.config", path, "--train.sed=5"],
        capture_output=True, text=True,
    )
    assert bad.returncode == 2 and "did you mean 'train.seed'" in bad.stderr
    help_text = subprocess.run(
        [sys.executable, "-m", "hyper_parallel.trainer.config", "--help"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "--train.optimizer.lr (float, default 0.0001)" in help_text
    assert "Peak learning rate." in help_text
