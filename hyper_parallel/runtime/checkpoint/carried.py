"""Weights the trainer does not hold, carried from the source checkpoint into the export.

A published Qwen3.5 checkpoint holds more than a run trains: the multi-token-prediction head
(``mtp.*``, which transformers does not run either) and, when a run trains the text decoder
alone, the vision tower (``model.visual.*``). The model never builds them (no memory, no
optimizer state), and they never change, so the Hugging Face export copies them unchanged from
the checkpoint the run started from (``model.weights_path``): the export is then as whole as
its source, and loads as the same ``...ForConditionalGeneration`` class.

Which source tensors are carried is the adapter's rule (``carried(name, config)``); their
names, dtypes and shapes come from the safetensors headers, so the export's plan (files, index)
is made before a byte is read, and the writer reads them one tensor at a time.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from hyper_parallel.utils.hf_layout import INDEX_FILE, SINGLE_FILE

from .hf_plan import TensorSpec

CONFIG_FILE = "config.json"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CarriedWeights:
    """The source checkpoint's tensors an export carries: where each one is, and its spec."""

    source: str
    files: dict[str, str]  # Hugging Face name -> the safetensors file holding it
    specs: tuple[TensorSpec, ...]

    def tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        """``(name, tensor)`` in spec order, each read from its file when it is reached."""
        from safetensors import safe_open

        for spec in self.specs:
            with safe_open(self.files[spec.name], framework="pt", device="cpu") as f:
                yield spec.name, f.get_tensor(spec.name)

    def source_config(self) -> dict[str, Any] | None:
        """The source's ``config.json``, when it has one."""
        path = Path(self.source) / CONFIG_FILE
        return json.loads(path.read_text()) if path.is_file() else None


def _header(file: Path) -> dict[str, Any]:
    """The safetensors header of ``file`` (names, dtypes, shapes; no tensor data)."""
    with open(file, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    header.pop("__metadata__", None)
    return header


def carried_weights(source: str | os.PathLike | None, adapter: Any,
                    config: Any) -> CarriedWeights | None:
    """The tensors of the Hugging Face checkpoint ``source`` that ``adapter`` says the model does
    not hold (``adapter.carried(name, config)``), in the source's order; None when ``source``
    is not a Hugging Face checkpoint directory, the adapter has no such rule, or nothing is
    carried."""
    rule = getattr(adapter, "carried", None)
    if source is None or rule is None:
        return None
    root = Path(source)
    if not root.exists():
        # It was read at the start: a source gone since (moved, cleaned up) must not make a
        # checkpoint that silently lacks what it would have carried.
        logger.warning(
            "the run's source checkpoint %s (model.weights_path) is gone: this export cannot "
            "carry its tensors the model does not hold (the MTP head; a text-only run's vision "
            "tower) and is not whole", source)
        return None
    if (root / INDEX_FILE).is_file():
        weight_map = json.loads((root / INDEX_FILE).read_text())["weight_map"]
        names_by_file: dict[str, list[str]] = {}
        for name, file in weight_map.items():
            names_by_file.setdefault(file, []).append(name)
        files = sorted(names_by_file)
    elif (root / SINGLE_FILE).is_file():
        files = [SINGLE_FILE]
    else:
        return None
    where: dict[str, str] = {}
    specs: list[TensorSpec] = []
    for file in files:
        for name, entry in _header(root / file).items():
            if rule(name, config):
                where[name] = str(root / file)
                specs.append(TensorSpec(name, entry["dtype"], tuple(entry["shape"])))
    if not specs:
        return None
    return CarriedWeights(str(root), where, tuple(specs))


#: The unit name of the carried tensors in an export's plan (written last, by pipeline rank 0).
CARRIED_UNIT = "<carried>"

__all__ = ["CARRIED_UNIT", "CarriedWeights", "carried_weights"]
