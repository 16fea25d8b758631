"""The step-metrics record, its log line and the ``metrics.jsonl`` writer (the
``MetricsProcessor``'s helpers).

Throughput (``report_throughput``): tokens/s = tokens of the last optimizer step over all DP ranks
/ step time; with ``model_flops_per_token`` and ``peak_tflops`` also TFLOPS = tokens/s *
flops_per_token / 1e12 (whole job) and MFU = TFLOPS / (peak_tflops * world_size). The log line
shows the loss with 8 decimals, as the legacy trainer did.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

METRICS_FILE = "metrics.jsonl"


def current_lr(trainer) -> float | None:
    """LR of the first param group after the last scheduler step (legacy: ``get_last_lr()[0]``)."""
    sched = getattr(trainer, "lr_scheduler", None)
    if sched is not None:
        return float(sched.get_last_lr()[0])
    opt = getattr(trainer, "optimizer", None)
    if opt is not None and opt.param_groups:
        return float(opt.param_groups[0]["lr"])
    return None


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def step_metrics_record(
    *,
    step: int,
    epoch: Any,
    loss: float,
    grad_norm: float | None,
    lr: float | None,
    step_time: float | None,
    tokens: int | None,
    report_throughput: bool,
    flops_per_token: float | None,
    peak_tflops: float | None,
    world_size: int,
) -> dict[str, Any]:
    """The metrics record of one optimizer step (see the module docstring for the formulas).

    ``tokens`` are the label tokens of the step over all DP ranks; throughput fields are added
    only with ``report_throughput``, a measured ``step_time`` and known ``tokens``.
    """
    rec: dict[str, Any] = {
        "step": int(step),
        "epoch": epoch,
        "loss": float(loss),
        "grad_norm": None if grad_norm is None else float(grad_norm),
        "lr": lr,
        "step_time": step_time,
    }
    if report_throughput and step_time and tokens is not None:
        tps = float(tokens) / step_time
        rec["tokens_per_sec"] = tps
        if flops_per_token and peak_tflops:
            tflops = tps * float(flops_per_token) / 1e12
            rec["tflops"] = tflops
            rec["mfu"] = tflops / (float(peak_tflops) * int(world_size))
    return rec


def format_step_record(rec: dict[str, Any], max_steps: int | None) -> str:
    """The one-line log message of a :func:`step_metrics_record` (loss with 8 decimals)."""
    parts = [
        f"step {rec['step']}/{max_steps}",
        f"loss {_fmt(rec['loss'], '.8f')}",
        f"grad_norm {_fmt(rec['grad_norm'], '.4f')}",
        f"lr {_fmt(rec['lr'], '.6e')}",
        f"step_time {_fmt(rec['step_time'], '.3f')}s",
    ]
    if "tokens_per_sec" in rec:
        parts.append(f"tokens/s {rec['tokens_per_sec']:.1f}")
    if "tflops" in rec:
        parts.append(f"TFLOPS {rec['tflops']:.2f} MFU {100 * rec['mfu']:.2f}%")
    return " | ".join(parts)


def format_eval_metrics(metrics: dict[str, Any]) -> str:
    """``k v | k v`` of evaluation metrics (finite floats with 8 decimals)."""
    return " | ".join(
        f"{k} {v:.8f}" if isinstance(v, float) and math.isfinite(v) else f"{k} {v}"
        for k, v in metrics.items()
    )


class JsonlWriter:
    """Appends one JSON object per line to ``path`` (opened on the first write, flushed per
    line, appended across resumes). NaN/inf are written as the JSON extensions NaN/Infinity
    (Python's json reads them back)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file = None

    def write(self, rec: dict[str, Any]) -> None:
        if self._file is None:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            # Kept open for the whole run (closed by close()): one line per logged step.
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._file.write(json.dumps(rec, sort_keys=True) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
