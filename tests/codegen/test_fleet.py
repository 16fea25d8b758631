"""Fleet migration: ``--from-yaml a.yaml b.yaml dir/`` writes one registry module (a tree of
shared functions with what the files share, one recipe per file), proven recipe by recipe.

The planner (:func:`fleet.plan_hierarchy`) is a pure function over item sets: its properties are
tested on small random fleets (hypothesis) as well as on the two fixtures, and its result against
the planner as first written (:func:`_reference_plan`, every pair of every scope after every
merge), which it must equal while doing a few evaluations per file.

Goldens (``golden/fleet/``): the module of the six ``examples/yaml`` files, and the module and
report of the family in ``fleet_family/`` (shared settings, a nested recipe, a family inside
the base, another flavor). Update them on purpose (then review the diff):

    HYPER_PARALLEL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/codegen/test_fleet.py
"""

from __future__ import annotations

import importlib.util
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hyper_parallel.codegen.__main__ import main
from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.migration import fleet, from_yaml
from hyper_parallel.codegen.migration.fleet import plan as fleet_plan
from hyper_parallel.codegen.migration.recipe import changes as recipe_changes

from .conftest import REPO

GOLDEN = Path(__file__).resolve().parent / "golden" / "fleet"
FAMILY = Path(__file__).resolve().parent / "fleet_family"
EXAMPLES = REPO / "examples" / "yaml"
UPDATE = os.environ.get("HYPER_PARALLEL_UPDATE_GOLDEN") == "1"


def _convert(folder: Path, **kwargs) -> fleet.Fleet:
    inputs = fleet.resolve_inputs([str(folder)], kwargs.pop("after", ()), base=REPO)
    return fleet.convert_fleet(inputs, output=REPO / "recipes" / "config_registry.py", repo=REPO,
                               base=REPO, **kwargs)


@pytest.fixture(scope="module")
def examples() -> fleet.Fleet:
    return _convert(EXAMPLES)


@pytest.fixture(scope="module")
def family() -> fleet.Fleet:
    return _convert(FAMILY)


def _check_golden(path: Path, text: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == text, (
        f"{path.name} differs; if the change is intended, rerun with "
        "HYPER_PARALLEL_UPDATE_GOLDEN=1 and review the diff")


def test_examples_module_matches_its_golden(examples):
    _check_golden(GOLDEN / "examples_config_registry.py", examples.text)


def test_family_module_and_report_match_their_goldens(family):
    _check_golden(GOLDEN / "family_config_registry.py", family.text)
    _check_golden(GOLDEN / "family_config_registry.out", fleet.conversion_report(family, base=REPO) + "\n")


@pytest.mark.parametrize("which", ["examples", "family"])
def test_a_second_conversion_gives_the_same_bytes(request, which):
    folder = {"examples": EXAMPLES, "family": FAMILY}[which]
    assert _convert(folder).text == request.getfixturevalue(which).text


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


@pytest.mark.parametrize("which", ["examples", "family"])
def test_every_recipe_equals_its_single_file_conversion(request, tmp_path, which):
    """Written to a temporary path and imported, each recipe builds what the single-file
    conversion of its YAML builds."""
    result = request.getfixturevalue(which)
    path = tmp_path / f"{which}_registry.py"
    path.write_text(result.text)
    module = _import(path, f"fleet_{which}_registry")
    for recipe in result.recipes:
        single, _ = from_yaml.convert(recipe.source.path, output=tmp_path / "single.py",
                                      repo=REPO, base=REPO)
        namespace: dict = {"__name__": "single"}
        exec(compile(single.text, "single.py", "exec"), namespace)  # noqa: S102 -- under test
        expected = namespace[single.name]()
        got = getattr(module, recipe.name)()
        assert from_yaml.differences(expected, got) == [], recipe.name
    for family in result.families:  # a shared function builds what the plan says
        assert from_yaml.differences(family.config, getattr(module, family.name)()) == []
    assert set(module.__all__) == {f.name for f in result.functions()}


# ---------------------------------------------------------------------------------------------
# the plan on the fixtures
# ---------------------------------------------------------------------------------------------


def _target(line) -> str:
    """The field a line sets (or deletes)."""
    return line.code.split(" = ", 1)[0].removeprefix("del ")


def _chains(result: fleet.Fleet) -> dict[str, list]:
    """Each function -> the functions from the top of its tree down to it."""
    by_call = {f"{f.name}()": f for f in result.functions()}
    chains = {}
    for function in result.functions():
        chain = [function]
        while chain[0].parent in by_call:
            chain.insert(0, by_call[chain[0].parent])
        chains[function.name] = chain
    return chains


@pytest.mark.parametrize("which", ["examples", "family"])
def test_no_field_is_set_twice_on_the_way_to_a_recipe(request, which):
    """Along every path from a baseline to a recipe each field is set at most once: no function
    re-sets what a function it calls already set."""
    result = request.getfixturevalue(which)
    for name, chain in _chains(result).items():
        targets = [_target(line) for function in chain for line in function.lines]
        assert len(targets) == len(set(targets)), name
        assert len(chain) == len({f.name for f in chain}), name  # no cycle


@pytest.mark.parametrize("which", ["examples", "family"])
def test_every_recipe_below_a_family_keeps_all_its_settings(request, which):
    """A family holds only what all the recipes below it share: none of them changes a field
    the family (or what it calls) sets, and every family has a line and two callers."""
    result = request.getfixturevalue(which)
    recipes = {r.name: r for r in result.recipes}
    chains = _chains(result)
    for family in result.families:
        assert family.lines, family.name
        set_here = {line.keys for f in chains[family.name] for line in f.lines}
        callers = [f for f in result.functions() if f.parent == f"{family.name}()"]
        assert len(callers) >= 2, family.name
        assert family.files == [r.name for r in result.recipes
                                if family in chains[r.name]]
        for name in family.files:
            changed = from_yaml.field_changes(family.config, recipes[name].goal)
            assert not {c.path for c in changed} & {
                c.path for c in from_yaml.field_changes(family.baseline.config, family.config)
            }, (family.name, name)
        assert set_here  # provenance paths recorded


def test_family_tree(family):
    parents = {f.name: f.parent for f in family.functions()}
    assert family.base == "family_base"
    assert parents == {
        "family_base": "flavor_baseline('qwen3_5', 'debugmodel')",
        # what family_cpu (and so family_cpu_eval) and family_tp2 share beyond the base: steps,
        # batch, warmup; not the lr.
        "family_cpu_tp2_shared": "family_base()",
        "family_cpu": "family_cpu_tp2_shared()",
        "family_cpu_eval": "family_cpu()",  # family_cpu + three keys: its recipe serves
        "family_fsdp2": "family_base()",
        "family_tp2": "family_cpu_tp2_shared()",
        "family_wide": "flavor_baseline('qwen3_5')",  # another flavor: its own baseline
    }
    shared = next(f for f in family.families if f.name == "family_cpu_tp2_shared")
    assert shared.files == ["family_cpu", "family_cpu_eval", "family_tp2"]
    # In the order of HyperTrainer.Config: the sections, then each section's fields.
    assert [_target(line) for line in shared.lines] == [
        "config.lr_scheduler.warmup_steps", "config.training.steps",
        "config.training.global_batch_size"]
    eval_recipe = next(r for r in family.recipes if r.name == "family_cpu_eval")
    assert [_target(line) for line in eval_recipe.lines] == [
        "config.checkpoint.interval", "config.validation.freq", "config.validation.dataset_path"]
    # What still repeats is shared with family_wide, on another baseline: no function can hold
    # it.
    repeated = family.repeated()
    assert sum(len(n) - 1 for n in repeated.values()) == 4
    assert family.repeated_across_baselines() == 4
    assert all("family_wide" in names for names in repeated.values())


def test_examples_tree(examples):
    parents = {f.name: f.parent for f in examples.functions()}
    assert examples.base == "train_qwen3_5_base"
    assert parents == {
        "train_qwen3_5_base": "flavor_baseline('qwen3_5', 'debugmodel')",
        "train_qwen3_5_debug_hsdp_tp2_shared": "train_qwen3_5_base()",
        "train_qwen3_5_debug_tp2_shared": "train_qwen3_5_debug_hsdp_tp2_shared()",
        "train_qwen3_5_demo_fsdp2_shared": "train_qwen3_5_base()",
        "train_qwen3_5_0_8b": "flavor_baseline('qwen3_5')",  # the other flavor, alone
        "train_qwen3_5_debug": "train_qwen3_5_debug_tp2_shared()",
        "train_qwen3_5_demo": "train_qwen3_5_demo_fsdp2_shared()",
        "train_qwen3_5_fsdp2": "train_qwen3_5_demo_fsdp2_shared()",
        "train_qwen3_5_hsdp": "train_qwen3_5_debug_hsdp_tp2_shared()",
        "train_qwen3_5_tp2": "train_qwen3_5_debug_tp2_shared()",
    }
    # Families first, parents before children; then the recipes in file order.
    order = [name.split("(")[0] for name in examples.text.split("\ndef ")[1:]]
    assert order == [f.name for f in examples.functions()]
    repeated = examples.repeated()
    # 10 lines are shared with train_qwen3_5_0_8b, on its own baseline; 9 are shared by two
    # functions in different branches of the tree (a tree holds nested sets only).
    assert sum(len(n) - 1 for n in repeated.values()) == 19
    assert examples.repeated_across_baselines() == 10


def test_a_recipe_can_be_what_a_family_starts_from(tmp_path):
    """``a`` is what all four files share, so it serves (``d``, a copy, calls it with no line);
    ``b`` and ``c`` share three more lines: their family starts from ``a()`` and comes right
    after it in the module."""
    cpu = (FAMILY / "family_cpu.yaml").read_text()
    evaluation = (FAMILY / "family_cpu_eval.yaml").read_text()
    (tmp_path / "a.yaml").write_text(cpu)
    (tmp_path / "d.yaml").write_text(cpu)
    for name, seed in (("b", 11), ("c", 22)):
        (tmp_path / f"{name}.yaml").write_text(
            evaluation.replace("  max_steps: 10\n", f"  max_steps: 10\n  seed: {seed}\n"))
    result = fleet.convert_fleet(fleet.resolve_inputs([str(tmp_path)], base=tmp_path),
                                 output=tmp_path / "reg" / "config_registry.py", repo=REPO,
                                 base=tmp_path)
    assert {f.name: (f.parent, len(f.lines)) for f in result.functions()} == {
        "a": ("flavor_baseline('qwen3_5', 'debugmodel')", 12), "b_c_shared": ("a()", 3),
        "b": ("b_c_shared()", 1), "c": ("b_c_shared()", 1), "d": ("a()", 0)}
    assert [f.name for f in result.functions()] == ["a", "b_c_shared", "b", "c", "d"]
    assert result.base is None and result.repeated() == {}


@pytest.mark.parametrize("names, members, base, taken, expected", [
    (["run_a", "run_b", "run_c"], [["run_a", "run_b", "run_c"], ["run_a", "run_b"]], 0, set(),
     ["run_base", "run_a_b_shared"]),
    # A recipe (or an import) already has the name: numbered instead.
    (["run_a", "run_b", "run_a_b_shared"], [["run_a", "run_b"]], None, set(), ["run_shared_1"]),
    (["run_a", "run_b"], [["run_a", "run_b"]], None, {"run_a_b_shared"}, ["run_shared_1"]),
    # More than three members, or a member named like the prefix itself: numbered.
    (["t_a", "t_b", "t_c", "t_d", "t"], [["t_a", "t_b", "t_c", "t_d"], ["t", "t_a"]], None,
     set(), ["t_shared_1", "t_shared_2"]),
    (["x_1", "x_2", "x_3", "x_4"], [["x_1", "x_2", "x_3", "x_4"], ["x_1", "x_2"]], None,
     {"x_shared_1"}, ["x_shared_2", "x_1_2_shared"]),
])
def test_family_names_never_collide(names, members, base, taken, expected):
    assert fleet.family_names(names, members, base, taken) == expected


def test_shared_lines_say_so_and_carry_comments_once(family):
    base = family.text.split("def family_base", 1)[1].split("\ndef ", 1)[0]
    # One comment: the key, how many YAMLs share it, its line, and the YAMLs' comment on it,
    # once although two YAMLs write it.
    assert ("    # train.comm_backend (4 of 5 YAMLs, line 15): CPU ranks talk over gloo\n"
            "    config.comm.backend = \"gloo\"\n") in base
    assert family.text.count("CPU ranks talk over gloo") == 1
    assert ("# model.{name, config_overrides.flavor} (4 of 5 YAMLs, lines 3-5): the small model "
            "every CPU run uses\n    config = flavor_baseline(") in base
    shared = family.text.split("def family_cpu_tp2_shared()", 1)[1].split("\ndef ", 1)[0]
    assert "config.training.steps = 10  # train.max_steps (3 of 5 YAMLs, line 12)" in shared
    doc = " ".join(shared.split('"""')[1].split())
    assert doc.startswith("The settings shared by family_cpu, family_cpu_eval and family_tp2 (3 "
                          "of the 5 YAMLs): what family_base sets, and the 3 fields")
    assert "config = family_base()  # the settings shared by 4 of 5 YAMLs" in shared
    cpu = family.text.split("def family_cpu()", 1)[1].split("\ndef ", 1)[0]
    # The YAML's header goes to its recipe's docstring.
    cpu_doc = cpu.split('"""')[1]
    assert "The YAML's header comment:\n\n        The family's one-rank CPU run" in cpu_doc
    assert "config.optimizer.lr = 0.001  # train.optimizer.lr (line 17)\n" in cpu
    doc = family.text.split('"""', 2)[1]
    assert "fleet_family/family_cpu.yaml" in doc and "(sha256 " in doc
    assert "--from-yaml tests/codegen/fleet_family" in " ".join(doc.split())
    assert "``family_base`` and ``family_cpu_tp2_shared``" in " ".join(doc.split())
    assert "_trainer_config_to_legacy" not in doc and "``_" not in family.text.split("def ")[0]


def test_report_is_one_table(family):
    text = fleet.conversion_report(family, base=REPO)
    lines = text.splitlines()
    assert lines[0] == "from-yaml: 5 YAMLs -> recipes/config_registry.py"
    assert lines[1].split() == ["file", "recipe", "base", "lines", "normalisations", "proof"]
    rows = {line.split()[1]: line.split() for line in lines[3:10]}
    assert rows["family_base"][:3] == ["(shared)", "family_base", "flavor_baseline('qwen3_5',"]
    assert rows["family_cpu_tp2_shared"] == ["(shared)", "family_cpu_tp2_shared",
                                             "family_base()", "3", "-", "-"]
    assert rows["family_cpu_eval"] == ["tests/codegen/fleet_family/family_cpu_eval.yaml",
                                       "family_cpu_eval", "family_cpu()", "3", "0", "ok"]
    assert (f"module: {family.line_count} lines; lines repeated across recipes: 4 (4 between "
            "recipes on different baselines, which share no function)") in text


def test_line_counts_against_single_file_conversions():
    counts = fleet.line_counts([EXAMPLES], repo=REPO, base=REPO)
    assert counts["files"] == 6 and set(counts["per_file"]) == {
        f"examples/yaml/{p.name}" for p in EXAMPLES.glob("*.yaml")}
    assert counts["module_lines"] < counts["single_lines"]
    assert counts["repeated_lines"] == 19 and counts["repeated_across_baselines"] == 10
    assert counts["families"][0] == "train_qwen3_5_base"


# ---------------------------------------------------------------------------------------------
# the planner alone (item sets)
# ---------------------------------------------------------------------------------------------


def _check_hierarchy(sets: list[frozenset], tree: fleet.Hierarchy, cost: int) -> None:
    n = tree.files
    assert tree.items[:n] == tuple(sets)
    for node in range(len(tree.items)):
        assert len(tree.ancestors(node)) < len(tree.items)  # no cycle (ancestors terminates)
        parent = tree.parent[node]
        if parent is not None:
            assert tree.items[node] >= tree.items[parent]  # a member holds its family's items
            assert not tree.lines(node) & tree.items[parent]
    for family in tree.families:
        below = tree.below(family)
        assert len(tree.children(family)) >= 2
        assert tree.lines(family)  # at least one line of its own
        # exactly what the files below it share
        assert tree.items[family] == frozenset.intersection(*(sets[f] for f in below))
        assert all(sets[f] != tree.items[family] for f in below)  # else that file would serve
    for f in range(n):  # a file's lines and its ancestors' add up to its items, each once
        chain = [f] + tree.ancestors(f)
        lines = [item for node in chain for item in tree.lines(node)]
        assert len(lines) == len(set(lines)) and set(lines) == sets[f]
    assert tree.cost(cost) <= sum(len(s) for s in sets)
    # Greedy to the end: no group left in any scope that would still save a line.
    scopes = [None] + list(range(len(tree.items)))
    for scope in scopes:
        members = tree.children(scope) if scope is not None else [
            m for m in range(len(tree.items)) if tree.parent[m] is None]
        above = frozenset() if scope is None else tree.items[scope]
        for a in members:
            for b in members:
                if a >= b:
                    continue
                shared = tree.items[a] & tree.items[b]
                group = [m for m in members if tree.items[m] >= shared]
                served = any(tree.items[m] == shared for m in group)
                saving = (len(group) - 1) * len(shared - above) - (0 if served else cost)
                assert saving <= 0 or not shared - above, (scope, a, b)


@pytest.mark.parametrize("sets, parents", [
    # Nothing shared: every file on the baseline.
    ([{1}, {2}, {3}], [None, None, None]),
    # Three files share two items: one family of 2 lines saves 2 * 2 - 2.
    ([{1, 2, 3}, {1, 2, 4}, {1, 2, 5}], [3, 3, 3, None]),
    # A file whose items the other holds: it serves (no new function).
    ([{1, 2}, {1, 2, 3}], [None, 0]),
    # Two items for two files: a family would cost as much as it saves.
    ([{1, 2, 3}, {1, 2, 4}], [None, None]),
    # A family inside the base: 4 files share {1, 2}, two of them also {3, 4, 5}.
    ([{1, 2, 3, 4, 5, 6}, {1, 2, 3, 4, 5, 7}, {1, 2, 8}, {1, 2, 9}], [5, 5, 4, 4, None, 4]),
    # The two files sharing most go first; then a base of {1} for three nodes would save
    # 2 * 1 - 2 = 0 lines: {1} stays repeated (in the family and in files 2 and 3).
    ([{1, 2, 3, 4, 5}, {1, 2, 3, 4, 6}, {1, 7}, {1, 8}], [4, 4, None, None, None]),
    # Identical files: the first serves the second.
    ([{1, 2}, {1, 2}], [None, 0]),
])
def test_plan_hierarchy_examples(sets, parents):
    sets = [frozenset(s) for s in sets]
    tree = fleet.plan_hierarchy(sets)
    assert list(tree.parent) == parents
    _check_hierarchy(sets, tree, fleet.FAMILY_COST)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.frozensets(st.integers(0, 9), max_size=8), min_size=1, max_size=7),
       st.integers(0, 5))
def test_plan_hierarchy_properties(sets, cost):
    tree = fleet.plan_hierarchy(sets, cost)
    _check_hierarchy(sets, tree, cost)
    assert fleet.plan_hierarchy(list(sets), cost) == tree  # deterministic


def _reference_plan(item_sets: list[frozenset], family_cost: int) -> fleet.Hierarchy:
    """The planner as first written, the specification of :func:`fleet.plan_hierarchy`: every
    pair of every scope, after every merge (cubic in the files or worse); from the flat
    files, and from one family with what they all have, the cheaper (a tie: the first)."""
    greedy = _reference_greedy(item_sets, family_cost, from_core=False)
    based = _reference_greedy(item_sets, family_cost, from_core=True)
    if based is None or based.cost(family_cost) >= greedy.cost(family_cost):
        return greedy
    return based


def _reference_greedy(item_sets: list[frozenset], family_cost: int, *, from_core: bool
                      ) -> fleet.Hierarchy | None:
    items = [frozenset(s) for s in item_sets]
    files = len(items)
    parent: list[int | None] = [None] * files
    first = list(range(files))
    if from_core:
        core = frozenset.intersection(*items)
        server = next((m for m in range(files) if items[m] == core), None)
        if files < 2 or not core or (files - 1) * len(core) - (
                0 if server is not None else family_cost) <= 0:
            return None
        if server is None:
            server = files
            items.append(core)
            parent.append(None)
            first.append(0)
        for m in range(files):
            if m != server:
                parent[m] = server
    while True:
        children: dict[int | None, list[int]] = {}
        for node in sorted(range(len(items)), key=lambda n: first[n]):
            children.setdefault(parent[node], []).append(node)
        best = None
        for scope, members in children.items():
            above = frozenset() if scope is None else items[scope]
            seen = set()
            for position, a in enumerate(members):
                for b in members[position + 1:]:
                    shared = items[a] & items[b]
                    group = tuple(m for m in members if items[m] >= shared)
                    if not shared - above or group in seen:
                        continue
                    seen.add(group)
                    server = next((m for m in group if items[m] == shared), None)
                    saving = (len(group) - 1) * len(shared - above) - (
                        0 if server is not None else family_cost)
                    key = (-saving, -len(group), -len(shared), [first[m] for m in group])
                    if saving > 0 and (best is None or key < best[0]):
                        best = (key, scope, group, shared, server)
        if best is None:
            return fleet.Hierarchy(files, tuple(items), tuple(parent))
        _, scope, group, shared, server = best
        if server is None:
            server = len(items)
            items.append(shared)
            parent.append(scope)
            first.append(min(first[m] for m in group))
        for m in group:
            if m != server:
                parent[m] = server


def _fleet_sets(seed: int, files: int, dims: tuple[int, ...] = (4, 4, 5, 3, 3),
                common: int = 12) -> list[frozenset]:
    """Item sets shaped like a fleet of variants: ``common`` items every file has, one value of
    each dimension (``dims``: how many values each has), one item of its own."""
    rng = random.Random(seed)
    return [frozenset(range(common)) | {(d, rng.randrange(n)) for d, n in enumerate(dims)}
            | {("own", f)} for f in range(files)]


def _random_sets(seed: int, files: int = 40, universe: int = 30, size: int = 10
                 ) -> list[frozenset]:
    rng = random.Random(seed)
    return [frozenset(rng.sample(range(universe), rng.randint(0, size))) for _ in range(files)]


def _one_base_cost(sets: list[frozenset], cost: int) -> int:
    """The cost of the simplest plan: one family with what every file has, when it saves."""
    core = frozenset.intersection(*sets)
    spread = sum(len(s) for s in sets)
    return min(spread, spread - (len(sets) - 1) * len(core) + cost)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.frozensets(st.integers(0, 9), max_size=8), min_size=1, max_size=12),
       st.integers(0, 5))
# Greedy alone split these (a pair first, saving 3 lines) and cost 17 against one base's 16.
@example([frozenset({0, 1, 2, 3, 4, 5}), frozenset({0, 1, 2, 3, 5, 9}),
          frozenset({0, 1, 2, 3, 4, 9})], 4)
def test_plan_hierarchy_is_the_reference_plan(sets, cost):
    sets = sets + sets[:len(sets) // 3]  # identical files too
    tree = fleet.plan_hierarchy(sets, cost)
    assert tree == _reference_plan(sets, cost)
    assert tree.cost(cost) <= _one_base_cost(sets, cost)


@pytest.mark.parametrize("seed", range(4))
def test_plan_hierarchy_is_the_reference_plan_on_fleets(seed):
    sets = _fleet_sets(seed, 12 + 8 * seed, dims=(3, 4, 2, 3)[:seed + 1])
    assert fleet.plan_hierarchy(sets) == _reference_plan(sets, fleet.FAMILY_COST)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.frozensets(st.integers(0, 9), max_size=8), min_size=1, max_size=10),
       st.permutations(range(10)))
def test_plan_hierarchy_ignores_how_items_hash(sets, labels):
    """Renaming the items (other hashes, another order in every set) changes nothing: ties go
    by file order alone."""
    renamed = [frozenset(f"item {labels[i]}" for i in s) for s in sets]
    assert fleet.plan_hierarchy(renamed).parent == fleet.plan_hierarchy(sets).parent


@pytest.mark.parametrize("sets, cost_before", [
    (_fleet_sets(0, 30), 164), (_fleet_sets(1, 45), 222), (_fleet_sets(2, 60), 280),
    (_random_sets(0), 192), (_random_sets(1), 182), (_random_sets(2), 157),
], ids=["fleet30", "fleet45", "fleet60", "random0", "random1", "random2"])
def test_plan_is_no_worse_than_before(sets, cost_before):
    """The costs the planner as first written reached on these sets (lines written, plus
    FAMILY_COST per family)."""
    assert fleet.plan_hierarchy(sets).cost() <= cost_before


def test_planning_1000_files_takes_a_few_evaluations_per_file(monkeypatch):
    """A thousand files plan with a few group evaluations each (the planner as first written
    evaluated every pair of every scope after every merge: about half a million per merge
    here), and the tree is sound."""
    sets = _fleet_sets(7, 1000)
    evaluations = 0
    evaluate = fleet_plan._Planner._candidate

    def counted(self, node, rest):
        nonlocal evaluations
        evaluations += 1
        return evaluate(self, node, rest)

    monkeypatch.setattr(fleet_plan._Planner, "_candidate", counted)
    tree = fleet.plan_hierarchy(sets)
    assert evaluations < 20 * len(sets)
    below = tree.below_each()
    callers = [0] * len(tree.items)
    for parent in tree.parent:
        if parent is not None:
            callers[parent] += 1
    for family in tree.families:
        assert callers[family] >= 2 and tree.lines(family)
        assert tree.items[family] == frozenset.intersection(*(sets[f] for f in below[family]))
    for f in range(tree.files):  # each item set once on the way down to each file
        lines = [item for node in [f, *tree.ancestors(f)] for item in tree.lines(node)]
        assert len(lines) == len(set(lines)) and set(lines) == sets[f]
    assert tree.cost() < _one_base_cost(sets, fleet.FAMILY_COST)
    renamed = [frozenset(map(repr, s)) for s in sets]
    assert fleet.plan_hierarchy(renamed).parent == tree.parent


# ---------------------------------------------------------------------------------------------
# inputs and names
# ---------------------------------------------------------------------------------------------


def test_folders_and_files_mix_in_name_order(tmp_path):
    for name in ("b.yml", "a.yaml", "notes.txt"):
        (tmp_path / "dir").mkdir(exist_ok=True)
        (tmp_path / "dir" / name).write_text("{}\n")
    (tmp_path / "c.yaml").write_text("{}\n")
    inputs = fleet.resolve_inputs([str(tmp_path / "c.yaml"), str(tmp_path / "dir")],
                                  ["--train.seed=1"], base=tmp_path)
    assert [i.path.name for i in inputs.files] == ["c.yaml", "a.yaml", "b.yml"]
    assert all(i.overrides == ("--train.seed=1",) for i in inputs.files)
    assert not inputs.single and inputs.folders
    assert inputs.command() == ("python -m hyper_parallel.codegen --from-yaml c.yaml dir -- "
                                "--train.seed=1")
    one_folder = fleet.resolve_inputs([str(tmp_path / "dir" / "a.yaml")])
    assert one_folder.single
    (tmp_path / "empty").mkdir()
    with pytest.raises(CodegenError, match="holds no"):
        fleet.resolve_inputs([str(tmp_path / "empty")], base=tmp_path)


def test_same_stem_twice_is_refused_with_renames(tmp_path):
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "run.yaml").write_text("{}\n")
    files = [fleet.Input(tmp_path / "one" / "run.yaml"), fleet.Input(tmp_path / "two" / "run.yaml"),
             fleet.Input(tmp_path / "bad-name.yaml")]
    with pytest.raises(CodegenError) as info:
        fleet.recipe_names(files, base=tmp_path)
    text = str(info.value)
    assert "2 YAMLs would become the recipe 'run': one/run.yaml, two/run.yaml" in text
    assert "rename all but one (e.g. two_run.yaml)" in text
    assert "'bad-name' (from the file name 'bad-name.yaml') is not a Python identifier; rename " \
           "the file (e.g. to bad_name.yaml)" in text


@pytest.mark.parametrize("names, taken, expected", [
    (["train_a", "train_b"], set(), "train_base"),
    (["train_a", "train_base"], set(), "train_shared"),
    (["alpha", "beta"], set(), "base"),
    (["base", "shared", "x"], set(), "base_2"),
    (["run_a", "run_b"], {"run_base"}, "run_shared"),
])
def test_base_name_never_collides(names, taken, expected):
    assert fleet.base_name(names, taken) == expected


# ---------------------------------------------------------------------------------------------
# the command line (in-process)
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_cli_writes_one_registry_and_its_recipes_load(workdir, capsys):
    from hyper_parallel.config.recipes import load_recipe

    shutil.copytree(FAMILY, workdir / "family")
    assert main(["--from-yaml", "family", "-o", "myfleet/config_registry.py"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("from-yaml: 5 YAMLs -> myfleet/config_registry.py\n")
    text = (workdir / "myfleet" / "config_registry.py").read_text()
    assert "--module myfleet.config_registry --config family_cpu_eval" in text
    config = load_recipe("myfleet", "family_cpu_eval")
    assert config.validation.freq == 5 and config.comm.backend == "gloo"
    # An existing output is kept without --force.
    assert main(["--from-yaml", "family", "-o", "myfleet/config_registry.py"]) == 1
    assert "exists; nothing was written" in capsys.readouterr().err


def test_cli_default_output_and_overrides_for_every_file(workdir, capsys):
    shutil.copytree(FAMILY, workdir / "family")
    files = sorted(str(p.relative_to(workdir)) for p in (workdir / "family").glob("*.yaml"))
    assert main(["--from-yaml", *files[:3], "--", "--train.max_steps=50"]) == 0
    text = (workdir / "recipes" / "config_registry.py").read_text()
    base = text.split("def family_base", 1)[1].split("\ndef ", 1)[0]
    # Every file has the override, so the base sets it once.
    assert "config.training.steps = 50  # command line: --train.max_steps=50 (all 3 YAMLs)" in base
    assert "The overrides after ``--`` apply to every YAML." in " ".join(text.split())


def test_cli_refuses_name_with_several_files(workdir, capsys):
    with pytest.raises(SystemExit) as info:
        main(["--from-yaml", str(FAMILY), "--name", "x"])
    assert info.value.code == 2
    assert "--name goes with one YAML" in capsys.readouterr().err
    assert not (workdir / "recipes").exists()


def test_cli_strict_applies_to_every_file(workdir, capsys):
    """One file of the family needs a normalisation (its warmup ratio): nothing is written."""
    assert main(["--from-yaml", str(FAMILY), "--strict"]) == 1
    err = capsys.readouterr().err
    assert err.count("--strict refuses the conversion") == 1
    assert "family_wide.yaml: --strict refuses" in err
    assert not (workdir / "recipes").exists()
    names = [str(p) for p in sorted(FAMILY.glob("*.yaml")) if p.name != "family_wide.yaml"]
    assert main(["--from-yaml", *names, "--strict"]) == 0


def test_a_failed_proof_writes_nothing(workdir, capsys, monkeypatch):
    real = recipe_changes.field_changes

    def lossy(base, target, path=()):
        changes = real(base, target, path)
        return [c for c in changes if c.dotted != "debug.seed"] if not path else changes

    monkeypatch.setattr(recipe_changes, "field_changes", lossy)
    assert main(["--from-yaml", str(EXAMPLES / "train_qwen3_5_debug.yaml"),
                 str(EXAMPLES / "train_qwen3_5_tp2.yaml")]) == 1
    err = capsys.readouterr().err
    assert "recipe train_qwen3_5_tp2 does not reproduce the YAML, so nothing was written" in err
    assert "debug.seed: expected 1234" in err
    assert not (workdir / "recipes").exists()


def test_whole_process_cli(tmp_path):
    """One real process: the module is written and the report printed."""
    import subprocess

    out = tmp_path / "reg.py"
    done = subprocess.run([sys.executable, "-m", "hyper_parallel.codegen", "--from-yaml",
                           str(EXAMPLES), "-o", str(out)], cwd=REPO, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "train_qwen3_5_base" in done.stdout and out.read_text().startswith('"""Recipes ')


#: Variants of one example for the fleet tests: each line given one of its values at random.
VARIED = {"    lr: 2.0e-3\n": ("1.0e-3", "2.0e-3", "3.0e-3"), "  seed: 42\n": ("1", "2", "42"),
          "    activation_checkpoint: full\n": ("full", "selective")}


def _variants(count: int, seed: int = 0) -> list[str]:
    """``count`` variants of train_qwen3_5_fsdp2.yaml, each with its own output folder."""
    rng = random.Random(seed)
    text = (EXAMPLES / "train_qwen3_5_fsdp2.yaml").read_text()
    found = []
    for index in range(count):
        variant = text.replace("outputs/qwen3_5_fsdp2", f"outputs/run_{index}")
        for line, values in VARIED.items():
            variant = variant.replace(line, f"{line.split(':')[0]}: {rng.choice(values)}\n")
        found.append(variant)
    return found


def test_fleet_module_ignores_listing_order_and_hash_seed(tmp_path):
    """A folder's files are taken in name order, and neither the plan nor the text hangs on how
    a process hashes: the same folder written in opposite orders and converted by processes with
    other hash seeds gives the same bytes -- and a module no longer than the planner as first
    written gave (296 lines, 11 lines repeated)."""
    outputs = []
    for run, order in (("a", 1), ("b", -1)):
        folder = tmp_path / run / "fleet"
        folder.mkdir(parents=True)
        for index, text in list(enumerate(_variants(10)))[::order]:
            (folder / f"run_{index}.yaml").write_text(text)
        done = subprocess.run([sys.executable, "-m", "hyper_parallel.codegen", "--from-yaml",
                               "fleet", "-o", "reg/config_registry.py"], cwd=folder.parent,
                              env={**os.environ, "PYTHONHASHSEED": str(order % 7)},
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        outputs.append(((folder.parent / "reg" / "config_registry.py").read_text(), done.stdout))
    assert outputs[0] == outputs[1]
    module, report = outputs[0]
    repeated = re.search(r"lines repeated across recipes: (\d+)", report)
    assert len(module.splitlines()) <= 296 and int(repeated.group(1)) <= 11
