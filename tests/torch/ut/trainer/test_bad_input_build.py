"""Configuration errors found while building: a ``ConfigError`` naming the path's own fields.

Each case runs on both entry paths. The recipe path (``HyperTrainer.Config``) names the recipe
fields (``parallelism.tensor_parallel_degree``, ``training.global_batch_size``, ...); the legacy
path (``LLMTrainer`` from a YAML) names the legacy keys (``train.accelerator.tp``,
``train.global_batch_size``, ...), rewritten in one place (``llm_trainer.legacy_config_error``).
Build-only: a trainer is constructed until the error, or -- for what needs a real world size or
heavy building -- the validating function the engine calls is called directly. Three
subprocesses check the command line: exit code 2 and no traceback.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from hyper_parallel.components.lr_scheduler import LRSchedulersContainer
from hyper_parallel.components.optimizer import OptimizersContainer
from hyper_parallel.config.configs import ParallelismConfig, TrainingConfig
from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
from hyper_parallel.config.validation import MAX_INT, ConfigFieldError, check_float, check_int
from hyper_parallel.models.qwen3_5.model_section import check_config_overrides
from hyper_parallel.models.qwen3_5_v2.config_registry import qwen3_5_v2_debugmodel
from hyper_parallel.models.spec import discover_model_spec, resolve_model_spec
from hyper_parallel.protocols.lazy import LazyRef
from hyper_parallel.runtime.parallel_dims import ParallelDims
from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig, parse_args
from hyper_parallel.trainer.llm_trainer import LLMTrainer, legacy_config_error, legacy_path

REPO = Path(__file__).resolve().parents[4]
DEBUG_YAML = REPO / "examples" / "yaml" / "train_qwen3_5_debug.yaml"
RECIPE = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel"]


def legacy(*overrides: str) -> HyperTrainerConfig:
    return parse_args(HyperTrainerConfig, [str(DEBUG_YAML), "--train.max_steps=2", *overrides])


def converted(*overrides: str):
    """The recipe the legacy front door hands to the engine."""
    return legacy_to_trainer_config(legacy(*overrides))


def recipe():
    config = qwen3_5_v2_debugmodel()
    config.training.steps = 2
    return config


def in_legacy_terms(error: ConfigError) -> ConfigError:
    """What ``LLMTrainer`` raises for an error the engine raised (its one translation)."""
    return legacy_config_error(error)


def assert_no_recipe_names(message: str, *names: str) -> None:
    """``names`` (recipe fields) appear at most in the ``(recipe field: ...)`` hint."""
    body = message.split(" (recipe field: ")[0]
    for name in names:
        assert re.search(rf"(?<![\w.]){re.escape(name)}", body) is None, message


# ------------------------------------------------------------------ parallel layout vs world


def test_tp_not_dividing_the_world_names_the_tp_field():
    with pytest.raises(ConfigError) as info:
        ParallelDims.from_parallelism(ParallelismConfig(tensor_parallel_degree=4), world_size=2)
    assert info.value.path == "parallelism.tensor_parallel_degree"
    assert "4 does not divide the world size 2" in str(info.value)

    with pytest.raises(ConfigError) as info:
        ParallelDims.from_parallelism(converted("--train.accelerator.tp=4").parallelism, 2)
    legacy_error = in_legacy_terms(info.value)
    assert legacy_error.path == "train.accelerator.tp"
    assert str(legacy_error).startswith("train.accelerator.tp: 4 does not divide the world size 2")
    assert "(recipe field: parallelism.tensor_parallel_degree)" in str(legacy_error)
    assert_no_recipe_names(str(legacy_error), "parallelism.")


def test_degrees_that_do_not_multiply_to_the_world_name_the_shard_degree():
    # tp=2 divides 4, but 2 processes would be needed: the FSDP degree is the one to infer.
    with pytest.raises(ConfigError) as info:
        ParallelDims.from_parallelism(ParallelismConfig(tensor_parallel_degree=2), world_size=4)
    assert info.value.path == "parallelism.data_parallel_shard_degree"
    assert "parallelism.data_parallel_shard_degree=-1" in str(info.value)

    with pytest.raises(ConfigError) as info:
        ParallelDims.from_parallelism(converted("--train.accelerator.tp=2").parallelism, 4)
    legacy_error = in_legacy_terms(info.value)
    assert legacy_error.path == "train.accelerator.dp_shard"  # a value-preserving transform row
    assert "train.accelerator.dp_shard=-1" in str(legacy_error)
    assert "train.accelerator.tp=2" in str(legacy_error)
    assert_no_recipe_names(str(legacy_error), "parallelism.")


def test_a_pipeline_degree_that_does_not_fit_names_its_field_in_both_worlds():
    with pytest.raises(ConfigError) as info:
        ParallelDims.from_parallelism(ParallelismConfig(pipeline_parallel_degree=3), world_size=2)
    assert info.value.path == "parallelism.pipeline_parallel_degree"
    assert "does not divide the world size 2" in str(info.value)
    assert "train.accelerator" not in str(info.value)
    assert in_legacy_terms(info.value).path == "train.accelerator.pp"


def test_pipeline_micro_batches_must_divide_the_rows_of_a_step():
    dims = ParallelDims.from_parallelism(
        ParallelismConfig(pipeline_parallel_degree=2, num_pp_microbatches=3), world_size=2)
    with pytest.raises(ConfigError) as info:
        dims.validate_training(TrainingConfig(global_batch_size=4, local_batch_size=2))
    assert info.value.path == "parallelism.num_pp_microbatches"
    assert "3 does not divide the 4 rows of a step" in str(info.value)
    assert "[1, 2, 4]" in str(info.value)
    assert in_legacy_terms(info.value).path == "train.accelerator.pp_micro_batch_num"


def test_direct_parallel_dims_keep_their_own_names():
    with pytest.raises(ValueError, match=r"world_size\(8\).*Set dp_shard=-1") as info:
        ParallelDims(dp_shard=2, tp=2, world_size=8)
    assert not isinstance(info.value, ConfigError)


# ------------------------------------------------------------------ batch and sequence layout


def test_global_batch_not_divisible_by_micro_batch_times_dp():
    dims = ParallelDims.from_parallelism(ParallelismConfig(data_parallel_shard_degree=2), 2)
    with pytest.raises(ConfigError) as info:
        dims.validate_training(TrainingConfig(global_batch_size=6, local_batch_size=2))
    assert info.value.path == "training.global_batch_size"
    message = str(info.value)
    assert "6 is not divisible by training.local_batch_size x the data-parallel size" in message
    assert "2 x 2 = 4" in message and "e.g. 4 or 8" in message
    assert "train." not in message

    legacy_config = converted(
        "--train.accelerator.dp_shard=2",
        "--train.global_batch_size=6",
        "--train.micro_batch_size=2",
    )
    dims = ParallelDims.from_parallelism(legacy_config.parallelism, 2)
    with pytest.raises(ConfigError) as info:
        dims.validate_training(legacy_config.training)
    legacy_error = in_legacy_terms(info.value)
    assert legacy_error.path == "train.global_batch_size"
    assert "train.micro_batch_size" in str(legacy_error)
    assert_no_recipe_names(str(legacy_error), "training.")
    # A divisible batch passes.
    dims.validate_training(TrainingConfig(global_batch_size=8, local_batch_size=2))


def test_seq_len_not_divisible_by_tp():
    dims = ParallelDims.from_parallelism(ParallelismConfig(tensor_parallel_degree=2), 2)
    with pytest.raises(ConfigError) as info:
        dims.validate_training(TrainingConfig(seq_len=127))
    assert info.value.path == "training.seq_len"
    assert "data.max_seq_len" not in str(info.value)
    legacy_error = in_legacy_terms(info.value)
    assert legacy_error.path == "data.max_seq_len"
    assert "train.accelerator.tp" in str(legacy_error)


def test_model_heads_not_divisible_by_tp_name_the_tp_field():
    model = SimpleNamespace(config=SimpleNamespace(num_attention_heads=3))
    with pytest.raises(ConfigError) as info:
        ParallelDims(tp=2, world_size=2).validate_against_model(model, seq_len=64)
    assert info.value.path == "parallelism.tensor_parallel_degree"
    assert in_legacy_terms(info.value).path == "train.accelerator.tp"


def test_steps_times_batch_beyond_a_dataset_index():
    dims = ParallelDims.from_parallelism(ParallelismConfig(), 1)
    with pytest.raises(ConfigError) as info:
        dims.validate_training(TrainingConfig(steps=MAX_INT, global_batch_size=2**20))
    assert info.value.path == "training.steps"
    assert in_legacy_terms(info.value).path == "train.max_steps"


# ------------------------------------------------------------------ model.name


def test_unknown_model_name_recipe_path():
    config = recipe()
    config.model_spec = None
    config.model.name = "qwen3_5_v3"
    with pytest.raises(ConfigError) as info:
        config.build()
    assert info.value.path == "model.name"
    assert "did you mean 'qwen3_5_v2'" in str(info.value)
    assert "Known models: " in str(info.value) and "qwen3_5" in str(info.value)


def test_unknown_model_name_legacy_path():
    with pytest.raises(ConfigError) as info:
        LLMTrainer(legacy("--model.name=qwen3_6"))
    assert info.value.path == "model.name"
    assert "did you mean 'qwen3_5'" in str(info.value)


def test_model_name_is_checked_even_with_a_model_spec():
    spec = recipe().model_spec
    # The given spec wins, its hooks resolved from their import paths (the model Config is its).
    for name in (spec.name, "qwen3_5"):  # its own name, another registered name
        got = resolve_model_spec(name, spec)
        assert got == spec and got.model is spec.model
        assert not isinstance(got.parallelize_fn, LazyRef)
    with pytest.raises(ConfigError) as info:
        resolve_model_spec("qwen3_6", spec)
    assert info.value.path == "model.name" and "did you mean 'qwen3_5'" in str(info.value)
    assert resolve_model_spec("qwen3_5").name == "qwen3_5"


def test_a_module_path_that_registers_nothing():
    with pytest.raises(ConfigError, match="registered no spec under that name") as info:
        discover_model_spec("hyper_parallel.models.qwen3_5.spec")
    assert info.value.path == "model.name"


# ------------------------------------------------------------------ model.config_overrides


def test_override_typo_recipe_path():
    config = recipe()
    config.model.config_overrides = {"flavor": "debugmodel", "num_hiden_layers": 2}
    with pytest.raises(ConfigError) as info:
        config.build()
    assert info.value.path == "model.config_overrides"
    assert "unknown key 'num_hiden_layers' (did you mean 'num_hidden_layers'?)" in str(info.value)


def test_override_typo_legacy_path():
    # The legacy parser may refuse it itself (with the file location) or the engine does.
    with pytest.raises(ConfigError) as info:
        LLMTrainer(legacy("--model.config_overrides={flavor: debugmodel, num_hiden_layers: 2}"))
    assert (info.value.path or "").startswith("model.config_overrides")
    assert "did you mean 'num_hidden_layers'" in str(info.value)


def test_check_config_overrides_is_the_one_rule():
    check_config_overrides(None)
    check_config_overrides({"flavor": "2b", "head_dim": 64})
    with pytest.raises(ConfigError) as info:
        check_config_overrides({"flavor": "9B"}, location="old.yaml:3")
    assert info.value.path == "model.config_overrides.flavor"
    assert info.value.location == "old.yaml:3"
    assert "did you mean '9b'" in str(info.value)
    with pytest.raises(ConfigError, match="unknown key 'rope_thta'.*did you mean 'rope_theta'"):
        check_config_overrides({"rope_thta": 1.0})


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"vocab_size": 10**30}, "vocab_size must be a positive int <= 2147483647"),
        ({"rope_theta": math.inf}, "rope_theta must be a finite number"),
        ({"rms_norm_eps": math.nan}, "rms_norm_eps must be a finite number"),
    ],
)
def test_override_values_that_cannot_train(overrides, words):
    config = recipe()
    config.model.config_overrides = {"flavor": "debugmodel", **overrides}
    with pytest.raises(ConfigError) as info:
        config.build()
    assert info.value.path == "model.config_overrides" and words in str(info.value)


def test_universal_model_field_is_named_as_such():
    config = recipe()
    config.model.num_attention_heads = 3  # the debug flavor has 2 KV heads
    with pytest.raises(ConfigError) as info:
        config.build()
    assert info.value.path == "model.num_attention_heads"
    assert "must be a multiple of num_key_value_heads" in str(info.value)


# ------------------------------------------------------------------ numbers that cannot train


def _recipe_cli_error(argument: str, capsys) -> tuple[str | None, str]:
    """``(path, message)`` of the recipe command line's refusal of ``argument``."""
    from hyper_parallel.config.manager import ConfigManager

    try:
        ConfigManager().parse_args([*RECIPE, argument])
    except ConfigError as exc:
        return exc.path, str(exc)
    except SystemExit as exc:  # tyro's own report
        assert exc.code == 2
        return None, capsys.readouterr().err
    raise AssertionError(f"{argument} was accepted")


@pytest.mark.parametrize(
    "recipe_arg, field, legacy_arg, legacy_key",
    [
        (f"--training.steps={10**30}", "steps", f"--train.max_steps={10**30}", "train.max_steps"),
        (
            f"--training.global_batch_size={2**63}",
            "global_batch_size",
            f"--train.global_batch_size={2**63}",
            "train.global_batch_size",
        ),
        ("--optimizer.lr=inf", "lr", "--train.optimizer.lr=inf", "train.optimizer.lr"),
        (
            "--training.max_norm=inf",
            "max_norm",
            "--train.optimizer.max_grad_norm=inf",
            "train.optimizer.max_grad_norm",
        ),
    ],
)
def test_values_that_cannot_train_are_refused_up_front(
    recipe_arg, field, legacy_arg, legacy_key, capsys
):
    path, message = _recipe_cli_error(recipe_arg, capsys)
    assert path is None or path.endswith(f".{field}")
    assert field in message and "train." not in message
    with pytest.raises(ConfigError) as info:
        LLMTrainer(legacy(legacy_arg))
    assert info.value.path == legacy_key


def test_check_float_refuses_non_finite_by_default():
    with pytest.raises(ConfigFieldError, match="max_norm=inf: must be a finite number"):
        TrainingConfig(max_norm=math.inf)
    with pytest.raises(ConfigFieldError, match="must be a number"):
        TrainingConfig(max_norm=math.nan)

    class Holder:
        x = math.inf

    check_float(Holder(), "x", finite=False)  # a field may opt out
    Holder.x = 10**400  # an int too large for a float is not finite either
    with pytest.raises(ConfigFieldError, match="finite"):
        check_float(Holder(), "x")


def test_check_int_bounds_every_integer():
    TrainingConfig(steps=MAX_INT)
    with pytest.raises(ConfigFieldError, match=r"steps=.*must be <= 9007199254740991"):
        TrainingConfig(steps=MAX_INT + 1)

    class Holder:
        x = -(2**60)

    with pytest.raises(ConfigFieldError, match="must be >= "):
        check_int(Holder(), "x")
    check_int(Holder(), "x", minimum=-(2**61))  # an explicit bound wins


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"lr": math.inf}, "lr=inf: must be a finite number >= 0"),
        ({"lr": math.nan}, "lr=nan: must be a finite number >= 0"),
        ({"eps": math.inf}, "eps=inf: must be a finite number > 0"),
        ({"weight_decay": math.inf}, "weight_decay=inf: must be a finite number"),
        ({"betas": (0.9, math.nan)}, "betas=(0.9, nan): must be two numbers in [0, 1)"),
    ],
)
def test_optimizer_config_refuses_non_finite(kwargs, words):
    with pytest.raises(ValueError) as info:
        OptimizersContainer.Config(**kwargs)
    assert str(info.value).startswith("OptimizersContainer.Config.") and words in str(info.value)


def test_component_integers_are_bounded_too():
    from hyper_parallel.components.profiler import Profiler

    with pytest.raises(ValueError, match=r"Profiler.Config.active=.*must be an integer <= "):
        Profiler.Config(active=2**60)
    # A warmup longer than the run is clamped, so it is not bounded (see the Config).
    LRSchedulersContainer.Config(warmup_steps=2**60)
    with pytest.raises(ValueError, match="lr_min=inf: must be a finite number"):
        LRSchedulersContainer.Config(lr_min=math.inf)


# ------------------------------------------------------------------ lr_min above lr


def _schedule(optimizer_config, scheduler_config):
    optimizers = optimizer_config.build(model_parts=[torch.nn.Linear(2, 2)])
    return scheduler_config.build(optimizers=optimizers, training_steps=10)


def test_lr_min_above_lr_recipe_path():
    with pytest.raises(ConfigError) as info:
        _schedule(OptimizersContainer.Config(lr=1e-3), LRSchedulersContainer.Config(lr_min=0.1))
    assert info.value.path == "lr_scheduler.lr_min"
    assert "optimizer.lr=0.001" in str(info.value)
    # The cheap up-front form, and what it lets through.
    with pytest.raises(ConfigError):
        LRSchedulersContainer.Config(lr_min=0.1).check_lr_min(1e-3)
    LRSchedulersContainer.Config(lr_min=0.1, decay_style="constant").check_lr_min(1e-3)
    LRSchedulersContainer.Config(lr_min=0.1).check_lr_min(0.0)  # lr 0: no floor
    LRSchedulersContainer.Config(lr_min=1e-3).check_lr_min(1e-3)


def test_lr_min_above_lr_legacy_path():
    # The legacy parser may refuse it itself; past it (a config built in code), the engine does.
    args = legacy()
    args.train.optimizer.lr_min = 0.1
    config = legacy_to_trainer_config(args)
    with pytest.raises(ConfigError) as info:
        _schedule(config.optimizer, config.lr_scheduler)
    legacy_error = in_legacy_terms(info.value)
    assert legacy_error.path == "train.optimizer.lr_min"
    assert "train.optimizer.lr=0.001" in str(legacy_error)
    assert "train.optimizer.lr_decay_style=constant" in str(legacy_error)
    assert_no_recipe_names(str(legacy_error), "optimizer.", "lr_scheduler.")


# ------------------------------------------------------------------ the translation itself


def test_translation_of_fields_without_a_same_valued_legacy_key():
    error = ConfigError(
        "5 is too many (lr_scheduler.warmup_steps)", path="lr_scheduler.warmup_steps"
    )
    legacy_error = legacy_config_error(error)
    # warmup steps are not the legacy ratio: the recipe name stays, its source is named.
    assert legacy_error.path == "train.optimizer.lr_warmup_ratio"
    assert "lr_scheduler.warmup_steps (from train.optimizer.lr_warmup_ratio)" in str(legacy_error)
    untouched = ConfigError("no such directory", path="hf_assets_path")
    assert legacy_config_error(untouched) is untouched
    assert legacy_path("model.config_overrides.flavor") == "model.config_overrides.flavor"
    # One transform row owns both fields: each names the legacy key that holds its value.
    assert legacy_path("model.config_overrides") == "model.config_overrides"
    assert legacy_path("model.attn_mask_type") == "model.config_overrides.attn_mask_type"
    fix = legacy_config_error(ConfigError("set model.attn_mask_type to block_causal", path="x"))
    assert "set model.config_overrides.attn_mask_type to block_causal" in str(fix)
    assert legacy_path("parallelism.data_parallel_shard_degree") == "train.accelerator.dp_shard"
    assert legacy_path("hf_assets_path") is None


# ------------------------------------------------------------------ the command line: exit 2


def _train(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HYPER_PARALLEL_DISABLE_TQDM": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "hyper_parallel.train", *args],
        check=False,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _assert_config_exit(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    error_lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(error_lines) == 1, proc.stderr[-3000:]
    for word in words:
        assert word in error_lines[0], error_lines[0]


def test_cli_legacy_tp_not_dividing_the_world_exits_2(tmp_path):
    # Raised after the process group exists (ParallelDims), in legacy terms.
    proc = _train([str(DEBUG_YAML), "--train.max_steps=2", "--train.accelerator.tp=2"], tmp_path)
    _assert_config_exit(
        proc,
        "error: train.accelerator.tp: 2 does not divide the world size 1",
        "(recipe field: parallelism.tensor_parallel_degree)",
    )


def test_cli_recipe_override_typo_exits_2(tmp_path):
    # Raised by the model spec's update_from_config, the engine's first step.
    proc = _train(
        [
            *RECIPE,
            "--training.steps=2",
            "--model.config_overrides={flavor: debugmodel, num_hiden_layers: 2}",
        ],
        tmp_path,
    )
    _assert_config_exit(
        proc,
        "error: model.config_overrides: unknown key 'num_hiden_layers'",
        "did you mean 'num_hidden_layers'",
    )


def test_cli_recipe_lr_min_above_lr_exits_2(tmp_path):
    # Raised late (the LR scheduler, after the model is built and parallelized).
    proc = _train([*RECIPE, "--training.steps=2", "--lr_scheduler.lr_min=0.1"], tmp_path)
    _assert_config_exit(proc, "error: lr_scheduler.lr_min: 0.1 is above", "optimizer.lr=0.001")


# ------------------------------------------------------------------ data


def _preset_file(tmp_path: Path, batches: int) -> Path:
    path = tmp_path / "batches.pt"
    ids = torch.arange(2 * 16).reshape(2, 16) % 100
    torch.save([{"input_ids": ids.clone()} for _ in range(batches)], path)
    return path


def test_a_replay_file_too_short_for_the_run_names_both_numbers(tmp_path):
    """preset_pt holding 3 batches of 2 samples for 2 steps x 4 samples: a clear error before
    training, never a run that quietly stops early (both entries, in their own names)."""
    path = _preset_file(tmp_path, batches=3)
    args = ("--data.type=preset_pt", f"--data.train_path={path}", "--data.max_seq_len=16",
            "--train.global_batch_size=4", "--train.micro_batch_size=2")
    with pytest.raises(ConfigError) as info:
        LLMTrainer(legacy(*args))
    message = str(info.value)
    assert info.value.path == "data.train_path"
    assert "holds 6 samples (3 batches)" in message
    assert "train.max_steps=2 x train.global_batch_size=4 = 8 samples" in message
    assert_no_recipe_names(message, "training.", "dataloader.")

    config = converted(*args)
    with pytest.raises(ConfigError) as info:
        config.build()
    assert info.value.path == "dataloader.dataset_path"
    assert "training.steps=2 x training.global_batch_size=4" in str(info.value)


def test_a_missing_data_file_is_a_config_error_in_the_entry_s_names(tmp_path):
    args = ("--data.type=jsonl", f"--data.train_path={tmp_path / 'nope.jsonl'}")
    with pytest.raises(ConfigError, match=r"data\.train_path: .*nope\.jsonl does not exist"):
        LLMTrainer(legacy(*args))
    with pytest.raises(ConfigError, match=r"dataloader\.dataset_path: .*nope\.jsonl does not exist"):
        converted(*args).build()


# ------------------------------------------------------------------ kernels


def test_forced_fla_kernels_on_cpu_fail_at_build_on_both_entries():
    # The device is known once the model is materialized: the error comes before any step.
    config = recipe()
    config.model.kernels = "fla"
    with pytest.raises(ConfigError, match=r"'fla' runs fla-core's CUDA kernels") as info:
        config.build()
    assert info.value.path == "model.kernels"

    with pytest.raises(ConfigError, match=r"'fla' runs fla-core's CUDA kernels") as info:
        LLMTrainer(legacy("--model.kernels=fla"))
    assert info.value.path == "model.kernels"
