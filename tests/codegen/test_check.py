"""``codegen-check`` catches every way a generated file can go stale, says why, and how to fix it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hyper_parallel.codegen import check, pipeline

from .conftest import REPO, edit

CONFIGS = "hyper_parallel/config/configs.py"
ADAPTER = "hyper_parallel/config/legacy_adapter.py"
REFERENCE = "docs/config_reference.md"
REGISTRY = "hyper_parallel/models/qwen3_5_v2/config_registry.py"


def _by_path(stale):
    return {s.path: s for s in stale}


def test_clean_tree_passes(repo_copy):
    assert check(repo_copy) == []


def test_hand_edit_is_caught(repo_copy):
    edit(repo_copy / CONFIGS, "    steps: int = 100\n", "    steps: int = 1000\n")
    stale = _by_path(check(repo_copy))
    assert list(stale) == [CONFIGS]
    item = stale[CONFIGS]
    assert item.reasons == ["edited by hand: the body no longer matches the hash in its header"]
    assert "-    steps: int = 1000\n+    steps: int = 100\n" in item.diff
    assert item.fix == "make codegen"


def test_removed_header_is_caught(repo_copy):
    path = repo_copy / ADAPTER
    path.write_text(path.read_text().split("\n\n", 1)[1])
    (item,) = check(repo_copy)
    assert item.path == ADAPTER
    assert "header is missing" in item.reasons[0]


def test_table_edit_is_caught(repo_copy):
    edit(repo_copy / "codegen" / "field_table.yaml",
         "doc: Total optimizer steps (also the horizon of the LR schedule).",
         "doc: Total optimizer steps.")
    stale = _by_path(check(repo_copy))
    # Every output is generated from the table (the recipe modules are checked against it), so
    # every header is out of date.
    assert sorted(stale) == sorted(pipeline.output_paths(repo_copy))
    assert REGISTRY in stale
    for path, item in stale.items():
        assert item.reasons == [
            "inputs changed: codegen/field_table.yaml (the fields the recipes set) was edited"
            if path == REGISTRY else
            "inputs changed: codegen/field_table.yaml was edited since the file was generated"
        ]
    assert '+    """Total optimizer steps."""' in stale[CONFIGS].diff


def test_template_edit_is_caught(repo_copy):
    edit(repo_copy / "templates" / "config_reference.md.j2", "# Configuration reference",
         "# The configuration reference")
    (item,) = check(repo_copy)
    assert item.path == REFERENCE
    assert item.reasons == ["inputs changed: its template in templates/ was edited"]


def test_generator_edit_is_caught(repo_copy):
    edit(repo_copy / "hyper_parallel" / "codegen" / "render.py", '"""Template contexts',
         '"""The template contexts')
    stale = check(repo_copy)
    assert {s.path for s in stale} == set(pipeline.output_paths(repo_copy))
    assert all(s.reasons == ["generator changed: hyper_parallel/codegen was edited"] for s in stale)


def test_component_docstring_edit_is_caught(repo_copy):
    edit(repo_copy / "hyper_parallel" / "components" / "profiler.py", '"""Steps recorded."""',
         '"""Steps recorded and written."""')
    stale = _by_path(check(repo_copy))
    # Only the outputs that read the introspected schema depend on it.
    assert sorted(stale) == sorted([ADAPTER, REFERENCE])
    assert stale[REFERENCE].reasons == [
        "inputs changed: the legacy schema or a component Config the table checks was edited"
    ]


def test_deleted_file_is_caught(repo_copy):
    (repo_copy / REFERENCE).unlink()
    (item,) = check(repo_copy)
    assert item.path == REFERENCE
    assert item.reasons == ["missing: the file does not exist"]
    assert item.fix == "make codegen"


def test_extra_generated_file_is_caught(repo_copy):
    extra = repo_copy / "hyper_parallel" / "config" / "old_sections.py"
    extra.write_text(f"# {pipeline.MARKER} from codegen/field_table.yaml -- DO NOT EDIT.\nX = 1\n")
    (item,) = check(repo_copy)
    assert item.path == "hyper_parallel/config/old_sections.py"
    assert item.reasons[0].startswith("extra:")
    assert "rm hyper_parallel/config/old_sections.py" in item.fix


def test_report_lists_reason_diff_and_fix(repo_copy):
    edit(repo_copy / CONFIGS, "    steps: int = 100\n", "    steps: int = 1000\n")
    report = pipeline.format_report(check(repo_copy))
    assert f"codegen-check: {CONFIGS} is stale" in report
    assert "reason: edited by hand" in report
    assert f"--- {CONFIGS} (committed)" in report and f"+++ {CONFIGS} (generated)" in report
    assert "fix: make codegen" in report


@pytest.mark.parametrize("args", [["--check"], ["check"]])
def test_cli_check_is_silent_when_clean_and_fails_with_a_diff(repo_copy, args):
    command = [sys.executable, "-m", "hyper_parallel.codegen", *args, "--root", str(repo_copy)]
    clean = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    assert (clean.returncode, clean.stdout, clean.stderr) == (0, "", "")
    if args == ["check"]:
        return
    edit(repo_copy / CONFIGS, "    steps: int = 100\n", "    steps: int = 1000\n")
    stale = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    assert stale.returncode == 1
    assert "+    steps: int = 100" in stale.stderr and "fix: make codegen" in stale.stderr


def test_cli_reports_a_broken_table_with_exit_2(repo_copy):
    edit(repo_copy / "codegen" / "field_table.yaml", "  - {kind: rename, legacy: data.pin_memory, "
         "new: dataloader.pin_memory,\n     probe: {observe: log, set: {dataloader.pin_memory: "
         "true}}}\n", "")
    command = [sys.executable, "-m", "hyper_parallel.codegen", "--root", str(repo_copy)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    assert result.returncode == 2
    assert "legacy field data.pin_memory" in result.stderr and "nothing was written" in result.stderr
    assert pipeline.find_generated(repo_copy)  # the committed outputs are untouched


# ---------------------------------------------------------------------------------------------
# recipes/ -- the recipe of every example YAML
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def with_examples(repo_copy):
    """repo_copy plus examples/yaml and the committed recipes/."""
    import shutil

    shutil.copytree(REPO / "examples", repo_copy / "examples")
    shutil.copytree(REPO / "recipes", repo_copy / "recipes",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return repo_copy


DEMO_RECIPE = "recipes/train_qwen3_5_demo.py"


def test_committed_example_recipes_are_current(with_examples):
    assert check(with_examples) == []


def test_edited_example_yaml_makes_its_recipe_stale(with_examples):
    edit(with_examples / "examples" / "yaml" / "train_qwen3_5_demo.yaml", "  max_steps: 20\n",
         "  max_steps: 30\n")
    (item,) = check(with_examples)
    assert item.path == DEMO_RECIPE
    assert item.reasons == [("inputs changed: examples/yaml/train_qwen3_5_demo.yaml was edited "
                             "since its recipe was converted")]
    assert "+    config.training.steps = 30" in item.diff


def test_hand_edited_recipe_is_caught(with_examples):
    edit(with_examples / DEMO_RECIPE, "config.training.steps = 20", "config.training.steps = 21")
    (item,) = check(with_examples)
    assert item.path == DEMO_RECIPE and "edited by hand" in item.reasons[0]


def test_recipe_of_a_removed_example_is_extra_and_user_recipes_are_left_alone(with_examples):
    (with_examples / "examples" / "yaml" / "train_qwen3_5_hsdp.yaml").unlink()
    mine = with_examples / "recipes" / "mine.py"
    mine.write_text('"""Recipe mine, converted from /home/me/old.yaml\n"""\n')
    (item,) = check(with_examples)
    assert item.path == "recipes/train_qwen3_5_hsdp.py" and item.reasons[0].startswith("extra:")
    pipeline.write(with_examples, pipeline.generate(with_examples))
    assert not (with_examples / "recipes" / "train_qwen3_5_hsdp.py").exists()
    assert mine.exists()


def test_broken_generated_files_are_reported_not_crashed_on(repo_copy):
    """Conflict markers and bytes that are not UTF-8 are just stale files (the generator reads
    the table and the classes it describes, never the files it writes)."""
    path = repo_copy / CONFIGS
    path.write_text(path.read_text() + "<<<<<<< HEAD\nx = 1\n=======\nx = 2\n>>>>>>> other\n")
    (repo_copy / REGISTRY).write_bytes(b"\xff\xfe\x00 not utf-8\n")
    stale = _by_path(check(repo_copy))
    assert sorted(stale) == sorted([CONFIGS, REGISTRY])
    assert "+>>>>>>> other" not in stale[CONFIGS].diff and "->>>>>>> other" in stale[CONFIGS].diff
    pipeline.write(repo_copy, pipeline.generate(repo_copy))
    assert check(repo_copy) == []


def test_a_recipe_that_could_not_be_verified_is_said_so():
    item = pipeline.Stale("recipes/x.py", ["why"], "", "make codegen", verdict="not verified")
    assert pipeline.format_report([item]).startswith("codegen-check: recipes/x.py is not verified")
