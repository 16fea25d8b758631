"""TensorBoardCallback: scalars into ``train.tensorboard.output_dir`` on rank 0 when enabled.

Every ``train.tensorboard.log_steps`` steps: ``train/loss``, ``train/grad_norm``, ``train/lr`` and,
when the logging callback measured it, ``train/tokens_per_sec`` (plus ``train/tflops``/``train/mfu``);
``eval/loss`` on every evaluation. The metrics come from ``handler.last_step_metrics`` (computed by
LoggingCallback, which runs first in the step-end order) so both report identical numbers.

Opening the writer and writing the scalars are plain helpers (:func:`open_summary_writer`,
:func:`add_step_scalars`, :func:`add_eval_scalars`) shared with the ``MetricsProcessor`` component.
"""

from __future__ import annotations

from typing import Any

from .base import Callback

_STEP_SCALARS = ("loss", "grad_norm", "lr", "tokens_per_sec", "tflops", "mfu")


def open_summary_writer(output_dir: str, field_name: str = "train.tensorboard.enabled"):
    """A ``SummaryWriter`` logging into ``output_dir``; ``field_name`` is the switch named in
    the error when the ``tensorboard`` package is missing."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"{field_name} needs the 'tensorboard' package (pip install tensorboard)"
        ) from e
    return SummaryWriter(log_dir=output_dir)


def add_step_scalars(writer, metrics: dict[str, Any], step: int) -> None:
    """``train/<name>`` for each step scalar present (not None) in ``metrics``."""
    for key in _STEP_SCALARS:
        value = metrics.get(key)
        if value is not None:
            writer.add_scalar(f"train/{key}", float(value), step)


def add_eval_scalars(writer, metrics: dict[str, Any], step: int) -> None:
    """``eval/<name>`` for each evaluation metric (``eval_`` prefix dropped), then flush."""
    for key, value in metrics.items():
        name = key.removeprefix("eval_")
        writer.add_scalar(f"eval/{name}", float(value), step)
    writer.flush()


class TensorBoardCallback(Callback):
    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        cfg = self.train_section("tensorboard")
        self.enabled = bool(cfg.enabled)
        self.output_dir = cfg.output_dir
        self.log_steps = int(cfg.log_steps)
        if self.enabled and self.log_steps < 1:
            raise ValueError(f"train.tensorboard.log_steps must be >= 1, got {cfg.log_steps}")
        if self.enabled and not self.output_dir:
            raise ValueError(
                "train.tensorboard.output_dir must be set when train.tensorboard.enabled is true"
            )
        self.writer = None

    def _ensure_writer(self):
        if self.writer is None and self.enabled and self.trainer.is_rank0:
            self.writer = open_summary_writer(self.output_dir)
        return self.writer

    def on_train_begin(self) -> None:
        self._ensure_writer()

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        step = self.trainer.state.global_step
        if step % self.log_steps != 0:
            return
        writer = self._ensure_writer()
        if writer is None:
            return
        metrics = dict(self.handler.last_step_metrics) if self.handler is not None else {}
        if metrics.get("step") != step:  # logging callback absent: report what we were given
            metrics = {"loss": loss, "grad_norm": grad_norm}
        add_step_scalars(writer, metrics, step)

    def on_evaluate(self, metrics: dict[str, Any]) -> None:
        writer = self._ensure_writer()
        if writer is None:
            return
        add_eval_scalars(writer, metrics, self.trainer.state.global_step)

    def on_train_end(self) -> None:
        if self.writer is not None:
            self.writer.flush()
            self.writer.close()
            self.writer = None
