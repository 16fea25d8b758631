"""Every refusal found while a run is built is a ``ConfigError`` in the entry's own names.

Building (the components, the model, parallelize, the data) refuses some settings only once the
run is being assembled: a degree the model does not support, a reset of a peak-memory counter
the device does not have, a file a setting names that is not there. Through either entry --
``python -m hyper_parallel.train --module M --config F`` (recipe fields) or ``python -m
hyper_parallel.train old.yaml`` (legacy keys) -- each is one ``error:`` line naming the field as
that entry spells it (the legacy front door adds ``(recipe field: ...)``), exit 2, no traceback.

Driven through ``hyper_parallel.train.main`` in this process, one rank: the build-time refusals
of the field table (rows whose probe observes ``refused`` and whose setting its Config accepts),
then those no probe drives.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hyper_parallel import train
from hyper_parallel.codegen.migration.config_recipe import RECORD_RECIPE, render_config_recipe
from hyper_parallel.codegen.migration.to_yaml import config_yaml
from tests.torch.ut.trainer.test_field_probes import ROWS, apply, base_config

REPO = Path(__file__).resolve().parents[4]
DEBUG_YAML = REPO / "examples" / "yaml" / "train_qwen3_5_debug.yaml"


class _NoFixtures:
    """What :func:`apply` resolves probe values with: a refused probe names no fixture file."""

    @staticmethod
    def resolve(value):
        assert not (isinstance(value, str) and value.startswith("{")), value
        return value


def probed(row):
    """The probe's configuration of ``row``: the probes' base run, its ``base``, its ``set``."""
    config = apply(base_config(), row.probe.get("base", {}), _NoFixtures)
    return apply(config, row.probe["set"], _NoFixtures)


def _refused_at_build(row) -> bool:
    """Whether the probe's Config accepts the setting (so the build is what refuses it)."""
    try:
        probed(row)
    except ValueError:  # refused by the Config itself, before anything is built
        return False
    return True


BUILD_REFUSALS = sorted(
    key for key, row in ROWS.items()
    if row.probe.get("observe") == "refused" and row.kind != "unsupported"
    and _refused_at_build(row)
)


def assert_refused(code: int, err: str, words: str, own: set[str], foreign: set[str]) -> None:
    """Exit 2 and one ``error:`` line without a traceback, holding ``words`` and one of the
    entry's ``own`` field names; the other entry's names (``foreign``) at most in the
    ``(recipe field: ...)`` hint."""
    assert code == 2, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, err[-3000:]
    (line,) = errors
    assert words in line and any(name in line for name in own), (words, own, line)
    body = line.split(" (recipe field: ")[0]
    for name in foreign:
        assert re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", body) is None, (name, line)


# ------------------------------------------------------------------ the field table's refusals


def test_the_table_has_build_time_refusals():
    assert BUILD_REFUSALS, "no probe of codegen/field_table.yaml is refused at build time"


@pytest.mark.parametrize("key", BUILD_REFUSALS)
def test_a_table_refusal_names_the_field_in_each_entry(key, run_entry, tmp_path):
    row = ROWS[key]
    config = probed(row)
    legacy_keys, recipe_fields = set(row.legacy.values()), set(row.new.values())

    recipe = tmp_path / "probe_recipe.py"
    recipe.write_text(render_config_recipe(config, repo=REPO, title=f"The probe of {key}.",
                                           about="A refused setting.").text)
    code, err = run_entry(train.main, ["--module", str(recipe), "--config", RECORD_RECIPE])
    assert_refused(code, err, row.probe["expect"], recipe_fields, legacy_keys - recipe_fields)

    if legacy_keys:
        yaml = tmp_path / "probe.yaml"
        yaml.write_text(config_yaml(config, f"the probe of {key}"))
        code, err = run_entry(train.main, [str(yaml)])
        assert_refused(code, err, row.probe["expect"], legacy_keys, recipe_fields - legacy_keys)


# ------------------------------------------------------------------ refusals no probe drives

RECIPE = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel", "--training.steps=1",
          "--model.config_overrides={flavor: tiny}"]
LEGACY = [str(DEBUG_YAML), "--train.max_steps=1", "--model.config_overrides={flavor: tiny}"]
TEXT_DATA = ["--dataloader.dataset=jsonl", "--dataloader.dataset_path=pkg://corpus/valid.jsonl"]
LEGACY_TEXT_DATA = ["--data.type=jsonl", "--data.train_path=pkg://corpus/valid.jsonl"]

#: ``(recipe flags, recipe field, legacy flags, legacy key, words of the message)``; a field
#: without a legacy key has ``None`` for both. Paths are relative to the run's folder, which
#: holds ``notes.txt`` (a text file) and ``empty/`` (an empty folder).
OTHERS = {
    "a peak reset without the memory monitor": (
        ["--metrics.reset_peak_memory_each_step=True"], "metrics.reset_peak_memory_each_step",
        ["--train.memory_monitor.reset_peak_each_step=true"],
        "train.memory_monitor.reset_peak_each_step", "no peak is ever sampled"),
    "weights that do not exist": (
        ["--model.weights_path=missing"], "model.weights_path",
        ["--model.weights_path=missing"], "model.weights_path", "'missing' does not exist"),
    "weights in an empty folder": (
        ["--model.weights_path=empty"], "model.weights_path",
        ["--model.weights_path=empty"], "model.weights_path",
        "is neither a Hugging Face checkpoint directory"),
    "weights that are not a state dict": (
        ["--model.weights_path=notes.txt"], "model.weights_path",
        ["--model.weights_path=notes.txt"], "model.weights_path",
        "is not a state-dict file torch.load can read"),
    "a tokenizer that does not exist": (
        [*TEXT_DATA, "--tokenizer.path=missing"], "tokenizer.path",
        [*LEGACY_TEXT_DATA, "--model.tokenizer_path=missing"], "model.tokenizer_path",
        "'missing' does not exist"),
    "a tokenizer folder without tokenizer.json": (
        [*TEXT_DATA, "--tokenizer.path=empty"], "tokenizer.path",
        [*LEGACY_TEXT_DATA, "--model.tokenizer_path=empty"], "model.tokenizer_path",
        "has no tokenizer.json"),
    "a misspelt compile backend": (
        ["--compile.enable=True", "--compile.backend=inductr"], "compile.backend", None, None,
        "'inductr' is not a torch.compile backend (did you mean 'inductor'?)"),
    "HF assets that are not a folder": (
        ["--hf_assets_path=notes.txt"], "hf_assets_path", None, None, "is not a directory"),
}


@pytest.mark.parametrize("case", sorted(OTHERS))
def test_a_build_refusal_names_the_field_in_each_entry(case, run_entry, tmp_path):
    recipe_flags, recipe_field, legacy_flags, legacy_key, words = OTHERS[case]
    (tmp_path / "notes.txt").write_text("not a state dict\n")
    (tmp_path / "empty").mkdir()
    foreign = {legacy_key} - {recipe_field, None}
    code, err = run_entry(train.main, [*RECIPE, *recipe_flags])
    assert_refused(code, err, words, {recipe_field}, foreign)
    if legacy_flags is not None:
        code, err = run_entry(train.main, [*LEGACY, *legacy_flags])
        assert_refused(code, err, words, {legacy_key}, {recipe_field} - {legacy_key})
