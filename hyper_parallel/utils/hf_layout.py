"""The files of a Hugging Face safetensors checkpoint, as transformers' ``save_pretrained``
writes them: one ``model.safetensors``, or ``model-00001-of-0000N.safetensors`` ... with
``model.safetensors.index.json``; files cut greedily in tensor order.

One home for both writers: the models' HF writer (``models/qwen3_5/hf_io.py``, a whole state
dict at once) and the trainer's streamed export (``runtime/checkpoint/hf_plan.py``, planned
from shapes before any weight is gathered). Framework-free.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable
from typing import TypeVar

Name = TypeVar("Name")

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
SHARD_FILE_RE = re.compile(r"^model-\d{5}-of-\d{5}\.safetensors$")


def shard_file_name(index: int, count: int) -> str:
    """``model-00001-of-00003.safetensors`` (``index`` from 1)."""
    return f"model-{index:05d}-of-{count:05d}.safetensors"


def file_names(count: int) -> list[str]:
    """The names of ``count`` files: ``model.safetensors`` alone, else the numbered shards."""
    if count == 1:
        return [SINGLE_FILE]
    return [shard_file_name(i, count) for i in range(1, count + 1)]


def cut_files(
    tensors: Iterable[tuple[Name, int, Hashable]], max_file_bytes: int | None
) -> list[list[Name]]:
    """``(name, nbytes, writer)`` in tensor order -> the names (or any keys) of each file.

    A new file starts when the next tensor would take the current one past ``max_file_bytes``
    (None: no limit), so a tensor larger than the limit gets a file of its own, and where the
    writer changes (a file is written by one process). The tensor order is kept."""
    files: list[list[Name]] = []
    size, writer = 0, None
    for name, nbytes, owner in tensors:
        if (
            not files
            or owner != writer
            or (max_file_bytes and files[-1] and size + nbytes > max_file_bytes)
        ):
            files.append([])
            size, writer = 0, owner
        files[-1].append(name)
        size += nbytes
    return files


__all__ = [
    "INDEX_FILE",
    "SHARD_FILE_RE",
    "SINGLE_FILE",
    "cut_files",
    "file_names",
    "shard_file_name",
]
