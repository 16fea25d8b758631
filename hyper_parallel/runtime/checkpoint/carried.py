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

The headers also say the dtype each tensor is published in (:func:`source_dtypes`): the export
writes the model's tensors in it by default (``checkpoint.export_hf_dtype: auto``), so a run
started from a bf16 checkpoint exports bf16, whatever it trained in.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Collection, Iterator
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

    def tensors(self, names: Collection[str] | None = None
                ) -> Iterator[tuple[str, torch.Tensor]]:
        """``(name, tensor)`` in spec order (only ``names``, when given), each read from its
        file when it is reached."""
        from safetensors import safe_open

        for spec in self.specs:
            if names is not None and spec.name not in names:
                continue
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


def _source_files(root: Path) -> list[Path] | None:
    """The safetensors files of the Hugging Face checkpoint ``root`` (None: it is not one)."""
    if (root / INDEX_FILE).is_file():
        weight_map = json.loads((root / INDEX_FILE).read_text())["weight_map"]
        return [root / name for name in sorted(set(weight_map.values()))]
    if (root / SINGLE_FILE).is_file():
        return [root / SINGLE_FILE]
    return None


def source_dtypes(source: str | os.PathLike | None) -> dict[str, str] | None:
    """The safetensors dtype code of every tensor of the Hugging Face checkpoint ``source``, by
    name, from the headers (no tensor is read); None when ``source`` is not one (unset, a DCP
    folder, a ``.pt`` file, gone since the start)."""
    if source is None:
        return None
    files = _source_files(Path(source))
    if files is None:
        return None
    return {name: entry["dtype"] for file in files for name, entry in _header(file).items()}


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
    files = _source_files(root)
    if files is None:
        return None
    where: dict[str, str] = {}
    specs: list[TensorSpec] = []
    for file in files:
        for name, entry in _header(file).items():
            if rule(name, config):
                where[name] = str(file)
                specs.append(TensorSpec(name, entry["dtype"], tuple(entry["shape"])))
    if not specs:
        return None
    return CarriedWeights(str(root), where, tuple(specs))


#: The unit name of the carried tensors in an export's plan (written last, by pipeline rank 0).
CARRIED_UNIT = "<carried>"

__all__ = ["CARRIED_UNIT", "CarriedWeights", "carried_weights", "source_dtypes"]
