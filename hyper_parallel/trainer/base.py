"""``BaseTrainer``: the training loop and the step, independent of any configuration schema.

The engine (:class:`~hyper_parallel.trainer.hyper_trainer.HyperTrainer`) builds the model, the
data, the optimizer, the scheduler and the callbacks from its ``HyperTrainer.Config`` and then
runs this loop. The loop reads only what the engine set on ``self``: ``state``, ``dist``,
``model``, ``optimizer``, ``lr_scheduler``, ``loss_fn``, ``train_dataloader``,
``eval_dataloader``, ``grad_accum``, ``callbacks``, ``max_epochs`` and ``_step_options()``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch.distributed as dist

from hyper_parallel.data import micro_batch_groups
from hyper_parallel.trainer.step import StepResult, evaluate, train_step

logger = logging.getLogger(__name__)

#: Test hook: ``exit_at_step:<step>[:<rank>]`` makes that rank die with exit code 13 at the
#: start of the given step (to test that a dead rank fails the whole job without a hang).
FAULT_ENV = "HYPER_PARALLEL_FAULT_INJECT"


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
        return micro_batch_groups(iter(self.train_dataloader), self.grad_accum)

    def evaluate(self) -> float:
        """Validation loss (token-weighted) over the whole validation set."""
        if self.eval_dataloader is None:
            raise RuntimeError("no validation data: set validation.freq and validation.dataset_path")
        return evaluate(
            self.model,
            self.eval_dataloader,
            device=self.device,
            dp_group=self.dist.dp_group,
            loss_fn=self.loss_fn,
        )

    def train_step(self, micro_batches: list) -> StepResult:
        result = train_step(
            self.model,
            self.optimizer,
            self.lr_scheduler,
            micro_batches,
            device=self.device,
            dp_group=self.dist.dp_group,
            dp_size=self.dist.dp_size,
            backward_context=self.model_bwd_context,
            on_substep_end=self.callbacks.on_substep_end,
            on_pre_optimizer_step=self.callbacks.on_pre_optimizer_step,
            **self._step_options(),
        )
        self.last_global_tokens = result.global_tokens
        self.state.loss_history.append((self.state.global_step, result.loss))
        return result

    def _maybe_inject_fault(self) -> None:
        spec = os.environ.get(FAULT_ENV, "")
        if not spec.startswith("exit_at_step:"):
            return
        parts = spec.split(":")
        step = int(parts[1])
        rank = int(parts[2]) if len(parts) > 2 else None
        if self.state.global_step + 1 == step and (rank is None or rank == self.rank):
            logger.error("fault injection: rank %d exits at step %d", self.rank, step)
            os._exit(13)

    def train(self) -> TrainerState:
        """Run until ``max_steps`` optimizer steps (or ``max_epochs`` passes over the data)."""
        self.callbacks.on_train_begin()
        try:
            for epoch in range(self.state.epoch, self.max_epochs):
                if self.state.global_step >= self.state.max_steps:
                    break
                self.state.epoch = epoch
                self.train_dataloader.sampler.set_epoch(epoch)
                self.callbacks.on_epoch_begin()
                batches = self._micro_batch_iterator()
                while self.state.global_step < self.state.max_steps:
                    try:
                        micro_batches = next(batches)
                    except StopIteration:
                        break
                    self._maybe_inject_fault()
                    self.state.global_step += 1
                    self.callbacks.on_step_begin()
                    result = self.train_step(micro_batches)
                    self.callbacks.on_step_end(result.loss, result.grad_norm)
                self.callbacks.on_epoch_end()
            if self.state.global_step < self.state.max_steps and self.is_rank0:
                logger.warning(
                    "data ran out after %d of %d steps (%d epochs)",
                    self.state.global_step, self.state.max_steps, self.max_epochs,
                )
            self.callbacks.on_train_end()
        finally:
            if dist.is_initialized():
                dist.barrier()
        return self.state

    def close(self) -> None:
        """Tear down the process group (the trainer is unusable afterwards)."""
        if dist.is_initialized():
            dist.destroy_process_group()


__all__ = ["FAULT_ENV", "BaseTrainer", "TrainerState"]
