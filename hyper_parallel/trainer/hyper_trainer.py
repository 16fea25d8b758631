"""``HyperTrainer``: the engine. Every entry trains through it.

It reads a ``HyperTrainer.Config`` and nothing else: the legacy YAML reaches it through the
front door ``LLMTrainer(args)``, which converts ``args`` with the generated adapter first.
``HyperTrainer.Config`` is generated (``RootConfig`` in
:mod:`hyper_parallel.trainer.trainer_config`) and adopted here, which makes this class the one
its ``build()`` constructs. ``__init__`` builds the run in the numbered steps below; the loop and the step are
:class:`~hyper_parallel.trainer.base.BaseTrainer`'s.

Importing this module imports no framework: recipes, the config manager and the code generator
name ``HyperTrainer.Config`` through it. torch, the data pipeline and the runtime layer are
imported by the steps below that use them.

1. the model spec: ``model_spec``, or the spec registered under ``model.name``; its model Config
   meets the run (``model.update_from_config(trainer_config=config)``) first, because it may
   re-base the architecture (``model.config_overrides``) and the synthetic data of step 4 must use
   the final vocabulary size;
2. paths: ``hf_assets_path`` must be a directory when set (and ``metrics.enable_wandb`` needs
   the ``wandb`` package); relative ``checkpoint.folder``, ``metrics.save_tb_folder`` and
   ``profiler.save_traces_folder`` resolve under ``dump_folder`` (as in torchtitan);
3. process group, device, ParallelDims + mesh, seeds, from ``comm`` / ``parallelism`` /
   ``debug`` (``comm.local_rank`` picks the device; the launcher's ``LOCAL_RANK`` fills it);
4. tokenizer -- ``config.tokenizer.build(weights_path=...)``: ``tokenizer.path`` travels in the
   Config, the runtime argument is where to look without it (``hf_assets_path``, else
   ``model.weights_path``); synthetic ``dummy`` data needs none -- and the dataloaders;
5. the model, built on ``training.init_device`` from ``spec.model``, checked with
   ``verify_module_protocol(check_init=False)``, then ``training.freeze_modules`` frozen; the
   loss (compiled when ``compile.components`` names it), which a pipeline's last stage calls;
6. parallelize (CP -> TP -> AC -> compile -> FSDP) with the spec's keyword signature -- under
   pipeline parallelism (``parallelism.pipeline_parallel_degree > 1``) the spec's
   ``pipelining_fn`` cuts the stages this rank holds and parallelizes each
   (:mod:`hyper_parallel.models.pipelining`); the engine's ``model_parts`` are them;
7. materialize + ``init_weights``, then pretrained weights (``model.weights_path``);
8. optimizer, then ``spec.post_optimizer_build_fn``, then the LR scheduler;
9. the state-dict adapter, built with ``(model_config, hf_assets_path)``, and the checkpoint
   manager;
10. the metrics processor and the profiler, wired into the loop as callbacks.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import logging
import os
from typing import Any

from hyper_parallel.models.spec import resolve_model_spec
from hyper_parallel.protocols.configurable import Configurable
from hyper_parallel.trainer.base import BaseTrainer, TrainerState
from hyper_parallel.trainer.config_identity import (
    check_resume,
    checkpoint_identity,
    run_configuration,
)
from hyper_parallel.trainer.trainer_config import RootConfig
from hyper_parallel.utils.data_types import ORDERED_TYPES, TYPES_NEEDING_TOKENIZER
from hyper_parallel.utils.errors import ConfigError

logger = logging.getLogger(__name__)

#: The launcher's per-node rank variable (torchrun sets it); it fills ``comm.local_rank``.
LOCAL_RANK_ENV = "LOCAL_RANK"


#: How data errors name the settings: by their recipe fields, which the legacy entry rewrites
#: to its keys (``dataloader.dataset_path`` -> ``data.train_path``).
_DATA_FIELDS = {
    "type": "dataloader.dataset",
    "path": "dataloader.dataset_path",
    "subset": "dataloader.dataset_subset",
    "text_key": "dataloader.text_key",
    "template": "dataloader.template",
    "max_samples": "dataloader.max_samples",
    "max_seq_len": "training.seq_len",
    "shuffle": "dataloader.shuffle",
    "streaming": "dataloader.streaming",
    "num_workers": "dataloader.num_workers",
    "messages_key": "dataloader.messages_key",
    "image_key": "dataloader.image_key",
    "processor_path": "dataloader.processor_path",
    "vl_grid": "dataloader.vl_grid_t/h/w",
    "packing": "dataloader.packing",
}


def _data_errors_as_config_errors(build: Any, **kwargs: Any) -> Any:
    """``build(**kwargs)``; the data layer reports what is wrong with the data a configuration
    names (a missing file, a malformed record, too few batches) as ``ValueError`` /
    ``OSError`` naming the setting, and to the user that is bad input: a ``ConfigError``."""
    try:
        return build(**kwargs)
    except ConfigError:
        raise
    except (ValueError, OSError) as exc:
        raise ConfigError(str(exc)) from None


def resolve_output_folder(dump_folder: str, folder: str) -> str:
    """``folder`` under ``dump_folder`` when relative (an absolute folder is kept), normalised
    (so the default ``dump_folder`` ``.`` leaves ``outputs`` as ``outputs``)."""
    return os.path.normpath(os.path.join(dump_folder, folder))


def build_state_dict_adapter(adapter: Any, model_config: Any, hf_assets_path: str | None) -> Any:
    """The spec's ``state_dict_adapter`` built for the run:
    ``adapter(model_config, hf_assets_path)`` when it is a class taking those two arguments;
    an instance (or a class of static methods taking none) is used as it is."""
    if not isinstance(adapter, type):
        return adapter
    try:
        inspect.signature(adapter).bind(model_config, hf_assets_path)
    except TypeError:
        return adapter
    return adapter(model_config, hf_assets_path)


class HyperTrainer(BaseTrainer, Configurable):
    """Trains the run a ``HyperTrainer.Config`` describes (build it with ``config.build()``).

    A ``Configurable``: a subclass that declares no ``Config`` gets one of its own, which builds
    the subclass (``LLMTrainer``'s is never built: the front door is ``LLMTrainer(args)``)."""

    #: The root of the configuration tree, generated (``trainer_config.RootConfig``); adopting it
    #: makes this class its owner, so ``HyperTrainer.Config(...).build()`` constructs this class.
    Config = RootConfig

    def __init__(self, config: HyperTrainer.Config, **runtime_objects: Any) -> None:
        if runtime_objects:
            raise TypeError(
                f"HyperTrainer takes no runtime objects, got {sorted(runtime_objects)}; every "
                "setting lives in HyperTrainer.Config"
            )
        self.config = config
        self.state = TrainerState(max_steps=config.training.steps)
        self.last_global_tokens = 0
        self.eval_dataloader = None
        from hyper_parallel.runtime.distributed import group_released_if_build_fails

        with group_released_if_build_fails():
            self._build()

    def _build(self) -> None:
        """Steps 1-10 of the module docstring."""
        config = self.config
        self._resolve_spec()                                # 1
        self._resolve_paths()                             # 2
        self._setup()                                       # 3
        self._build_tokenizer()                             # 4
        self._build_dataloaders()
        self._build_model()                                 # 5
        self.loss_fn = self._build_loss()
        self._parallelize_and_materialize()                 # 6-7
        self._build_optimizer()                             # 8
        self.lr_scheduler = config.lr_scheduler.build(
            optimizers=self.optimizer, training_steps=config.training.steps
        )
        self.sd_adapter = build_state_dict_adapter(                                  # 9
            self.spec.state_dict_adapter, self.model_config, config.hf_assets_path
        )
        self.checkpointer = config.checkpoint.build(
            model_parts=self.model_parts,
            optimizers=self.optimizer,
            lr_schedulers=self.lr_scheduler,
            dataloader=self.train_dataloader,
            sd_adapter=self.sd_adapter,
            model_config=self.model_config,
            pipeline_group=None if self.pipeline is None else self.pipeline.group,
            data_rank=(self.dist.dp_rank, self.dist.dp_size),
            weights_source=config.model.weights_path,
        )
        self.metrics = config.metrics.build(                                        # 10
            trainer=self,
            output_dir=config.checkpoint.folder,
            max_steps=config.training.steps,
            counted_flops_per_token=self._model_flops_per_token(),
        )
        self.profiler = config.profiler.build(rank=self.rank)
        # What every checkpoint records of the run, and a resume checks (config_identity).
        self.run_configuration = run_configuration(config, self.model_config)
        self.model_fwd_context = contextlib.nullcontext
        self.model_bwd_context = contextlib.nullcontext
        self._init_callbacks()
        self.callbacks.on_init_end()

    # ------------------------------------------------------------------ steps

    def _model_flops_per_token(self) -> float | None:
        """The model's training FLOPs per token at ``training.seq_len``, for TFLOPS and MFU when
        ``metrics.model_flops_per_token`` is unset (None for a model that cannot count them)."""
        count = getattr(self.model, "num_flops_per_token", None)
        if count is None:
            return None
        # Each pipeline rank computes its stages' share of every token.
        return count(self.config.training.seq_len) / self.parallel_dims.pp

    def _resolve_spec(self) -> None:
        c = self.config
        spec = resolve_model_spec(c.model.name, c.model_spec)
        where = "model_spec" if c.model_spec is not None else "model.name"
        if spec.model is None:
            raise ConfigError(
                f"the spec {spec.name!r} has no model Config (a v1 spec whose "
                "build_model_fn reads the legacy schema); the engine builds the model from "
                "spec.model. Give the spec model=<YourModel>.Config(...) (for Qwen3.5: "
                "qwen3_5_spec_factory(flavor)), or leave model_spec unset to use the spec "
                "registered under model.name",
                path=where,
            )
        if c.parallelism.pipeline_parallel_degree > 1:
            self._check_pipelining(spec, where)
        else:
            self._check_no_pipeline_settings()
        # Cross-section rules no single section can check, before anything is built.
        c.lr_scheduler.check_lr_min(c.optimizer.lr)
        # A private copy: update_from_config edits the model Config in place, and the caller's
        # spec (a recipe's, or the registry's) must stay as it was.
        self.spec = dataclasses.replace(spec, model=copy.deepcopy(spec.model))
        self.spec.model.update_from_config(trainer_config=c)
        self.model_config = self.spec.model

    def _check_pipelining(self, spec: Any, where: str) -> None:
        """What pipeline parallelism needs from the spec and the run, before anything is built."""
        c = self.config
        if spec.pipelining_fn is None:
            raise ConfigError(
                f"{c.parallelism.pipeline_parallel_degree}: the spec {spec.name!r} has no "
                "pipelining_fn, so its model cannot be cut into pipeline stages; set it to 1 or "
                "use a spec with a pipelining_fn",
                path="parallelism.pipeline_parallel_degree",
            )
        if spec.clip_grad_fn is not None:
            raise ConfigError(
                f"the spec {spec.name!r} has its own clip_grad_fn, which does not reduce the "
                "gradient norm over the pipeline stages; use the default (clip_grad_fn=None) "
                "with pipeline parallelism",
                path=where,
            )
        if c.moe.router_aux_loss_coef > 0:
            raise ConfigError(
                f"{c.moe.router_aux_loss_coef}: the load-balancing loss is added to the "
                "objective after the whole forward, and under pipeline parallelism each stage's "
                "routers are on another rank; use the auxiliary-loss-free balancing "
                "(moe.load_balance_coeff) with pipeline parallelism, or set it to 0",
                path="moe.router_aux_loss_coef",
            )
        from hyper_parallel.models.pipelining import check_schedule_name

        check_schedule_name(c.parallelism.pipeline_parallel_schedule)

    def _check_no_pipeline_settings(self) -> None:
        """A pipeline setting off its default without pipeline parallelism would be ignored."""
        p = self.config.parallelism
        defaults = type(p)()
        for name in (
            "pipeline_parallel_schedule", "num_pp_microbatches",
            "pipeline_parallel_stages_per_rank", "pipeline_parallel_layer_split",
            "pipeline_parallel_layers_per_stage", "module_fqns_per_model_part",
            "pipeline_parallel_first_stage_less_layers",
            "pipeline_parallel_last_stage_less_layers",
        ):
            if getattr(p, name) != getattr(defaults, name):
                raise ConfigError(
                    f"{getattr(p, name)!r} has no effect without pipeline parallelism; set "
                    "parallelism.pipeline_parallel_degree > 1, or leave it at its default "
                    f"({getattr(defaults, name)!r})",
                    path=f"parallelism.{name}",
                )

    def _resolve_paths(self) -> None:
        from hyper_parallel.components.metrics import check_wandb
        from hyper_parallel.runtime.checkpoint import require_hf_assets_dir

        c = self.config
        # Checked before any work: the export that reads it runs only at the first save.
        require_hf_assets_dir(c.hf_assets_path)
        # Before any work too: the metrics processor, which needs it, is built last.
        check_wandb(c.metrics)
        c.checkpoint = dataclasses.replace(
            c.checkpoint, folder=resolve_output_folder(c.dump_folder, c.checkpoint.folder)
        )
        c.metrics = dataclasses.replace(
            c.metrics, save_tb_folder=resolve_output_folder(c.dump_folder, c.metrics.save_tb_folder)
        )
        c.profiler = dataclasses.replace(
            c.profiler,
            save_traces_folder=resolve_output_folder(c.dump_folder, c.profiler.save_traces_folder),
        )

    def _setup(self) -> None:
        from hyper_parallel.runtime.distributed import setup_distributed

        c = self.config
        if LOCAL_RANK_ENV in os.environ:
            c.comm.local_rank = int(os.environ[LOCAL_RANK_ENV])
        self.dist = setup_distributed(
            parallelism=c.parallelism,
            comm_backend=c.comm.backend,
            local_rank=c.comm.local_rank,
            timeout_seconds=c.comm.init_timeout_seconds,
            seed=c.debug.seed,
            deterministic=c.debug.deterministic,
            deterministic_warn_only=c.debug.deterministic_warn_only,
        )
        self.device = self.dist.device
        self.parallel_dims = self.dist.parallel_dims
        self.mesh = self.dist.mesh

    def _build_tokenizer(self) -> None:
        if self.config.dataloader.dataset not in TYPES_NEEDING_TOKENIZER:
            self.tokenizer = None  # synthetic ids, or batches tokenized already
            return
        # Without tokenizer.path the tokenizer is looked for among the model's HF assets.
        c = self.config
        self.tokenizer = c.tokenizer.build(weights_path=c.hf_assets_path or c.model.weights_path)

    def _build_dataloaders(self) -> None:
        from hyper_parallel.data import grad_accum_steps

        c = self.config
        common = {
            "dp_world_size": self.dist.dp_size,
            "dp_rank": self.dist.dp_rank,
            "local_batch_size": c.training.local_batch_size,
            "seq_len": c.training.seq_len,
            "seed": c.debug.seed,
            "tokenizer": self.tokenizer,
            "vocab_size": getattr(self.model_config, "vocab_size", None),
            # Image-text data is made for the model's tower (placeholder ids, patch sizes).
            "vision": getattr(self.model_config, "vision_config", None),
            # Sequence- and context-parallel splits need a length they divide.
            "pad_to_multiple_of": self.parallel_dims.seq_divisor,
        }
        self.parallel_dims.validate_training(c.training)
        self.grad_accum = grad_accum_steps(
            c.training.global_batch_size, c.training.local_batch_size, self.dist.dp_size
        )
        self.train_dataloader = _data_errors_as_config_errors(
            c.dataloader.build,
            num_samples=c.training.steps * c.training.global_batch_size,
            field_names=_DATA_FIELDS,
            **common,
        )
        self._check_replay_length()
        if c.validation.freq > 0:
            if c.dataloader.dataset == "dummy":
                raise ConfigError(
                    f"{c.validation.freq}: validation needs real data, and with "
                    "dataloader.dataset=dummy there is no validation set; set validation.freq "
                    "to 0 or train on a dataset",
                    path="validation.freq",
                )
            # The same data type on another path; max_samples limits the training set only,
            # and the validation set is read whole (not streamed): every rank evaluates all of
            # its share, which a stream of unknown length per rank could not promise.
            eval_config = dataclasses.replace(
                c.dataloader, dataset_path=c.validation.dataset_path, shuffle=False,
                max_samples=None, streaming=False,
            )
            self.eval_dataloader = _data_errors_as_config_errors(
                eval_config.build,
                field_names={**_DATA_FIELDS, "path": "validation.dataset_path"},
                **common,
            )

    def _check_replay_length(self) -> None:
        """A replayed file (``preset_pt``) is the data of a run batch for batch, so a file too
        short for ``training.steps`` is an error rather than a run that quietly ends early."""
        c = self.config
        if c.dataloader.dataset not in ORDERED_TYPES:
            return
        needed = c.training.steps * c.training.global_batch_size
        held = len(self.train_dataloader.dataset)
        if held * c.training.max_epochs < needed:
            batches = getattr(self.train_dataloader.dataset, "num_batches", None)
            what = f"{held} samples" + (f" ({batches} batches)" if batches is not None else "")
            epochs = (f" x training.max_epochs={c.training.max_epochs}"
                      if c.training.max_epochs > 1 else "")
            raise ConfigError(
                f"holds {what}{epochs}, fewer than the run needs: training.steps="
                f"{c.training.steps} x training.global_batch_size={c.training.global_batch_size}"
                f" = {needed} samples; write more batches, or lower training.steps",
                path="dataloader.dataset_path",
            )

    def _build_model(self) -> None:
        import torch

        from hyper_parallel.runtime.model_setup import freeze_parameters

        c = self.config
        with torch.device(c.training.init_device):
            self.model = self.model_config.build()
        self.model.verify_module_protocol(check_init=False)
        frozen = freeze_parameters(self.model, c.training.freeze_modules)
        if frozen and self.is_rank0:
            logger.info("froze %d parameters", len(frozen))
        self.parallel_dims.validate_against_model(self.model, seq_len=c.training.seq_len)

    def _parallelize_and_materialize(self) -> None:
        from hyper_parallel.runtime.model_setup import load_pretrained_weights, materialize_and_init

        c = self.config
        sections = {
            "training": c.training,
            "activation_checkpoint": c.activation_checkpoint,
            "compile": c.compile,
            "dump_folder": c.dump_folder,
        }
        if self.parallel_dims.pp_enabled:
            from hyper_parallel.runtime.pipeline_step import PipelineLoss

            # The stages are cut from the whole model, then parallelized, materialized and
            # initialized one by one (the draws are the whole model's: models.pipelining).
            self.pipeline_loss = PipelineLoss(self.loss_fn)
            self.pipeline = self.spec.pipelining_fn(
                self.model,
                self.parallel_dims,
                device=self.device,
                parallelize_fn=self.spec.parallelize_fn,
                loss_fn=self.pipeline_loss,
                num_microbatches=c.parallelism.num_pp_microbatches,
                parallelism=c.parallelism,
                **sections,
            )
            self.model_parts = list(self.pipeline.parts)
        else:
            self.model = self.spec.parallelize_fn(
                self.model, self.parallel_dims, parallelism=c.parallelism, **sections
            )
            # The order matters for the RNG: materialize + init, then pretrained weights.
            if c.training.init_device == "meta":
                materialize_and_init(self.model, self.device)
            self.model_parts = [self.model]
        if c.model.weights_path:
            load_pretrained_weights(
                self.model_parts,
                c.model.weights_path,
                adapter=self.spec.state_dict_adapter,
                model_config=self.model_config,
            )
        # The model the loop names (``self.model``): the whole model, or under pipeline
        # parallelism this rank's first stage (``model_parts`` holds all of its stages).
        self.model = self.model_parts[0]
        for part in self.model_parts:
            # A model that picks kernels by device (Qwen3.5's model.kernels) resolves them now
            # that its parameters are on their device: a forced choice that cannot run here is
            # a ConfigError before the first step, not during it.
            select_kernels = getattr(part, "select_kernels", None)
            if select_kernels is not None:
                select_kernels()
            part.train()

    def _build_optimizer(self) -> None:
        import torch

        from hyper_parallel.runtime.moe_balance import build_moe_balancer

        self.optimizer = self.config.optimizer.build(model_parts=self.model_parts)
        if self.spec.post_optimizer_build_fn is not None:
            self.spec.post_optimizer_build_fn(self.optimizer, self.model_parts, self.parallel_dims)
        parts = self.model if len(self.model_parts) == 1 else torch.nn.ModuleList(self.model_parts)
        self.moe_balancer = build_moe_balancer(parts, self.config.moe, self.dist.dp_group)

    def _build_loss(self) -> Any:
        import torch

        from hyper_parallel.runtime.model_setup import check_compile_backend

        c = self.config
        if c.compile.enable:
            # Before the first compile (this loss, or the model's layers when parallelized).
            check_compile_backend(c.compile.backend)
        loss_fn = c.loss.build()
        if c.compile.enable and "loss" in c.compile.components:
            # The per-micro-batch loss sum is the part worth compiling (the cross-entropy over
            # the vocabulary); the aggregation around it is a few scalar ops.
            loss_fn.loss_sum = torch.compile(loss_fn.loss_sum, backend=c.compile.backend)
            self.loss_compiled = True
        else:
            self.loss_compiled = False
        return loss_fn

    # ------------------------------------------------------------------ the loop's hooks

    @property
    def max_epochs(self) -> int:
        return self.config.training.max_epochs

    def _init_callbacks(self) -> None:
        from hyper_parallel.runtime.callbacks import (
            CallbackHandler,
            CheckpointManagerCallback,
            EvalCallback,
            GCCallback,
            GradientHealthCallback,
            MetricsCallback,
            ProfilerComponentCallback,
            ProgressCallback,
        )

        c = self.config
        self.callbacks = CallbackHandler(
            self,
            builtins={
                "logging": MetricsCallback(self, self.metrics),
                "checkpoint": CheckpointManagerCallback(self, self.checkpointer),
                "profiler": ProfilerComponentCallback(self, self.profiler),
                "eval": EvalCallback(self, every=c.validation.freq),
                "progress": ProgressCallback(self),
                "gradient_health": GradientHealthCallback(self, enabled=c.debug.check_nan_inf),
                "gc": GCCallback(self, every=c.training.gc_freq),
            },
        )

    def _pipeline_rows_per_step(self) -> int:
        return self.config.training.local_batch_size * self.grad_accum // self.dist.batch_split

    def _pipeline_seq_len(self) -> int | None:
        # Under context parallelism a stage runs this rank's shard of every row.
        return self.config.training.seq_len // self.dist.seq_split

    def _on_first_step(self) -> None:
        # The first step pays for compilation, lazy initialisation and the first allocations,
        # so it runs under the longer init timeout; from now on a collective that waits this
        # long means a peer is gone.
        self.dist.set_timeout(self.config.comm.train_timeout_seconds)

    def _save_for_stop(self) -> str | None:
        from hyper_parallel.runtime.checkpoint import step_dir as ckpt_step_dir

        step = self.state.global_step
        # Saves unless checkpointing is off or the cadence just saved this very step.
        self.checkpointer.maybe_save(step, self.checkpoint_extra(), last_step=True)
        self.checkpointer.wait()
        self.metrics.close(step)
        if self.checkpointer.last_saved_step != step:
            return None
        return ckpt_step_dir(self.config.checkpoint.folder, step)

    def checkpoint_extra(self) -> dict:
        """What a checkpoint saves besides the state: the epoch and the run's configuration."""
        return {"epoch": self.state.epoch, **checkpoint_identity(self.run_configuration)}

    def check_resume(self, extra: dict, path: str) -> None:
        """Before a checkpoint is loaded: its configuration against this run's
        (:func:`~hyper_parallel.trainer.config_identity.check_resume`), and the rule for an
        explicit ``model.weights_path`` beside it, said in the log."""
        check_resume(extra, path, self.run_configuration, name=self.field_name,
                     log=self.is_rank0)
        weights = self.config.model.weights_path
        if weights and self.is_rank0:
            logger.warning("%s=%s is not loaded: a resume restores the checkpoint's weights "
                           "(%s); the checkpoint wins over the pretrained weights",
                           self.field_name("model.weights_path"), weights, path)

    def note_fresh_start(self) -> None:
        """No checkpoint is resumed: say so when the checkpoint folder holds some (they are not
        read, and this run's saves will replace those of the same steps)."""
        from hyper_parallel.runtime.checkpoint import complete_checkpoints

        folder = self.config.checkpoint.folder
        found = [path for _, path in complete_checkpoints(folder)]
        if found and self.is_rank0:
            source = (f"{self.field_name('model.weights_path')}={self.config.model.weights_path}"
                      if self.config.model.weights_path else "a fresh initialisation")
            logger.warning("%s holds %d checkpoint(s) (newest %s) that this run does not resume "
                           "(%s is unset): it starts from %s", folder, len(found), found[-1],
                           self.field_name("checkpoint.load_path"), source)

    def field_name(self, path: str) -> str:
        """A field of ``HyperTrainer.Config`` in this entry's names (the legacy front door
        spells it as its YAML key)."""
        return path

    def _step_options(self) -> dict:
        from hyper_parallel.runtime.optim import clip_grad_norm_

        return {
            "loss_fn": self.loss_fn,
            "max_grad_norm": self.config.training.max_norm,
            "clip_fn": self.spec.clip_grad_fn or clip_grad_norm_,
            "defer_gradient_sync": self.config.parallelism.fsdp_defer_gradient_sync,
        }


__all__ = ["HyperTrainer", "build_state_dict_adapter", "resolve_output_folder"]
