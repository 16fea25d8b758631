"""A checkpoint's configuration and what a resume may change (``trainer.config_identity``)."""

from __future__ import annotations

import logging

import pytest

from hyper_parallel.trainer.config_identity import (
    MEANING,
    check_resume,
    checkpoint_identity,
    compare,
    config_hash,
    flatten,
    run_configuration,
    why_fixed,
)
from hyper_parallel.utils.errors import ConfigError


def _config():
    from hyper_parallel.models.qwen3_5_v2.config_registry import qwen3_5_v2_debugmodel

    config = qwen3_5_v2_debugmodel()
    spec = config.model_spec
    model = spec.model
    model.update_from_config(trainer_config=config)
    return config, model


def test_the_flat_configuration_is_stable_and_json_safe():
    import json

    config, model = _config()
    flat = run_configuration(config, model)
    assert flat == run_configuration(*_config())  # two builds, one record
    assert json.loads(json.dumps(flat)) == flat
    assert flat["training.steps"] == repr(config.training.steps)
    assert flat["architecture.hidden_size"] == repr(model.hidden_size)
    # Functions and lazy references are named, never printed with an address.
    assert not any(" at 0x" in value for value in flat.values())
    assert checkpoint_identity(flat)["config_sha256"] == config_hash(flat)
    # Dict entries one by one, in a fixed order; an empty dict is one leaf.
    assert list(flatten({"m": {"b": 1, "a": [2]}, "e": {}})) == ["e", "m.a", "m.b"]


def test_which_fields_may_change():
    assert why_fixed("architecture.hidden_size")
    assert why_fixed("architecture.kernels") is None  # a kernel choice computes the same model
    assert why_fixed("tokenizer.path") and why_fixed("optimizer.name")
    for field in ("training.steps", "optimizer.lr", "checkpoint.interval",
                  "parallelism.tensor_parallel_degree", "model.weights_path", "model_spec.name"):
        assert why_fixed(field) is None, field
    assert all(rule.endswith(".") or "." in rule for rule, _ in MEANING)


def test_compare_sorts_the_differences():
    saved = {"a.x": "1", "architecture.hidden_size": "32", "optimizer.name": "'AdamW'"}
    now = {"a.x": "2", "architecture.hidden_size": "64", "optimizer.name": "'AdamW'", "b": "3"}
    refused, allowed = compare(saved, now)
    assert [r[:3] for r in refused] == [("architecture.hidden_size", "32", "64")]
    assert allowed == [("a.x", "1", "2"), ("b", "<absent>", "3")]


def test_check_resume_refuses_with_both_values():
    config, model = _config()
    saved = run_configuration(config, model)
    current = dict(saved, **{"architecture.hidden_size": "999", "optimizer.name": "'SGD'"})
    with pytest.raises(ConfigError) as info:
        check_resume(checkpoint_identity(saved), "ckpt/step_4", current,
                     name=lambda f: f"<{f}>")
    text = str(info.value)
    assert "2 field(s) that change what it means differ" in text
    assert f"architecture.hidden_size: checkpoint {saved['architecture.hidden_size']}, " \
           "this run 999" in text
    assert "optimizer.name: checkpoint 'AdamW', this run 'SGD'" in text


def test_check_resume_logs_what_may_change(caplog):
    config, model = _config()
    saved = run_configuration(config, model)
    current = dict(saved, **{"training.steps": "99"})
    with caplog.at_level(logging.INFO):
        check_resume(checkpoint_identity(saved), "ckpt/step_4", current)
        check_resume({"epoch": 0}, "old/step_1", current)  # written before configs were saved
    assert f"training.steps: {saved['training.steps']} -> 99" in caplog.text
    assert "old/step_1 records no configuration" in caplog.text
