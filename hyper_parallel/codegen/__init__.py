"""The code generator: ``codegen/field_table.yaml`` -> the new configuration's code and docs.

``python -m hyper_parallel.codegen`` (``make codegen``) loads the field table, checks it against
the classes it describes (coverage, types, defaults: :mod:`.coverage`), renders the Jinja2
templates in ``templates/`` and formats the Python with black in-process. It writes:

* ``hyper_parallel/config/configs.py`` -- the generic section dataclasses;
* ``hyper_parallel/trainer/trainer_config.py`` -- ``HyperTrainer.Config``;
* ``hyper_parallel/config/legacy_adapter.py`` -- legacy <-> new conversion, ``canonicalize_legacy``,
  ``FIELD_MAP``;
* ``docs/config_reference.md`` -- the migration guide;
* ``hyper_parallel/models/<model>/config_registry.py`` -- one per model descriptor
  ``codegen/models/*.yaml``: the model's named recipes (zero-argument functions returning a fresh
  ``HyperTrainer.Config``), checked against the table by :mod:`.descriptors`.

``python -m hyper_parallel.codegen --check`` (``make codegen-check``) regenerates into a
temporary directory and compares: silent with exit 0 when everything is current, otherwise a
unified diff per file, the reason and the fix, exit 1. A table or descriptor that does not
validate is exit 2.

Modules: reading the inputs -- :mod:`.checked_yaml` (YAML with lines, problems),
:mod:`.table` (schema), :mod:`.mapping_rows` (the rows and their probes, :mod:`.probes`),
:mod:`.constraints`, :mod:`.types` (annotations), :mod:`.introspect` (legacy schema, component
Configs, flavor tables), :mod:`.coverage`, :mod:`.descriptors` and :mod:`.descriptor_recipes`
(model descriptors); rendering -- one template context per output (:mod:`.sections_context`,
:mod:`.adapter_context`, :mod:`.reference_context`, :mod:`.registry_context`),
:mod:`.templating`, :mod:`.render` (black), :mod:`.framing` (headers); :mod:`.outputs` (what
each file is generated from), :mod:`.pipeline` (generate / write / up to date),
:mod:`.writing` (atomic writes), :mod:`.recipe_record`, :mod:`.staleness` (check), ``__main__``
(CLI).
"""

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.outputs import OUTPUTS, output_paths
from hyper_parallel.codegen.pipeline import Generation, generate, write
from hyper_parallel.codegen.staleness import Stale, check

__all__ = ["OUTPUTS", "CodegenError", "Generation", "Stale", "check", "generate", "output_paths",
           "write"]
