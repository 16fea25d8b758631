"""Data files: what a data path names, reading them as UTF-8, and JSON lines -- shared by every
file-backed data type (``jsonl`` / ``text`` in :mod:`.datasets`, ``json_file`` in :mod:`.sft`
and its chat records in :mod:`.vision`)."""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator
from typing import Any

from hyper_parallel import assets


def _has_glob(path: str) -> bool:
    return any(ch in path for ch in "*?[")


def resolve_data_files(path: str, *, suffix: str, path_field: str = "data.train_path"
                       ) -> list[str]:
    """Files named by ``path``: a file, a directory (its ``*suffix`` files) or a glob pattern.

    ``pkg://`` paths address the shipped assets. Errors name ``path_field``.
    """
    resolved = assets.resolve_path(os.path.expanduser(path))
    shown = path if resolved == path else f"{path!r} (= {resolved!r})"
    if os.path.isfile(resolved):
        return [resolved]
    if os.path.isdir(resolved):
        files = sorted(os.path.join(resolved, n) for n in os.listdir(resolved)
                       if n.endswith(suffix) and os.path.isfile(os.path.join(resolved, n)))
        if not files:
            raise FileNotFoundError(f"{path_field}: directory {shown} contains no *{suffix} files")
        return files
    if _has_glob(resolved):
        files = sorted(f for f in glob.glob(resolved, recursive=True) if os.path.isfile(f))
        if not files:
            raise FileNotFoundError(f"{path_field}: pattern {shown} matches no files")
        return files
    hint = (f"; shipped files are addressed as {assets.PKG_PREFIX}corpus/train.jsonl"
            if not path.startswith(assets.PKG_PREFIX) else "")
    raise FileNotFoundError(f"{path_field}: {shown} does not exist{hint}")


def decode_utf8(raw: bytes, where: str) -> str:
    """``raw`` as UTF-8 text; a ``ValueError`` naming ``where`` and the byte otherwise."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc


def json_line(line: str, where: str, expected: str) -> Any:
    """The object of one JSON-lines ``line`` (at ``where``, ``file:line``); a line that is not
    JSON is a ``ValueError`` naming its place, then ``expected`` (what a line should hold)."""
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: invalid JSON ({exc.msg}, column {exc.colno}); "
                         f"{expected}") from exc


def json_lines(file: str, expected: str) -> Iterator[tuple[str, Any]]:
    """``(file:line, object)`` for every non-blank line of the JSON-lines ``file``, read line
    by line; a line that is not UTF-8 or not JSON is a ``ValueError`` naming its place, then
    ``expected`` (what a line should hold)."""
    with open(file, "rb") as fh:  # bytes: so a decoding error can name its line too
        for lineno, raw in enumerate(fh, start=1):
            where = f"{file}:{lineno}"
            line = decode_utf8(raw, where)
            if line.strip():
                yield where, json_line(line, where, expected)
