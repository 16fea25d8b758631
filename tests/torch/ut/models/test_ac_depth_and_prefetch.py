"""Keys of the later legacy snapshots, honoured: activation checkpointing on part of the stack
(``train.gradient_checkpointing.num_layers`` -> ``activation_checkpoint.num_layers``) and FSDP2's
explicit prefetching (``train.accelerator.fsdp_forward_prefetch`` / ``_backward_prefetch`` ->
``parallelism.fsdp_forward_prefetch`` / ``_backward_prefetch``).

In-process: the depth rule, the wrapped layers of a model and of a pipeline stage, the
refusals in both schemas and in ``parallelize`` (before the model is touched), the legacy front
door naming the legacy key, and the prefetch lists of the MoE model's FSDP units (one rank with
mixed precision, which wraps in FSDP). The two-rank runs -- the prefetch lists moving, the same
losses bit for bit -- are the field probes and the layout tests (``test_legacy_training``,
``test_moe_layouts``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

from hyper_parallel.config.configs import (
    ActivationCheckpointConfig,
    CompileConfig,
    ParallelismConfig,
    TrainingConfig,
)
from hyper_parallel.models.pipelining import STAGE_ATTR, stage_position
from hyper_parallel.models.qwen3_5.activation_checkpoint import (
    ac_depth,
    apply_ac,
    checkpoint_depth,
    checkpointed_layers,
)
from hyper_parallel.models.qwen3_5_v2 import flavor_config, parallelize_qwen3_5_v2
from hyper_parallel.trainer.legacy_train_sections import (
    AcceleratorConfig,
    GradientCheckpointingConfig,
)
from hyper_parallel.utils.errors import ConfigError, ConfigFieldError
from hyper_parallel.utils.field_problems import ConfigValueError


def meta_model(layers: int = 4):
    with torch.device("meta"):
        return dataclasses.replace(flavor_config("debugmodel"), num_hidden_layers=layers).build()


# ====================================================================== the depth rule
@pytest.mark.parametrize(
    "num_layers, layers, stage, num_stages, depth",
    [
        (None, 4, 0, 1, 4),  # unset: every layer
        (2, 4, 0, 1, 2),  # the first N
        (0, 4, 0, 1, 0),  # none
        (9, 4, 0, 1, 4),  # more than the stage has: all of them
        (1, 3, 1, 2, 1),  # a number is the same for every stage
        ([3, 1], 3, 0, 2, 3),  # a list: one count per stage
        ([3, 1], 3, 1, 2, 1),
        ([5, 0, 2, 0], 2, 0, 4, 2),
    ],
)
def test_checkpoint_depth(num_layers, layers, stage, num_stages, depth):
    assert checkpoint_depth(num_layers, layers, stage=stage, num_stages=num_stages) == depth


@pytest.mark.parametrize(
    "num_layers, num_stages, match",
    [
        ([1, 2], 1, r"\[1, 2\] has 2 entries but the run has 1 pipeline stage"),
        ([1], 2, r"has 1 entries but the run has 2 pipeline stages"),
        (-1, 1, r"counts of layers must be integers >= 0"),
        ([1, -2], 2, r"counts of layers must be integers >= 0"),
    ],
)
def test_checkpoint_depth_refuses_what_cannot_apply(num_layers, num_stages, match):
    with pytest.raises(ConfigError, match=match) as info:
        checkpoint_depth(num_layers, 4, stage=num_stages - 1, num_stages=num_stages)
    assert info.value.path == "activation_checkpoint.num_layers"


# ====================================================================== the wrapped layers
@pytest.mark.parametrize(
    "mode, num_layers, wrapped",
    [("full", None, [0, 1, 2, 3]), ("full", 2, [0, 1]), ("selective", 1, [0]),
     ("full", 0, []), ("full", [3], [0, 1, 2]), ("off", None, [])],
)
def test_apply_ac_wraps_the_first_layers(mode, num_layers, wrapped):
    model = meta_model()
    apply_ac(model, mode, num_layers)
    assert checkpointed_layers(model) == wrapped
    kinds = [isinstance(layer, CheckpointWrapper) for layer in model.model.layers]
    assert kinds == [i in wrapped for i in range(4)]


def test_a_pipeline_stage_reads_its_own_entry():
    """A stage carries ``(index, number of stages)`` (set by ``pipeline_decoder_lm``) and takes
    its own entry of the list, counted from its first layer; indices are the whole model's."""
    from hyper_parallel.models.pipelining import cut_stage

    model = meta_model()
    assert stage_position(model) == (0, 1)
    units = list(model.pipeline_units())
    stage = cut_stage(model, [u for u in units if u in ("model.layers.2", "model.layers.3",
                                                         "model.norm", "lm_head")])
    setattr(stage, STAGE_ATTR, (1, 2))
    apply_ac(stage, "full", [2, 1])
    assert checkpointed_layers(stage) == [2]


def test_num_layers_needs_checkpointing_on():
    model = meta_model()
    with pytest.raises(ConfigError, match="only applies with activation checkpointing"):
        ac_depth(model, "off", 2)
    with pytest.raises(ConfigError, match="only applies with activation checkpointing"):
        apply_ac(model, "none", [1])
    assert checkpointed_layers(model) == []


# ====================================================================== both schemas
def test_the_legacy_schema_validates_num_layers():
    assert GradientCheckpointingConfig("full", [2, 0]).num_layers == [2, 0]
    with pytest.raises(ConfigValueError, match="num_layers") as info:
        GradientCheckpointingConfig("off", 2)
    assert "only applies with activation checkpointing" in str(info.value)
    for bad in (-1, [1, -1], [True], 1.5):
        with pytest.raises(ConfigValueError, match="num_layers"):
            GradientCheckpointingConfig("full", bad)


def test_the_new_section_validates_num_layers():
    assert ActivationCheckpointConfig(mode="full", num_layers=[1, 2]).num_layers == [1, 2]
    with pytest.raises(ConfigFieldError, match="only applies with activation checkpointing"):
        ActivationCheckpointConfig(mode="off", num_layers=1)
    with pytest.raises(ConfigFieldError, match="must be >= 0"):
        ActivationCheckpointConfig(mode="full", num_layers=[1, -1])
    with pytest.raises(ConfigFieldError, match="an integer or a list of integers"):
        ActivationCheckpointConfig(mode="full", num_layers="2")


def test_both_schemas_validate_the_prefetch_depths():
    assert AcceleratorConfig(fsdp_forward_prefetch=2, fsdp_backward_prefetch=1)
    with pytest.raises(ConfigValueError, match="fsdp_forward_prefetch"):
        AcceleratorConfig(fsdp_forward_prefetch=-1)
    with pytest.raises(ConfigValueError, match="needs reshard_after_forward"):
        AcceleratorConfig(fsdp_backward_prefetch=1, reshard_after_forward=False)
    assert AcceleratorConfig(fsdp_forward_prefetch=1, reshard_after_forward=False)
    with pytest.raises(ConfigFieldError, match="must be >= 0"):
        ParallelismConfig(fsdp_backward_prefetch=-1)
    with pytest.raises(ConfigFieldError, match="needs reshard_after_forward"):
        ParallelismConfig(fsdp_backward_prefetch=2, reshard_after_forward=False)


# ====================================================================== parallelize refusals
def _no_fsdp_dims():
    """One rank, no mesh axis FSDP would shard over (nothing asks for FSDP on one rank)."""
    from types import SimpleNamespace

    class Mesh:
        mesh_dim_names = ()

    return SimpleNamespace(tp=1, cp=1, pp=1, ep=1, dp_replicate=1, dp_shard=1, world_mesh=Mesh(),
                           get_mesh=lambda name: None)


def _sections(**parallelism):
    return {"training": TrainingConfig(), "parallelism": ParallelismConfig(**parallelism),
            "activation_checkpoint": ActivationCheckpointConfig(mode="full", num_layers=[1, 1]),
            "compile": CompileConfig()}


@pytest.mark.parametrize(
    "parallelism, path, match",
    [
        ({"fsdp_forward_prefetch": 1}, "parallelism.fsdp_forward_prefetch",
         "not wrapped in FSDP2 on this layout"),
        ({"fsdp_backward_prefetch": 2}, "parallelism.fsdp_backward_prefetch",
         "not wrapped in FSDP2 on this layout"),
        ({}, "activation_checkpoint.num_layers", "has 2 entries but the run has 1"),
    ],
)
def test_parallelize_refuses_before_touching_the_model(parallelism, path, match):
    model = meta_model()
    with pytest.raises(ConfigError, match=match) as info:
        parallelize_qwen3_5_v2(model, _no_fsdp_dims(), **_sections(**parallelism))
    assert info.value.path == path
    assert checkpointed_layers(model) == []


# ====================================================================== through the engines
def _probe_run(tmp_path: Path, **settings):
    from tests.torch.ut.trainer.test_field_probes import Fixtures, apply, base_config, run

    config = apply(base_config(), settings, Fixtures(tmp_path / "fixtures"))
    return config, run(config.build, 0, tmp_path / "run")


def test_the_legacy_front_door_names_the_legacy_key(tmp_path):
    """Prefetching where FSDP does not run (one fp32 rank) is refused, in the legacy YAML's own
    key."""
    from hyper_parallel.codegen.migration.to_yaml import config_yaml
    from hyper_parallel.trainer.config import HyperTrainerConfig, parse_args
    from hyper_parallel.trainer.llm_trainer import LLMTrainer
    from tests.torch.ut.trainer.test_field_probes import Fixtures, apply, base_config

    config = apply(base_config(), {"parallelism.fsdp_forward_prefetch": 1}, Fixtures(tmp_path))
    path = tmp_path / "old.yaml"
    path.write_text(config_yaml(config, "the test"))
    args = parse_args(HyperTrainerConfig, [str(path)])
    assert args.train.accelerator.fsdp_forward_prefetch == 1
    with pytest.raises(ConfigError, match="not wrapped in FSDP2") as info:
        LLMTrainer(args)
    assert "train.accelerator.fsdp_forward_prefetch" in str(info.value)


def test_moe_layers_prefetch_their_experts_units(tmp_path):
    """The MoE model's FSDP units: every layer prefetches the next layer and its routed experts
    (forward), the previous ones backwards; the experts units themselves prefetch nothing."""
    from tests.torch.ut.trainer.test_field_probes import _fsdp_settings

    _, result = _probe_run(
        tmp_path, **{"model.name": "qwen3_5_moe", "model.intermediate_size": None,
                     "model.num_hidden_layers": 3,
                     "training.mixed_precision_param": "bfloat16",
                     "parallelism.fsdp_forward_prefetch": 1,
                     "parallelism.fsdp_backward_prefetch": 1})
    assert result["error"] is None, result["error"]
    trainer = result["trainer"]
    try:
        lists = {name: (fwd, bwd) for name, *_, fwd, bwd in _fsdp_settings(trainer.model)}
    finally:
        trainer.close()
    layer = "model.layers.{}".format
    experts = "model.layers.{}.mlp.experts".format
    assert lists[layer(0)] == ([layer(1), experts(1)], [])
    assert lists[layer(1)] == ([layer(2), experts(2)], [layer(0), experts(0)])
    assert lists[layer(2)] == ([], [layer(1), experts(1)])
    assert lists[experts(1)] == ([], [])
