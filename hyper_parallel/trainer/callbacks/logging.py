"""LoggingCallback: step metrics to the log, ``state.log_history``, a JSONL file and ``on_log``.

Every step it times the step (``on_step_begin`` -> ``on_step_end``) and publishes the step's
metrics in ``handler.last_step_metrics`` (TensorBoard uses them at its own cadence; the trainer
itself keeps ``state.loss_history``). Every ``train.logging.log_steps`` steps it:

* logs one line through the ``logging`` module on rank 0 (loss with 8 decimals, as the legacy);
* appends the record to ``trainer.state.log_history`` (every rank, so the states agree);
* appends it as one JSON object to ``<train.checkpoint.output_dir>/metrics.jsonl`` (rank 0, flushed
  per line; appended across resumes);
* fans it out to every callback's ``on_log``.

Throughput (``report_throughput``): tokens/s = ``trainer.last_global_tokens`` (tokens of the last
optimizer step over all DP ranks) / step time; with ``model_flops_per_token`` and ``peak_tflops``
also TFLOPS = tokens/s * flops_per_token / 1e12 (whole job) and MFU = TFLOPS / (peak_tflops *
world_size). Evaluation results (``on_evaluate``) are logged and written the same way.

The record, the log lines and the JSONL file are plain helpers (:func:`step_metrics_record`,
:func:`format_step_record`, :func:`format_eval_metrics`, :class:`JsonlWriter`) shared with the
``MetricsProcessor`` component of the new configuration.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from typing import Any

from .base import Callback

logger = logging.getLogger(__name__)

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


class LoggingCallback(Callback):
    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        cfg = self.train_section("logging")
        self.log_steps = int(cfg.log_steps)
        if self.log_steps < 1:
            raise ValueError(f"train.logging.log_steps must be >= 1, got {cfg.log_steps}")
        self.report_throughput = bool(cfg.report_throughput)
        self.flops_per_token = getattr(cfg, "model_flops_per_token", None)
        self.peak_tflops = getattr(cfg, "peak_tflops", None)
        if self.peak_tflops is not None and self.peak_tflops <= 0:
            raise ValueError(
                f"train.logging.peak_tflops must be > 0 when set, got {self.peak_tflops}"
            )
        self.metrics_path = os.path.join(self.train_section("checkpoint").output_dir, METRICS_FILE)
        self._writer = JsonlWriter(self.metrics_path)
        self._step_start: float | None = None

    # -- metrics --------------------------------------------------------------------------------
    def step_metrics(
        self, loss: float, grad_norm: float | None, step_time: float | None
    ) -> dict[str, Any]:
        t = self.trainer
        return step_metrics_record(
            step=t.state.global_step,
            epoch=t.state.epoch,
            loss=loss,
            grad_norm=grad_norm,
            lr=current_lr(t),
            step_time=step_time,
            tokens=t.last_global_tokens,
            report_throughput=self.report_throughput,
            flops_per_token=self.flops_per_token,
            peak_tflops=self.peak_tflops,
            world_size=t.world_size,
        )

    def _format(self, rec: dict[str, Any]) -> str:
        return format_step_record(rec, self.trainer.state.max_steps)

    def _write_jsonl(self, rec: dict[str, Any]) -> None:
        if self.trainer.is_rank0:
            self._writer.write(rec)

    # -- hooks ----------------------------------------------------------------------------------
    def on_step_begin(self) -> None:
        self._step_start = time.perf_counter()

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        step_time = None if self._step_start is None else time.perf_counter() - self._step_start
        self._step_start = None
        state = self.trainer.state
        rec = self.step_metrics(loss, grad_norm, step_time)
        if self.handler is not None:
            self.handler.last_step_metrics = rec
        if rec["step"] % self.log_steps != 0:
            return
        if self.trainer.is_rank0:
            logger.info(self._format(rec))
        state.log_history.append(dict(rec))
        self._write_jsonl(rec)
        self.dispatch("on_log", dict(rec))

    def on_evaluate(self, metrics: dict[str, Any]) -> None:
        rec = {"step": int(self.trainer.state.global_step), **metrics}
        if self.trainer.is_rank0:
            logger.info("step %d | %s", rec["step"], format_eval_metrics(metrics))
        self.trainer.state.log_history.append(dict(rec))
        self._write_jsonl(rec)

    def on_train_end(self) -> None:
        self._writer.close()
