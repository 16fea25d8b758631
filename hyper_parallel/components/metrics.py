"""``MetricsProcessor``: step metrics to the log, a JSONL file, TensorBoard, Weights & Biases and
the memory monitor.

One object does what the legacy trainer's logging, TensorBoard and memory-monitor callbacks
did, with their helpers, so the numbers, the log lines and the files are the legacy ones:

* the record of a step (:func:`~hyper_parallel.runtime.callbacks.logging.step_metrics_record`:
  loss, grad norm, LR, step time and, with ``report_throughput``, tokens/s, TFLOPS and MFU) and
  its log line (:func:`~hyper_parallel.runtime.callbacks.logging.format_step_record`);
* every ``log_freq`` steps: the line on rank 0, the record appended to ``history`` and, on rank 0,
  to ``<output_dir>/metrics.jsonl`` (legacy: ``<train.checkpoint.output_dir>/metrics.jsonl``);
  a resume at step S (:meth:`MetricsProcessor.resume`) first cuts the file back to the rows of
  steps <= S, so the resumed run's rows replace those of the steps it repeats;
* every ``tb_log_freq`` steps with ``enable_tensorboard``: ``train/<scalar>`` on rank 0;
* every ``wandb_log_freq`` steps with ``enable_wandb``: every number of the step's record as
  ``train/<key>`` in a Weights & Biases run on rank 0 (evaluations as ``eval/<name>``, memory
  samples as ``memory/<key>``), opened by :meth:`MetricsProcessor.begin` -- offline, under
  ``<output_dir>/wandb``, where there is no API key or network
  (:mod:`~hyper_parallel.runtime.callbacks.wandb_logger`);
* every ``memory_log_freq`` steps with ``enable_memory_monitor``: host and device memory.

Use::

    metrics = config.metrics.build(trainer=trainer, output_dir=config.checkpoint.folder)
    metrics.begin()                       # once, before the first step
    metrics.resume(step)                  # after loading a checkpoint of `step` (if any)
    for step in ...:
        metrics.step_begin()              # starts the step timer
        result = train_step(...)
        metrics.log(step, loss=result.loss, grad_norm=result.grad_norm,
                    lr=lr_schedulers.get_last_lr()[0], tokens=result.global_tokens, epoch=epoch)
    metrics.log_eval(step, {"eval_loss": value})
    metrics.close()

Defaults equal the legacy ``train.logging``, ``train.tensorboard``, ``train.wandb`` and
``train.memory_monitor`` sections (log every 10 steps with throughput; TensorBoard off,
``tb_traces``, every step; W&B off, project ``hyper-parallel``, every step; memory monitor off,
every 50 steps, no per-step peak reset).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from hyper_parallel.components._validate import integer_at_least, require
from hyper_parallel.protocols.configurable import Configurable
from hyper_parallel.utils.errors import ConfigError

# The helpers below the Config (hyper_parallel.runtime.callbacks.logging / memory / tensorboard /
# wandb_logger, some of which import torch or wandb) are imported by the methods that use them:
# the Config is configuration and must import without torch.

logger = logging.getLogger(__name__)

#: The recipe field of ``Config.reset_peak_memory_each_step`` (its refusals are ConfigErrors
#: that name it).
RESET_PEAK_FIELD = "metrics.reset_peak_memory_each_step"
#: The recipe fields the W&B refusals name.
WANDB_FIELD = "metrics.enable_wandb"
WANDB_PROJECT_FIELD = "metrics.wandb_project"


class MetricsProcessor(Configurable):
    """Computes, logs and stores the metrics of every step; see the module docstring."""

    @dataclass(kw_only=True, slots=True)
    class Config(Configurable.Config):
        log_freq: int = 10
        """Log the step metrics every N optimizer steps (legacy ``train.logging.log_steps``)."""

        report_throughput: bool = True
        """Add tokens/s (and TFLOPS / MFU when ``peak_tflops`` is set) to the metrics."""

        model_flops_per_token: int | None = None
        """Training FLOPs per token, for TFLOPS and MFU; unset: the model's own count at
        ``training.seq_len`` (``num_flops_per_token``: ``6 * N`` plus attention and the Gated
        DeltaNet state)."""

        peak_tflops: float | None = None
        """Peak TFLOPS of one device, for TFLOPS and MFU (e.g. 989.0 for an H100 in bf16)."""

        enable_tensorboard: bool = False
        """Write TensorBoard scalars (``train/loss``, ``train/lr``, ...) on rank 0."""

        save_tb_folder: str = "tb_traces"
        """Directory of the TensorBoard event files."""

        tb_log_freq: int = 1
        """Write TensorBoard scalars every N steps (legacy ``train.tensorboard.log_steps``)."""

        enable_wandb: bool = False
        """Log the step metrics to Weights & Biases on rank 0 (``train/<key>``, ``eval/<name>``,
        ``memory/<key>``); needs the ``wandb`` package (``pip install hyper_parallel[wandb]``).
        Without an API key or network the run is written offline into
        ``<checkpoint.folder>/wandb`` (``WANDB_DIR`` if set) for a later ``wandb sync``;
        ``WANDB_MODE`` is respected."""

        wandb_project: str = "hyper-parallel"
        """Weights & Biases project (the entity: ``WANDB_ENTITY``, else the API key's default)."""

        wandb_run_name: str | None = None
        """Display name of the Weights & Biases run; unset: W&B's own (``WANDB_NAME`` if set)."""

        wandb_log_freq: int = 1
        """Log to Weights & Biases every N steps (legacy ``train.wandb.log_steps``)."""

        enable_memory_monitor: bool = False
        """Log host RSS and device memory (legacy ``train.memory_monitor.enabled``)."""

        memory_log_freq: int = 50
        """Log memory every N steps."""

        reset_peak_memory_each_step: bool = False
        """Reset the device peak-memory counter after every step (per-step peaks)."""

        def __post_init__(self) -> None:
            integer_at_least(self, "log_freq", 1)
            if self.model_flops_per_token is not None:
                integer_at_least(self, "model_flops_per_token", 1)
            if self.peak_tflops is not None:
                require(
                    isinstance(self.peak_tflops, (int, float)) and self.peak_tflops > 0,
                    self,
                    "peak_tflops",
                    "must be > 0 (or unset)",
                )
            integer_at_least(self, "tb_log_freq", 1)
            require(
                not self.enable_tensorboard
                or (isinstance(self.save_tb_folder, str) and self.save_tb_folder != ""),
                self,
                "save_tb_folder",
                "must be a directory when enable_tensorboard is true",
            )
            require(
                isinstance(self.wandb_project, str) and self.wandb_project != "",
                self,
                "wandb_project",
                "must be a non-empty project name",
            )
            require(
                self.wandb_run_name is None
                or (isinstance(self.wandb_run_name, str) and self.wandb_run_name != ""),
                self,
                "wandb_run_name",
                "must be a non-empty name (or unset)",
            )
            integer_at_least(self, "wandb_log_freq", 1)
            integer_at_least(self, "memory_log_freq", 1)

    def __init__(
        self,
        config: Config,
        *,
        trainer: Any | None = None,
        output_dir: str | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        device: Any | None = None,
        max_steps: int | None = None,
        counted_flops_per_token: float | None = None,
    ) -> None:
        """
        Args:
            trainer: optional; its ``rank``, ``world_size`` and ``device`` attributes are used
                for the arguments below that are not given.
            output_dir: directory of ``metrics.jsonl`` (None: no file).
            rank, world_size: default from ``torch.distributed`` (0 / 1 without a group).
            device: the training device, for the device-memory figures (None: host only).
            max_steps: shown in the log line as ``step <n>/<max_steps>``.
            counted_flops_per_token: the model's own count, used when the Config leaves
                ``model_flops_per_token`` unset.
        """
        import torch.distributed as dist

        from hyper_parallel.runtime.callbacks.logging import METRICS_FILE, JsonlWriter
        from hyper_parallel.runtime.callbacks.memory import has_device_peak_counter

        self.config = config
        self.flops_per_token = (
            config.model_flops_per_token
            if config.model_flops_per_token is not None
            else counted_flops_per_token
        )
        distributed = dist.is_available() and dist.is_initialized()
        self.rank = _pick(rank, trainer, "rank", dist.get_rank() if distributed else 0)
        self.world_size = _pick(
            world_size, trainer, "world_size", dist.get_world_size() if distributed else 1
        )
        self.device = _pick(device, trainer, "device", None)
        if config.reset_peak_memory_each_step:
            # Never accept a setting that does nothing: the reset acts on the device peak
            # counter, sampled only by the memory monitor. The errors name the recipe fields,
            # which the legacy front door translates to its keys.
            if not config.enable_memory_monitor:
                raise ConfigError(
                    "True, but metrics.enable_memory_monitor is off, so no peak is ever sampled "
                    "to reset; turn the memory monitor on or set it to False",
                    path=RESET_PEAK_FIELD,
                )
            if not has_device_peak_counter(self.device):
                raise ConfigError(
                    "True needs a device peak-memory counter (CUDA or NPU); the training device "
                    f"is {self.device or 'cpu'}, whose host peak RSS cannot be reset; set it to "
                    "False",
                    path=RESET_PEAK_FIELD,
                )
        # Every rank: one that went on alone would wait for the others in a collective.
        check_wandb(config)
        self.max_steps = max_steps
        self.is_rank0 = self.rank == 0
        self.output_dir = output_dir
        # Read when the W&B run opens (the trainer records its configuration after building
        # the components).
        self._trainer = trainer
        self.metrics_path = None if output_dir is None else os.path.join(output_dir, METRICS_FILE)
        self._jsonl = None if self.metrics_path is None else JsonlWriter(self.metrics_path)
        self._tb_writer = None
        self._wandb_run = None
        # What W&B recorded of the run when it opened (rank 0; None until then), and the steps
        # whose record went to it.
        self.wandb_info = None
        self.wandb_steps: list[int] = []
        self._step_start: float | None = None
        # The record of the last step (every step, logged or not); every logged step and
        # evaluation record; every memory sample.
        self.last_metrics: dict[str, Any] = {}
        self.history: list[dict[str, Any]] = []
        self.memory_history: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ lifecycle

    def begin(self, step: int = 0) -> None:
        """Before the first step: open TensorBoard and the W&B run, take the first memory
        sample."""
        from hyper_parallel.runtime.callbacks.memory import reset_device_peak

        self._tensorboard()
        self._open_wandb()
        if self.config.enable_memory_monitor:
            self._record_memory("train begin", step)
            if self.config.reset_peak_memory_each_step:
                reset_device_peak(self.device)

    def resume(self, step: int) -> None:
        """The run resumed from a checkpoint of ``step``: before the first new row, rank 0 cuts
        ``metrics.jsonl`` back to the rows of steps ``<= step`` (atomically, keeping its
        permissions; rows without a step and evaluation rows of those steps stay), so the resumed
        run replaces the rows of the steps it repeats instead of appending duplicates."""
        if self._jsonl is None or not self.is_rank0:
            return
        from hyper_parallel.runtime.callbacks.logging import truncate_metrics_file

        self._jsonl.close()  # reopened (appending) by the next write
        dropped = truncate_metrics_file(self.metrics_path, int(step))
        if dropped:
            logger.info(
                "resumed at step %d: removed %d row(s) after that step from %s",
                step,
                dropped,
                self.metrics_path,
            )

    def step_begin(self) -> None:
        """Start the step timer."""
        self._step_start = time.perf_counter()

    def close(self, step: int | None = None, *, exit_code: int = 0) -> None:
        """After training: a last memory sample, then flush and close the files and finish the
        W&B run (``exit_code`` != 0: marked failed). Closing again does nothing more."""
        if self.config.enable_memory_monitor and step is not None:
            self._record_memory("train end", step)
        if self._wandb_run is not None:
            run, self._wandb_run = self._wandb_run, None
            run.finish(exit_code=exit_code)
        if self._tb_writer is not None:
            self._tb_writer.flush()
            self._tb_writer.close()
            self._tb_writer = None
        if self._jsonl is not None:
            self._jsonl.close()

    # ------------------------------------------------------------------ per step

    def log(
        self,
        step: int,
        *,
        loss: float,
        grad_norm: float | None,
        lr: float | None,
        tokens: int | None,
        epoch: Any = None,
        extra: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        """Record the metrics of ``step`` and emit them at their cadences; returns the record.

        ``tokens`` are the label tokens of the step over all DP ranks (throughput); the step
        time is measured from the last :meth:`step_begin` (None without one). ``extra`` are
        the model's own step metrics (a mixture of experts: ``moe_aux_loss``,
        ``moe_load_imbalance``), added to the record as they are.
        """
        from hyper_parallel.runtime.callbacks.logging import format_step_record, step_metrics_record
        from hyper_parallel.runtime.callbacks.memory import reset_device_peak
        from hyper_parallel.runtime.callbacks.tensorboard import add_step_scalars

        step_time = None if self._step_start is None else time.perf_counter() - self._step_start
        self._step_start = None
        c = self.config
        rec = step_metrics_record(
            step=step,
            epoch=epoch,
            loss=loss,
            grad_norm=grad_norm,
            lr=lr,
            step_time=step_time,
            tokens=tokens,
            report_throughput=c.report_throughput,
            flops_per_token=self.flops_per_token,
            peak_tflops=c.peak_tflops,
            world_size=self.world_size,
        )
        rec.update(extra or {})
        self.last_metrics = rec
        if step % c.log_freq == 0:
            if self.is_rank0:
                logger.info(format_step_record(rec, self.max_steps))
            self.history.append(dict(rec))
            self._write_jsonl(rec)
        if step % c.tb_log_freq == 0:
            writer = self._tensorboard()
            if writer is not None:
                add_step_scalars(writer, rec, step)
        if step % c.wandb_log_freq == 0 and self._wandb_run is not None:
            from hyper_parallel.runtime.callbacks.wandb_logger import step_values

            self._wandb_run.log(step_values(rec), step=int(step))
            self.wandb_steps.append(int(step))
        if c.enable_memory_monitor:
            if step % c.memory_log_freq == 0:
                self._record_memory("step", step)
            if c.reset_peak_memory_each_step:
                reset_device_peak(self.device)
        return rec

    def log_eval(self, step: int, metrics: dict[str, Any]) -> dict[str, Any]:
        """Log evaluation ``metrics`` (e.g. ``{"eval_loss": 2.1}``) at ``step``; returns the
        record ``{"step": step, **metrics}``."""
        from hyper_parallel.runtime.callbacks.logging import format_eval_metrics
        from hyper_parallel.runtime.callbacks.tensorboard import add_eval_scalars

        rec = {"step": int(step), **metrics}
        if self.is_rank0:
            logger.info("step %d | %s", rec["step"], format_eval_metrics(metrics))
        self.history.append(dict(rec))
        self._write_jsonl(rec)
        writer = self._tensorboard()
        if writer is not None:
            add_eval_scalars(writer, metrics, step)
        if self._wandb_run is not None:
            from hyper_parallel.runtime.callbacks.wandb_logger import eval_values

            self._wandb_run.log(eval_values(metrics), step=int(step))
        return rec

    # ------------------------------------------------------------------ sinks

    def _write_jsonl(self, rec: dict[str, Any]) -> None:
        if self._jsonl is not None and self.is_rank0:
            self._jsonl.write(rec)

    def _tensorboard(self):
        if self._tb_writer is None and self.config.enable_tensorboard and self.is_rank0:
            from hyper_parallel.runtime.callbacks.tensorboard import open_summary_writer

            self._tb_writer = open_summary_writer(
                self.config.save_tb_folder, field_name="MetricsProcessor.Config.enable_tensorboard"
            )
        return self._tb_writer

    def _open_wandb(self) -> None:
        """Rank 0, once, with ``enable_wandb``: open the run and say where it is."""
        c = self.config
        if not (c.enable_wandb and self.is_rank0) or self.wandb_info is not None:
            return
        from hyper_parallel.runtime.callbacks.wandb_logger import choose_mode, describe, open_run

        mode, why = choose_mode()
        self._wandb_run, self.wandb_info = open_run(
            project=c.wandb_project,
            name=c.wandb_run_name,
            folder=self.output_dir,
            config=getattr(self._trainer, "run_configuration", None),
            mode=mode,
        )
        logger.info(describe(self.wandb_info, why))

    def _record_memory(self, label: str, step: int) -> None:
        from hyper_parallel.runtime.callbacks.memory import format_memory, sample_memory

        sample = sample_memory(self.device, step)
        self.memory_history.append(sample)
        if self.is_rank0:
            logger.info("memory (%s, step %d, rank 0): %s", label, step, format_memory(sample))
        if self._wandb_run is not None:
            from hyper_parallel.runtime.callbacks.wandb_logger import memory_values

            self._wandb_run.log(memory_values(sample), step=int(step))


def check_wandb(config: MetricsProcessor.Config) -> None:
    """With ``enable_wandb``: the ``wandb`` package is installed and the project is a name W&B
    accepts, else a ConfigError naming the field (cheap: the trainer calls it before building
    anything, the processor again when it is built)."""
    if config.enable_wandb:
        from hyper_parallel.runtime.callbacks.wandb_logger import check_project, require_wandb

        require_wandb(WANDB_FIELD)
        check_project(config.wandb_project, WANDB_PROJECT_FIELD)


def _pick(value: Any, trainer: Any, name: str, default: Any) -> Any:
    """``value`` if given, else ``trainer.<name>`` if the trainer has it, else ``default``."""
    if value is not None:
        return value
    if trainer is not None and hasattr(trainer, name):
        return getattr(trainer, name)
    return default


__all__ = ["MetricsProcessor", "check_wandb"]
