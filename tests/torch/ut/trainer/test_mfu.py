"""The logged TFLOPS and MFU use the model's own FLOPs count unless the config gives one.

The count itself is checked by hand in ``tests/torch/ut/models/test_qwen3_5_model.py``
(``test_flops_per_token_by_hand_for_the_debug_flavor``); here the engine's log carries it.
"""

from __future__ import annotations

import json

import pytest

from hyper_parallel.models.qwen3_5 import FLAVORS
from hyper_parallel.models.qwen3_5.model import flops_per_token
from hyper_parallel.models.qwen3_5_v2.config_registry import qwen3_5_v2_debugmodel

SEQ_LEN = 64
PEAK_TFLOPS = 0.5


def _train(tmp_path, **metrics) -> list[dict]:
    config = qwen3_5_v2_debugmodel()
    config.dump_folder = str(tmp_path)
    config.training.steps = 2
    config.training.seq_len = SEQ_LEN
    config.training.local_batch_size = 2
    config.training.global_batch_size = 2
    config.dataloader.dataset = "dummy"
    config.checkpoint.interval = 0
    config.checkpoint.export_hf = False
    config.metrics.log_freq = 1
    config.metrics.peak_tflops = PEAK_TFLOPS
    for name, value in metrics.items():
        setattr(config.metrics, name, value)
    trainer = config.build()
    try:
        trainer.train()
        folder = trainer.config.checkpoint.folder
    finally:
        trainer.close()
    with open(f"{folder}/metrics.jsonl") as f:
        return [json.loads(line) for line in f]


def test_mfu_uses_the_models_count_when_the_config_gives_none(tmp_path):
    records = _train(tmp_path)
    expected = flops_per_token(FLAVORS["debugmodel"], SEQ_LEN)
    assert [r["step"] for r in records] == [1, 2]
    for rec in records:
        assert rec["tflops"] == pytest.approx(rec["tokens_per_sec"] * expected / 1e12)
        assert rec["mfu"] == pytest.approx(rec["tflops"] / PEAK_TFLOPS)


def test_a_configured_count_wins_over_the_models(tmp_path):
    records = _train(tmp_path, model_flops_per_token=1_000)
    for rec in records:
        assert rec["tflops"] == pytest.approx(rec["tokens_per_sec"] * 1_000 / 1e12)
