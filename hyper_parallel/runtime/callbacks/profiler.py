"""The torch.profiler of the ``Profiler`` component: one ``wait -> warmup -> active`` window of
optimizer steps, a Chrome/TensorBoard trace per rank
(``<save_traces_folder>/rank<r>.<...>.pt.trace.json``, via ``tensorboard_trace_handler``)."""

from __future__ import annotations

import logging

import torch

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
