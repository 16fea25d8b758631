"""The generator's inputs, read and checked: the field table and the model descriptors.

``codegen/field_table.yaml`` becomes checked objects (:mod:`.field_table`; its mapping rows and
their probes, :mod:`.mapping_rows` and :mod:`.probes`; the value rules, :mod:`.constraints`; the
type annotations, :mod:`.types`) and is held against the classes it describes: the legacy
schema and the component Configs (:mod:`.introspect`), each field covered once with agreeing
types and defaults (:mod:`.coverage`). The model descriptors ``codegen/models/*.yaml`` become
checked recipes (:mod:`.descriptors`, :mod:`.descriptor_recipes`). :mod:`.checked_yaml` reads
both kinds of file with their lines and reports every problem at once. Nothing here renders.

The table's own names (``load_table``, ``Table``, ``FieldSpec``, ...) are exported here too, as
the module ``hyper_parallel.codegen.table`` did before it became this package; each is imported
on first use.
"""

from __future__ import annotations

from hyper_parallel.protocols.lazy import lazy_exports

_FIELD_TABLE = "hyper_parallel.codegen.table.field_table"

__all__ = ["Check", "Component", "ExpectedField", "FieldSpec", "RootEntry", "Section", "Table",
           "load_table"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), dict.fromkeys(__all__, _FIELD_TABLE))
