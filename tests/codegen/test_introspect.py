"""The generator reads component Configs from source, without importing them; this checks that
reading against the imported classes, so the two can never drift apart."""

from __future__ import annotations

import dataclasses
import importlib
import typing

import pytest

from hyper_parallel.codegen.table import introspect
from hyper_parallel.codegen.table import types as T
from hyper_parallel.codegen.table.field_table import load_table
from hyper_parallel.trainer.config import HyperTrainerConfig
from hyper_parallel.utils.docstrings import field_docstrings

from .conftest import REPO

TABLE = load_table(REPO / "codegen" / "field_table.yaml")
TARGETS = sorted({(c.module, c.owner) for c in TABLE.components}
                 | {(c.slot_module, c.slot_owner) for c in TABLE.components})


@pytest.mark.parametrize(("module", "owner"), TARGETS, ids=lambda v: v)
def test_static_reading_equals_the_imported_config(module, owner):
    config_cls = getattr(importlib.import_module(module), owner).Config
    static = introspect.component_fields(REPO, module, owner)
    runtime = dataclasses.fields(config_cls)
    assert list(static) == [f.name for f in runtime]
    defaults = config_cls()
    docs = {}
    for klass in reversed(config_cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update(field_docstrings(klass))
    hints = typing.get_type_hints(config_cls)  # resolves aliases such as DecayStyle
    for f in runtime:
        info = static[f.name]
        assert info.type == T.canonical(T.canonical_runtime(hints[f.name])), f.name
        assert info.default == getattr(defaults, f.name), f.name
        assert type(info.default) is type(getattr(defaults, f.name)), f.name
        assert info.doc == docs.get(f.name, ""), f.name


def test_legacy_reading_covers_every_leaf_with_its_default_and_doc():
    fields = introspect.legacy_fields()
    assert fields["train.optimizer.betas"].type == "tuple[float, float]"
    assert fields["model.config_overrides"].type == "dict[str, Any] | None"
    assert fields["train.max_steps"].default == 100
    assert fields["data.type"].doc.startswith("``dummy``")
    expected = HyperTrainerConfig()
    for path, info in fields.items():
        value = expected
        for part in path.split("."):
            value = getattr(value, part)
        assert value == info.default, path


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("Optional[str]", "str | None"),
        ("None | str", "str | None"),
        ("typing.List[int]", "list[int]"),
        ("Literal['a', \"b\"] | None", 'Literal["a", "b"] | None'),
        ("Annotated[ModelSpec | None, Suppress]", "ModelSpec | None"),
        ("tuple[str, ...]", "tuple[str, ...]"),
    ],
)
def test_canonical_type_spelling(text, canonical):
    assert T.canonical(text) == canonical
