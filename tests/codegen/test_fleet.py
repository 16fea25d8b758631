"""Fleet migration: ``--from-yaml a.yaml b.yaml dir/`` writes one registry module (a base recipe
with what the files share, one recipe per file), proven recipe by recipe.

Goldens (``golden/fleet/``): the module of the six ``examples/yaml`` files, and the module and
report of the family in ``fleet_family/`` (shared settings, a nested sibling, non-nested
differences, another flavor). Update them on purpose (then review the diff):

    HYPER_PARALLEL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/codegen/test_fleet.py
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

from hyper_parallel.codegen import fleet, from_yaml
from hyper_parallel.codegen.__main__ import main
from hyper_parallel.codegen.errors import CodegenError

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
    _check_golden(GOLDEN / "family_config_registry.out", fleet.report(family, base=REPO) + "\n")


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
    assert set(module.__all__) == {r.name for r in result.recipes} | (
        {result.base} if result.base else set())


def test_base_and_sibling_choice(family):
    parents = {r.name: r.parent for r in family.recipes}
    assert family.base == "family_base"
    assert parents == {
        "family_cpu": "family_base()",
        "family_cpu_eval": "family_cpu()",  # family_cpu + three keys: the nested sibling
        "family_fsdp2": "family_base()",
        "family_tp2": "family_base()",
        "family_wide": "flavor_baseline('qwen3_5')",  # another flavor: its own baseline
    }
    assert sorted(family.members) == ["family_cpu", "family_cpu_eval", "family_fsdp2",
                                      "family_tp2"]
    eval_recipe = next(r for r in family.recipes if r.name == "family_cpu_eval")
    assert [line.code.split(" = ")[0] for line in eval_recipe.lines] == [
        "config.checkpoint.interval", "config.validation.freq", "config.validation.dataset_path"]
    # Overlapping but not nested: family_cpu and family_tp2 both set these (counted, shown).
    repeated = family.repeated()
    assert repeated["config.training.steps = 10"] == ["family_cpu", "family_tp2"]


def test_shared_lines_say_so_and_carry_comments_once(family):
    base = family.text.split("def family_base", 1)[1].split("\ndef ", 1)[0]
    assert "config.comm.backend = \"gloo\"  # train.comm_backend: 4 of 5 YAMLs, line 15" in base
    assert base.count("# CPU ranks talk over gloo") == 1  # written in two YAMLs
    assert "# the small model every CPU run uses" in base
    assert family.text.count("# CPU ranks talk over gloo") == 1
    cpu = family.text.split("def family_cpu()", 1)[1].split("\ndef ", 1)[0]
    assert "# The family's one-rank CPU run" in cpu and "family_cpu.yaml:12 train.max_steps" in cpu
    doc = family.text.split('"""', 2)[1]
    assert "fleet_family/family_cpu.yaml" in doc and "(sha256 " in doc
    assert "--from-yaml tests/codegen/fleet_family" in " ".join(doc.split())
    assert "_trainer_config_to_legacy" not in doc and "``_" not in family.text.split("def ")[0]


def test_examples_choose_the_shared_flavor_and_leave_the_other_alone(examples):
    parents = {r.name: r.parent for r in examples.recipes}
    assert examples.base == "train_qwen3_5_base"
    assert examples.base_root.code == "flavor_baseline('qwen3_5', 'debugmodel')"
    assert parents["train_qwen3_5_0_8b"] == "flavor_baseline('qwen3_5')"
    assert "train_qwen3_5_demo" in examples.members


def test_report_is_one_table(family):
    text = fleet.report(family, base=REPO)
    lines = text.splitlines()
    assert lines[0] == "from-yaml: 5 YAMLs -> recipes/config_registry.py"
    assert lines[1].split() == ["file", "recipe", "base", "lines", "normalisations", "proof"]
    rows = {line.split()[1]: line.split() for line in lines[3:9]}
    assert rows["family_base"][:3] == ["(shared)", "family_base", "flavor_baseline('qwen3_5',"]
    assert rows["family_cpu_eval"] == ["tests/codegen/fleet_family/family_cpu_eval.yaml",
                                       "family_cpu_eval", "family_cpu()", "3", "0", "ok"]
    assert f"module: {family.line_count} lines; lines repeated across recipes: " in text


def test_line_counts_against_single_file_conversions():
    counts = fleet.line_counts([EXAMPLES], repo=REPO, base=REPO)
    assert counts["files"] == 6 and set(counts["per_file"]) == {
        f"examples/yaml/{p.name}" for p in EXAMPLES.glob("*.yaml")}
    assert counts["module_lines"] < counts["single_lines"]


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
    assert "config.training.steps = 50  # command line: --train.max_steps=50: all 3 YAMLs" in base
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
    real = from_yaml.field_changes

    def lossy(base, target, path=()):
        changes = real(base, target, path)
        return [c for c in changes if c.dotted != "debug.seed"] if not path else changes

    monkeypatch.setattr(from_yaml, "field_changes", lossy)
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
