"""The code generator: ``codegen/field_table.yaml`` -> the new configuration's code and docs, and
legacy YAMLs -> recipe modules.

``python -m hyper_parallel.codegen`` (``make codegen``) runs the pipeline in three stages, one
subpackage each; each imports only the ones before it:

1. :mod:`.table` -- the inputs, read and checked: the field table (its sections, component slots,
   root and mapping rows, each row with its probe), checked against the classes it describes
   (coverage, types, defaults), and the model descriptors ``codegen/models/*.yaml``.
2. :mod:`.rendering` -- the generated files: what each one is generated from
   (:mod:`.rendering.outputs`), its template context, the Jinja2 templates of ``templates/``,
   black (in-process), the header with its input hashes, atomic writes.
3. :mod:`.migration` -- legacy YAMLs to recipe modules and back (``--from-yaml``, a fleet of
   YAMLs, ``--to-yaml``, a run record's ``config.py``).

The modules at the top drive them: :mod:`.pipeline` (generate, write, up to date),
:mod:`.staleness` (``--check``), ``__main__`` (the command line) and :mod:`.errors` (the one
error type, below everything). The generated files:

* ``hyper_parallel/config/configs.py`` -- the generic section dataclasses;
* ``hyper_parallel/trainer/trainer_config.py`` -- ``HyperTrainer.Config``;
* ``hyper_parallel/config/legacy_adapter.py`` -- legacy <-> new conversion, ``canonicalize_legacy``,
  ``FIELD_MAP``;
* ``hyper_parallel/trainer/legacy_parsing/unsupported_keys.py`` -- the ``unsupported`` rows, for
  the legacy parser (a layer below the adapter), which refuses them with every other problem;
* ``docs/config_reference.md`` -- the migration guide;
* ``hyper_parallel/models/<model>/config_registry.py`` -- one per model descriptor: the model's
  named recipes (zero-argument functions returning a fresh ``HyperTrainer.Config``);
* ``recipes/<x>.py`` -- the recipe of every ``examples/yaml/<x>.yaml``, as ``--from-yaml``
  writes it.

``python -m hyper_parallel.codegen --check`` (``make codegen-check``) regenerates into a
temporary directory and compares: silent with exit 0 when everything is current, otherwise a
unified diff per file, the reason and the fix, exit 1. A table or descriptor that does not
validate is exit 2.

The modules that moved into the subpackages keep their old paths: ``hyper_parallel.codegen.<old>``
is the module at its new path (:data:`MOVED`); ``hyper_parallel.codegen.table`` is the package
now and exports what the module did.
"""

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.pipeline import Generation, generate, write
from hyper_parallel.codegen.rendering.outputs import OUTPUTS, output_paths
from hyper_parallel.codegen.staleness import Stale, check
from hyper_parallel.utils.moved_modules import alias_moved_modules

__all__ = ["MOVED", "OUTPUTS", "CodegenError", "Generation", "Stale", "check", "generate",
           "output_paths", "write"]

#: ``{old module: new module}``, both under ``hyper_parallel.codegen``.
MOVED: dict[str, str] = {
    "checked_yaml": "table.checked_yaml",
    "constraints": "table.constraints",
    "coverage": "table.coverage",
    "descriptor_recipes": "table.descriptor_recipes",
    "descriptors": "table.descriptors",
    "introspect": "table.introspect",
    "mapping_rows": "table.mapping_rows",
    "probes": "table.probes",
    "types": "table.types",
    "adapter_context": "rendering.adapter_context",
    "framing": "rendering.framing",
    "outputs": "rendering.outputs",
    "recipe_record": "rendering.recipe_record",
    "reference_context": "rendering.reference_context",
    "registry_context": "rendering.registry_context",
    "render": "rendering.render",
    "sections_context": "rendering.sections_context",
    "templating": "rendering.templating",
    "writing": "rendering.writing",
    "config_recipe": "migration.config_recipe",
    "fleet": "migration.fleet",
    "fleet_convert": "migration.fleet.convert",
    "fleet_inputs": "migration.fleet.inputs",
    "fleet_model": "migration.fleet.model",
    "fleet_plan": "migration.fleet.plan",
    "fleet_report": "migration.fleet.report",
    "fleet_text": "migration.fleet.text",
    "from_yaml": "migration.from_yaml",
    "launch": "migration.launch",
    "pyliteral": "migration.pyliteral",
    "recipe_baseline": "migration.recipe.baseline",
    "recipe_changes": "migration.recipe.changes",
    "recipe_comments": "migration.recipe.comments",
    "recipe_proof": "migration.recipe.proof",
    "recipe_render": "migration.recipe.render",
    "to_yaml": "migration.to_yaml",
    "yaml_comments": "migration.yaml_comments",
    "yaml_source": "migration.yaml_source",
}

alias_moved_modules(__name__, {old: f"{__name__}.{new}" for old, new in MOVED.items()})
