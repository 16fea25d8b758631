"""MemoryMonitorCallback: host RSS and device memory every ``train.memory_monitor.log_steps`` steps.

Host: current RSS (psutil) and the process's peak RSS (``getrusage``; the OS cannot reset it).
Device (CUDA or NPU, when the trainer's device is one): allocated / reserved and peak allocated.
With ``reset_peak_each_step`` the device peak counter is reset after every step, so each sample's
peak covers only that step; otherwise it is the peak since start. Samples are logged on rank 0
(figures are this rank's) and kept in ``self.last_metrics`` / ``self.history``.

Sampling and resetting are plain helpers (:func:`sample_memory`, :func:`reset_device_peak`,
:func:`format_memory`) shared with the ``MetricsProcessor`` component.
"""

from __future__ import annotations

import logging
import resource
import sys
from typing import Any

import torch

from .base import Callback

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


class MemoryMonitorCallback(Callback):
    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        cfg = self.train_section("memory_monitor")
        self.enabled = bool(cfg.enabled)
        self.log_steps = int(cfg.log_steps)
        self.reset_peak_each_step = bool(cfg.reset_peak_each_step)
        if self.enabled and self.log_steps < 1:
            raise ValueError(f"train.memory_monitor.log_steps must be >= 1, got {cfg.log_steps}")
        self.last_metrics: dict[str, Any] = {}
        self.history: list[dict[str, Any]] = []

    def sample(self) -> dict[str, Any]:
        return sample_memory(getattr(self.trainer, "device", None), self.trainer.state.global_step)

    def _record(self, label: str) -> None:
        metrics = self.sample()
        self.last_metrics = metrics
        self.history.append(metrics)
        if self.trainer.is_rank0:
            logger.info(
                "memory (%s, step %d, rank 0): %s", label, metrics["step"], format_memory(metrics)
            )

    def _reset_peak(self) -> None:
        reset_device_peak(getattr(self.trainer, "device", None))

    def on_train_begin(self) -> None:
        if self.enabled:
            self._record("train begin")
            if self.reset_peak_each_step:
                self._reset_peak()

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        if not self.enabled:
            return
        if self.trainer.state.global_step % self.log_steps == 0:
            self._record("step")
        if self.reset_peak_each_step:
            self._reset_peak()

    def on_train_end(self) -> None:
        if self.enabled:
            self._record("train end")
