"""Process-wide logging set-up for entry points."""

from __future__ import annotations

import logging
import os

_FORMAT = "[%(asctime)s rank{rank}] %(levelname)s %(name)s: %(message)s"


def init_logger(level: int = logging.INFO) -> None:
    """Root logger with the rank in every line; idempotent."""
    root = logging.getLogger()
    if getattr(root, "_hyper_parallel_configured", False):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(
        logging.Formatter(_FORMAT.format(rank=os.environ.get("RANK", "0")), datefmt="%H:%M:%S")
    )
    root.handlers[:] = [handler]
    root.setLevel(level)
    root._hyper_parallel_configured = True  # type: ignore[attr-defined]
