"""Recipe module resolution and errors of ``ConfigManager`` (independent of the trainer tree)."""

from __future__ import annotations

import pytest

from hyper_parallel.config.manager import ConfigManager, extract_module_and_config
from hyper_parallel.config.recipes import RecipeError, load_recipe, revalidate

BROKEN = "tests.torch.ut.config._broken_recipes"


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--module", "m", "--config", "c", "--a=1"], ("m", "c", ["--a=1"])),
        (["--module=m", "--config=c"], ("m", "c", [])),
        (["--config", "c", "--x", "1", "--module", "m"], ("m", "c", ["--x", "1"])),
    ],
)
def test_extract(argv, expected):
    assert extract_module_and_config(argv) == expected


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--module", "m"], "missing --config"),
        (["--module", "--config", "c"], "--module needs a value"),
        (["--module", "m", "--module", "n", "--config", "c"], "--module is given twice"),
    ],
)
def test_extract_errors(argv, fragment):
    with pytest.raises(RecipeError, match=fragment):
        extract_module_and_config(argv)


def test_missing_module_and_failing_module_are_different_errors():
    with pytest.raises(RecipeError, match="no such module"):
        load_recipe("tests.torch.ut.config.no_such_recipes", "x")
    with pytest.raises(RecipeError, match="failed: RuntimeError: boom while importing"):
        load_recipe(f"{BROKEN}.raises_on_import", "x")
    with pytest.raises(RecipeError, match="failed: ModuleNotFoundError: .*hyper_parallel_no_such_dependency"):
        load_recipe(f"{BROKEN}.missing_dependency", "x")


def test_unknown_recipe_lists_available_ones():
    with pytest.raises(RecipeError) as info:
        load_recipe("tests.torch.ut.config._test_dummy", "qwen3_5_v2_tinyy")
    assert "did you mean 'qwen3_5_v2_tiny'" in str(info.value)
    assert "Available: " in str(info.value)


def test_revalidate_reruns_post_init():
    from dataclasses import dataclass, field

    @dataclass
    class Leaf:
        n: int = 1

        def __post_init__(self):
            if self.n < 1:
                raise ValueError("n must be >= 1")

    @dataclass
    class Root:
        leaf: Leaf = field(default_factory=Leaf)

    root = Root()
    root.leaf.n = 0  # as a tool that bypasses __post_init__ would leave it
    with pytest.raises(ValueError, match="n must be >= 1"):
        revalidate(root)


def test_legacy_path_keeps_legacy_errors(tmp_path):
    from hyper_parallel.trainer.config import ConfigError

    bad = tmp_path / "old.yaml"
    bad.write_text("train:\n  max_step: 3\n")
    with pytest.raises(ConfigError, match=r"old.yaml:2: train.max_step: unknown key .*did you mean 'train.max_steps'"):
        ConfigManager().parse_args([str(bad)])


def test_available_recipes_are_zero_argument_functions_of_the_module():
    import importlib

    from hyper_parallel.config.recipes import available_recipes

    assert available_recipes(importlib.import_module(f"{BROKEN}.needs_argument")) == [
        "sized_with_default"]
    wrong = importlib.import_module(f"{BROKEN}.returns_wrong_type")
    assert "NotARecipe" not in available_recipes(wrong) and "Other" not in available_recipes(wrong)
    assert available_recipes(importlib.import_module(f"{BROKEN}.private_base")) == ["derived"]


def test_import_failures_keep_their_file_and_line():
    with pytest.raises(RecipeError, match=r"raises_on_import\.py:3\)$"):
        load_recipe(f"{BROKEN}.raises_on_import", "x")
    with pytest.raises(RecipeError, match=r"missing_dependency\.py:3\)$"):
        load_recipe(f"{BROKEN}.missing_dependency", "x")
