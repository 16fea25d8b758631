"""``HyperTrainer``: the trainer of the new configuration tree (RFC Part 5).

``HyperTrainer.Config(...).build()`` (the Config is generated in
:mod:`hyper_parallel.trainer.trainer_config`) constructs this class. Its ``__init__`` follows the
RFC's steps in order, calling each component's ``build`` and the same helpers the legacy
``LLMTrainer`` calls; the training loop, the step, loss aggregation, clipping, checkpointing and
callbacks are :class:`~hyper_parallel.trainer.base.BaseTrainer`'s — there is no second copy.

1. process group, device, ParallelDims + mesh, seeds (``setup_distributed``);
2. tokenizer — ``config.tokenizer.build(weights_path=...)``. The RFC sketch passes
   ``path=config.tokenizer.path``, but ``path`` is already a field of the tokenizer's Config and
   the Configurable rules reject a build kwarg that repeats a field, so the path travels in the
   Config; only the weights directory (the legacy fallback location) is a runtime argument.
   Synthetic (``dummy``) data needs no tokenizer and none is built, as in the legacy trainer;
3. dataloader — ``config.dataloader.build(dp_world_size=..., dp_rank=..., tokenizer=...,
   seq_len=...)`` plus the batch size, seed and vocabulary size (and the validation loader);
4. the model config meets the run: ``model.update_from_config(trainer_config=config)``. This one
   runs first, before step 1: it can re-base the architecture (``model.config_overrides``), and
   the synthetic data of step 3 must use the final vocabulary size;
5. the model is built on ``training.init_device`` (``meta``: no memory);
6. ``verify_module_protocol(check_init=False)`` — the structural checks (the init check would
   allocate a full unsharded copy);
7. parallelize (CP -> TP -> AC -> compile -> FSDP) with the spec's keyword signature;
8. materialize + ``init_weights`` (the legacy helper), then pretrained weights;
9. optimizer and LR scheduler containers;
10. the checkpoint manager;
11. the metrics processor and the profiler, wired into the shared callback loop.

``model_spec`` unset: the legacy spec registered under ``model.name`` builds and parallelizes
the model exactly as ``LLMTrainer`` does (its ``(model, mesh, cfg)`` signature gets the legacy
view of this Config from the generated adapter), which is what makes a converted YAML train
bit-identically on both paths.
"""

from __future__ import annotations

import dataclasses
import os
from types import SimpleNamespace
from typing import Any

import torch

from hyper_parallel.data import grad_accum_steps
from hyper_parallel.models.spec import discover_model_spec
from hyper_parallel.trainer.base import (
    BaseTrainer,
    TrainerState,
    _helper_post_parallelize,
    _helper_setup_distributed,
)
from hyper_parallel.trainer.callbacks import CallbackHandler
from hyper_parallel.trainer.callbacks.components import (
    CheckpointManagerCallback,
    MetricsCallback,
    ProfilerComponentCallback,
)
from hyper_parallel.trainer.callbacks.eval import EvalCallback
from hyper_parallel.trainer.callbacks.gc import GCCallback
from hyper_parallel.trainer.callbacks.gradient_health import GradientHealthCallback
from hyper_parallel.trainer.callbacks.progress import ProgressCallback
from hyper_parallel.trainer.optim import clip_grad_norm_
from hyper_parallel.trainer.trainer_config import HyperTrainer as _ConfigOwner


def accelerator_view(parallelism: Any) -> SimpleNamespace:
    """``ParallelismConfig`` in the shape ``ParallelDims.from_config`` reads."""
    return SimpleNamespace(
        dp=None,
        dp_replicate=parallelism.data_parallel_replicate_degree,
        dp_shard=parallelism.data_parallel_shard_degree,
        tp=parallelism.tensor_parallel_degree,
        cp=parallelism.context_parallel_degree,
        pp=parallelism.pipeline_parallel_degree,
        ep=parallelism.expert_parallel_degree,
        etp=parallelism.expert_tensor_parallel_degree,
    )


class HyperTrainer(BaseTrainer):
    """Trains the run a ``HyperTrainer.Config`` describes (build it with ``config.build()``)."""

    #: The generated Config; its ``build()`` constructs this class.
    Config = _ConfigOwner.Config

    def __init__(self, config: _ConfigOwner.Config, **runtime_objects: Any) -> None:
        if runtime_objects:
            raise TypeError(
                f"HyperTrainer takes no runtime objects, got {sorted(runtime_objects)}; every "
                "setting lives in HyperTrainer.Config"
            )
        if config.optimizer.loss_aggregation != config.loss.aggregation:
            raise ValueError(
                f"optimizer.loss_aggregation={config.optimizer.loss_aggregation!r} and "
                f"loss.aggregation={config.loss.aggregation!r} disagree; set both to the same "
                "value (the legacy train.optimizer.loss_aggregation sets both)"
            )
        self.config = config
        self.args = None  # no legacy config on this path
        self.state = TrainerState(max_steps=config.training.steps)
        self.last_global_tokens = 0
        self.eval_dataloader = None
        self._resolve_spec()                                # 4 (see the module docstring)
        self._setup()                                       # 1
        self._build_tokenizer()                             # 2
        self._build_dataloaders()                           # 3
        self._build_model_from_config()                     # 5-6
        self._parallelize_and_materialize()                 # 7-8
        self._build_optimizer()                                                     # 9
        self.lr_scheduler = config.lr_scheduler.build(
            optimizers=self.optimizer, training_steps=config.training.steps
        )
        self.checkpointer = config.checkpoint.build(                                # 10
            model_parts=[self.model],
            optimizers=self.optimizer,
            lr_schedulers=self.lr_scheduler,
            dataloader=self.train_dataloader,
            sd_adapter=self.spec.state_dict_adapter,
            model_config=getattr(self.model, "config", None),
        )
        self.metrics = config.metrics.build(                                        # 11
            trainer=self, output_dir=config.checkpoint.folder, max_steps=config.training.steps
        )
        self.profiler = config.profiler.build(rank=self.rank)
        self.loss_fn = config.loss.build()
        self._build_training_context()
        self._init_callbacks()
        self.callbacks.on_init_end()

    # ------------------------------------------------------------------ steps

    def _resolve_spec(self) -> None:
        """``model_spec``, or the legacy spec registered under ``model.name``."""
        self.spec = self.config.model_spec or discover_model_spec(self.config.model.name)
        # A spec found by name is "legacy" when it builds from the legacy config; a v2 spec
        # (it carries a model Config) is used as if it had been set as model_spec.
        self.legacy_spec = self.config.model_spec is None and self.spec.model is None
        if self.legacy_spec:
            from hyper_parallel.config.legacy_adapter import _trainer_config_to_legacy

            # The legacy spec's functions read the legacy schema; a Config that uses a field
            # the legacy world cannot express fails here, naming it.
            self.legacy_view = _trainer_config_to_legacy(self.config)
        else:
            self.spec.model.update_from_config(trainer_config=self.config)

    def _setup(self) -> None:
        c = self.config
        self.dist = _helper_setup_distributed(
            accelerator=accelerator_view(c.parallelism),
            comm_backend=c.comm.backend,
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
            seed=c.debug.seed,
            deterministic=c.debug.deterministic,
            deterministic_warn_only=c.debug.deterministic_warn_only,
        )
        self.device = self.dist.device
        self.parallel_dims = self.dist.parallel_dims
        self.mesh = self.dist.mesh

    def _build_tokenizer(self) -> None:
        if self.config.dataloader.dataset == "dummy":
            self.tokenizer = None
            return
        self.tokenizer = self.config.tokenizer.build(weights_path=self.config.model.weights_path)

    def _model_config(self) -> Any:
        if self.legacy_spec:
            return self.spec.model_config_fn(self.legacy_view) if self.spec.model_config_fn else None
        return self.spec.model

    def _build_dataloaders(self) -> None:
        c = self.config
        vocab_size = getattr(self._model_config(), "vocab_size", None)
        common = dict(
            dp_world_size=self.dist.dp_size,
            dp_rank=self.dist.dp_rank,
            local_batch_size=c.training.local_batch_size,
            seq_len=c.training.seq_len,
            seed=c.debug.seed,
            tokenizer=self.tokenizer,
            vocab_size=vocab_size,
        )
        self.grad_accum = grad_accum_steps(
            c.training.global_batch_size, c.training.local_batch_size, self.dist.dp_size
        )
        self.train_dataloader = c.dataloader.build(
            num_samples=c.training.steps * c.training.global_batch_size, **common
        )
        if c.validation.freq > 0:
            if c.dataloader.dataset == "dummy":
                raise ValueError(
                    "validation needs real data: with dataloader.dataset=dummy there is no "
                    "validation set; set validation.freq to 0"
                )
            eval_config = dataclasses.replace(
                c.dataloader, dataset_path=c.validation.dataset_path, shuffle=False
            )
            self.eval_dataloader = eval_config.build(**common)

    def _build_model_from_config(self) -> None:
        c = self.config
        if self.legacy_spec:
            self.model_config = self._model_config()
            with torch.device(c.training.init_device):
                self.model = self.spec.build_model_fn(self.legacy_view)
        else:
            self.model_config = self.spec.model
            with torch.device(c.training.init_device):
                self.model = self.model_config.build()                        # 5
            self.model.verify_module_protocol(check_init=False)               # 6
        self.parallel_dims.validate_against_model(self.model, seq_len=c.training.seq_len)

    def _parallelize_and_materialize(self) -> None:
        c = self.config
        if self.legacy_spec:
            self.model = self.spec.parallelize_fn(self.model, self.mesh, self.legacy_view)
        else:
            self.model = self.spec.parallelize_fn(
                self.model,
                self.parallel_dims,
                training=c.training,
                parallelism=c.parallelism,
                activation_checkpoint=c.activation_checkpoint,
                compile=c.compile,
                dump_folder=c.dump_folder,
            )
        _helper_post_parallelize(
            self.model,
            device=self.device,
            init_device=c.training.init_device,
            weights_path=c.model.weights_path,
            adapter=self.spec.state_dict_adapter,
            model_config=getattr(self.model, "config", None),
        )

    # ------------------------------------------------------------------ the shared loop's hooks

    @property
    def max_epochs(self) -> int:
        return self.config.training.max_epochs

    @property
    def callback_sections(self) -> SimpleNamespace:
        """The settings the legacy-config callbacks (eval, NaN abort, GC) read."""
        c = self.config
        return SimpleNamespace(
            debug=SimpleNamespace(gc_steps=c.training.gc_freq, check_nan_inf=c.debug.check_nan_inf),
            eval=SimpleNamespace(eval_steps=c.validation.freq, eval_dataset=c.validation.dataset_path),
        )

    def _init_callbacks(self) -> None:
        self.callbacks = CallbackHandler(
            self,
            builtins={
                "logging": MetricsCallback(self, self.metrics),
                "checkpoint": CheckpointManagerCallback(self, self.checkpointer),
                "profiler": ProfilerComponentCallback(self, self.profiler),
                "eval": EvalCallback(self),
                "progress": ProgressCallback(self),
                "gradient_health": GradientHealthCallback(self),
                "gc": GCCallback(self),
            },
        )

    def _step_options(self) -> dict:
        return {
            "loss_fn": self.loss_fn,
            "max_grad_norm": self.config.training.max_norm,
            "clip_fn": self.spec.clip_grad_fn or clip_grad_norm_,
        }


__all__ = ["HyperTrainer", "accelerator_view"]
