"""The generated adapter reads like hand-written code and leans on its hand-written support.

* ``FIELD_MAP`` is the field table, row for row, written as literal ``FieldMapping(...)`` calls:
  nothing is parsed when the module is imported, and no row is referred to by its position.
* The defaults an ``unsupported`` legacy field or a ``new_only`` field must hold are the ones
  their dataclasses declare (never restated in the generated module).
* The ``unsupported`` rows the legacy parser reads (generated below it, in
  ``trainer/legacy_parsing/unsupported_keys.py``) are ``FIELD_MAP``'s, line and reason alike.
* A validation error of a new-tree section names the legacy field its value came from through
  the error's ``field`` attribute (``ConfigFieldError``), never by reading the message.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from hyper_parallel.codegen.table.field_table import load_table
from hyper_parallel.config import adapter_support, legacy_adapter
from hyper_parallel.config.legacy_adapter import (
    FIELD_MAP,
    field_mapping,
    legacy_to_trainer_config,
    trainer_config_to_legacy,
)
from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig
from hyper_parallel.trainer.legacy_parsing import unsupported
from hyper_parallel.trainer.legacy_parsing.unsupported_keys import TABLE as UNSUPPORTED_TABLE
from hyper_parallel.trainer.legacy_parsing.unsupported_keys import UNSUPPORTED_KEYS
from hyper_parallel.utils.errors import ConfigFieldError

REPO = Path(__file__).resolve().parents[4]
TABLE = "codegen/field_table.yaml"
ADAPTER = REPO / "hyper_parallel" / "config" / "legacy_adapter.py"


def test_field_map_is_the_table_row_for_row():
    rows = load_table(REPO / TABLE, TABLE).rows
    assert len(FIELD_MAP) == len(rows)
    for mapping, row in zip(FIELD_MAP, rows):
        assert mapping.legacy == tuple(row.legacy.values())
        assert mapping.new == tuple(row.new.values())
        assert (mapping.kind, mapping.line) == (row.kind, row.line)
        if row.kind == "transform":
            names = [row.forward, row.backward] + ([row.canonical] if row.canonical else [])
            assert mapping.detail == " / ".join(names)
        else:
            assert mapping.detail == (row.reason or "")


def test_the_module_parses_nothing_and_names_rows_by_path():
    text = ADAPTER.read_text(encoding="utf-8")
    tree = ast.parse(text)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    assert "re" not in imported
    assert "FIELD_MAP[" not in text and "mappings[" not in text and "_ROWS = \"\"\"" not in text
    field_map = next(node for node in tree.body if isinstance(node, ast.AnnAssign)
                     and getattr(node.target, "id", None) == "FIELD_MAP")
    assert isinstance(field_map.value, ast.Tuple)
    assert all(isinstance(item, ast.Call) and ast.unparse(item.func) == "FieldMapping"
               for item in field_map.value.elts)
    # The fixed helpers are the support module's, not the generated module's.
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert functions == {"field_mapping", "legacy_to_trainer_config", "trainer_config_to_legacy",
                         "canonicalize_legacy"}


def test_the_first_names_remain_aliases():
    assert legacy_adapter._legacy_to_trainer_config is legacy_to_trainer_config
    assert legacy_adapter._trainer_config_to_legacy is trainer_config_to_legacy
    assert legacy_adapter.FieldMapping is adapter_support.FieldMapping
    assert legacy_adapter.Normalisation is adapter_support.Normalisation


def test_field_mapping_finds_a_row_by_either_path():
    row = field_mapping("train.max_steps")
    assert row is field_mapping("training.steps") and row.kind == "rename"
    with pytest.raises(KeyError, match="no row of codegen/field_table.yaml owns 'nope'"):
        field_mapping("nope")


def test_field_default_reads_the_dataclass():
    @dataclasses.dataclass(kw_only=True)
    class Example:
        required: int
        plain: int = 3
        made: list = dataclasses.field(default_factory=lambda: ["a"])

    assert adapter_support.field_default(Example, "plain") == 3
    first = adapter_support.field_default(Example, "made")
    assert first == ["a"] and first is not adapter_support.field_default(Example, "made")
    with pytest.raises(TypeError, match="has no default"):
        adapter_support.field_default(Example, "required")


def test_an_unsupported_value_is_refused_against_the_dataclass_default():
    legacy = HyperTrainerConfig()
    legacy.data.image_token_id = 7
    with pytest.raises(ConfigError) as info:
        legacy_to_trainer_config(legacy)
    row = field_mapping("data.image_token_id")
    assert info.value.path == "data.image_token_id"
    assert f"(default 151655; {TABLE}:{row.line})" in str(info.value)


def test_the_parser_reads_the_unsupported_rows_of_field_map():
    rows = [(row.legacy, row.line, row.detail) for row in FIELD_MAP if row.kind == "unsupported"]
    parsed = [((path,), line, reason) for path, (line, reason) in UNSUPPORTED_KEYS.items()]
    assert parsed == rows and UNSUPPORTED_TABLE == TABLE
    assert adapter_support.field_default is unsupported.field_default


def test_a_new_only_value_is_refused_against_the_dataclass_default():
    config = legacy_to_trainer_config(HyperTrainerConfig())
    config.compile.enable = True
    with pytest.raises(ConfigError) as info:
        trainer_config_to_legacy(config)
    assert info.value.path == "compile.enable"
    assert "only the default False converts to the legacy schema" in str(info.value)


def test_a_component_validation_error_names_the_legacy_field():
    legacy = HyperTrainerConfig()
    # Set after construction: the legacy section's own check never sees it, the component
    # Config's does -- its error names the field, which the adapter maps back.
    legacy.train.optimizer.lr = -1.0
    with pytest.raises(ConfigError) as info:
        legacy_to_trainer_config(legacy)
    assert info.value.path == "train.optimizer.lr"
    assert "cannot convert to the new configuration (optimizer.lr)" in str(info.value)
    cause = info.value.__context__
    assert isinstance(cause, ConfigFieldError) and cause.field == "lr"
    assert cause.owner == "OptimizersContainer.Config" and cause.value == -1.0


def test_a_section_validation_error_names_the_legacy_field():
    legacy = HyperTrainerConfig()
    legacy.train.max_steps = 0
    with pytest.raises(ConfigError) as info:
        legacy_to_trainer_config(legacy)
    assert info.value.path == "train.max_steps"
    assert "(training.steps)" in str(info.value)


def test_config_field_error_carries_what_it_says():
    error = ConfigFieldError("TrainingConfig", "steps", -5, "must be >= 1")
    assert str(error) == "TrainingConfig.steps=-5: must be >= 1"
    assert (error.owner, error.field, error.value, error.reason) == (
        "TrainingConfig", "steps", -5, "must be >= 1")
    assert isinstance(error, ValueError)
