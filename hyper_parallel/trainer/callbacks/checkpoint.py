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

The work is done by :class:`hyper_parallel.components.checkpoint.CheckpointManager`, built from
these settings, through the same callback ``HyperTrainer`` uses.
"""

from __future__ import annotations

import logging

from .base import Callback
from .components import CheckpointManagerCallback

logger = logging.getLogger(__name__)


class CheckpointCallback(CheckpointManagerCallback):
    """The legacy ``train.checkpoint`` settings driving a ``CheckpointManager``.

    Resume, cadence and saving are the manager's (one implementation for both trainers); the
    Hugging Face export stays with :class:`HFExportCallback`, which reacts to ``on_save``.
    """

    def __init__(self, trainer) -> None:
        from hyper_parallel.components.checkpoint import CheckpointManager

        Callback.__init__(self, trainer)
        cfg = self.train_section("checkpoint")
        if int(cfg.save_steps) < 0:
            raise ValueError(
                f"train.checkpoint.save_steps must be >= 0 (0 disables saving), got {cfg.save_steps}"
            )
        if int(cfg.save_steps) > 0 and not cfg.output_dir:
            raise ValueError(
                "train.checkpoint.output_dir must be set when train.checkpoint.save_steps > 0"
            )
        t = self.trainer
        manager = CheckpointManager.Config(
            folder=cfg.output_dir,
            interval=int(cfg.save_steps),
            export_hf=False,
            load_path=cfg.load_path or None,  # the legacy trainer reads "" as unset
            async_mode="async" if cfg.save_async else "disabled",
        ).build(
            model_parts=[t.model],
            optimizers=t.optimizer,
            lr_schedulers=t.lr_scheduler,
            dataloader=t.train_dataloader,
        )
        super().__init__(trainer, manager)

    @property
    def output_dir(self) -> str:
        return self.checkpointer.config.folder

    @property
    def save_steps(self) -> int:
        return self.checkpointer.config.interval

    @property
    def saved(self) -> list[str]:
        return self.checkpointer.saved

    @property
    def loaded_from(self) -> str | None:
        return self.checkpointer.loaded_from

    @property
    def last_saved_step(self) -> int | None:
        return self.checkpointer.last_saved_step

    def save(self, *, async_save: bool | None = None) -> str:
        """Save the current step now (collective) and send ``on_save``; returns the directory."""
        t = self.trainer
        path = self.checkpointer.save(t.state.global_step, {"epoch": t.state.epoch}, async_save=async_save)
        self.dispatch("on_save", path)
        return path
