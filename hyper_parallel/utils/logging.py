"""Process-wide logging set-up for entry points."""

from __future__ import annotations

import logging
import os
import sys

_FORMAT = "[%(asctime)s rank{rank}] %(levelname)s %(name)s: %(message)s"


class _CurrentStderr(logging.StreamHandler):
    """A handler writing to ``sys.stderr`` as it is when a record is emitted, not as it was when
    the logger was set up (a caller that redirects or replaces stderr later -- a test's capture,
    a wrapper -- would otherwise leave the logger writing to a closed stream)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def init_logger(level: int = logging.INFO) -> None:
    """Root logger with the rank in every line; idempotent."""
    root = logging.getLogger()
    if getattr(root, "_hyper_parallel_configured", False):
        return
    handler = _CurrentStderr()
    handler.setFormatter(
        logging.Formatter(_FORMAT.format(rank=os.environ.get("RANK", "0")), datefmt="%H:%M:%S")
    )
    root.handlers[:] = [handler]
    root.setLevel(level)
    root._hyper_parallel_configured = True  # type: ignore[attr-defined]
