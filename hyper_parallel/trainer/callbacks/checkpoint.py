"""CheckpointCallback: resume at train begin, save every ``save_steps`` and at train end.

Settings: ``train.checkpoint.{output_dir, save_steps, load_path, save_async}``.

* Resume (``on_train_begin``, which runs before the progress bar is created): ``load_path`` is
  resolved by :func:`hyper_parallel.trainer.checkpoint.resolve_resume_path`:
  ``"latest"`` = newest complete ``step_<N>`` under ``output_dir`` (fresh start, with a warning,
  when there is none yet - the restartable-job idiom); a ``step_<N>`` directory = that one; a
  directory holding ``step_<N>`` directories = its newest complete one. A missing, interrupted or
  incomplete path is an error, never a silent fresh start. After loading, ``state.global_step`` and
  ``state.epoch`` come from the checkpoint and ``on_load(dir)`` is sent to every callback.
* Save: every ``save_steps`` steps (``0`` disables all saves, including the final one) and at train
  end unless this step was already saved (or loaded). Step 0 is never saved (nothing trained; the
  optimizer has no state). ``on_save(dir)`` is sent after each save - with ``save_async`` when the
  background write was started (the directory appears once it completes; ``wait_async_save()``).
  Periodic saves honour ``save_async``; the final save is synchronous and waits for any pending one.
* Errors propagate: a failed save or load stops training instead of being only warned about
  (the legacy warned, E.12).
"""

from __future__ import annotations

import logging

from .. import checkpoint as ckpt
from .base import Callback

logger = logging.getLogger(__name__)


class CheckpointCallback(Callback):
    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        cfg = self.train_section("checkpoint")
        self.output_dir = cfg.output_dir
        self.save_steps = int(cfg.save_steps)
        self.load_path = cfg.load_path
        self.save_async = bool(cfg.save_async)
        if self.save_steps < 0:
            raise ValueError(
                f"train.checkpoint.save_steps must be >= 0 (0 disables saving), got {cfg.save_steps}"
            )
        if self.save_steps > 0 and not self.output_dir:
            raise ValueError(
                "train.checkpoint.output_dir must be set when train.checkpoint.save_steps > 0"
            )
        self.last_saved_step: int | None = None
        self.loaded_from: str | None = None
        self.saved: list[str] = []

    # -- resume -----------------------------------------------------------------------------------
    def on_train_begin(self) -> None:
        path = ckpt.resolve_resume_path(self.load_path, self.output_dir)
        if path is None:
            return
        t = self.trainer
        extra = ckpt.load_checkpoint(
            path,
            model=t.model,
            optimizer=t.optimizer,
            lr_scheduler=t.lr_scheduler,
            dataloader=t.train_dataloader,
        )
        if "epoch" not in extra:
            raise ckpt.CheckpointError(
                f"{path}/{ckpt.EXTRA_STATE_FILE} has no 'epoch'; it was not written by a trainer"
            )
        t.state.global_step = int(extra["global_step"])
        t.state.epoch = extra["epoch"]
        self.last_saved_step = t.state.global_step
        self.loaded_from = path
        if t.is_rank0:
            logger.info(
                "Resumed from %s at step %d (epoch %s)", path, t.state.global_step, t.state.epoch
            )
        self.dispatch("on_load", path)

    # -- save -------------------------------------------------------------------------------------
    def save(self, *, async_save: bool | None = None) -> str:
        """Save the current step now (collective) and send ``on_save``; returns the directory."""
        t = self.trainer
        step = int(t.state.global_step)
        path = ckpt.save_checkpoint(
            self.output_dir,
            step,
            model=t.model,
            optimizer=t.optimizer,
            lr_scheduler=t.lr_scheduler,
            dataloader=t.train_dataloader,
            extra={"epoch": t.state.epoch},
            async_save=self.save_async if async_save is None else async_save,
        )
        self.last_saved_step = step
        self.saved.append(path)
        self.dispatch("on_save", path)
        return path

    def on_step_end(self, loss: float, grad_norm: float | None) -> None:
        step = self.trainer.state.global_step
        if (
            self.save_steps > 0
            and step > 0
            and step % self.save_steps == 0
            and step != self.last_saved_step
        ):
            self.save()

    def on_train_end(self) -> None:
        step = self.trainer.state.global_step
        if self.save_steps > 0 and step > 0 and step != self.last_saved_step:
            self.save(async_save=False)
        ckpt.wait_async_save()
