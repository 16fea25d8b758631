"""A run record's ``config.py``: the generator writes a proven recipe of any configuration.

The recipe starts from the baseline that leaves the fewest lines, sets each differing field in
the order of ``HyperTrainer.Config``, comments the lines a flag set with that flag, and builds
the configuration exactly (executed here again, independently of the generator's own proof).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyper_parallel.codegen.migration.config_recipe import (
    RECORD_RECIPE,
    Flag,
    candidates,
    render_config_recipe,
)
from hyper_parallel.codegen.migration.recipe.proof import ConversionError, differences

REPO = Path(__file__).resolve().parents[2]


def _render(config, flags=(), flavors=()):
    return render_config_recipe(config, repo=REPO, title="Run record of a test.",
                                about="About it.", flags=flags, flavors=flavors)


def _built(text: str):
    namespace: dict = {}
    exec(compile(text, "config.py", "exec"), namespace)  # noqa: S102 -- the generator's output
    return namespace[RECORD_RECIPE]()


def _registry_recipe():
    from hyper_parallel.models.qwen3_5_v2.config_registry import qwen3_5_v2_debugmodel_tp2

    return qwen3_5_v2_debugmodel_tp2()


def test_a_registry_recipe_with_overrides_is_its_call_and_the_overrides():
    config = _registry_recipe()
    config.training.steps = 7
    config.optimizer.lr = 3e-4
    recipe = _render(config, [Flag("--training.steps=7", ("training.steps",))])
    assert "config = qwen3_5_v2_debugmodel_tp2()" in recipe.text
    assert recipe.lines == 2
    assert "config.training.steps = 7  # command line: --training.steps=7" in recipe.text
    assert "config.optimizer.lr = 0.0003\n" in recipe.text  # no flag set it: no comment
    assert not differences(config, _built(recipe.text))


def test_a_legacy_configuration_is_written_on_its_registered_spec():
    from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
    from hyper_parallel.trainer.config import HyperTrainerConfig, parse_args

    legacy = parse_args(HyperTrainerConfig,
                        [str(REPO / "examples" / "yaml" / "train_qwen3_5_debug.yaml")])
    config = legacy_to_trainer_config(legacy)
    assert config.model_spec is None
    recipe = _render(config)
    assert 'config = flavor_baseline("qwen3_5", "debugmodel")' in recipe.text
    built = _built(recipe.text)
    assert not differences(recipe.target, built)
    assert built.model_spec is not None and built.model_spec.name == config.model.name


def test_a_flavor_changed_on_the_command_line_is_one_line_on_the_recipes_flavor():
    from hyper_parallel.config.baselines import flavor_baseline

    config = flavor_baseline("qwen3_5", "debugmodel")
    config.model.config_overrides = {"flavor": "tiny"}
    flag = Flag("--model.config_overrides={flavor: tiny}", ("model.config_overrides",))
    recipe = _render(config, [flag], flavors=["debugmodel"])
    assert 'config = flavor_baseline("qwen3_5", "debugmodel")' in recipe.text
    assert recipe.lines == 1
    assert "command line: --model.config_overrides={flavor: tiny}" in recipe.text
    names = [c.described for c in candidates(config, ["debugmodel"])]
    assert names[:3] == ["flavor_baseline: model 'qwen3_5', flavor 'tiny'",
                         "flavor_baseline: model 'qwen3_5', flavor 'debugmodel'",
                         "flavor_baseline: model 'qwen3_5' (its default flavor)"]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.integers(1, 10**6), lr=st.floats(1e-8, 1.0, allow_nan=False),
       shuffle=st.booleans(), folder=st.text(st.characters(codec="utf-8",
                                                          exclude_categories=("Cs",)),
                                            min_size=1, max_size=20),
       overrides=st.dictionaries(st.sampled_from(["head_dim", "rope_theta"]),
                                 st.integers(1, 4096), max_size=2))
def test_any_configuration_builds_back_exactly(steps, lr, shuffle, folder, overrides):
    config = _registry_recipe()
    config.training.steps = steps
    config.optimizer.lr = lr
    config.dataloader.shuffle = shuffle
    config.checkpoint.folder = folder
    config.model.config_overrides = {**(config.model.config_overrides or {}), **overrides}
    recipe = _render(config)
    assert not differences(config, _built(recipe.text))


def test_a_recipe_that_does_not_build_its_configuration_is_refused(monkeypatch):
    from hyper_parallel.codegen.migration import config_recipe

    config = _registry_recipe()
    config.training.steps = 9
    # A generator bug: every statement written for another value.
    real = config_recipe.recipe_changes.statement
    monkeypatch.setattr(config_recipe.recipe_changes, "statement",
                        lambda change, imports: real(change, imports).replace("= 9", "= 8"))
    with pytest.raises(ConversionError, match=r"training\.steps: expected 9, the recipe gives 8"):
        _render(config)
