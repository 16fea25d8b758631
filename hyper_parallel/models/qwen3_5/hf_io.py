"""Read and write Hugging Face checkpoint directories (safetensors + ``config.json``).

Pure I/O on HF-keyed state dicts: convert with
:class:`~hyper_parallel.models.qwen3_5.state_dict_adapter.Qwen3_5StateDictAdapter` first/after.
Layouts (the ``save_pretrained`` conventions):

* ``model.safetensors`` — a single file;
* ``model-00001-of-0000N.safetensors`` ... + ``model.safetensors.index.json`` (``weight_map``).
"""

from __future__ import annotations

import copy
import json
import os
from collections import defaultdict
from collections.abc import Mapping
from typing import Any
from pathlib import Path

import torch

from hyper_parallel.utils.hf_layout import (
    INDEX_FILE,
    SHARD_FILE_RE,
    SINGLE_FILE,
    cut_files,
    file_names,
)

from .configuration import Qwen3_5Config

CONFIG_FILE = "config.json"
# Keys of our own (un-fused) layout: passing them here means the adapter was not applied.
_NATIVE_MARKERS = (".linear_attn.in_proj_q.weight", ".linear_attn.conv_q_weight")


def _safetensors():
    try:
        import safetensors.torch as st
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "HF checkpoint I/O needs the 'safetensors' package: pip install 'hyper_parallel[train]'."
        ) from exc
    return st


def load_hf_checkpoint(
    path: str | os.PathLike, device: str | torch.device = "cpu"
) -> dict[str, torch.Tensor]:
    """All tensors of the HF checkpoint directory ``path`` (sharded or single-file).

    A sharded checkpoint is read through its index, each shard opened exactly once.
    """
    from safetensors import safe_open

    _safetensors()
    root = Path(path)
    index = root / INDEX_FILE
    single = root / SINGLE_FILE
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        by_shard: dict[str, list[str]] = defaultdict(list)
        for name, shard in weight_map.items():
            by_shard[shard].append(name)
        out: dict[str, torch.Tensor] = {}
        for shard, names in sorted(by_shard.items()):
            shard_path = root / shard
            if not shard_path.is_file():
                raise FileNotFoundError(f"{index} names shard {shard!r}, which is missing.")
            with safe_open(str(shard_path), framework="pt", device=str(device)) as f:
                available = set(f.keys())
                for name in names:
                    if name not in available:
                        raise KeyError(f"{index} maps {name!r} to {shard}, which lacks it.")
                    out[name] = f.get_tensor(name)
        return out
    if single.is_file():
        return _safetensors().load_file(str(single), device=str(device))
    found = sorted(p.name for p in root.glob("*")) if root.is_dir() else "directory missing"
    raise FileNotFoundError(f"No {SINGLE_FILE} or {INDEX_FILE} in {root} (found: {found}).")


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _plan_shards(
    state_dict: Mapping[str, torch.Tensor], max_shard_bytes: int | None
) -> list[list[str]]:
    """Greedy, order-preserving split into shards of at most ``max_shard_bytes`` (a tensor larger
    than the limit gets a shard of its own; ``utils.hf_layout.cut_files``)."""
    return cut_files(((name, _nbytes(t), None) for name, t in state_dict.items()),
                     max_shard_bytes) or [[]]


def _dtype_name(state_dict: Mapping[str, torch.Tensor]) -> str | None:
    floats = [t.dtype for t in state_dict.values() if t.is_floating_point()]
    return str(max(set(floats), key=floats.count)).removeprefix("torch.") if floats else None


def save_hf_checkpoint(
    state_dict: Mapping[str, torch.Tensor],
    path: str | os.PathLike,
    config: Qwen3_5Config,
    max_shard_bytes: int | None = None,
) -> list[Path]:
    """Write an HF-keyed ``state_dict`` and ``config.json`` (``qwen3_5_text``) into ``path``.

    One ``model.safetensors`` unless ``max_shard_bytes`` forces several shards (then also the
    index). Previous ``model*.safetensors`` / index files in ``path`` are removed first so a stale
    layout cannot shadow the new one. Returns the written weight files.
    """
    st = _safetensors()
    bad = [k for k in state_dict if k.endswith(_NATIVE_MARKERS)]
    if bad:
        raise ValueError(
            f"save_hf_checkpoint got un-fused keys such as {bad[0]!r}: convert with "
            "Qwen3_5StateDictAdapter.to_hf(state_dict, config) first."
        )
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    for old in root.iterdir():
        if old.name in (SINGLE_FILE, INDEX_FILE) or SHARD_FILE_RE.match(old.name):
            old.unlink()

    # safetensors needs contiguous CPU tensors that do not share storage with each other.
    tensors: dict[str, torch.Tensor] = {}
    storages: set[tuple[int, int]] = set()
    for name, tensor in state_dict.items():
        t = tensor.detach().to("cpu").contiguous()
        ident = (t.untyped_storage().data_ptr(), t.storage_offset())
        if t.numel() and (ident in storages or t.untyped_storage().nbytes() != _nbytes(t)):
            t = t.clone()
        storages.add((t.untyped_storage().data_ptr(), t.storage_offset()))
        tensors[name] = t

    shards = _plan_shards(tensors, max_shard_bytes)
    written: list[Path] = []
    metadata = {"format": "pt"}
    if len(shards) == 1:
        target = root / SINGLE_FILE
        st.save_file(tensors, str(target), metadata=metadata)
        written.append(target)
    else:
        weight_map: dict[str, str] = {}
        for fname, names in zip(file_names(len(shards)), shards):
            st.save_file({n: tensors[n] for n in names}, str(root / fname), metadata=metadata)
            weight_map.update({n: fname for n in names})
            written.append(root / fname)
        index = {
            "metadata": {"total_size": sum(_nbytes(t) for t in tensors.values())},
            "weight_map": weight_map,
        }
        (root / INDEX_FILE).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")

    write_hf_config(root, config, _dtype_name(tensors))
    return written


def write_hf_config(
    path: str | os.PathLike, config: Qwen3_5Config, dtype: str | None = None,
    base: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``path/config.json`` (``config.to_hf_dict()``; ``dtype`` is the weights' dtype
    name, e.g. ``"float32"``, when known), flushed to disk; returns the file. The streamed
    export (``runtime/checkpoint/hf_export.py``) writes its weights itself and this file here.

    ``base``: the source checkpoint's ``config.json``, when the export carries weights from it.
    A text-only model exported with the tower of an image-text source keeps the source's
    image-text config, its ``text_config`` replaced by this model's: the checkpoint is still
    the image-text model it was."""
    hf_config = config.to_hf_dict()
    if base is not None and "text_config" in base and "text_config" not in hf_config:
        hf_config = {**copy.deepcopy(dict(base)), "text_config": hf_config}
        hf_config.pop("dtype", None)
        hf_config["text_config"].pop("dtype", None)
    if dtype:
        hf_config["dtype"] = dtype
    target = Path(path) / CONFIG_FILE
    with open(target, "w", encoding="utf-8") as f:
        f.write(json.dumps(hf_config, indent=2) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return target


def load_hf_config(path: str | os.PathLike) -> Qwen3_5Config:
    """``Qwen3_5Config`` from ``path/config.json`` (text or full vision-language HF config)."""
    return Qwen3_5Config.from_hf_dict(json.loads((Path(path) / CONFIG_FILE).read_text()))
