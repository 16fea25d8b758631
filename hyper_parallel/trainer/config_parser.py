"""The legacy command line: ``old.yaml [--a.b.c=value | --a.b.c value ...]``.

Rules (each one is tested in ``tests/torch/ut/trainer/test_legacy_config.py`` and
``tests/torch/ut/config/test_bad_input_legacy.py``):

* The first positional argument is the YAML path; a missing file is an error, and so is an
  empty one (nothing, only comments, or a bare ``null``: write ``{}`` to run every default).
* The YAML is read by :mod:`hyper_parallel.utils.yaml_lines`: the YAML 1.2 core schema (``010``
  is ten, ``1_000`` and ``off`` are strings), merge keys, duplicate keys are errors, alias
  expansion is bounded. The top level must be a mapping.
* Overrides ``--a.b.c=value`` or ``--a.b.c value`` are applied over the YAML. Values are read as
  YAML (``[0.9,0.95]``, ``{num_hidden_layers: 4}``, ``null``) and then coerced by the field's
  declared type. Overrides inside a dict field (``--model.config_overrides.head_dim=64``) merge.
* Strict: an unknown key anywhere is a :class:`ConfigError` with the dotted path, the file and
  line, and a did-you-mean; the old flat top-level keys get their migration hint. A value of the
  wrong type is a :class:`ConfigError` naming the field, the expected type, the value and where it
  came from. So is a value the section refuses (its ``__post_init__``): non-finite numbers,
  integers beyond ``MAX_INT``, values outside a field's range or choices.
* ``model.name`` must name a model: a registered name, a built-in model package or a module
  that exists, looked up without importing it (the model packages import torch); an unknown
  name is an error with its line and a did-you-mean among the known models.
* ``model.config_overrides`` keys are the model config's fields (plus ``flavor``), read from the
  model's source without importing it: an unknown key, an unknown flavor or a value of the
  wrong type is an error with its line and a did-you-mean. Under an unknown ``model.name`` they
  are checked against the known model its did-you-mean offers, in the same pass.
* A key the new configuration cannot express (an ``unsupported`` row of the field table:
  ``train.accelerator.zero_stage``, ``train.backend``, ``model.tp_plan``, ...) must hold the
  default its dataclass declares: any other value is an error with its line, the row's reason and
  the fix, in the same pass (:mod:`.legacy_parsing.unsupported`); it is the key's one problem.
* Every problem is reported at once: one problem is one :class:`ConfigError`; several are one
  ``ConfigError`` saying ``N problems in old.yaml:`` with a line each (``problems`` lists them),
  in the order of the file, then the command line. A cross-field rule that reads a field that is
  wrong already is skipped. Nothing else escapes the parser.
* Booleans accept ``true/yes/y/on/1/t`` and ``false/no/n/off/0/f`` in any case.
* ``train.local_rank`` comes from the ``LOCAL_RANK`` environment variable.

The parts live in :mod:`hyper_parallel.trainer.legacy_parsing` (below the schema, which calls
them); this module binds them to the legacy root class ``HyperTrainerConfig`` and is what callers
import.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hyper_parallel.trainer.config import HyperTrainerConfig
from hyper_parallel.trainer.legacy_parsing import load as _load
from hyper_parallel.trainer.legacy_parsing import show as _show
from hyper_parallel.trainer.legacy_parsing.build import (
    LEGACY_TOP_LEVEL_HINTS,
    RESERVED_KEYS,
    SECTION_CHECKS,
)
from hyper_parallel.trainer.legacy_parsing.coerce import FALSE_WORDS, TRUE_WORDS, describe_type
from hyper_parallel.trainer.legacy_parsing.load import (
    USAGE,
    empty_config_error,
    load_config,
    read_config_file,
)
from hyper_parallel.trainer.legacy_parsing.model_overrides import (
    MODEL_CONFIG_SOURCES,
    ModelOverrideKeys,
    model_override_keys,
)
from hyper_parallel.trainer.legacy_parsing.overrides import _split_overrides
from hyper_parallel.trainer.legacy_parsing.problems import _Context
from hyper_parallel.trainer.legacy_parsing.show import config_to_dict, dump_yaml


def parse_args(root_class: type = HyperTrainerConfig, argv: Sequence[str] | None = None) -> Any:
    """Parse ``argv`` (default ``sys.argv[1:]``): a YAML path, then overrides."""
    return _load.parse_args(root_class, argv)


def field_help(cls: type = HyperTrainerConfig, prefix: str = "") -> list[str]:
    """One block per field: dotted path, type, default, docstring."""
    return _show.field_help(cls, prefix)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hyper_parallel.trainer.config old.yaml [overrides]``: print the resolved config."""
    return _show.main(HyperTrainerConfig, argv)


__all__ = [
    "FALSE_WORDS",
    "LEGACY_TOP_LEVEL_HINTS",
    "MODEL_CONFIG_SOURCES",
    "RESERVED_KEYS",
    "SECTION_CHECKS",
    "TRUE_WORDS",
    "USAGE",
    "ModelOverrideKeys",
    "_Context",
    "_split_overrides",
    "config_to_dict",
    "describe_type",
    "dump_yaml",
    "empty_config_error",
    "field_help",
    "load_config",
    "main",
    "model_override_keys",
    "parse_args",
    "read_config_file",
]
