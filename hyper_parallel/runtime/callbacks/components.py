"""Built-in callbacks that drive the engine's components.

``HyperTrainer`` builds ``MetricsProcessor``, ``CheckpointManager`` and ``Profiler`` from its
Config; these callbacks plug them into the training loop under the
built-in names ``logging``, ``checkpoint`` and ``profiler``, so the dispatch orders stay the legacy
ones.
"""

from __future__ import annotations

import logging

from .. import checkpoint as ckpt
from .base import Callback
from .logging import current_lr

logger = logging.getLogger(__name__)


class MetricsCallback(Callback):
    """Step metrics through ``MetricsProcessor`` (log line, metrics.jsonl, TensorBoard, memory)."""

    def __init__(self, trainer, metrics) -> None:
        super().__init__(trainer)
        self.metrics = metrics

    def on_train_begin(self) -> None:
        self.metrics.begin(self.trainer.state.global_step)

    def on_load(self, checkpoint_dir: str) -> None:
        # Dispatched by the checkpoint callback once it restored state.global_step (after this
        # callback's on_train_begin, before the first step).
        self.metrics.resume(self.trainer.state.global_step)

    def on_step_begin(self) -> None:
        self.metrics.step_begin()

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        t = self.trainer
        step = t.state.global_step
        record = self.metrics.log(
            step,
            loss=loss,
            grad_norm=grad_norm,
            lr=current_lr(t),
            tokens=t.last_global_tokens,
            epoch=t.state.epoch,
            extra=getattr(t, "last_step_metrics", None),
        )
        if self.handler is not None:
            self.handler.last_step_metrics = record
        if step % self.metrics.config.log_freq == 0:
            t.state.log_history.append(dict(record))
            self.dispatch("on_log", dict(record))

    def on_evaluate(self, metrics: dict) -> None:
        record = self.metrics.log_eval(self.trainer.state.global_step, metrics)
        self.trainer.state.log_history.append(dict(record))

    def on_train_end(self) -> None:
        self.metrics.close(self.trainer.state.global_step)


class CheckpointManagerCallback(Callback):
    """Resume and save through ``CheckpointManager`` (its cadence, HF export and keep-latest-k)."""

    def __init__(self, trainer, checkpointer) -> None:
        super().__init__(trainer)
        self.checkpointer = checkpointer

    def on_train_begin(self) -> None:
        t = self.trainer
        # The trainer checks the checkpoint's configuration against its own before the state
        # is read, and says which source a fresh start takes its weights from.
        extra = self.checkpointer.load(before_load=getattr(t, "check_resume", None))
        if extra is None:
            note = getattr(t, "note_fresh_start", None)
            if note is not None:
                note()
            return
        path = self.checkpointer.loaded_from
        if "epoch" not in extra:
            raise ckpt.CheckpointError(
                f"{path}/{ckpt.EXTRA_STATE_FILE} has no 'epoch'; it was not written by a trainer"
            )
        t.state.global_step = int(extra["global_step"])
        t.state.epoch = extra["epoch"]
        if t.is_rank0:
            logger.info("Resumed from %s at step %d (epoch %s)", path, t.state.global_step, t.state.epoch)
        self.dispatch("on_load", path)

    def _save(self, *, end_of_training: bool) -> None:
        t = self.trainer
        extra = t.checkpoint_extra() if hasattr(t, "checkpoint_extra") else {"epoch": t.state.epoch}
        path = self.checkpointer.maybe_save(t.state.global_step, extra,
                                            end_of_training=end_of_training)
        if path is not None:
            self.dispatch("on_save", path)

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        self._save(end_of_training=False)

    def on_train_end(self) -> None:
        # The end of training (not a stop request's save): where export_hf_policy "final"
        # exports.
        self._save(end_of_training=True)
        self.checkpointer.wait()


class ProfilerComponentCallback(Callback):
    """Step the ``Profiler`` component once per optimizer step."""

    def __init__(self, trainer, profiler) -> None:
        super().__init__(trainer)
        self.profiler = profiler

    def on_train_begin(self) -> None:
        self.profiler.start()

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        self.profiler.step()

    def on_train_end(self) -> None:
        self.profiler.stop()
