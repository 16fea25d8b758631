"""``BaseTrainer``: the training loop and the step, independent of any configuration schema.

The engine (:class:`~hyper_parallel.trainer.hyper_trainer.HyperTrainer`) builds the model, the
data, the optimizer, the scheduler and the callbacks from its ``HyperTrainer.Config`` and then
runs this loop. The loop reads only what the engine set on ``self``: ``state``, ``dist``,
``model``, ``optimizer``, ``lr_scheduler``, ``loss_fn``, ``train_dataloader``,
``eval_dataloader``, ``grad_accum``, ``callbacks``, ``max_epochs`` and ``_step_options()``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hyper_parallel.runtime.step import StepResult

# torch, the data pipeline and the runtime layer are imported by the methods that use them, so
# that the engine's module (which names ``HyperTrainer.Config`` for recipes) imports no framework.

logger = logging.getLogger(__name__)

@dataclass
class TrainerState:
    """Progress of a run; saved in checkpoints."""

    max_steps: int
    global_step: int = 0
    epoch: int = 0
    log_history: list = field(default_factory=list)
    loss_history: list = field(default_factory=list)
    """``(step, loss)`` of every optimizer step."""


class BaseTrainer:
    """The loop over epochs and optimizer steps, with the callbacks' hooks around each step."""

    state: TrainerState
    last_global_tokens: int = 0

    @property
    def rank(self) -> int:
        return self.dist.rank

    @property
    def world_size(self) -> int:
        return self.dist.world_size

    @property
    def is_rank0(self) -> bool:
        return self.dist.is_rank0

    @property
    def max_epochs(self) -> int:
        """Upper bound on passes over the data."""
        raise NotImplementedError

    def _step_options(self) -> dict:
        """How one step computes the loss and clips (``train_step`` keyword arguments)."""
        raise NotImplementedError

    def add_callback(self, callback: Any) -> None:
        self.callbacks.add_callback(callback)

    # ------------------------------------------------------------------ the loop

    def _micro_batch_iterator(self) -> Iterator[list]:
        from hyper_parallel.data import micro_batch_groups

        groups = micro_batch_groups(iter(self.train_dataloader), self.grad_accum)
        if self.dist.batch_split == 1 and self.dist.seq_split == 1:
            return groups
        return ([self._own_part(mb) for mb in group] for group in groups)

    def _own_part(self, batch: dict) -> dict:
        """This rank's part of a batch its batch sharers loaded too: the expert-parallel ranks
        each train on their own rows, the context-parallel ones on their own positions."""
        from hyper_parallel.data import split_rows, split_sequence

        if self.dist.batch_split > 1:
            batch = split_rows(batch, self.dist.split_rank, self.dist.batch_split)
        if self.dist.seq_split > 1:
            from hyper_parallel.runtime.step import with_documents

            if self.pipeline is not None:  # the stages' fixed length, padding the rows' ends
                from hyper_parallel.runtime.pipeline_step import pad_sequence

                batch = pad_sequence(batch, self._pipeline_seq_len() * self.dist.seq_split)
            # A packed batch's documents from the whole rows, before the split: a shard's own
            # positions cannot say whether its first token continues a document.
            batch = with_documents(self.model, batch)
            batch = split_sequence(batch, self.dist.cp_rank, self.dist.seq_split)
        return batch

    def evaluate(self) -> float:
        """Validation loss (token-weighted) over the whole validation set."""
        from hyper_parallel.runtime.step import evaluate

        if self.eval_dataloader is None:
            raise RuntimeError("no validation data: set validation.freq and validation.dataset_path")
        if self.pipeline is not None:
            from hyper_parallel.runtime.pipeline_step import pipeline_evaluate

            batches = self.eval_dataloader
            if self.dist.seq_split > 1:  # each context-parallel rank evaluates its positions
                batches = (self._own_part(batch) for batch in batches)
            return pipeline_evaluate(
                self.pipeline,
                batches,
                loss=self.pipeline_loss,
                device=self.device,
                dp_group=self.dist.dp_group,
                rows_per_step=self._pipeline_rows_per_step(),
                seq_len=self._pipeline_seq_len(),
            )
        batches = self.eval_dataloader
        if self.dist.seq_split > 1:  # each context-parallel rank evaluates its positions
            batches = (self._own_part(batch) for batch in batches)
        return evaluate(
            self.model,
            batches,
            device=self.device,
            dp_group=self.dist.dp_group,
            loss_fn=self.loss_fn,
        )

    #: The mixture-of-experts load balancing of the run (None: a dense model).
    moe_balancer = None
    #: The pipeline schedule and this rank's stages (``models.pipelining.Pipeline``; None
    #: without pipeline parallelism) and the loss function its last stage calls.
    pipeline = None
    pipeline_loss = None

    def _pipeline_rows_per_step(self) -> int:
        """Rows one pipeline step runs on this rank (every accumulation micro-batch's)."""
        raise NotImplementedError

    def _pipeline_seq_len(self) -> int | None:
        """The length every pipeline batch is padded to (the stages fix their shapes)."""
        raise NotImplementedError

    def _pre_optimizer_step(self, grad_norm: float) -> None:
        if self.moe_balancer is not None:
            self.moe_balancer.before_optimizer_step()
        self.callbacks.on_pre_optimizer_step(grad_norm)

    def train_step(self, micro_batches: list) -> StepResult:
        from hyper_parallel.runtime.step import train_step

        balancer = self.moe_balancer
        if self.pipeline is not None:
            return self._pipeline_train_step(micro_batches)
        result = train_step(
            self.model,
            self.optimizer,
            self.lr_scheduler,
            micro_batches,
            device=self.device,
            dp_group=self.dist.dp_group,
            dp_size=self.dist.grad_average_size,
            split_group=self.dist.split_group,
            backward_context=self.model_bwd_context,
            on_substep_end=self.callbacks.on_substep_end,
            on_pre_optimizer_step=self._pre_optimizer_step,
            auxiliary_loss=None if balancer is None else balancer.auxiliary_loss,
            **self._step_options(),
        )
        self.last_global_tokens = result.global_tokens
        self.last_step_metrics = {} if balancer is None else balancer.step_metrics(
            result.aux_loss
        )
        self.state.loss_history.append((self.state.global_step, result.loss))
        return result

    def _pipeline_train_step(self, micro_batches: list) -> StepResult:
        from hyper_parallel.runtime.pipeline_step import pipeline_train_step

        options = self._step_options()
        result = pipeline_train_step(
            self.pipeline,
            self.optimizer,
            self.lr_scheduler,
            micro_batches,
            loss=self.pipeline_loss,
            device=self.device,
            dp_group=self.dist.dp_group,
            dp_size=self.dist.grad_average_size,
            max_grad_norm=options["max_grad_norm"],
            seq_len=self._pipeline_seq_len(),
            split_group=self.dist.split_group,
            on_substep_end=self.callbacks.on_substep_end,
            on_pre_optimizer_step=self._pre_optimizer_step,
        )
        self.last_global_tokens = result.global_tokens
        self.last_step_metrics = (
            {} if self.moe_balancer is None else self.moe_balancer.step_metrics(None)
        )
        self.state.loss_history.append((self.state.global_step, result.loss))
        return result

    def _maybe_inject_fault(self, stop: Any) -> None:
        """The ``<kind>_at_step`` test hook (:mod:`~hyper_parallel.runtime.fault_injection`);
        ``stop`` is the loop's :class:`~hyper_parallel.runtime.faults.StopSignal`."""
        from hyper_parallel.runtime.fault_injection import maybe_fail_at_step

        maybe_fail_at_step(self.state.global_step, self.rank, stop_requested=stop.requested)

    def _on_first_step(self) -> None:
        """Called once, after the first step this process ran (the collective timeouts tighten)."""

    def _save_for_stop(self) -> str | None:
        """Write a checkpoint before a requested stop; its directory, or None when off."""
        return None

    def train(self) -> TrainerState:
        """Run until ``max_steps`` optimizer steps (or ``max_epochs`` passes over the data).

        A stop request (SIGTERM, see :mod:`~hyper_parallel.runtime.faults`) ends the run after the
        current step with :class:`~hyper_parallel.runtime.faults.TrainingStopped`, once the
        checkpoint is written. An exception propagates at once, with no further collective: the
        caller exits, and the peers' collectives fail instead of waiting out the timeout.
        """
        from hyper_parallel.platform.collectives import barrier
        from hyper_parallel.runtime.faults import StopSignal, TrainingStopped

        self.callbacks.on_train_begin()
        first_step_done = False
        with StopSignal(self.world_size) as stop:
            for epoch in range(self.state.epoch, self.max_epochs):
                if self.state.global_step >= self.state.max_steps:
                    break
                self.state.epoch = epoch
                _set_epoch(self.train_dataloader, epoch)
                self.callbacks.on_epoch_begin()
                batches = self._micro_batch_iterator()
                while self.state.global_step < self.state.max_steps:
                    try:
                        micro_batches = next(batches)
                    except StopIteration:
                        break
                    self.state.global_step += 1
                    self._maybe_inject_fault(stop)
                    self.callbacks.on_step_begin()
                    result = self.train_step(micro_batches)
                    self.callbacks.on_step_end(result.loss, result.grad_norm)
                    if not first_step_done:
                        first_step_done = True
                        self._on_first_step()
                    if stop.should_stop():
                        raise TrainingStopped(
                            stop.reason or "a stop request", self.state.global_step,
                            self._save_for_stop(),
                        )
                self.callbacks.on_epoch_end()
            if self.state.global_step < self.state.max_steps and self.is_rank0:
                logger.warning(
                    "data ran out after %d of %d steps (%d epochs)",
                    self.state.global_step, self.state.max_steps, self.max_epochs,
                )
            self.callbacks.on_train_end()
        barrier()
        return self.state

    def close(self) -> None:
        """Tear down the process group (the trainer is unusable afterwards)."""
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def _set_epoch(loader: Any, epoch: int) -> None:
    """The epoch of a loader: its own ``set_epoch`` (``BaseDataLoader``: the sampler's, or a
    stream's), else its sampler's (a bare ``DataLoader`` over a ``DistributedSampler``)."""
    setter = getattr(loader, "set_epoch", None)
    (setter if callable(setter) else loader.sampler.set_epoch)(epoch)


__all__ = ["BaseTrainer", "TrainerState"]
