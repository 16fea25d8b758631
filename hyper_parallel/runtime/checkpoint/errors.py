"""How a checkpoint failure is described: :class:`CheckpointError` and the wording it uses.

Every failure names the setting that picks the checkpoint (``checkpoint.load_path``; legacy
``train.checkpoint.load_path``; callers may pass their own field names), so the message says
what to change on either command line.
"""

from __future__ import annotations

from typing import Any

#: The setting that picks the checkpoint to load, as errors name it (``resolve_resume_path`` /
#: ``load_checkpoint`` take others from their callers).
LOAD_PATH_FIELD = "checkpoint.load_path"
LEGACY_LOAD_PATH_FIELD = "train.checkpoint.load_path"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, incomplete, inconsistent or could not be written."""


class _ShardReadError(Exception):
    """Reading one DCP file failed (raised inside ``dcp.load``; crosses ranks pickled)."""

    def __init__(self, file: str, reason: str) -> None:
        super().__init__(file, reason)
        self.file = file
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


def _reason(exc: BaseException) -> str:
    """``Type: first sentence`` of an error (torch's load errors go on for a paragraph, with
    advice about ``weights_only`` that does not apply to a damaged file)."""
    lines = str(exc).strip().splitlines()
    text = lines[0].strip() if lines else ""
    if len(text) > 100 and ". " in text:
        text = text[: text.index(". ") + 1]
    return f"{type(exc).__name__}: {text}".rstrip(": ")


def _field_ref(field: str, legacy_field: str | None, value: Any = None) -> str:
    """``checkpoint.load_path='x' (legacy YAML: train.checkpoint.load_path)``: the setting an
    error tells the user about, on both command lines (without ``='x'`` when ``value`` is None)."""
    text = field if value is None else f"{field}={value!r}"
    return text if not legacy_field else f"{text} (legacy YAML: {legacy_field})"
