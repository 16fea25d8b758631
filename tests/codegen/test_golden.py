"""Golden files: the committed generated files are exactly what the generator produces, and the
output is byte-stable (same input, same bytes; black's result is a fixed point)."""

from __future__ import annotations

from pathlib import Path

import black
import pytest

from hyper_parallel.codegen import OUTPUTS, generate, output_paths, pipeline, render, write

from .conftest import REPO

#: Every generated file: the table's outputs, one recipe module per model descriptor and one
#: recipe per example YAML.
PATHS = output_paths(REPO)
REGISTRY = "hyper_parallel/models/qwen3_5_v2/config_registry.py"
EXAMPLE_RECIPES = pipeline.example_recipes(REPO)
#: The files that carry the generated header (the example recipes carry their YAML's hash in
#: their docstring instead: they are exactly what --from-yaml writes for a user).
HEADED = [p for p in PATHS if p not in EXAMPLE_RECIPES]


@pytest.fixture(scope="module")
def generation():
    return generate(REPO)


def test_every_output_is_produced(generation):
    assert sorted(generation.files) == sorted(PATHS)
    assert {o.path for o in OUTPUTS} | {REGISTRY} | set(EXAMPLE_RECIPES) == set(PATHS)
    yamls = sorted(p.name for p in (REPO / "examples" / "yaml").glob("*.yaml"))
    assert sorted(Path(p).name for p in EXAMPLE_RECIPES.values()) == yamls


@pytest.mark.parametrize("path", PATHS)
def test_committed_file_is_the_generator_output(generation, path):
    committed = (REPO / path).read_text(encoding="utf-8")
    assert committed == generation.files[path], (
        f"{path} differs from the generator's output; run `make codegen` (see `make codegen-check`"
        " for the diff)"
    )


@pytest.mark.parametrize("path", sorted(EXAMPLE_RECIPES))
def test_example_recipe_records_its_yaml_and_hash(generation, path):
    import hashlib

    yaml_rel = EXAMPLE_RECIPES[path]
    sha = hashlib.sha256((REPO / yaml_rel).read_bytes()).hexdigest()
    name = Path(path).stem
    head = generation.files[path].split("\n", 2)
    assert head[0] == f'"""Recipe {name}, converted from {yaml_rel}'
    assert head[1] == f"(sha256 {sha})."
    assert f"--module recipes.{name} --config {name}" in generation.files[path]


@pytest.mark.parametrize("path", HEADED)
def test_header_names_inputs_hash_and_command(generation, path):
    text = generation.files[path]
    head = text.split("\n", 6)[:6]
    joined = "\n".join(head)
    assert pipeline.MARKER in head[0] and "DO NOT EDIT" in head[0]
    assert "make codegen" in joined
    assert "codegen/field_table.yaml" in joined and "templates/" in joined
    parts, body = pipeline.split_header(text)
    assert set(parts) >= {"table", "template", "generator", "schema", "body"}
    assert parts["body"] == pipeline._sha(body)[:12]
    assert "Inputs sha256: " in joined
    if path == REGISTRY:
        # A recipe module names its descriptor first and records the descriptor's hash.
        assert head[0].endswith("from codegen/models/qwen3_5.yaml -- DO NOT EDIT.")
        assert "Inputs: codegen/models/qwen3_5.yaml, codegen/field_table.yaml" in joined
        assert "templates/config_registry.py.j2" in joined
        assert "descriptor" in parts


@pytest.mark.parametrize("path", [p for p in PATHS if p.endswith(".py")])
def test_formatting_twice_changes_nothing(generation, path):
    text = generation.files[path]
    once = black.format_str(text, mode=render.black_mode())
    assert once == text
    assert black.format_str(once, mode=render.black_mode()) == once


def test_generation_is_deterministic(generation):
    render._format_cached.cache_clear()  # make black run again for real
    assert generate(REPO).files == generation.files


def test_output_ignores_the_black_configuration_of_the_tree(repo_copy, generation):
    # black is called in-process with explicit settings: a pyproject.toml cannot change it.
    (repo_copy / "pyproject.toml").write_text("[tool.black]\nline-length = 60\nskip-string-normalization = true\n")
    produced = generate(repo_copy).files
    for path, text in produced.items():
        # Only the generator-hash part may differ... and it does not: the copy is identical.
        assert text == generation.files[path]


def test_second_run_writes_nothing(repo_copy):
    first = write(repo_copy, generate(repo_copy))
    assert first == []  # the copy holds the committed, current files
    (repo_copy / "docs" / "config_reference.md").unlink()
    assert write(repo_copy, generate(repo_copy)) == ["docs/config_reference.md"]
    assert write(repo_copy, generate(repo_copy)) == []


def test_write_is_atomic_and_removes_extra_generated_files(repo_copy):
    stale = repo_copy / "hyper_parallel" / "config" / "old_generated.py"
    stale.write_text(f"# {pipeline.MARKER} from x -- DO NOT EDIT.\nX = 1\n")
    changed = write(repo_copy, generate(repo_copy))
    assert changed == ["hyper_parallel/config/old_generated.py"] and not stale.exists()
    leftovers = [p for p in repo_copy.rglob("*.tmp")]
    assert leftovers == []


def test_generated_python_passes_ruff(generation, tmp_path):
    ruff = pytest.importorskip("ruff")
    import subprocess
    import sys

    del ruff
    for path, text in generation.files.items():
        if path.endswith(".py"):
            target = tmp_path / Path(path).name
            target.write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--line-length", "100", str(tmp_path)],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
