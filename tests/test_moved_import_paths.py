"""Modules that moved keep their old import paths: the old path is the module at the new one.

Every moved public module is listed here as ``(old path, new path)``: the legacy trainer's
helpers that moved from ``trainer/`` to ``runtime/`` (legacy user code imports
``hyper_parallel.trainer.parallel_dims.ParallelDims``) and the generator's modules that moved
into the subpackages of ``codegen/``. For each, ``import old``, ``from old import X`` and
``from package import name`` give the very module (and objects) of the new path, a moved
package's submodules included, and the old path is no file that could drift from the new one.
``hyper_parallel.codegen.table`` became the package of the table's modules; it exports what the
module did.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: The legacy trainer's modules, moved to the runtime layer.
TRAINER_MOVES = [
    (f"hyper_parallel.trainer.{name}", f"hyper_parallel.runtime.{name}")
    for name in ("callbacks", "checkpoint", "distributed", "faults", "loss", "model_setup",
                 "optim", "parallel_dims", "step")
]

#: The generator's modules, moved into its stages (table, rendering, migration).
CODEGEN_MOVES = [
    (f"hyper_parallel.codegen.{old}", f"hyper_parallel.codegen.{new}")
    for old, new in [
        ("checked_yaml", "table.checked_yaml"),
        ("constraints", "table.constraints"),
        ("coverage", "table.coverage"),
        ("descriptor_recipes", "table.descriptor_recipes"),
        ("descriptors", "table.descriptors"),
        ("introspect", "table.introspect"),
        ("mapping_rows", "table.mapping_rows"),
        ("probes", "table.probes"),
        ("types", "table.types"),
        ("adapter_context", "rendering.adapter_context"),
        ("framing", "rendering.framing"),
        ("outputs", "rendering.outputs"),
        ("recipe_record", "rendering.recipe_record"),
        ("reference_context", "rendering.reference_context"),
        ("registry_context", "rendering.registry_context"),
        ("render", "rendering.render"),
        ("sections_context", "rendering.sections_context"),
        ("templating", "rendering.templating"),
        ("writing", "rendering.writing"),
        ("config_recipe", "migration.config_recipe"),
        ("fleet", "migration.fleet"),
        ("fleet_convert", "migration.fleet.convert"),
        ("fleet_inputs", "migration.fleet.inputs"),
        ("fleet_model", "migration.fleet.model"),
        ("fleet_plan", "migration.fleet.plan"),
        ("fleet_report", "migration.fleet.report"),
        ("fleet_text", "migration.fleet.text"),
        ("from_yaml", "migration.from_yaml"),
        ("launch", "migration.launch"),
        ("pyliteral", "migration.pyliteral"),
        ("recipe_baseline", "migration.recipe.baseline"),
        ("recipe_changes", "migration.recipe.changes"),
        ("recipe_comments", "migration.recipe.comments"),
        ("recipe_proof", "migration.recipe.proof"),
        ("recipe_render", "migration.recipe.render"),
        ("to_yaml", "migration.to_yaml"),
        ("yaml_comments", "migration.yaml_comments"),
        ("yaml_source", "migration.yaml_source"),
    ]
]

MOVES = TRAINER_MOVES + CODEGEN_MOVES

#: A name each module defines (checked through ``from old import name``).
NAMES = {
    "hyper_parallel.runtime.parallel_dims": "ParallelDims",
    "hyper_parallel.runtime.callbacks": "Callback",
    "hyper_parallel.codegen.migration.fleet.plan": "plan_hierarchy",
    "hyper_parallel.codegen.rendering.outputs": "OUTPUTS",
    "hyper_parallel.codegen.table.types": "canonical",
    "hyper_parallel.codegen.migration.from_yaml": "convert",
}


def _file(dotted: str) -> Path | None:
    """The source of a module path, if it is one (a module file or a package)."""
    base = REPO.joinpath(*dotted.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


@pytest.mark.parametrize(("old", "new"), MOVES, ids=[old for old, _ in MOVES])
def test_the_old_path_is_the_module_at_the_new_one(old, new):
    assert _file(old) is None, f"{old} is a file again: delete it or its alias"
    assert _file(new) is not None
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == module.__spec__.name == new
    package, _, name = old.rpartition(".")
    namespace: dict = {}
    exec(f"from {package} import {name} as via_package", namespace)  # noqa: S102
    assert namespace["via_package"] is module
    if new in NAMES:
        attribute = NAMES[new]
        exec(f"from {old} import {attribute} as value", namespace)  # noqa: S102
        assert namespace["value"] is getattr(module, attribute)


def test_legacy_parallel_dims():
    """The legacy import of the issue, spelled as legacy code spells it."""
    from hyper_parallel.trainer.parallel_dims import ParallelDims as legacy

    from hyper_parallel.runtime.parallel_dims import ParallelDims

    assert legacy is ParallelDims


def test_a_moved_package_keeps_its_submodules():
    import hyper_parallel.codegen.fleet.report as old_report
    import hyper_parallel.trainer.callbacks.base as old_base

    from hyper_parallel.codegen.migration.fleet import report
    from hyper_parallel.runtime.callbacks import base

    assert old_base is base and old_report is report
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("hyper_parallel.trainer.callbacks.no_such_module")


def test_the_table_package_exports_what_the_table_module_did():
    from hyper_parallel.codegen import table
    from hyper_parallel.codegen.table import field_table

    for name in ("Check", "Component", "ExpectedField", "FieldSpec", "RootEntry", "Section",
                 "Table", "load_table"):
        assert getattr(table, name) is getattr(field_table, name)
    assert sorted(table.__all__) == sorted(
        n for n, v in vars(field_table).items()
        if not n.startswith("_") and getattr(v, "__module__", None) == field_table.__name__
    )


def test_the_lists_are_the_packages_own():
    """This test lists exactly the moves the packages alias."""
    from hyper_parallel import codegen, trainer

    assert sorted(CODEGEN_MOVES) == sorted(
        (f"hyper_parallel.codegen.{o}", f"hyper_parallel.codegen.{n}")
        for o, n in codegen.MOVED.items()
    )
    assert sorted(TRAINER_MOVES) == sorted(
        (f"hyper_parallel.trainer.{o}", n) for o, n in trainer.MOVED.items()
    )


def test_python_dash_m_on_an_old_path_runs_the_new_module():
    """``python -m hyper_parallel.codegen.fleet`` (the fleet's line counts) still runs."""
    done = subprocess.run(
        [sys.executable, "-m", "hyper_parallel.codegen.fleet"], cwd=REPO, capture_output=True,
        text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 2, done.stderr
    assert "usage: python -m hyper_parallel.codegen.migration.fleet" in done.stderr
