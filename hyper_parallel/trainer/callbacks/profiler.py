"""ProfilerCallback: torch.profiler over a window of optimizer steps, traces per rank.

Schedule ``wait_steps`` idle steps, ``warmup_steps`` warm-up steps, ``active_steps`` recorded steps,
once (``repeat=1``); stepped at every ``on_step_end``. When the window completes, each rank writes a
Chrome/TensorBoard trace ``<profile.output_dir>/rank<r>.<...>.pt.trace.json`` via
``tensorboard_trace_handler`` (open with TensorBoard's profiler plugin, Perfetto or
chrome://tracing). A run that ends inside the window still writes what was recorded.

The profiler itself is built by the plain helper :func:`make_step_profiler`, shared with the
``Profiler`` component of the new configuration.
"""

from __future__ import annotations

import logging

import torch

from .base import Callback

logger = logging.getLogger(__name__)


def make_step_profiler(
    *, output_dir: str, wait: int, warmup: int, active: int, rank: int
) -> torch.profiler.profile:
    """A (not yet started) ``torch.profiler.profile`` over one ``wait -> warmup -> active``
    window of steps (``repeat=1``), CPU plus CUDA when available, writing the trace of this
    rank as ``<output_dir>/rank<rank>.<...>.pt.trace.json``."""
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    return profile(
        activities=activities,
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(output_dir, worker_name=f"rank{rank}"),
    )


class ProfilerCallback(Callback):
    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        cfg = self.train_section("profile")
        self.enabled = bool(cfg.enabled)
        self.output_dir = cfg.output_dir
        self.wait, self.warmup, self.active = (
            int(cfg.wait_steps),
            int(cfg.warmup_steps),
            int(cfg.active_steps),
        )
        if self.enabled:
            for name, value in (("wait_steps", self.wait), ("warmup_steps", self.warmup)):
                if value < 0:
                    raise ValueError(f"train.profile.{name} must be >= 0, got {value}")
            if self.active < 1:
                raise ValueError(f"train.profile.active_steps must be >= 1, got {self.active}")
            if not self.output_dir:
                raise ValueError(
                    "train.profile.output_dir must be set when train.profile.enabled is true"
                )
        self.profiler: torch.profiler.profile | None = None

    def on_train_begin(self) -> None:
        if not self.enabled or self.profiler is not None:
            return
        self.profiler = make_step_profiler(
            output_dir=self.output_dir,
            wait=self.wait,
            warmup=self.warmup,
            active=self.active,
            rank=self.trainer.rank,
        )
        self.profiler.start()
        logger.info(
            "Profiler on: wait %d, warmup %d, active %d steps -> %s",
            self.wait,
            self.warmup,
            self.active,
            self.output_dir,
        )

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        if self.profiler is not None:
            self.profiler.step()

    def on_train_end(self) -> None:
        if self.profiler is not None:
            self.profiler.stop()
            self.profiler = None
