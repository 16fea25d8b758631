"""``Profiler``: torch.profiler over one window of optimizer steps, as a Configurable.

The profiler is the legacy ``ProfilerCallback``'s
(:func:`hyper_parallel.runtime.callbacks.profiler.make_step_profiler`): ``wait`` idle steps,
``warmup`` traced-but-discarded steps, ``active`` recorded steps, once; each rank writes
``<save_traces_folder>/rank<r>.<...>.pt.trace.json`` when the window completes (or at ``stop``
when the run ends inside it). Disabled, every method is a no-op.

Use it as a context manager around the loop and call ``step()`` after every optimizer step::

    with config.profiler.build() as profiler:
        for ...:
            train_step(...)
            profiler.step()

Defaults equal the legacy ``train.profile`` section (off, ``profiler_traces``, wait 1, warmup 1,
active 3).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from typing_extensions import Self

from hyper_parallel.components._validate import integer_at_least, require
from hyper_parallel.protocols.configurable import Configurable

logger = logging.getLogger(__name__)


class Profiler(Configurable):
    """Starts a step-scheduled ``torch.profiler.profile`` (``.profiler``) when enabled."""

    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        enable_profiling: bool = False
        """Profile one ``wait -> warmup -> active`` window of steps."""

        save_traces_folder: str = "profiler_traces"
        """Directory of the per-rank traces (open with TensorBoard, Perfetto or
        chrome://tracing)."""

        wait: int = 1
        """Steps skipped before warming up."""

        warmup: int = 1
        """Steps traced but discarded."""

        active: int = 3
        """Steps recorded."""

        def __post_init__(self) -> None:
            integer_at_least(self, "wait", 0)
            integer_at_least(self, "warmup", 0)
            integer_at_least(self, "active", 1)
            require(
                not self.enable_profiling
                or (isinstance(self.save_traces_folder, str) and self.save_traces_folder != ""),
                self,
                "save_traces_folder",
                "must be a directory when enable_profiling is true",
            )

    def __init__(self, config: Config, *, rank: int | None = None) -> None:
        """``rank`` names the trace files (default: the ``torch.distributed`` rank, or 0)."""
        self.config = config
        if rank is None:
            import torch.distributed as dist  # here, not at import: the Config needs no torch

            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        self.rank = rank
        self.profiler = None

    def start(self) -> None:
        """Create and start the profiler (once; no-op when disabled or already started)."""
        c = self.config
        if not c.enable_profiling or self.profiler is not None:
            return
        from hyper_parallel.runtime.callbacks.profiler import make_step_profiler

        self.profiler = make_step_profiler(
            output_dir=c.save_traces_folder,
            wait=c.wait,
            warmup=c.warmup,
            active=c.active,
            rank=self.rank,
        )
        self.profiler.start()
        logger.info(
            "Profiler on: wait %d, warmup %d, active %d steps -> %s",
            c.wait,
            c.warmup,
            c.active,
            c.save_traces_folder,
        )

    def step(self) -> None:
        """Advance the schedule by one optimizer step."""
        if self.profiler is not None:
            self.profiler.step()

    def stop(self) -> None:
        """Stop the profiler (writes a trace for a window that is still open)."""
        if self.profiler is not None:
            self.profiler.stop()
            self.profiler = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["Profiler"]
