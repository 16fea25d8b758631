"""Mixed precision with ``output_dtype`` float32 and bf16 compute trains on both entries.

``output_dtype`` is the dtype of the model's outputs (the logits). It used to go into every FSDP2
unit's policy, so the last decoder layer handed float32 activations to the root unit (final norm +
``lm_head``, bf16 weights) and the first forward failed. Now only the root casts its output
(:func:`hyper_parallel.models.qwen3_5.parallelize.split_mp_policy`): the logits are float32, the
activations between units stay bf16 (the layers cast to the compute dtype). One process (a size-1 ``dp_shard`` mesh: FSDP still applies).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch.distributed.fsdp import MixedPrecisionPolicy

from hyper_parallel.models.qwen3_5.parallelize import split_mp_policy

pytestmark = [
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated"),
    pytest.mark.filterwarnings("ignore:torch.distributed is disabled"),
]

REPO = Path(__file__).resolve().parents[4]
DEBUG_YAML = REPO / "examples" / "yaml" / "train_qwen3_5_debug.yaml"
STEPS = 2


def test_split_mp_policy_keeps_output_dtype_for_the_root_only():
    assert split_mp_policy(None) == (None, None)
    same = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    assert split_mp_policy(same) == (same, same)
    policy = MixedPrecisionPolicy(
        param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.float32
    )
    layer, root = split_mp_policy(policy)
    assert root is policy
    assert layer == MixedPrecisionPolicy(
        param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.bfloat16
    )
    # output_dtype == param_dtype: one policy for every unit (the layers cast to it anyway)
    both = MixedPrecisionPolicy(param_dtype=torch.bfloat16, output_dtype=torch.bfloat16)
    assert split_mp_policy(both) == (both, both)
    # float32 compute (param_dtype unset), bf16 logits: the layers do not cast
    fp32 = MixedPrecisionPolicy(reduce_dtype=torch.bfloat16, output_dtype=torch.bfloat16)
    assert split_mp_policy(fp32) == (MixedPrecisionPolicy(reduce_dtype=torch.bfloat16), fp32)


def _recipe_trainer(tmp_path):
    import hyper_parallel.models.qwen3_5_v2  # noqa: F401 - registers the spec
    from hyper_parallel.components.checkpoint import CheckpointManager
    from hyper_parallel.components.dataloader import BaseDataLoader
    from hyper_parallel.config.configs import ModelConfig, TrainingConfig
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    return HyperTrainer.Config(
        model=ModelConfig(
            name="qwen3_5_v2", config_overrides={"flavor": "debugmodel", "num_hidden_layers": 2}
        ),
        training=TrainingConfig(
            steps=STEPS,
            seq_len=32,
            global_batch_size=2,
            local_batch_size=2,
            mixed_precision_param="bfloat16",
            mixed_precision_output="float32",
        ),
        dataloader=BaseDataLoader.Config(dataset="dummy", pin_memory=False),
        checkpoint=CheckpointManager.Config(folder=str(tmp_path), interval=0, export_hf=False),
    ).build()


def _legacy_trainer(tmp_path):
    from hyper_parallel.models.spec import discover_model_spec
    from hyper_parallel.trainer.config import HyperTrainerConfig, parse_args
    from hyper_parallel.trainer.llm_trainer import LLMTrainer

    legacy = parse_args(
        HyperTrainerConfig,
        [
            str(DEBUG_YAML),
            f"--train.max_steps={STEPS}",
            "--data.max_seq_len=32",
            "--train.mixed_precision.enabled=true",
            "--train.mixed_precision.param_dtype=bfloat16",
            "--train.mixed_precision.output_dtype=float32",
            f"--train.checkpoint.output_dir={tmp_path}",
        ],
    )
    discover_model_spec(legacy.model.name)
    return LLMTrainer(legacy)


@pytest.mark.parametrize("entry", ["recipe", "legacy"])
def test_float32_logits_from_bf16_compute_train(entry, tmp_path):
    trainer = (_recipe_trainer if entry == "recipe" else _legacy_trainer)(tmp_path)
    try:
        model = trainer.model
        seen: dict[str, set] = {"logits": set(), "last_layer": set(), "lm_head_weight": set()}
        # Registered after fully_shard, so they run after FSDP's own output casts.
        model.register_forward_hook(lambda _m, _a, out: seen["logits"].add(out.dtype))
        model.model.layers[-1].register_forward_hook(
            lambda _m, _a, out: seen["last_layer"].add(out.dtype)
        )
        model.lm_head.register_forward_pre_hook(
            lambda m, _a: seen["lm_head_weight"].add(m.weight.dtype)
        )
        state = trainer.train()
        losses = [loss for _, loss in state.loss_history]
        assert len(losses) == STEPS
        assert all(math.isfinite(loss) for loss in losses), losses
        assert seen["logits"] == {torch.float32}  # output_dtype: the model's outputs
        assert seen["last_layer"] == {torch.bfloat16}  # between units: the compute dtype
        assert seen["lm_head_weight"] == {torch.bfloat16}  # the root computes in bf16
        # fp32 master weights and gradients
        assert {p.dtype for p in model.parameters()} == {torch.float32}
        assert {p.grad.dtype for p in model.parameters() if p.grad is not None} <= {torch.float32}
    finally:
        trainer.close()
