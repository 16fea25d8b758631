"""Read back what an offline Weights & Biases run wrote, from its local files only.

An offline run is a folder ``<dir>/wandb/offline-run-<time>-<id>/`` whose ``run-<id>.wandb``
holds every record the run sent (the run itself, its config, each history row, ...): W&B's
transaction log, the LevelDB log format -- a 7-byte header (``:W&B``, magic, version), then
32 KiB blocks of chunks, each ``crc32 (4) | length (2, little-endian) | type (1) | data``, a
record being one FULL chunk or FIRST, MIDDLE..., LAST -- of ``wandb_internal_pb2.Record``
protobufs. ``wandb sync`` uploads exactly this file; reading it needs neither the network nor
``wandb.Api``.

W&B's service writes the file: a run's last records reach it shortly after ``finish()`` returns
(the service closes the run's stream on its own time), so :func:`read_offline_run` reads until
the run's exit record is there.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_HEADER = 7
_BLOCK = 32 * 1024
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _records(path: Path) -> Iterator[bytes]:
    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B transaction log")
    pos, pending = _HEADER, b""
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:  # the block's trailer: zero padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + _HEADER])
        pos += _HEADER
        chunk, pos = data[pos:pos + length], pos + length
        if kind == _FULL:
            yield chunk
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            yield pending + chunk
            pending = b""


@dataclass
class OfflineRun:
    """What one offline run recorded."""

    folder: Path
    project: str = ""
    name: str = ""
    #: The run's config (W&B's own ``_wandb`` entry dropped).
    config: dict[str, Any] = field(default_factory=dict)
    #: W&B step -> the row logged at it (W&B's own ``_step`` / ``_runtime`` / ``_timestamp``
    #: dropped).
    history: dict[int, dict[str, Any]] = field(default_factory=dict)
    exit_code: int | None = None


def read_offline_run(folder: Path, timeout: float = 30.0) -> OfflineRun:
    """The run written in ``folder`` (an ``offline-run-*`` folder), once its exit record is
    written (what is there after ``timeout`` seconds otherwise)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            run = _read(Path(folder))
        except Exception:  # noqa: BLE001 - a record cut short: the service is still writing
            run = None
        if (run is not None and run.exit_code is not None) or time.monotonic() > deadline:
            return run if run is not None else _read(Path(folder))
        time.sleep(0.05)


def _read(folder: Path) -> OfflineRun:
    from wandb.proto import wandb_internal_pb2 as pb

    (log,) = sorted(folder.glob("run-*.wandb"))
    run = OfflineRun(folder)
    for data in _records(log):
        record = pb.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run.project, run.name = record.run.project, record.run.display_name
            run.config.update({i.key: json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "config":
            run.config.update({i.key: json.loads(i.value_json) for i in record.config.update})
        elif kind == "history":
            row = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json)
                   for i in record.history.item}
            step = row.pop("_step")
            for own in ("_runtime", "_timestamp"):
                row.pop(own, None)
            run.history.setdefault(int(step), {}).update(row)
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    run.config.pop("_wandb", None)
    return run


def offline_runs(root: Path) -> list[Path]:
    """The offline run folders W&B made under ``root`` (``root/wandb/offline-run-*``)."""
    return sorted(p for p in (Path(root) / "wandb").glob("offline-run-*") if p.is_dir())


__all__ = ["OfflineRun", "offline_runs", "read_offline_run"]
