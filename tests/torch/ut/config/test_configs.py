"""The generated section dataclasses and ``HyperTrainer.Config``.

* Defaults agree with the legacy world: an empty YAML converts to ``HyperTrainer.Config()``, and
  every field an example YAML leaves unset converts to the new tree's default.
* Invalid values raise in ``__post_init__`` with an error naming ``<Class>.<field>``.
* The classes follow the Config rules (kw_only, slots, documented fields) and
  ``HyperTrainer.Config(...).build()`` constructs the engine, ``HyperTrainer``.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml

from hyper_parallel.codegen.table.field_table import load_table
from hyper_parallel.config import configs
from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
from hyper_parallel.config.validation import ConfigFieldError
from hyper_parallel.trainer import trainer_config
from hyper_parallel.trainer.config import HyperTrainerConfig
from hyper_parallel.trainer.config_parser import load_config
from hyper_parallel.trainer.hyper_trainer import HyperTrainer
from hyper_parallel.utils.docstrings import field_docstrings

REPO = Path(__file__).resolve().parents[4]
EXAMPLES = sorted((REPO / "examples" / "yaml").glob("*.yaml"))
TABLE = load_table(REPO / "codegen" / "field_table.yaml")
SECTIONS = [
    configs.ModelConfig,
    configs.TrainingConfig,
    configs.ParallelismConfig,
    configs.ActivationCheckpointConfig,
    configs.CompileConfig,
    configs.CommConfig,
    configs.DebugConfig,
    configs.ValidationConfig,
]


def _get(obj, path):
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _set_paths(tree, prefix=""):
    """Dotted paths of every key a YAML document sets (leaves and sections)."""
    for key, value in (tree or {}).items():
        path = f"{prefix}{key}"
        yield path
        if isinstance(value, dict) and path != "model.config_overrides":
            yield from _set_paths(value, path + ".")


# ------------------------------------------------------------------ defaults across the worlds


def test_empty_yaml_converts_to_the_default_config():
    legacy = load_config(HyperTrainerConfig, "")
    assert legacy_to_trainer_config(legacy) == HyperTrainer.Config()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_fields_an_example_leaves_unset_convert_to_the_new_defaults(example):
    text = example.read_text()
    stated = set(_set_paths(yaml.safe_load(text)))
    converted = legacy_to_trainer_config(load_config(HyperTrainerConfig, text))
    defaults = HyperTrainer.Config()
    checked = 0
    for row in TABLE.rows:
        sources = set(row.legacy.values()) | set(row.reads.values())
        if not row.new or sources & stated:
            continue
        for path in row.new.values():
            assert _get(converted, path) == _get(defaults, path), (
                f"{example.name} leaves {sorted(row.legacy.values())} unset, but {path} converts "
                f"to {_get(converted, path)!r} instead of the default {_get(defaults, path)!r}"
            )
            checked += 1
    assert checked > 20  # the examples leave plenty unset; the check must not be vacuous


def test_a_recipe_stating_only_what_the_yaml_states_equals_the_conversion():
    # train_qwen3_5_tp2.yaml written as a recipe: a default Config plus its stated values.
    text = (REPO / "examples" / "yaml" / "train_qwen3_5_tp2.yaml").read_text()
    config = HyperTrainer.Config()
    config.model.config_overrides = {"flavor": "debugmodel"}
    config.training.seq_len = 128
    config.dataloader.shuffle = False
    config.dataloader.pin_memory = False
    config.training.steps = 10
    config.training.global_batch_size = 4
    config.training.local_batch_size = 2
    config.debug.seed = 1234
    config.comm.backend = "gloo"
    config.parallelism.tensor_parallel_degree = 2
    config.parallelism.data_parallel_shard_degree = -1
    config.optimizer.lr = 1.0e-3
    config.lr_scheduler.lr_min = 1.0e-4
    config.lr_scheduler.warmup_steps = 2  # ceil(10 x 0.2)
    config.lr_scheduler.decay_style = "constant"
    config.training.max_norm = 0.0
    config.activation_checkpoint.mode = "selective"
    config.checkpoint.folder = "outputs/qwen3_5_tp2"
    config.checkpoint.interval = 0
    config.checkpoint.export_hf = False
    config.metrics.log_freq = 1
    config.metrics.report_throughput = True
    config.metrics.enable_memory_monitor = True
    config.metrics.memory_log_freq = 5
    config.debug.deterministic = True
    assert legacy_to_trainer_config(load_config(HyperTrainerConfig, text)) == config


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("cls", "kwargs", "field", "words"),
    [
        (configs.ParallelismConfig, {"tensor_parallel_degree": -2}, "tensor_parallel_degree", ">= 1"),
        (configs.ParallelismConfig, {"data_parallel_shard_degree": 0}, "data_parallel_shard_degree",
         "or -1"),
        (configs.ParallelismConfig, {"reshard_after_forward": "yes"}, "reshard_after_forward",
         "true or false"),
        (configs.TrainingConfig, {"steps": 0}, "steps", ">= 1"),
        (configs.TrainingConfig, {"steps": True}, "steps", "integer"),
        (configs.TrainingConfig, {"steps": 2.5}, "steps", "integer"),
        (configs.TrainingConfig, {"seq_len": 1}, "seq_len", ">= 2"),
        (configs.TrainingConfig, {"local_batch_size": 4, "global_batch_size": 2},
         "global_batch_size", "local_batch_size"),
        (configs.TrainingConfig, {"mixed_precision_param": "bf16"}, "mixed_precision_param",
         "bfloat16"),
        (configs.TrainingConfig, {"max_norm": float("nan")}, "max_norm", "number"),
        (configs.TrainingConfig, {"freeze_modules": ["ok", ""]}, "freeze_modules", "empty"),
        (configs.TrainingConfig, {"freeze_modules": "embed"}, "freeze_modules", "list"),
        (configs.ActivationCheckpointConfig, {"mode": "partial"}, "mode", "selective"),
        (configs.CompileConfig, {"components": ["model", "optimizer"]}, "components", "among"),
        (configs.CommConfig, {"backend": "tcp"}, "backend", "gloo"),
        (configs.CommConfig, {"local_rank": -1}, "local_rank", ">= 0"),
        (configs.DebugConfig, {"seed": -1}, "seed", ">= 0"),
        (configs.ValidationConfig, {"freq": 5}, "dataset_path", "required"),
        (configs.ValidationConfig, {"dataset_path": "v.jsonl"}, "dataset_path", "never be used"),
        (configs.ModelConfig, {"name": ""}, "name", "empty"),
        (configs.ModelConfig, {"weights_path": ""}, "weights_path", "None"),
        (configs.ModelConfig, {"hidden_size": 0}, "hidden_size", ">= 1"),
        (configs.ModelConfig, {"config_overrides": {1: 2}}, "config_overrides", "string keys"),
    ],
)
def test_invalid_values_raise_in_post_init(cls, kwargs, field, words):
    with pytest.raises(ConfigFieldError) as info:
        cls(**kwargs)
    assert info.value.field == field
    assert info.value.owner == cls.__qualname__
    assert str(info.value).startswith(f"{cls.__qualname__}.{field}=")
    assert words in str(info.value)


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (configs.ParallelismConfig, {"data_parallel_shard_degree": -1}),
        (configs.ParallelismConfig, {"data_parallel_shard_degree": 4, "tensor_parallel_degree": 2}),
        (configs.CommConfig, {"backend": "cpu:gloo,cuda:nccl"}),
        (configs.CommConfig, {"backend": "hccl"}),
        (configs.TrainingConfig, {"max_norm": 1, "mixed_precision_output": "bfloat16"}),
        (configs.ValidationConfig, {"freq": 5, "dataset_path": "v.jsonl"}),
        (configs.CompileConfig, {"enable": True, "components": ["model"]}),
    ],
)
def test_valid_values_are_accepted(cls, kwargs):
    config = cls(**kwargs)
    for name, value in kwargs.items():
        assert getattr(config, name) == value


def test_post_init_runs_again_on_replace():
    config = configs.TrainingConfig(steps=5)
    with pytest.raises(ConfigFieldError, match="TrainingConfig.steps=-5"):
        dataclasses.replace(config, steps=-5)


def test_root_config_checks_its_slots():
    with pytest.raises(ConfigFieldError, match=r"HyperTrainer\.Config\.training=.*TrainingConfig"):
        HyperTrainer.Config(training=configs.DebugConfig())
    with pytest.raises(ConfigFieldError, match="dump_folder"):
        HyperTrainer.Config(dump_folder="")
    with pytest.raises(ConfigFieldError, match="model_spec"):
        HyperTrainer.Config(model_spec="qwen3_5")


# ------------------------------------------------------------------ the Config rules


@pytest.mark.parametrize("cls", SECTIONS, ids=lambda c: c.__name__)
def test_sections_are_kw_only_slotted_and_documented(cls):
    assert dataclasses.is_dataclass(cls)
    assert "__slots__" in cls.__dict__
    assert all(f.kw_only for f in dataclasses.fields(cls))
    with pytest.raises(TypeError):
        cls(1)  # positional
    with pytest.raises(AttributeError):
        cls().misspelt_field = 1  # slots: a typo is an error, not a silent new attribute
    docs = field_docstrings(cls)
    undocumented = [f.name for f in dataclasses.fields(cls) if not docs.get(f.name)]
    assert not undocumented, f"{cls.__name__}: fields without a docstring: {undocumented}"


def test_list_defaults_are_not_shared():
    a, b = configs.CompileConfig(), configs.CompileConfig()
    a.components.append("x")
    assert b.components == ["model", "loss"]


def test_model_spec_is_hidden_from_the_cli():
    tyro = pytest.importorskip("tyro")
    hint = typing.get_type_hints(HyperTrainer.Config, include_extras=True)["model_spec"]
    assert typing.get_origin(hint) is typing.Annotated
    assert tyro.conf.Suppress in typing.get_args(hint)[1:]


def test_root_docs_for_every_field():
    docs = field_docstrings(HyperTrainer.Config)
    assert {f.name for f in dataclasses.fields(HyperTrainer.Config)} <= set(docs)


# ------------------------------------------------------------------ build()


def test_the_root_is_the_engines_config():
    """One class named ``HyperTrainer``: the engine, whatever the import path; its ``Config`` is
    the generated root, which reads as ``HyperTrainer.Config`` and is owned by the engine."""
    from hyper_parallel.trainer import HyperTrainer as from_package

    assert trainer_config.HyperTrainer is HyperTrainer and from_package is HyperTrainer
    assert HyperTrainer.Config is trainer_config.RootConfig
    assert HyperTrainer.Config._owner is HyperTrainer
    with pytest.raises(AttributeError, match="has no attribute 'Trainer'"):
        trainer_config.Trainer  # noqa: B018 -- only HyperTrainer is answered lazily


def test_the_legacy_root_has_a_public_name_of_its_own():
    from hyper_parallel.trainer.config import LegacyConfig

    assert LegacyConfig is HyperTrainerConfig


def test_the_owner_is_imported_when_first_read():
    """Importing the generated module does not import the engine's; reading ``_owner`` (what
    ``build()`` does) imports it and gives the engine class."""
    code = (
        "import sys\n"
        "from hyper_parallel.trainer.trainer_config import RootConfig\n"
        "engine = 'hyper_parallel.trainer.hyper_trainer'\n"
        "assert engine not in sys.modules\n"
        "owner = RootConfig._owner\n"
        "assert owner is sys.modules[engine].HyperTrainer, owner\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_build_constructs_a_subclass_of_the_engine():
    """``Configurable``'s rule: a subclass that declares no Config gets its own, which builds the
    subclass (never the engine), with a copy of the config and the runtime objects."""

    class Recording(HyperTrainer):
        def __init__(self, config, **runtime_objects):
            self.config = config
            self.runtime_objects = runtime_objects

    assert Recording.Config is not HyperTrainer.Config
    assert issubclass(Recording.Config, HyperTrainer.Config)
    config = Recording.Config(debug=configs.DebugConfig(seed=3))
    config.training.steps = 7
    trainer = config.build(device="cpu")
    assert type(trainer) is Recording and trainer.runtime_objects == {"device": "cpu"}
    assert trainer.config == config and trainer.config is not config  # a copy, per Configurable
    assert trainer.config.debug.seed == 3
    with pytest.raises(ValueError, match="fields of"):
        config.build(training=None)  # Configurable's rule: settings belong in the Config


def test_the_engine_takes_no_runtime_objects():
    with pytest.raises(TypeError, match="takes no runtime objects"):
        HyperTrainer.Config().build(device="cpu")


def test_generated_modules_import_no_framework():
    code = (
        "import sys\n"
        "import hyper_parallel.config.configs, hyper_parallel.config.legacy_adapter\n"
        "import hyper_parallel.config.transforms, hyper_parallel.config.validation\n"
        "bad = [m for m in ('torch', 'tyro', 'mindspore') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
