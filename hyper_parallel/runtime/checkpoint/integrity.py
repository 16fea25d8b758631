"""Damaged checkpoints: which file is wrong, and which earlier step to load instead.

``load_checkpoint`` checks a step directory before it restores anything from it:
``extra_state.json`` and ``.metadata`` must parse, every ``.distcp`` shard that ``.metadata``
names must exist and be at least as long as the items it places in it (a size check, no
hashing), and the per-rank ``.pt`` files must load (the ranks agree on the outcome, so a file
damaged on one rank fails every rank instead of leaving the others in a collective). A shard
that still fails inside ``dcp.load`` is named too (the reader reads one file at a time). Each
failure is a :class:`~.errors.CheckpointError` naming the directory, the file and the newest
earlier complete checkpoint that passes the same checks, with the setting that loads it.
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch
import torch.distributed as dist

from .errors import CheckpointError, _field_ref, _reason, _ShardReadError
from .layout import DCP_METADATA_FILE, EXTRA_STATE_FILE, _step_of, complete_checkpoints
from .ranks import _distributed, _world_size


def _dcp_storage_sizes(metadata: Any) -> dict[str, int] | None:
    """``{shard file: bytes the metadata places in it}`` (the end of its last item), or None
    when the metadata is not the file-system layout (then no size check is possible)."""
    storage = getattr(metadata, "storage_data", None)
    if not isinstance(storage, dict):
        return None
    sizes: dict[str, int] = {}
    for info in storage.values():
        rel, offset, length = (getattr(info, a, None) for a in ("relative_path", "offset", "length"))
        if not isinstance(rel, str) or not isinstance(offset, int) or not isinstance(length, int):
            return None
        sizes[rel] = max(sizes.get(rel, 0), offset + length)
    return sizes


def _checkpoint_problem(path: str) -> tuple[str, str] | None:
    """``(file, what is wrong)`` for the first damaged shared file of the complete checkpoint
    ``path`` (None: nothing found). Cheap: ``extra_state.json`` and ``.metadata`` are parsed and
    every shard is checked to exist and to be as long as ``.metadata`` says (no hashing, no
    tensor reads)."""
    try:
        with open(os.path.join(path, EXTRA_STATE_FILE), encoding="utf-8") as f:
            extra = json.load(f)
    except FileNotFoundError:
        return EXTRA_STATE_FILE, "is missing"
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return EXTRA_STATE_FILE, f"cannot be read ({_reason(e)})"
    if not isinstance(extra, dict):
        return EXTRA_STATE_FILE, f"holds a {type(extra).__name__}, not a JSON object"
    return _dcp_problem(path)


def _dcp_problem(path: str) -> tuple[str, str] | None:
    """``(file, what is wrong)`` of ``.metadata`` and the shard files it names, or None."""
    from torch.distributed.checkpoint import FileSystemReader

    if not os.path.isfile(os.path.join(path, DCP_METADATA_FILE)):
        return DCP_METADATA_FILE, "is missing"
    try:
        metadata = FileSystemReader(path).read_metadata()
    except Exception as e:  # noqa: BLE001 - unpickling garbage raises anything
        return DCP_METADATA_FILE, f"cannot be read ({_reason(e)})"
    sizes = _dcp_storage_sizes(metadata)
    if sizes is None:
        return None
    for rel, needed in sorted(sizes.items()):
        file = os.path.join(path, rel)
        try:
            size = os.path.getsize(file)
        except FileNotFoundError:
            return rel, f"is missing ({DCP_METADATA_FILE} places {needed} bytes in it)"
        except OSError as e:
            return rel, f"cannot be read ({_reason(e)})"
        if size < needed:
            return rel, (
                f"is truncated: {size} bytes, but {DCP_METADATA_FILE} places {needed} bytes in it"
            )
    return None


def _earlier_checkpoint_hint(
    path: str, field: str, legacy_field: str | None, *, prefix: str = ""
) -> str:
    """The sentence naming the newest earlier checkpoint of ``path``'s folder that passes
    :func:`_checkpoint_problem` and the setting that loads it ('' for a path that is not a
    ``step_<N>`` directory)."""
    step = _step_of(path)
    if step is None:
        return ""
    folder = os.path.dirname(os.path.normpath(path)) or "."
    ref = _field_ref(field, legacy_field)
    for earlier, candidate in reversed(complete_checkpoints(folder)):
        if earlier < step and _checkpoint_problem(candidate) is None:
            return (
                f"{prefix}The newest earlier complete checkpoint is step {earlier} ({candidate}): "
                f"to resume from it, set {_field_ref(field, legacy_field, candidate)}; with "
                f"{field}='latest' move {os.path.normpath(path)} aside first."
            )
    return (
        f"{prefix}No earlier complete checkpoint under {folder} passes the same checks: restore "
        f"the file, or start from step 0 (unset {ref})."
    )


def _damaged(path: str, file: str, what: str, field: str, legacy_field: str | None) -> CheckpointError:
    return CheckpointError(
        f"checkpoint {path} is damaged: {file} {what}."
        + _earlier_checkpoint_hint(path, field, legacy_field, prefix=" ")
    )


def _agree_on_error(error: CheckpointError | None) -> None:
    """Raise on every rank when any rank found a damaged per-rank file (collective): a rank
    that raised alone would leave the others waiting in the next collective."""
    if not _distributed():
        if error is not None:
            raise error
        return
    messages: list[str | None] = [None] * _world_size()
    dist.all_gather_object(messages, None if error is None else str(error))
    if error is not None:
        raise error
    for rank, message in enumerate(messages):
        if message is not None:
            raise CheckpointError(f"rank {rank} reports: {message}")


def _load_small_file(path: str, name: str, what: str, field: str, legacy_field: str | None) -> Any:
    """``torch.load`` of ``path/name`` (weights only), a CheckpointError naming it otherwise."""
    file = os.path.join(path, name)
    if not os.path.isfile(file):
        raise _damaged(path, name, f"({what}) is missing", field, legacy_field)
    try:
        return torch.load(file, weights_only=True)
    except Exception as e:  # a damaged pickle/zip raises anything
        raise _damaged(
            path, name, f"({what}) cannot be read ({_reason(e)})", field, legacy_field
        ) from e


def read_extra_state(path: str, field: str, legacy_field: str | None) -> dict[str, Any]:
    """A checkpoint's ``extra_state.json``, once its files are checked (a damaged checkpoint is
    a ``CheckpointError`` naming ``field``)."""
    problem = _checkpoint_problem(path)  # extra_state.json, .metadata, the shards' sizes
    if problem is not None:
        raise _damaged(path, *problem, field, legacy_field)
    with open(os.path.join(path, EXTRA_STATE_FILE), encoding="utf-8") as f:
        return json.load(f)


def _shard_errors(exc: BaseException) -> list[_ShardReadError]:
    """The :class:`_ShardReadError` s inside a (DCP ``CheckpointException``) error, any rank."""
    found: list[_ShardReadError] = []
    seen: set[int] = set()

    def walk(e: BaseException | None) -> None:
        if e is None or id(e) in seen:
            return
        seen.add(id(e))
        if isinstance(e, _ShardReadError):
            found.append(e)
        failures = getattr(e, "failures", None)
        if isinstance(failures, dict):
            for value in failures.values():
                walk(value[0] if isinstance(value, tuple) and value else value)
        walk(e.__cause__)
        walk(e.__context__)

    walk(exc)
    return found


def _first_failure(exc: BaseException) -> BaseException:
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:
        value = next(iter(failures.values()))
        inner = value[0] if isinstance(value, tuple) and value else value
        if isinstance(inner, BaseException):
            return inner
    return exc
