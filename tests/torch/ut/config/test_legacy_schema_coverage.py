"""Every key of the legacy schema real YAMLs use is a known key: honoured, or refused off its
legacy default with the reason -- never "unknown key".

``LEGACY_KEYS`` is the legacy ``HyperTrainerConfig`` schema as the legacy code base declares it
(the keys of its first version plus the keys of later versions that real YAMLs use), written
out here as test data so that a key dropped from ``hyper_parallel/trainer/config.py`` fails
this test.
"""

from __future__ import annotations

import pytest

from hyper_parallel.config.legacy_adapter import FIELD_MAP, legacy_to_trainer_config
from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig
from hyper_parallel.trainer.config_parser import load_config

LEGACY_KEYS = """
model.name model.weights_path model.tokenizer_path model.freeze_modules model.tp_plan
model.cp_modules model.ep_modules model.num_hidden_layers model.hidden_size
model.intermediate_size model.num_attention_heads model.num_key_value_heads model.vocab_size
model.max_position_embeddings model.config_overrides
data.type data.train_path data.subset data.max_seq_len data.text_key data.train_size
data.template data.image_key data.messages_key data.image_token_id data.vl_grid_t
data.vl_grid_h data.vl_grid_w data.streaming data.num_workers data.prefetch_factor
data.pin_memory data.shuffle data.processor_path data.load
train.max_steps train.num_train_epochs train.global_batch_size train.micro_batch_size
train.seed train.backend train.init_device train.comm_backend train.local_rank
train.accelerator.dp train.accelerator.dp_replicate train.accelerator.dp_shard
train.accelerator.tp train.accelerator.cp train.accelerator.pp train.accelerator.ep
train.accelerator.etp train.accelerator.zero_stage train.accelerator.reshard_after_forward
train.accelerator.async_cp train.accelerator.ulysses_degree train.accelerator.comm_fusion
train.accelerator.pp_micro_batch_num train.accelerator.pp_schedule train.accelerator.pp_vpp
train.accelerator.pp_layer_split train.accelerator.pp_less_memory
train.accelerator.pp_mpipe_transpose_layers train.accelerator.pp_mpipe_transpose_overflow
train.accelerator.cpu_offload
train.accelerator.linear_attention_cp_mode train.accelerator.moe_token_dispatcher_type
train.accelerator.npu_nums_per_device train.accelerator.fsdp_forward_prefetch
train.accelerator.fsdp_backward_prefetch
train.mixed_precision.enabled train.mixed_precision.param_dtype
train.mixed_precision.reduce_dtype train.mixed_precision.output_dtype
train.gradient_checkpointing.activation_checkpoint train.gradient_checkpointing.num_layers
train.optimizer.type train.optimizer.lr train.optimizer.lr_min train.optimizer.lr_decay_style
train.optimizer.lr_warmup_ratio train.optimizer.loss_aggregation train.optimizer.weight_decay
train.optimizer.max_grad_norm train.optimizer.bsz_warmup_ratio train.optimizer.eps
train.optimizer.betas train.optimizer.foreach
train.checkpoint.output_dir train.checkpoint.save_steps train.checkpoint.save_hf_weights
train.checkpoint.load_path train.checkpoint.save_async
train.logging.report_to train.logging.report_global_loss train.logging.log_steps
train.logging.report_throughput train.logging.model_flops_per_token train.logging.peak_tflops
train.tensorboard.enabled train.tensorboard.output_dir train.tensorboard.log_steps
train.wandb.enabled train.wandb.project train.wandb.run_name train.wandb.log_steps
train.profile.enabled train.profile.output_dir train.profile.wait_steps
train.profile.warmup_steps train.profile.active_steps
train.memory_monitor.enabled train.memory_monitor.log_steps
train.memory_monitor.reset_peak_each_step
train.moe_monitor.enabled train.moe_monitor.lr train.moe_monitor.num_recomputations
train.eval.eval_steps train.eval.eval_dataset
train.debug.deterministic train.debug.deterministic_warn_only train.debug.check_nan_inf
train.debug.gc_steps
""".split()

#: A value other than the legacy default for each key of an ``unsupported`` row.
OFF_DEFAULT = {
    "model.tp_plan": "{q_proj: colwise}",
    "model.cp_modules": "[self_attn]",
    "model.ep_modules": "[mlp]",
    "data.image_token_id": "7",
    "train.backend": "mindspore",
    "train.accelerator.zero_stage": "3",
    "train.accelerator.comm_fusion": "false",
    "train.accelerator.pp_less_memory": "true",
    "train.accelerator.pp_mpipe_transpose_layers": "visual",
    "train.accelerator.pp_mpipe_transpose_overflow": "min",
    "train.optimizer.bsz_warmup_ratio": "0.1",
    "train.logging.report_global_loss": "true",
    "train.accelerator.moe_token_dispatcher_type": "deredundency",
    "train.moe_monitor.num_recomputations": "2",
    "train.accelerator.npu_nums_per_device": "4",
    "data.load": "single",
}

UNSUPPORTED = {key: row for row in FIELD_MAP if not row.new for key in row.legacy}
MAPPED = {key for row in FIELD_MAP for key in row.legacy}


def _yaml(key: str, value: str) -> str:
    """``a.b.c: v`` as nested YAML."""
    parts = key.split(".")
    lines = [f"{'  ' * depth}{part}:" for depth, part in enumerate(parts[:-1])]
    return "\n".join(lines + [f"{'  ' * (len(parts) - 1)}{parts[-1]}: {value}"]) + "\n"


def _schema_keys(cls=HyperTrainerConfig, prefix=""):
    import dataclasses

    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            yield from _schema_keys(type(default), f"{prefix}{f.name}.")
        else:
            yield prefix + f.name


def test_every_legacy_key_is_in_the_schema_and_the_table():
    schema = set(_schema_keys())
    assert set(LEGACY_KEYS) - schema == set(), "legacy keys missing from the schema"
    assert set(LEGACY_KEYS) - MAPPED == set(), "legacy keys without a field-table row"
    # The schema's own additions (the collective timeouts, the kernel choice, packing: the
    # upstream packs its online loaders' batches with no key, docs/packing.md) are ours; nothing
    # else is.
    ours = {"train.init_timeout_seconds", "train.train_timeout_seconds", "model.kernels",
            "data.packing"}
    assert schema - set(LEGACY_KEYS) == ours
    assert ours - MAPPED == set(), "keys of ours without a field-table row"


def test_the_off_default_values_cover_every_unsupported_row():
    assert set(OFF_DEFAULT) == set(UNSUPPORTED)


@pytest.mark.parametrize("key", sorted(UNSUPPORTED))
def test_unsupported_key_is_accepted_at_its_default_and_refused_off_it(key):
    defaults = HyperTrainerConfig()
    node = defaults
    for part in key.split("."):
        node = getattr(node, part)
    # At its default (written out in the YAML): parsed and converted.
    import yaml

    written = yaml.safe_dump(node, default_flow_style=True).strip().removesuffix("...").strip()
    legacy = load_config(HyperTrainerConfig, _yaml(key, written), source="old.yaml")
    legacy_to_trainer_config(legacy)
    # Off it: a known key, refused by the parser (with every other problem of the file, at the
    # key's line) with the row's reason ...
    with pytest.raises(ConfigError) as parsed:
        load_config(HyperTrainerConfig, _yaml(key, OFF_DEFAULT[key]), source="old.yaml")
    line = len(key.split("."))
    reason = " ".join(UNSUPPORTED[key].detail.split())
    message = str(parsed.value)
    assert message.startswith(f"old.yaml:{line}: {key}: ") and "unknown" not in message, message
    assert reason[:60] in " ".join(message.split()), message
    # ... and by the conversion, in the same words, of a config set in code.
    legacy = HyperTrainerConfig()
    *parents, name = key.split(".")
    section = legacy
    for part in parents:
        section = getattr(section, part)
    setattr(section, name, yaml.safe_load(OFF_DEFAULT[key]))
    with pytest.raises(ConfigError) as converted:
        legacy_to_trainer_config(legacy)
    assert converted.value.path == key
    assert message == f"old.yaml:{line}: {converted.value}", (message, str(converted.value))


def test_comm_fusion_true_is_what_fully_shard_does_and_false_says_why():
    legacy = load_config(HyperTrainerConfig, _yaml("train.accelerator.comm_fusion", "true"),
                         source="old.yaml")
    assert legacy_to_trainer_config(legacy) == legacy_to_trainer_config(HyperTrainerConfig())
    with pytest.raises(ConfigError, match="one reduce-scatter of its gradients"):
        load_config(HyperTrainerConfig, _yaml("train.accelerator.comm_fusion", "false"),
                    source="old.yaml")


@pytest.mark.parametrize("kind", ["megatron"])
def test_refused_data_types_name_their_reason(kind):
    with pytest.raises(ConfigError) as info:
        load_config(HyperTrainerConfig, f"data: {{type: {kind}, train_path: x}}\n",
                    source="old.yaml")
    message = str(info.value)
    assert "old.yaml:1" in message and "data.type" in message
    assert {"megatron": "megatron-core"}[kind] in message
