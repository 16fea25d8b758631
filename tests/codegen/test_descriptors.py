"""Model descriptors -> ``config_registry.py``.

* A wrong descriptor stops the generator with an error naming the descriptor file, the line and
  the field (one test per kind of error); nothing is written.
* The generated recipes: each returns a fresh ``HyperTrainer.Config``; a base recipe differs from
  ``HyperTrainer.Config()`` exactly in what it states, a derived recipe from its base exactly in
  the fields it sets; the spec alone names the model and its flavor (no ``model.name`` or
  ``config_overrides['flavor']`` beside it), and the legacy conversion derives both from it.
* The module is byte-stable and covered by ``codegen-check``.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyper_parallel.codegen import CodegenError, check, generate, write
from hyper_parallel.codegen.rendering import framing, registry_context, render
from hyper_parallel.codegen.table.coverage import resolve
from hyper_parallel.codegen.table.descriptors import load_descriptors
from hyper_parallel.codegen.table.field_table import load_table

from .conftest import REPO, edit

DESCRIPTOR = "codegen/models/qwen3_5.yaml"
REGISTRY = "hyper_parallel/models/qwen3_5_v2/config_registry.py"
MODULE = "hyper_parallel.models.qwen3_5_v2.config_registry"


def _error(repo) -> str:
    with pytest.raises(CodegenError) as info:
        generate(repo)
    return str(info.value)


def _line_of(repo, needle: str, after: str | None = None) -> int:
    """1-based line of the first ``needle`` (after the first ``after``, when given)."""
    lines = (repo / DESCRIPTOR).read_text().splitlines()
    start = 0 if after is None else next(i for i, line in enumerate(lines) if after in line)
    return next(i for i, line in enumerate(lines[start:], start + 1) if needle in line)


def _edit_recipe(repo, recipe: str, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` within recipe ``recipe`` of the descriptor."""
    path = repo / DESCRIPTOR
    text = path.read_text()
    start = text.index(f"\n  {recipe}:\n")
    following = re.compile(r"\n  \S").search(text, start + 1)  # the next recipe or comment
    end = following.start() if following else len(text)
    block = text[start:end]
    assert old in block, f"{old!r} not in recipe {recipe}"
    path.write_text(text[:start] + block.replace(old, new, 1) + text[end:])


# ---------------------------------------------------------------------------------------------
# errors: file, line, field
# ---------------------------------------------------------------------------------------------


def test_unknown_flavor_in_the_flavor_list(repo_copy):
    edit(repo_copy / DESCRIPTOR, "flavors: [debugmodel, tiny, 0.8b, 2b, 4b, 9b, 27b, debugmodel_vl]",
         "flavors:\n  - debugmodel\n  - tiny\n  - 0.8b\n  - 2b\n  - 4B\n  - 9b\n  - 27b\n"
         "  - debugmodel_vl")
    line = _line_of(repo_copy, "  - 4B")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: flavors[4]: unknown flavor '4B' (did you mean '4b'?); the "
            "flavor table hyper_parallel.models.qwen3_5.configuration:FLAVORS has: debugmodel, "
            "tiny, 0.8b, 2b, 4b, 9b, 27b, debugmodel_vl, 0.8b_vl, 2b_vl, 4b_vl, 9b_vl, 27b_vl"
            ) in message


def test_unknown_flavor_of_a_recipe(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_0_8b", "flavor: 0.8b", "flavor: 0.9b")
    line = _line_of(repo_copy, "flavor: 0.9b")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_0_8b.flavor: unknown flavor '0.9b' (did "
            "you mean '0.8b'?)") in message


def test_flavor_in_the_table_but_not_listed(repo_copy):
    edit(repo_copy / DESCRIPTOR, "flavors: [debugmodel, tiny, 0.8b, 2b, 4b, 9b, 27b, debugmodel_vl]",
         "flavors: [debugmodel, tiny, 0.8b, 2b, 4b, 27b, debugmodel_vl]")
    message = _error(repo_copy)
    line = _line_of(repo_copy, "flavor: 9b")
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_9b_fsdp8.flavor: unknown flavor '9b' (it "
            "is in the flavor table: add it to `flavors:`)") in message


def test_unknown_field_path_with_suggestion(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "training.steps: 10", "training.step: 10")
    line = _line_of(repo_copy, "training.step: 10")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel.set: unknown field "
            "'training.step' (did you mean 'training.steps'?)") in message


def test_unknown_field_of_a_component_lists_its_fields(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "optimizer.lr: 1.0e-3",
                 "optimizer.learning_rate: 1.0e-3")
    line = _line_of(repo_copy, "optimizer.learning_rate")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel.set: unknown field "
            "'optimizer.learning_rate'; optimizer has: name, lr, betas, eps, weight_decay,") in message


def test_unknown_section_with_suggestion(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_0_8b", "training.steps: 1000", "trainer.steps: 1000")
    line = _line_of(repo_copy, "trainer.steps: 1000")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_0_8b.set: unknown field 'trainer.steps' "
            "(did you mean 'training.steps'?)") in message


def test_a_section_is_not_a_field(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "debug.deterministic: true",
                 "debug: {deterministic: true}")
    line = _line_of(repo_copy, "debug: {deterministic: true}")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel.set: 'debug' is a section of "
            "HyperTrainer.Config, not a field; set its fields (debug.seed, ...)") in message


def test_bad_value_type(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "training.steps: 10", "training.steps: ten")
    line = _line_of(repo_copy, "training.steps: ten")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel.set.training.steps: wrong type: "
            "'ten' is not of type int") in message


def test_bad_value_of_a_component_field(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "optimizer.betas: [0.9, 0.95]",
                 "optimizer.betas: [0.9]")
    line = _line_of(repo_copy, "optimizer.betas: [0.9]")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel.set.optimizer.betas: wrong "
            "type: [0.9] is not of type tuple[float, float]") in message


def test_value_violates_a_constraint_of_the_table(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "training.seq_len: 128",
                 "training.seq_len: 1")
    line = _line_of(repo_copy, "training.seq_len: 1")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel.set.training.seq_len: 1: must "
            "be >= 2") in message


def test_value_outside_a_literal(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_4b", "activation_checkpoint.mode: full",
                 "activation_checkpoint.mode: ful")
    line = _line_of(repo_copy, "activation_checkpoint.mode: ful")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_4b.set.activation_checkpoint.mode: 'ful' "
            "is not allowed (did you mean 'full'?); choose one of: 'off', 'none', 'full', "
            "'selective'") in message


def test_unknown_base(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel_tp2", "base: qwen3_5_v2_debugmodel",
                 "base: qwen3_5_v2_debugmodle")
    line = _line_of(repo_copy, "base: qwen3_5_v2_debugmodle")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel_tp2.base: unknown base recipe "
            "'qwen3_5_v2_debugmodle' (did you mean 'qwen3_5_v2_debugmodel'?)") in message


def test_cycle_of_bases(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "flavor: debugmodel",
                 "base: qwen3_5_v2_debugmodel_fsdp2")
    line = _line_of(repo_copy, "base: qwen3_5_v2_debugmodel_fsdp2")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel.base: recipes derive from each "
            "other in a cycle: qwen3_5_v2_debugmodel -> qwen3_5_v2_debugmodel_fsdp2 -> "
            "qwen3_5_v2_debugmodel") in message
    assert message.count("cycle") == 1  # one cycle, reported once


def test_flavor_and_base_together(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel_tp2", "base: qwen3_5_v2_debugmodel",
                 "base: qwen3_5_v2_debugmodel\n    flavor: debugmodel")
    line = _line_of(repo_copy, "doc:", after="  qwen3_5_v2_debugmodel_tp2:")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel_tp2: give exactly one of "
            "`flavor:`") in message


def test_model_spec_is_not_settable(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "training.steps: 10",
                 "training.steps: 10\n      model_spec: null")
    line = _line_of(repo_copy, "model_spec: null")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel.set.model_spec: cannot be set "
            "here: it is built from the recipe's flavor") in message


def test_stating_a_default_is_an_error(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "training.steps: 10",
                 "training.steps: 10\n      training.max_epochs: 1")
    line = _line_of(repo_copy, "training.max_epochs: 1")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel.set.training.max_epochs: 1 is "
            "what the recipe already has (it is the default); state only what differs") in message


def test_restating_the_base_value_is_an_error(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel_fsdp2", "parallelism.data_parallel_shard_degree: 2",
                 "parallelism.data_parallel_shard_degree: 2\n      training.seq_len: 128")
    line = _line_of(repo_copy, "training.seq_len: 128", after="  qwen3_5_v2_debugmodel_fsdp2:")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel_fsdp2.set.training.seq_len: 128 "
            "is what the recipe already has (base qwen3_5_v2_debugmodel gives it)") in message


def test_config_overrides_may_not_name_the_flavor(repo_copy):
    # The spec carries the flavor: the same one again states it twice, another one contradicts it.
    _edit_recipe(repo_copy, "qwen3_5_v2_9b_fsdp8", "training.steps: 2000",
                 "training.steps: 2000\n      model.config_overrides: {flavor: 4b}")
    _edit_recipe(repo_copy, "qwen3_5_v2_4b", "training.steps: 2000",
                 "training.steps: 2000\n      model.config_overrides: {flavor: 4b, head_dim: 64}")
    other = _line_of(repo_copy, "model.config_overrides: {flavor: 4b}")
    same = _line_of(repo_copy, "model.config_overrides: {flavor: 4b, head_dim: 64}")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{other}: recipes.qwen3_5_v2_9b_fsdp8.set.model.config_overrides.flavor:"
            " '4b' disagrees with the recipe's flavor '9b'") in message
    assert (f"{DESCRIPTOR}:{same}: recipes.qwen3_5_v2_4b.set.model.config_overrides.flavor: '4b' "
            "is the recipe's flavor already: its model_spec carries it") in message


def test_model_name_is_not_settable(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "training.steps: 10",
                 "training.steps: 10\n      model.name: qwen3_5_v2")
    line = _line_of(repo_copy, "model.name: qwen3_5_v2")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel.set.model.name: cannot be set "
            "here: the recipe's model_spec names the model") in message


def test_other_config_overrides_are_real_overrides(repo_copy):
    # A key that is not the flavor is written as given and trains on top of the spec's flavor;
    # the legacy conversion puts the spec's flavor beside it.
    from hyper_parallel.config.legacy_adapter import trainer_config_to_legacy

    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "training.steps: 10",
                 "training.steps: 10\n      model.config_overrides: {num_hidden_layers: 2}")
    text = generate(repo_copy).files[REGISTRY]
    assert 'model=ModelConfig(config_overrides={"num_hidden_layers": 2}),' in text
    namespace: dict[str, Any] = {}
    exec(compile(text, REGISTRY, "exec"), namespace)
    config = namespace["qwen3_5_v2_debugmodel"]()
    config.dump_folder = "."  # new-only: the legacy schema has no dump_folder
    legacy = trainer_config_to_legacy(config)
    assert legacy.model.name == "qwen3_5_v2"
    assert legacy.model.config_overrides == {"flavor": "debugmodel", "num_hidden_layers": 2}


def test_cross_field_check_of_the_table(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel_tp2", "parallelism.tensor_parallel_degree: 2",
                 "parallelism.tensor_parallel_degree: 2\n      training.local_batch_size: 8")
    line = _line_of(repo_copy, "training.local_batch_size: 8")
    message = _error(repo_copy)
    # The rule is on global_batch_size (inherited); the line is that of the field it also reads.
    assert message == (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_debugmodel_tp2: "
                       "training.global_batch_size=4 must be >= local_batch_size")


def test_batch_must_divide_over_data_parallel_ranks(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_4b_tp2_fsdp4", "parallelism.data_parallel_shard_degree: 4",
                 "parallelism.data_parallel_shard_degree: 3")
    line = _line_of(repo_copy, "parallelism.data_parallel_shard_degree: 3")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_4b_tp2_fsdp4: training.global_batch_size=64 "
            "is not a multiple of local_batch_size=2 x data-parallel size 3") in message


def test_recipe_name_must_not_shadow_an_import(repo_copy):
    edit(repo_copy / DESCRIPTOR, "  qwen3_5_v2_debugmodel_tp2:\n",
         "  qwen3_5_v2_spec_factory:\n")
    line = _line_of(repo_copy, "  qwen3_5_v2_spec_factory:")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_spec_factory: 'qwen3_5_v2_spec_factory' is "
            "a name the generated module imports") in message


def test_missing_spec_factory(repo_copy):
    edit(repo_copy / DESCRIPTOR, "qwen3_5_v2.spec:qwen3_5_v2_spec_factory",
         "qwen3_5_v2.spec:qwen3_5_v2_factory")
    line = _line_of(repo_copy, "spec_factory:")
    message = _error(repo_copy)
    assert re.search(rf"{DESCRIPTOR}:{line}: model.spec_factory: .*spec.py: no function "
                     r"'qwen3_5_v2_factory'", message)


def test_unknown_model_package(repo_copy):
    edit(repo_copy / DESCRIPTOR, "  name: qwen3_5_v2\n", "  name: qwen3_5_v3\n")
    line = _line_of(repo_copy, "  name: qwen3_5_v3")
    message = _error(repo_copy)
    assert (f"{DESCRIPTOR}:{line}: model.name: no package hyper_parallel/models/qwen3_5_v3/ (did "
            "you mean 'qwen3_5_v2'?)") in message


def test_flavor_table_must_be_a_dict_literal(repo_copy):
    edit(repo_copy / DESCRIPTOR, "configuration:FLAVORS", "configuration:FLAVOR_KEY")
    line = _line_of(repo_copy, "flavor_table:")
    message = _error(repo_copy)
    assert re.search(rf"{DESCRIPTOR}:{line}: model.flavor_table: .*configuration.py: FLAVOR_KEY "
                     r"is not a module-level dict literal", message)


def test_derived_recipe_must_set_something(repo_copy):
    path = repo_copy / DESCRIPTOR
    text = path.read_text()
    head = text.index("  qwen3_5_v2_4b_tp2_fsdp4:\n")
    start = text.index("    set:\n", head)
    end = text.index("\n\n", start)
    path.write_text(text[:start] + "    set: {}" + text[end:])
    line = _line_of(repo_copy, "  qwen3_5_v2_4b_tp2_fsdp4:")
    assert _error(repo_copy) == (f"{DESCRIPTOR}:{line}: recipes.qwen3_5_v2_4b_tp2_fsdp4: derives "
                                 "from qwen3_5_v2_4b but sets nothing; a derived recipe must "
                                 "change something (or remove it)")


def test_generation_does_not_import_torch(repo_copy):
    # The model packages import torch; the generator reads them from source instead. (Only the
    # recipes of examples/yaml -- not in repo_copy -- need torch: converting a YAML executes the
    # recipe and builds its HyperTrainer.Config.)
    assert not (repo_copy / "examples").exists()
    code = ("import sys; from pathlib import Path; from hyper_parallel.codegen import generate; "
            f"generate(Path({str(repo_copy)!r})); print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"


def test_every_problem_is_reported_at_once_and_nothing_is_written(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "training.steps: 10", "training.step: 10")
    _edit_recipe(repo_copy, "qwen3_5_v2_4b", "activation_checkpoint.mode: full",
                 "activation_checkpoint.mode: ful")
    registry = repo_copy / REGISTRY
    before = registry.read_text()
    message = _error(repo_copy)
    assert message.startswith("2 problems:")
    command = [sys.executable, "-m", "hyper_parallel.codegen", "--root", str(repo_copy)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    assert result.returncode == 2
    assert f"{DESCRIPTOR}:" in result.stderr and "nothing was written" in result.stderr
    assert registry.read_text() == before


# ---------------------------------------------------------------------------------------------
# the generated recipes
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def descriptor():
    return _descriptors()["qwen3_5_v2"]


def _descriptors() -> dict:
    loaded = load_descriptors(REPO, resolve(load_table(REPO / "codegen" / "field_table.yaml"), REPO))
    return {d.name: d for d in loaded}


@pytest.fixture(scope="module")
def registry():
    return importlib.import_module(MODULE)


def _flat(config: Any, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a config tree by dotted path; ``model_spec`` as (name, flavor, model)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        path = prefix + f.name
        if path == "model_spec":
            out[path] = None if value is None else (value.name, value.flavor, value.model)
        elif dataclasses.is_dataclass(value):
            out.update(_flat(value, path + "."))
        else:
            out[path] = value
    return out


def _differences(a: Any, b: Any) -> set[str]:
    fa, fb = _flat(a), _flat(b)
    assert fa.keys() == fb.keys()
    return {p for p in fa if not (fa[p] == fb[p] and type(fa[p]) is type(fb[p]))}


def test_the_registry_lists_exactly_the_descriptor_recipes(registry, descriptor):
    from hyper_parallel.config.recipes import available_recipes

    names = [r.name for r in descriptor.recipes]
    assert sorted(registry.__all__) == sorted(names) == available_recipes(registry)
    required = {"qwen3_5_v2_debugmodel", "qwen3_5_v2_0_8b", "qwen3_5_v2_4b",
                "qwen3_5_v2_4b_tp2_fsdp4", "qwen3_5_v2_9b_fsdp8", "qwen3_5_v2_debugmodel_fsdp2",
                "qwen3_5_v2_debugmodel_tp2"}
    assert required <= set(names)
    assert {r.flavor for r in descriptor.recipes} <= set(descriptor.flavors)
    assert descriptor.flavors == ["debugmodel", "tiny", "0.8b", "2b", "4b", "9b", "27b",
                                  "debugmodel_vl"]


def test_every_model_family_has_its_registry():
    """The second family (mixture of experts) goes through the same descriptor, spec and
    registry machinery as the dense one: its generated module lists its recipes, on its spec."""
    from hyper_parallel.config.recipes import available_recipes

    descriptors = _descriptors()
    assert sorted(descriptors) == ["qwen3_5_moe", "qwen3_5_v2"]
    moe = descriptors["qwen3_5_moe"]
    registry = importlib.import_module("hyper_parallel.models.qwen3_5_moe.config_registry")
    assert sorted(registry.__all__) == sorted(r.name for r in moe.recipes)
    assert available_recipes(registry) == sorted(registry.__all__)
    assert moe.flavors == ["debugmodel", "35b_a3b", "122b_a10b", "397b_a17b"]
    for name in registry.__all__:
        config = getattr(registry, name)()
        assert config.model_spec.name == "qwen3_5_moe", name
        assert type(config.model_spec.model).__name__ == "Qwen3_5MoeModelConfig", name


@pytest.mark.parametrize("name", [
    "qwen3_5_v2_debugmodel", "qwen3_5_v2_debugmodel_fsdp2", "qwen3_5_v2_0_8b",
    "qwen3_5_v2_4b_tp2_fsdp4", "qwen3_5_v2_9b_fsdp8",
])
def test_every_call_returns_a_fresh_config(registry, name):
    from hyper_parallel.config.recipes import revalidate
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    recipe = getattr(registry, name)
    a, b = recipe(), recipe()
    assert isinstance(a, HyperTrainer.Config) and a is not b
    assert _differences(a, b) == set()
    revalidate(a)  # every section's and component's __post_init__ accepts the values
    # No part of the tree is shared between two calls...
    for f in dataclasses.fields(a):
        left, right = getattr(a, f.name), getattr(b, f.name)
        if dataclasses.is_dataclass(left):
            assert left is not right, f.name
    assert a.model_spec.model is not b.model_spec.model
    # ...so mutating one call's config leaves the others alone.
    a.training.steps += 1
    a.optimizer.lr *= 2
    a.parallelism.tensor_parallel_degree = 8
    a.model.num_hidden_layers = 1
    a.model_spec.model.num_hidden_layers = 1
    assert _differences(b, recipe()) == set()
    assert _differences(a, b) == {"training.steps", "optimizer.lr",
                                  "parallelism.tensor_parallel_degree",
                                  "model.num_hidden_layers", "model_spec"}


def test_base_recipes_differ_from_the_defaults_exactly_in_what_they_state(registry, descriptor):
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    checked = 0
    for recipe in descriptor.recipes:
        if recipe.base is not None:
            continue
        config = getattr(registry, recipe.name)()
        stated = {s.path for s in recipe.settings}
        # The spec names the model and its flavor: nothing beside it says them again.
        assert not stated & {"model.name", "model.config_overrides"}
        assert _differences(config, HyperTrainer.Config()) == stated | {"model_spec"}
        flat = _flat(config)
        for s in recipe.settings:
            assert flat[s.path] == s.value, s.path
        checked += 1
    assert checked >= 4


def test_derived_recipes_differ_from_their_base_exactly_in_the_stated_fields(registry, descriptor):
    derived = [r for r in descriptor.recipes if r.base is not None]
    assert {r.name for r in derived} >= {"qwen3_5_v2_4b_tp2_fsdp4", "qwen3_5_v2_debugmodel_fsdp2",
                                         "qwen3_5_v2_debugmodel_tp2"}
    for recipe in derived:
        config = getattr(registry, recipe.name)()
        base = getattr(registry, recipe.base)()
        stated = {s.path: s.value for s in recipe.settings}
        assert _differences(config, base) == set(stated), recipe.name
        flat = _flat(config)
        assert {p: flat[p] for p in stated} == stated


def test_the_spec_alone_names_the_model_and_the_legacy_schema_gets_both(registry, descriptor):
    from hyper_parallel.config.configs import ModelConfig
    from hyper_parallel.config.legacy_adapter import trainer_config_to_legacy
    from hyper_parallel.config.legacy_spec import without_registered_spec
    from hyper_parallel.models.qwen3_5.configuration import DEFAULT_FLAVOR

    checked_default = 0
    for recipe in descriptor.recipes:
        config = getattr(registry, recipe.name)()
        assert (config.model_spec.name, config.model_spec.flavor) == ("qwen3_5_v2", recipe.flavor)
        assert config.model == ModelConfig()  # no name, no flavor beside the spec
        # What the legacy conversion writes for the spec (other new-only fields aside).
        legacy = without_registered_spec(config)
        assert legacy.model_spec is None
        assert legacy.model.name == "qwen3_5_v2"
        # The flavor is written where the name alone would train another size (the default).
        flavored = None if recipe.flavor == DEFAULT_FLAVOR else {"flavor": recipe.flavor}
        assert legacy.model.config_overrides == flavored
        checked_default += recipe.flavor == DEFAULT_FLAVOR
    assert checked_default  # both kinds are seen
    debug = registry.qwen3_5_v2_debugmodel()
    debug.dump_folder = "."  # new-only: the legacy schema has no dump_folder
    legacy = trainer_config_to_legacy(debug).model
    assert (legacy.name, legacy.config_overrides) == ("qwen3_5_v2", {"flavor": "debugmodel"})


def test_cpu_recipes_have_the_promised_shape(registry):
    debug = registry.qwen3_5_v2_debugmodel()
    assert (debug.dataloader.dataset, debug.dataloader.dataset_path) == (
        "jsonl", "pkg://corpus/train.jsonl")
    assert debug.training.seq_len == 128 and debug.parallelism.data_parallel_shard_degree is None
    fsdp2 = registry.qwen3_5_v2_debugmodel_fsdp2()
    assert fsdp2.parallelism.data_parallel_shard_degree == 2
    tp2 = registry.qwen3_5_v2_debugmodel_tp2()
    assert tp2.parallelism.tensor_parallel_degree == 2
    tp2_fsdp4 = registry.qwen3_5_v2_4b_tp2_fsdp4()
    assert (tp2_fsdp4.parallelism.tensor_parallel_degree,
            tp2_fsdp4.parallelism.data_parallel_shard_degree) == (2, 4)


# ---------------------------------------------------------------------------------------------
# the generated text
# ---------------------------------------------------------------------------------------------


def test_generated_module_is_byte_stable():
    first = generate(REPO).files[REGISTRY]
    render._format_cached.cache_clear()  # black runs again for real
    assert generate(REPO).files[REGISTRY] == first
    assert (REPO / REGISTRY).read_text(encoding="utf-8") == first


def test_order_of_the_descriptor_lines_does_not_change_the_code(repo_copy):
    before = framing.split_header(generate(repo_copy).files[REGISTRY])[1]
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "      training.steps: 10\n", "")
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "    set:\n",
                 "    set:\n      training.steps: 10\n")
    assert framing.split_header(generate(repo_copy).files[REGISTRY])[1] == before


def test_readable_shape():
    text = (REPO / REGISTRY).read_text(encoding="utf-8")
    # A base recipe builds the tree with keyword arguments, non-defaults only...
    assert ('    return HyperTrainer.Config(\n'
            '        model_spec=qwen3_5_v2_spec_factory("debugmodel"),\n'
            '        dump_folder="outputs/qwen3_5_v2_debugmodel",\n') in text
    assert "ModelConfig" not in text and "config_overrides" not in text
    assert "optimizer=OptimizersContainer.Config(lr=1e-3, betas=(0.9, 0.95))" in text
    # ...a derived one calls its base and assigns one field per line.
    assert ("    config = qwen3_5_v2_4b()\n"
            '    config.dump_folder = "outputs/qwen3_5_v2_4b_tp2_fsdp4"\n'
            "    config.parallelism.data_parallel_shard_degree = 4\n"
            "    config.parallelism.tensor_parallel_degree = 2\n"
            "    return config\n") in text
    # Imports: sorted, each used.
    imports = [line for line in text.splitlines() if line.startswith("from hyper_parallel")]
    assert imports == sorted(imports)
    assert ('"""The 4B recipe as tensor parallel 2 x FSDP 4. Preflight on 8 H100 80GB: 36.7 GiB '
            'a rank."""') in text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_literals_round_trip(value):
    assert float(registry_context._float(value)) == value


def test_small_floats_are_written_as_people_write_them():
    assert [registry_context._float(v) for v in (1e-3, 3e-4, 1.5e-4, 3e-05, 0.1, 0.95, 1.0, -2e-6)] == [
        "1e-3", "3e-4", "1.5e-4", "3e-5", "0.1", "0.95", "1.0", "-2e-6"]


# ---------------------------------------------------------------------------------------------
# codegen-check covers the recipe module
# ---------------------------------------------------------------------------------------------


def test_hand_edit_of_the_registry_is_caught(repo_copy):
    edit(repo_copy / REGISTRY, "config.parallelism.tensor_parallel_degree = 2\n",
         "config.parallelism.tensor_parallel_degree = 4\n")
    (item,) = check(repo_copy)
    assert item.path == REGISTRY
    assert item.reasons == ["edited by hand: the body no longer matches the hash in its header"]
    assert "+    config.parallelism.tensor_parallel_degree = 2\n" in item.diff


def test_descriptor_edit_is_caught(repo_copy):
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel_tp2", "parallelism.tensor_parallel_degree: 2",
                 "parallelism.tensor_parallel_degree: 2\n      training.steps: 20")
    (item,) = check(repo_copy)
    assert item.path == REGISTRY
    assert item.reasons == [f"inputs changed: {DESCRIPTOR} was edited since the file was generated"]
    assert "+    config.training.steps = 20\n" in item.diff


def test_flavor_table_edit_is_caught(repo_copy):
    # A new flavor: nothing in the recipes changes, but what they were checked against did.
    edit(repo_copy / "hyper_parallel" / "models" / "qwen3_5" / "configuration.py",
         '    "0.8b": _full_size(', '    "mini": Qwen3_5Config(),\n    "0.8b": _full_size(')
    (item,) = check(repo_copy)
    assert item.path == REGISTRY
    assert item.reasons == [("inputs changed: a component Config, the flavor table or the spec "
                             "factory the recipes are checked against was edited")]


def test_removed_descriptor_removes_its_module(repo_copy):
    (repo_copy / DESCRIPTOR).unlink()
    (item,) = check(repo_copy)
    assert item.path == REGISTRY and item.reasons[0].startswith("extra:")
    assert REGISTRY in write(repo_copy, generate(repo_copy))
    assert not (repo_copy / REGISTRY).exists()
    assert check(repo_copy) == []


def _descriptor_problems(repo) -> list[str]:
    """The descriptors' own problems (the table loads cleanly)."""
    r = resolve(load_table(repo / "codegen" / "field_table.yaml"), repo)
    with pytest.raises(CodegenError) as info:
        load_descriptors(repo, r)
    return info.value.problems


def test_every_problem_of_the_descriptor_is_reported_at_once(repo_copy):
    """Problems in three recipes plus a duplicate key and a YAML 1.1 boolean spelling (a string
    under the YAML 1.2 rules of every YAML here, so a wrong type): one error lists all five
    with their lines."""
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "training.steps: 10", "training.step: 10")
    _edit_recipe(repo_copy, "qwen3_5_v2_0_8b", "training.seq_len: 4096", "training.seq_len: 1")
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel_tp2", "base: qwen3_5_v2_debugmodel",
                 "base: qwen3_5_v2_debugmodle")
    _edit_recipe(repo_copy, "qwen3_5_v2_4b", "optimizer.lr: 2.0e-4",
                 "optimizer.lr: 2.0e-4\n      optimizer.lr: 3.0e-4")
    _edit_recipe(repo_copy, "qwen3_5_v2_debugmodel", "debug.deterministic: true",
                 "debug.deterministic: yes")
    problems = _descriptor_problems(repo_copy)
    assert len(problems) == 5, problems
    text = "\n".join(problems)
    step = _line_of(repo_copy, "training.step: 10")
    seq = _line_of(repo_copy, "training.seq_len: 1", after="  qwen3_5_v2_0_8b:")
    base = _line_of(repo_copy, "base: qwen3_5_v2_debugmodle")
    dup = _line_of(repo_copy, "optimizer.lr: 3.0e-4", after="  qwen3_5_v2_4b:")
    first = _line_of(repo_copy, "optimizer.lr: 2.0e-4", after="  qwen3_5_v2_4b:")
    yes = _line_of(repo_copy, "debug.deterministic: yes")
    assert f"{DESCRIPTOR}:{step}: recipes.qwen3_5_v2_debugmodel.set: unknown field " \
           "'training.step' (did you mean 'training.steps'?)" in text
    assert f"{DESCRIPTOR}:{seq}: recipes.qwen3_5_v2_0_8b.set.training.seq_len: 1: must be >= 2" \
        in text
    assert f"{DESCRIPTOR}:{base}: recipes.qwen3_5_v2_debugmodel_tp2.base: unknown base recipe" \
        in text
    assert f"{DESCRIPTOR}:{dup}: duplicate key 'optimizer.lr' (first at line {first})" in text
    assert (f"{DESCRIPTOR}:{yes}: recipes.qwen3_5_v2_debugmodel.set.debug.deterministic: wrong "
            "type: 'yes' is not of type bool") in text


def test_a_missing_part_of_the_descriptor_does_not_hide_the_others(repo_copy):
    edit(repo_copy / DESCRIPTOR, "\nflavors: [debugmodel, tiny, 0.8b, 2b, 4b, 9b, 27b, debugmodel_vl]",
         "\nflavours: [debugmodel, tiny, 0.8b, 2b, 4b, 9b, 27b, debugmodel_vl]")
    edit(repo_copy / DESCRIPTOR, "  spec_factory: hyper_parallel.models.qwen3_5_v2.spec:",
         "  spec_factory: hyper_parallel.models.qwen3_5_v2.nospec:")
    text = "\n".join(_descriptor_problems(repo_copy))
    assert "unknown key 'flavours' (did you mean 'flavors'?)" in text
    assert "missing key 'flavors'" in text
    assert "model.spec_factory" in text
