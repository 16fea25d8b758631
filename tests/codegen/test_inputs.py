"""Each generated file's header hashes only its own inputs, and ``make codegen`` on a current
tree renders nothing.

* The generator modules an output declares (``Output.modules``, hashed into its header) are
  exactly the modules its template context is computed by and everything they import from the
  generator, plus the framing every file gets: a test, so a new import cannot go unhashed.
* A template's inputs are the templates it includes (found as Jinja2 finds them).
* ``pipeline.up_to_date`` says "current" from the recorded hashes alone -- without rendering, black
  or the recipe conversion -- and "not current" after any input or output changed.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hyper_parallel.codegen import OUTPUTS, pipeline
from hyper_parallel.codegen.rendering import framing, outputs, recipe_record, render, templating
from hyper_parallel.codegen.table import descriptors, introspect
from hyper_parallel.codegen.table.coverage import resolve
from hyper_parallel.codegen.table.field_table import load_table

from .conftest import REPO, edit

PACKAGE = "hyper_parallel"
#: Where the closure stops: the legacy schema and the component Configs are introspected, and
#: what is read from them is hashed as the schema part of a header; a package's __init__ is no
#: input of anything.
NOT_FOLLOWED = ("trainer/", "components/", "config/")


def _headed_outputs(repo: Path = REPO) -> tuple[outputs.Output, ...]:
    resolved = resolve(load_table(repo / outputs.TABLE, outputs.TABLE), repo)
    return OUTPUTS + outputs.model_outputs(descriptors.load_descriptors(repo, resolved))


def _module(dotted: str) -> str | None:
    """``hyper_parallel.codegen.table.types`` -> ``codegen/table/types`` when that is a module
    file (a package's ``__init__`` is no input)."""
    if not dotted.startswith(f"{PACKAGE}."):
        return None
    rel = dotted[len(PACKAGE) + 1:].replace(".", "/")
    return rel if (REPO / PACKAGE / f"{rel}.py").is_file() else None


def _imports(name: str) -> set[str]:
    """The package modules ``hyper_parallel/<name>.py`` imports, anywhere in it (function-level
    imports too)."""
    tree = ast.parse((REPO / PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
    package = f"{PACKAGE}.{name.rpartition('/')[0].replace('/', '.')}"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = package + (f".{node.module}" if node.module else "")
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        found |= {module for full in names if (module := _module(full))}
    return found


def _closure(start: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(start)
    while todo:
        name = todo.pop()
        if name not in seen and not name.startswith(NOT_FOLLOWED):
            seen.add(name)
            todo.extend(_imports(name))
    return seen


@pytest.mark.parametrize("out", _headed_outputs(), ids=lambda o: o.path)
def test_declared_generator_modules_are_what_produces_the_file(out):
    renderer = _module(out.renderer)
    assert renderer is not None and renderer.startswith("codegen/")
    produced_by = _closure({renderer, "codegen/rendering/framing", "codegen/rendering/templating"})
    assert set(out.modules) == produced_by, (
        f"{out.path}: declared {sorted(out.modules)}; its template context imports "
        f"{sorted(produced_by)} -- fix the list in hyper_parallel/codegen/rendering/outputs.py")
    assert list(out.modules) == sorted(out.modules)


def test_the_converter_produces_no_configuration_file():
    for out in _headed_outputs():
        assert not {name for name in out.modules if name.startswith("codegen/migration/")}
        assert not {f"codegen/{name}" for name in ("pipeline", "staleness", "__main__")} & set(
            out.modules)


def test_the_import_reader_sees_function_level_imports():
    # pipeline imports from_yaml inside a function; the closure must see it.
    assert "codegen/migration/from_yaml" in _imports("codegen/pipeline")


@pytest.mark.parametrize("template", sorted(p.name for p in (REPO / "templates").glob("*.j2")))
def test_template_inputs_are_the_templates_jinja_references(template, tmp_path):
    import jinja2
    import jinja2.meta

    env = templating.environment(REPO)

    def referenced(name: str, seen: list[str]) -> list[str]:
        seen.append(f"templates/{name}")
        source = env.loader.get_source(env, name)[0]
        for other in jinja2.meta.find_referenced_templates(env.parse(source)):
            if f"templates/{other}" not in seen:
                referenced(other, seen)
        return seen

    assert outputs.template_files(REPO, template) == referenced(template, [])


def test_an_included_template_is_an_input_of_its_includer(current_copy):
    repo_copy = current_copy
    templates = repo_copy / "templates"
    (templates / "part.j2").write_text("{# a shared part #}\n")
    edit(templates / "config_reference.md.j2", "# Configuration reference",
         '{% include "part.j2" %}# Configuration reference')
    assert outputs.template_files(repo_copy, "config_reference.md.j2") == [
        "templates/config_reference.md.j2", "templates/part.j2"]
    pipeline.write(repo_copy, pipeline.generate(repo_copy))
    assert pipeline.up_to_date(repo_copy) is not None
    (templates / "part.j2").write_text("{# a shared part, edited #}\n")
    assert pipeline.up_to_date(repo_copy) is None


# ---------------------------------------------------------------------------------------------
# make codegen on a current tree
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def current_copy(repo_copy):
    """repo_copy made current by one run (the committed files may lag the tree under test)."""
    pipeline.write(repo_copy, pipeline.generate(repo_copy))
    return repo_copy


def test_up_to_date_renders_nothing(current_copy, monkeypatch):
    repo_copy = current_copy
    count = pipeline.up_to_date(repo_copy)
    assert count == len(outputs.output_paths(repo_copy))

    def refuse(*args, **kwargs):
        raise AssertionError("rendered or formatted although every input is unchanged")

    monkeypatch.setattr(pipeline, "environment", refuse)
    monkeypatch.setattr(render, "format_python", refuse)
    assert pipeline.up_to_date(repo_copy) == count


@pytest.mark.parametrize("change", ["table", "template", "generator", "hand edit", "deleted",
                                    "extra", "component"])
def test_up_to_date_notices_every_change(current_copy, change):
    repo_copy = current_copy
    assert pipeline.up_to_date(repo_copy) is not None
    configs = repo_copy / "hyper_parallel" / "config" / "configs.py"
    if change == "table":
        edit(repo_copy / "codegen" / "field_table.yaml",
             "doc: Total optimizer steps (also the horizon of the LR schedule).",
             "doc: Total optimizer steps.")
    elif change == "template":
        edit(repo_copy / "templates" / "config_reference.md.j2", "# Configuration reference",
             "# The configuration reference")
    elif change == "generator":
        edit(repo_copy / "hyper_parallel" / "codegen" / "rendering" / "registry_context.py",
             '"""The template',
             '"""The Jinja2 template')
    elif change == "hand edit":
        edit(configs, "    steps: int = 100\n", "    steps: int = 1000\n")
    elif change == "deleted":
        (repo_copy / "docs" / "config_reference.md").unlink()
    elif change == "extra":
        (repo_copy / "hyper_parallel" / "config" / "old.py").write_text(
            f"# {framing.MARKER} from x -- DO NOT EDIT.\nX = 1\n")
    else:
        edit(repo_copy / "hyper_parallel" / "components" / "profiler.py", '"""Steps recorded."""',
             '"""Steps recorded and written."""')
        introspect.clear_cache()  # a new process reads the source afresh
    assert pipeline.up_to_date(repo_copy) is None


def test_a_broken_table_is_still_an_error(repo_copy):
    from hyper_parallel.codegen import CodegenError

    edit(repo_copy / "codegen" / "field_table.yaml", "schema_version: 1", "schema_version: 2")
    with pytest.raises(CodegenError, match="schema_version 1"):
        pipeline.up_to_date(repo_copy)


@pytest.fixture(scope="module")
def current_whole_copy(tmp_path_factory):
    """The package, the generator's inputs, the example YAMLs and every output, made current
    by one run of the generator *from the copy* (``PYTHONPATH``), which records what the
    recipes were converted from."""
    root = tmp_path_factory.mktemp("whole") / "repo"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("hyper_parallel", "codegen", "templates", "docs", "examples", "recipes"):
        shutil.copytree(REPO / name, root / name, ignore=ignore)
    first = _run(root)
    assert first.returncode == 0, first.stderr
    assert (root / recipe_record.RECORD).is_file()
    return root


@pytest.fixture
def whole_copy(current_whole_copy, tmp_path):
    """A test's own copy of :func:`current_whole_copy`, as current: the files with their
    modification times, the record naming the package where it now is (what a run of the
    generator from this copy would record; the generator ran once for all the copies)."""
    root = tmp_path / "repo"
    shutil.copytree(current_whole_copy, root, ignore=shutil.ignore_patterns("__pycache__"))
    record = root / recipe_record.RECORD
    record.write_text(record.read_text().replace(json.dumps(str(current_whole_copy))[1:-1],
                                                 json.dumps(str(root))[1:-1]))
    return root


def _run(root: Path, code: str | None = None) -> subprocess.CompletedProcess:
    """``python -m hyper_parallel.codegen --root root`` importing the package from ``root``; with
    ``code``, that Python instead (``ROOT`` is the root)."""
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    env.pop(pipeline.RERUN_ENV, None)
    command = ([sys.executable, "-c", code.replace("ROOT", repr(str(root)))] if code
               else [sys.executable, "-m", "hyper_parallel.codegen", "--root", str(root)])
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, check=False)


FAST = "generated files are up to date (no input changed since they were generated"
_IMPORTS = ("import sys; from hyper_parallel.codegen.__main__ import main; status = main(['--root', "
            "ROOT]); print(status, sorted(m for m in ('black', 'jinja2', 'torch') "
            "if m in sys.modules))")


def test_make_codegen_on_a_current_tree_imports_neither_black_nor_jinja_nor_torch(whole_copy):
    result = _run(whole_copy, _IMPORTS)
    assert result.returncode == 0, result.stderr
    count = len(outputs.output_paths(whole_copy))
    assert result.stdout.splitlines() == [f"codegen: {count} {FAST}: nothing was rendered)",
                                          "0 []"]


def test_the_recipes_depend_on_the_converter_the_headers_do_not(whole_copy):
    path = whole_copy / "hyper_parallel" / "codegen" / "migration" / "from_yaml.py"
    path.write_text(path.read_text() + "\n# an edit\n")
    again = _run(whole_copy)
    assert again.returncode == 0, again.stderr
    # Converted again (the converter changed), nothing rewritten: no header depends on it.
    assert FAST not in again.stdout
    assert again.stdout.strip().endswith("generated files are up to date")
    assert FAST in _run(whole_copy).stdout  # and recorded: the next run renders nothing


def test_a_hand_edited_recipe_is_converted_again(whole_copy):
    recipe = whole_copy / next(iter(outputs.example_recipes(whole_copy)))
    committed = recipe.read_text()
    recipe.write_text(committed + "# mine\n")
    again = _run(whole_copy)
    assert again.returncode == 0, again.stderr
    assert f"codegen: wrote {recipe.relative_to(whole_copy)}" in again.stdout
    assert recipe.read_text() == committed
