"""Fleet migration: ``--from-yaml a.yaml b.yaml dir/`` writes one registry module.

A folder stands for its ``*.yaml`` / ``*.yml`` files in name order; the default output is
``recipes/config_registry.py``. The work is done by

* :mod:`.inputs` -- the arguments resolved to files, the names of the functions;
* :mod:`.plan` -- the planner (:func:`plan_hierarchy`, a pure function over item sets);
* :mod:`.model` -- recipes, shared functions, the plan's tree over them;
* :mod:`.convert` -- :func:`convert_fleet`: read, plan, render, prove;
* :mod:`.text` -- the comments of shared lines and the docstrings;
* :mod:`.report` -- the report table (:func:`conversion_report`) and :func:`line_counts`.

This package gathers the names their callers use (``__main__``, the tests, ``bench/``), none of
them a submodule's name (``fleet.report`` is the module, whoever imported what first);
``python -m hyper_parallel.codegen.migration.fleet YAML_OR_FOLDER ...`` prints :func:`line_counts`.
"""

from __future__ import annotations

from hyper_parallel.codegen.migration.fleet.convert import DEFAULT_OUTPUT, TEMPLATE, convert_fleet
from hyper_parallel.codegen.migration.fleet.inputs import (
    SUFFIXES,
    Input,
    Inputs,
    base_name,
    family_names,
    recipe_names,
    resolve_inputs,
)
from hyper_parallel.codegen.migration.fleet.model import Fleet, FleetFamily, FleetRecipe
from hyper_parallel.codegen.migration.fleet.plan import FAMILY_COST, Hierarchy, plan_hierarchy
from hyper_parallel.codegen.migration.fleet.report import conversion_report, line_counts, main

__all__ = ["DEFAULT_OUTPUT", "FAMILY_COST", "SUFFIXES", "TEMPLATE", "Fleet", "FleetFamily",
           "FleetRecipe", "Hierarchy", "Input", "Inputs", "base_name", "conversion_report",
           "convert_fleet", "family_names", "line_counts", "main", "plan_hierarchy",
           "recipe_names", "resolve_inputs"]
