"""Host and device memory samples, for the ``MetricsProcessor``'s memory monitor.

Host: current RSS (psutil) and the process's peak RSS (``getrusage``; the OS cannot reset it).
Device (CUDA or NPU, when the trainer's device is one): allocated / reserved and peak allocated.
:func:`reset_device_peak` resets the device peak counter (per-step peaks).
"""

from __future__ import annotations

import logging
import resource
import sys
from typing import Any

import torch

logger = logging.getLogger(__name__)

_GIB = 1024**3


def _device_module(device) -> Any | None:
    dev_type = torch.device(device).type if device is not None else "cpu"
    if dev_type == "cuda" and torch.cuda.is_available():
        return torch.cuda
    if dev_type == "npu":
        npu = getattr(torch, "npu", None)
        if npu is not None and npu.is_available():
            return npu
    return None


def has_device_peak_counter(device) -> bool:
    """Whether ``device`` has a peak-memory counter that :func:`reset_device_peak` resets."""
    return _device_module(device) is not None


def host_memory() -> dict[str, float]:
    """Current and peak resident set size of this process, in GiB."""
    import psutil

    rss = psutil.Process().memory_info().rss
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak_bytes = peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB
    return {"rss_gib": rss / _GIB, "peak_rss_gib": max(peak_bytes, rss) / _GIB}


def sample_memory(device, step: int) -> dict[str, Any]:
    """``step``, host RSS and, when ``device`` is a CUDA/NPU device, its memory counters (GiB)."""
    metrics: dict[str, Any] = {"step": int(step), **host_memory()}
    dev = _device_module(device)
    if dev is not None:
        metrics["device_allocated_gib"] = dev.memory_allocated() / _GIB
        metrics["device_reserved_gib"] = dev.memory_reserved() / _GIB
        metrics["device_peak_allocated_gib"] = dev.max_memory_allocated() / _GIB
    return metrics


def reset_device_peak(device) -> None:
    """Reset the peak-memory counter of ``device`` (no-op on CPU)."""
    dev = _device_module(device)
    if dev is not None and hasattr(dev, "reset_peak_memory_stats"):
        dev.reset_peak_memory_stats()


def format_memory(metrics: dict[str, Any]) -> str:
    """``name value | ...`` of a :func:`sample_memory` result (``step`` left out)."""
    return " | ".join(f"{k} {v:.3f}" for k, v in metrics.items() if k != "step")
