"""``BaseTrainer``: the legacy trainer's build steps and the training loop.

Every algorithm lives in a plain helper function (``distributed``, ``model_setup``, ``optim``,
``loss``, ``step``, ``checkpoint``) so that a second trainer calls the same code; the ``_build_*``
methods here only read the legacy config and call those helpers. The order of the build steps is
the legacy one (``LLMTrainer.__init__`` runs them).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch.distributed as dist

from hyper_parallel.data import (
    build_dataloader,
    build_dataset,
    grad_accum_steps,
    micro_batch_groups,
)
from hyper_parallel.models.spec import ModelSpec, get_spec
from hyper_parallel.trainer.config import HyperTrainerConfig
from hyper_parallel.trainer.distributed import DistributedContext, setup_distributed
from hyper_parallel.trainer.model_setup import (
    build_model_on,
    freeze_parameters,
    load_pretrained_weights,
    materialize_and_init,
)
from hyper_parallel.trainer.optim import (
    build_lr_scheduler,
    build_optimizer,
    clip_grad_norm_,
    warmup_steps_from_ratio,
)
from hyper_parallel.trainer.step import StepResult, evaluate, train_step

logger = logging.getLogger(__name__)

#: Test hook: ``exit_at_step:<step>[:<rank>]`` makes that rank die with exit code 13 at the
#: start of the given step (to test that a dead rank fails the whole job without a hang).
FAULT_ENV = "HYPER_PARALLEL_FAULT_INJECT"


def _helper_setup_distributed(
    *,
    accelerator: Any,
    comm_backend: str | None,
    local_rank: int,
    seed: int,
    deterministic: bool,
    deterministic_warn_only: bool,
) -> DistributedContext:
    """Process group, device, ParallelDims + mesh, DP group, seeds (both trainers' step 1)."""
    return setup_distributed(
        accelerator=accelerator,
        comm_backend=comm_backend,
        local_rank=local_rank,
        seed=seed,
        deterministic=deterministic,
        deterministic_warn_only=deterministic_warn_only,
    )


def _helper_load_weights(model: Any, weights_path: str, *, adapter: Any, model_config: Any) -> None:
    """Overlay pretrained weights (Hugging Face directory, DCP directory or state-dict file)."""
    load_pretrained_weights(model, weights_path, adapter=adapter, model_config=model_config)


def _helper_post_parallelize(
    model: Any,
    *,
    device: Any,
    init_device: str,
    weights_path: str | None,
    adapter: Any,
    model_config: Any,
) -> None:
    """After parallelization: materialize + init a meta-built model, load pretrained weights,
    switch to train mode (both trainers call this; the order matters for the RNG)."""
    if init_device == "meta":
        materialize_and_init(model, device)
    if weights_path:
        _helper_load_weights(model, weights_path, adapter=adapter, model_config=model_config)
    model.train()


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
    """Build steps shared by the legacy trainers, and the training loop."""

    def __init__(self, args: HyperTrainerConfig):
        if args.train.backend != "torch":
            raise NotImplementedError(
                f"train.backend={args.train.backend!r}: the trainer runs on torch only for now; "
                "set train.backend: torch"
            )
        self.args = args
        self.spec: ModelSpec = get_spec(args.model.name)
        self.state = TrainerState(max_steps=args.train.max_steps)
        self.last_global_tokens = 0
        self.eval_dataloader = None
        self.tokenizer = None
        self.model_config = None

    # ------------------------------------------------------------------ 1. setup

    def _setup(self) -> None:
        t = self.args.train
        self.dist: DistributedContext = _helper_setup_distributed(
            accelerator=t.accelerator,
            comm_backend=t.comm_backend,
            local_rank=t.local_rank,
            seed=t.seed,
            deterministic=t.debug.deterministic,
            deterministic_warn_only=t.debug.deterministic_warn_only,
        )
        self.device = self.dist.device
        self.parallel_dims = self.dist.parallel_dims
        self.mesh = self.dist.mesh

    @property
    def rank(self) -> int:
        return self.dist.rank

    @property
    def world_size(self) -> int:
        return self.dist.world_size

    @property
    def is_rank0(self) -> bool:
        return self.dist.is_rank0

    # ------------------------------------------------------------------ 2-3. model

    def _build_model(self) -> None:
        if self.spec.model_config_fn is not None:
            self.model_config = self.spec.model_config_fn(self.args)
        self.model = build_model_on(self.args.train.init_device, self.spec.build_model_fn, self.args)
        self.parallel_dims.validate_against_model(self.model, seq_len=self.args.data.max_seq_len)

    def _freeze_model(self) -> None:
        frozen = freeze_parameters(self.model, self.args.model.freeze_modules)
        if frozen and self.is_rank0:
            logger.info("froze %d parameters", len(frozen))

    # ------------------------------------------------------------------ 6, 8. data

    def _build_dataset(self) -> None:
        data = self.args.data
        vocab_size = getattr(self.model_config, "vocab_size", None)
        self.train_dataset = build_dataset(
            data.type,
            train_path=data.train_path,
            max_seq_len=data.max_seq_len,
            text_key=data.text_key,
            tokenizer=self.tokenizer,
            vocab_size=vocab_size,
            num_samples=self.args.train.max_steps * self.args.train.global_batch_size,
        )
        ev = self.args.train.eval
        if ev.eval_steps > 0:
            if data.type == "dummy":
                raise ValueError(
                    "train.eval needs real data: with data.type=dummy there is no validation "
                    "set; set data.type to jsonl or text, or train.eval.eval_steps to 0"
                )
            self.eval_dataset = build_dataset(
                data.type,
                train_path=ev.eval_dataset,
                max_seq_len=data.max_seq_len,
                text_key=data.text_key,
                tokenizer=self.tokenizer,
                vocab_size=vocab_size,
                path_field="train.eval.eval_dataset",
            )

    def _build_collate_fn(self) -> None:
        self.collate_fn = None

    def _build_dataloader(self) -> None:
        data, t = self.args.data, self.args.train
        common = dict(
            dp_rank=self.dist.dp_rank,
            dp_size=self.dist.dp_size,
            micro_batch_size=t.micro_batch_size,
            seed=t.seed,
            num_workers=data.num_workers,
            pin_memory=data.pin_memory,
            prefetch_factor=data.prefetch_factor,
            collate_fn=self.collate_fn,
        )
        self.grad_accum = grad_accum_steps(t.global_batch_size, t.micro_batch_size, self.dist.dp_size)
        self.train_dataloader = build_dataloader(self.train_dataset, shuffle=data.shuffle, **common)
        if getattr(self, "eval_dataset", None) is not None:
            self.eval_dataloader = build_dataloader(self.eval_dataset, shuffle=False, **common)

    # ------------------------------------------------------------------ 9. parallelize + weights

    def _build_parallelized_model(self) -> None:
        if self.spec.parallelize_fn is None:
            raise ValueError(f"model spec {self.spec.name!r} has no parallelize_fn")
        self.model = self.spec.parallelize_fn(self.model, self.mesh, self.args)
        self._post_parallelize()

    def _post_parallelize(self) -> None:
        _helper_post_parallelize(
            self.model,
            device=self.device,
            init_device=self.args.train.init_device,
            weights_path=self.args.model.weights_path,
            adapter=self.spec.state_dict_adapter,
            model_config=self.model_config,
        )

    # ------------------------------------------------------------------ 10-12. optimization

    def _build_optimizer(self) -> None:
        config = getattr(self, "config", None)
        if config is not None and isinstance(config, _trainer_config_class()):
            # The new tree: the optimizer is a component built from its own Config.
            self.optimizer = config.optimizer.build(model_parts=[self.model])
            return
        o = self.args.train.optimizer
        self.optimizer = build_optimizer(
            self.model,
            name=o.type,
            lr=o.lr,
            betas=o.betas,
            eps=o.eps,
            weight_decay=o.weight_decay,
            foreach=o.foreach,
        )

    def _build_lr_scheduler(self) -> None:
        o, t = self.args.train.optimizer, self.args.train
        self.lr_scheduler = build_lr_scheduler(
            self.optimizer,
            total_steps=t.max_steps,
            warmup_steps=warmup_steps_from_ratio(t.max_steps, o.lr_warmup_ratio),
            decay_style=o.lr_decay_style,
            lr=o.lr,
            lr_min=o.lr_min,
        )

    def _build_training_context(self) -> None:
        self.model_fwd_context = contextlib.nullcontext
        self.model_bwd_context = contextlib.nullcontext

    # ------------------------------------------------------------------ 13. callbacks

    def _init_callbacks(self) -> None:
        from hyper_parallel.trainer.callbacks import CallbackHandler

        self.callbacks = CallbackHandler(self)

    def add_callback(self, callback: Any) -> None:
        self.callbacks.add_callback(callback)

    # ------------------------------------------------------------------ the loop

    def _micro_batch_iterator(self) -> Iterator[list]:
        return micro_batch_groups(iter(self.train_dataloader), self.grad_accum)

    def evaluate(self) -> float:
        """Validation loss (token-weighted) over the whole eval set."""
        if self.eval_dataloader is None:
            raise RuntimeError("no evaluation data: set train.eval.eval_steps and eval_dataset")
        return evaluate(self.model, self.eval_dataloader, device=self.device, dp_group=self.dist.dp_group)

    def _step_options(self) -> dict:
        """How one step aggregates the loss and clips, from the legacy config (``train_step``
        keyword arguments); a trainer with another config overrides this."""
        o = self.args.train.optimizer
        return {
            "loss_aggregation": o.loss_aggregation,
            "max_grad_norm": o.max_grad_norm,
            "clip_fn": self.spec.clip_grad_fn or clip_grad_norm_,
        }

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

    @property
    def max_epochs(self) -> int:
        """Upper bound on passes over the data (``train.num_train_epochs``)."""
        return self.args.train.num_train_epochs

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


def _trainer_config_class() -> type:
    from hyper_parallel.trainer.trainer_config import HyperTrainer

    return HyperTrainer.Config


__all__ = [
    "BaseTrainer",
    "TrainerState",
    "_helper_load_weights",
    "_helper_post_parallelize",
    "_helper_setup_distributed",
]
