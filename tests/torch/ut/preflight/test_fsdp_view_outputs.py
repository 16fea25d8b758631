"""Preflight's simulated step of a MoE recipe under FSDP x TP (bf16, so the routed experts take
``torch._grouped_mm``) prints no FSDP2 "returned a view tensor" warning: neither for the
experts' units nor for the root's logits (the tensor-parallel ``lm_head``'s ``to_local()``).
Preflight runs the engine's own parallelize and step, so a warning here is one every step of
the real run would print (tests/torch/ut/models/test_qwen3_5_moe_fsdp_outputs.py runs the
units for real)."""

from __future__ import annotations

import warnings

from hyper_parallel.config.manager import ConfigManager
from hyper_parallel.preflight.run import measure_role
from hyper_parallel.preflight.simulate import simulation_config
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

MOE = ["--module", "qwen3_5_moe", "--config", "qwen3_5_moe_debugmodel"]
P = "--parallelism."


def test_moe_fsdp_tp_step_returns_no_view_from_any_unit():
    argv = [*MOE, f"{P}data_parallel_shard_degree=2", f"{P}tensor_parallel_degree=2",
            "--training.mixed_precision_param=bfloat16",
            # The smallest step that still runs every kind of unit: one layer, one row of 32
            # tokens per rank.
            "--model.num_hidden_layers=1", "--training.seq_len=32",
            "--training.local_batch_size=1", "--training.global_batch_size=2"]
    config = simulation_config(ConfigManager(root_type=HyperTrainer.Config).parse_args(argv))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        measure_role(config, 0, 4, 1.0, extrapolate_depth=False)
    views = sorted({str(w.message).split(" returned")[0] for w in caught
                    if "returned a view tensor" in str(w.message)})
    assert not views, views
