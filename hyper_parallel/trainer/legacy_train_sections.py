"""The legacy ``train`` section's sub-sections: ``train.accelerator``, ``train.mixed_precision``,
``train.gradient_checkpointing``, ``train.optimizer``, ``train.checkpoint``, ``train.logging``,
``train.tensorboard``, ``train.wandb``, ``train.profile``, ``train.memory_monitor``,
``train.moe_monitor``, ``train.eval`` and ``train.debug``.

Part of the legacy schema (:mod:`hyper_parallel.trainer.config`, which assembles them into
``TrainConfig`` and re-exports them); field docstrings are the ``--help`` text. Framework-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from hyper_parallel.platform.dtypes import DTYPE_NAMES
from hyper_parallel.trainer.legacy_rules import (
    ACTIVATION_CHECKPOINT_MODES,
    LR_DECAY_STYLES,
    at_least,
    one_of,
    require,
    validated,
)
from hyper_parallel.utils.choices import (
    CP_LINEAR_ATTENTION_MODES,
    LEGACY_PP_SCHEDULES,
    LEGACY_REPORT_TO,
    LOSS_AGGREGATIONS,
    OPTIMIZER_TYPES,
    normalized_pp_schedule,
)
from hyper_parallel.utils.suggest import did_you_mean


@dataclass
class AcceleratorConfig:
    """``train.accelerator``: the parallel layout. The product of all degrees must equal the
    world size (``dp_shard: -1`` fills in the rest)."""

    dp: Optional[int] = None
    """Legacy single data-parallel degree; used as ``dp_shard`` when ``dp_shard`` is unset."""

    dp_replicate: int = 1
    """HSDP replicate (outer) degree."""

    dp_shard: Optional[int] = None
    """FSDP shard degree; ``-1`` infers it from the world size; unset means ``dp`` or 1."""

    tp: int = 1
    """Tensor-parallel degree."""

    cp: int = 1
    """Context-parallel degree: its ranks load the same batch and each trains on a contiguous
    1/cp of every sequence (``max_seq_len`` a multiple of ``cp * tp``); see ``ulysses_degree``
    and ``linear_attention_cp_mode``. Not with ``pp`` or ``ep`` above 1."""

    pp: int = 1
    """Pipeline-parallel degree: the decoder's layers cut into stages over this many ranks."""

    ep: int = 1
    """Expert-parallel degree of a mixture-of-experts model: its own mesh axis, whose ranks load
    the same batch and split its rows, each holding ``num_experts / ep`` experts."""

    etp: int = 1
    """Expert tensor-parallel degree; with ``ep > 1`` it must be 1 or ``tp`` (only 1 is
    implemented)."""

    moe_token_dispatcher_type: str = "all_to_all"
    """How expert parallelism moves tokens to their experts: ``all_to_all``. Refused unless at its default (the reason is in the error and the migration guide)."""

    npu_nums_per_device: int = 8
    """Devices per node for the ``deredundency`` token dispatcher: its inner expert-parallel
    degree (``ep // npu_nums_per_device`` nodes outside). Refused unless at its default (the reason is in the error and the migration guide)."""

    zero_stage: int = 0
    """Never read by the legacy trainer; FSDP shards parameters, gradients and optimizer state
    over ``dp_shard``. Refused unless at its default (the reason is in the error and the migration guide)."""

    reshard_after_forward: bool = True
    """FSDP: free gathered parameters after forward (saves memory, re-gathers in backward).
    One rank without mixed precision or CPU offload is not wrapped in FSDP (it would shard
    nothing), so there is nothing to gather."""

    async_cp: bool = False
    """Context parallelism: send each projection through its all-to-all as soon as it is
    computed (overlapping the next projection), one collective each, instead of one fused
    all-to-all per layer once all are computed. Same results. Needs ``cp > 1``."""

    ulysses_degree: Optional[int] = None
    """How the full-attention layers see the whole sequence under context parallelism: unset
    or ``cp`` -- Ulysses (all-to-all from sequence shards to head shards; the query heads per
    ``tp`` rank must divide by ``cp``, KV heads are repeated when they do not); 1 -- K/V
    all-gathered, each rank attends its own queries under an offset causal mask. Values in
    between (the hybrid) are refused. Needs ``cp > 1``."""

    comm_fusion: bool = True
    """One bucketed all-gather / reduce-scatter per FSDP unit, which is how torch's
    ``fully_shard`` always communicates; ``false`` is refused."""

    pp_micro_batch_num: int = 1
    """Pipeline micro-batches of a step: its rows (``micro_batch_size`` x the gradient
    accumulation steps) concatenated and split into this many, which must divide them."""

    pp_schedule: str = "1f1b"
    """Pipeline schedule: ``gpipe``, ``1f1b``, or ``interleaved_1f1b`` (what ``pp_vpp > 1``
    runs; ``1f1b`` with ``pp_vpp > 1`` means it too). Case and ``-`` / ``_`` are not
    significant."""

    pp_vpp: int = 1
    """Virtual pipeline stages per rank (rank r holds stages r, r + pp, ...); above 1 the
    schedule is interleaved 1F1B."""

    pp_layer_split: Optional[list[int]] = None
    """Decoder layers of each (virtual) stage, ``pp x pp_vpp`` entries summing to the model's
    layers; unset: balanced."""

    pp_less_memory: bool = False
    """The legacy shallow-warmup interleaved schedule of Qwen3-VL-MoE. Refused unless at its default (the reason is in the error and the migration guide)."""

    pp_mpipe_transpose_layers: Union[int, str] = 1
    """What the legacy MPipe-transpose schedule of Qwen3-VL-MoE transposes. Refused unless at its default (the reason is in the error and the migration guide)."""

    pp_mpipe_transpose_overflow: str = "full"
    """How the legacy MPipe-transpose schedule places surplus micro-batches. Refused unless at its default (the reason is in the error and the migration guide)."""

    cpu_offload: bool = False
    """FSDP keeps parameters, gradients and optimizer state in host memory and copies each unit
    to the device for its forward and backward (the optimizer steps on the CPU)."""

    fsdp_forward_prefetch: int = 0
    """FSDP forward prefetch depth: each decoder layer's forward issues the all-gathers of the
    next N layers (0: off, FSDP's implicit overlap only). A larger depth overlaps more and keeps
    up to N more layers' parameters gathered. Needs FSDP (more than one data-parallel rank, or
    mixed precision / CPU offload on one)."""

    fsdp_backward_prefetch: int = 0
    """FSDP backward prefetch depth: each decoder layer's backward issues the all-gathers of the
    N layers before it (0: off, FSDP's default of one). Needs FSDP and
    ``reshard_after_forward: true`` (otherwise the parameters stay gathered and there is
    nothing to prefetch)."""

    linear_attention_cp_mode: str = "ulysses"
    """How the Gated DeltaNet layers run under context parallelism: ``ulysses`` (each rank
    runs 1/cp of the heads over the whole sequence; key and value heads per ``tp`` rank must
    divide by ``cp``) or ``p2p`` (state passing: each rank runs its shard of every head from the
    recurrent state of the shards before it; any head count). Needs ``cp > 1``."""

    @validated
    def __post_init__(self) -> None:
        if self.dp is not None:
            at_least(self.dp, 1, "dp")
        for name in ("dp_replicate", "tp", "cp", "pp", "ep", "etp", "pp_micro_batch_num",
                     "pp_vpp", "npu_nums_per_device"):
            at_least(getattr(self, name), 1, name)
        at_least(self.fsdp_forward_prefetch, 0, "fsdp_forward_prefetch")
        at_least(self.fsdp_backward_prefetch, 0, "fsdp_backward_prefetch")
        one_of(self.linear_attention_cp_mode, CP_LINEAR_ATTENTION_MODES,
               "linear_attention_cp_mode")
        if self.ulysses_degree is not None:
            at_least(self.ulysses_degree, 1, "ulysses_degree")
        require(
            self.fsdp_backward_prefetch == 0 or self.reshard_after_forward,
            "fsdp_backward_prefetch",
            "needs reshard_after_forward: true (with false the parameters stay gathered from the "
            "forward to the backward, so there is no all-gather to prefetch); set it to 0",
            reads=("reshard_after_forward",),
        )
        schedule = normalized_pp_schedule(self.pp_schedule)
        require(
            schedule in LEGACY_PP_SCHEDULES,
            "pp_schedule",
            f"{self.pp_schedule!r} is not a pipeline schedule"
            f"{did_you_mean(schedule, LEGACY_PP_SCHEDULES)}; choose one of: "
            f"{', '.join(LEGACY_PP_SCHEDULES)}",
        )
        require(
            self.pp_vpp == 1 or schedule in ("1f1b", "interleaved_1f1b"),
            "pp_schedule",
            f"{self.pp_schedule!r} with pp_vpp={self.pp_vpp}: several stages per rank run the "
            "interleaved 1F1B schedule; set pp_schedule to 1f1b (or interleaved_1f1b)",
        )
        require(
            self.pp_vpp > 1 or schedule != "interleaved_1f1b",
            "pp_vpp",
            "must be > 1 with pp_schedule interleaved_1f1b (it interleaves several stages per "
            "rank); set pp_vpp=2, or pp_schedule=1f1b",
        )
        if self.pp_layer_split is not None:
            require(
                all(isinstance(n, int) and n >= 1 for n in self.pp_layer_split),
                "pp_layer_split",
                f"{self.pp_layer_split}: every stage needs at least one decoder layer",
            )
        if self.dp_shard is not None:
            require(
                self.dp_shard == -1 or self.dp_shard >= 1,
                "dp_shard",
                f"must be -1 (infer from the world size) or >= 1, got {self.dp_shard}",
            )


@dataclass
class MixedPrecisionConfig:
    """``train.mixed_precision``: FSDP2 mixed precision (fp32 master weights)."""

    enabled: bool = False
    """Compute in ``param_dtype`` through FSDP2's MixedPrecisionPolicy; keep fp32 masters."""

    param_dtype: str = "bfloat16"
    """Compute / all-gather dtype."""

    reduce_dtype: str = "float32"
    """Gradient reduce-scatter dtype."""

    output_dtype: Optional[str] = None
    """Dtype of the model's outputs (the logits), applied at the root FSDP unit; unset
    inherits ``param_dtype``."""

    @validated
    def __post_init__(self) -> None:
        one_of(self.param_dtype, DTYPE_NAMES, "param_dtype")
        one_of(self.reduce_dtype, DTYPE_NAMES, "reduce_dtype")
        if self.output_dtype is not None:
            one_of(self.output_dtype, DTYPE_NAMES, "output_dtype")


@dataclass
class GradientCheckpointingConfig:
    """``train.gradient_checkpointing``: activation checkpointing."""

    activation_checkpoint: str = "off"
    """``off`` / ``none``: keep activations; ``full``: recompute every decoder layer;
    ``selective``: save matmul outputs and recompute the rest."""

    num_layers: int | list[int] | None = None
    """How many decoder layers are checkpointed: unset, every layer; ``N``, the first N layers
    of every pipeline stage (of the model without pipeline parallelism); a list, one count per
    stage (``pp x pp_vpp`` entries, as ``pp_layer_split``). A count above a stage's layers
    means all of them, 0 none. Needs ``activation_checkpoint`` on."""

    @validated
    def __post_init__(self) -> None:
        one_of(self.activation_checkpoint, ACTIVATION_CHECKPOINT_MODES, "activation_checkpoint")
        if self.num_layers is not None:
            counts = self.num_layers if isinstance(self.num_layers, list) else [self.num_layers]
            require(
                all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts),
                "num_layers",
                f"{self.num_layers!r}: must be a count of layers (>= 0) or a list of them, "
                "one per pipeline stage",
            )
            require(
                self.activation_checkpoint not in ("off", "none"),
                "num_layers",
                "only applies with activation checkpointing; set activation_checkpoint to full "
                "or selective, or remove num_layers",
                reads=("activation_checkpoint",),
            )


@dataclass
class OptimizerConfig:
    """``train.optimizer``: optimizer, learning-rate schedule, loss accounting and clipping."""

    type: str = "adamw"
    """``adamw`` (decoupled weight decay) or ``adam``."""

    lr: float = 1e-4
    """Peak learning rate."""

    lr_min: float = 1e-5
    """Final learning rate of the ``cosine`` and ``linear`` decays."""

    lr_decay_style: str = "cosine"
    """After warmup: ``cosine``, ``linear`` or ``constant``."""

    lr_warmup_ratio: float = 0.1
    """Warmup steps = ceil(max_steps x ratio); warmup starts from 0."""

    loss_aggregation: str = "token_weighted"
    """``token_weighted``: mean over all label tokens of the global batch; ``rank_average``:
    mean of per-rank mean losses."""

    weight_decay: float = 0.01
    """Weight decay of the decay group (biases and norms are never decayed)."""

    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this value; ``<= 0`` disables clipping."""

    bsz_warmup_ratio: float = 0.0
    """Batch-size warmup; never read by the legacy trainer. Refused unless at its default (the reason is in the error and the migration guide)."""

    eps: float = 1e-8
    """Adam epsilon."""

    betas: tuple[float, float] = (0.9, 0.999)
    """Adam betas, e.g. ``[0.9, 0.95]``."""

    foreach: Optional[bool] = None
    """Use the foreach (multi-tensor) implementation; unset lets torch choose."""

    @validated
    def __post_init__(self) -> None:
        one_of(self.type, OPTIMIZER_TYPES, "type")
        at_least(self.lr, 0.0, "lr")
        at_least(self.lr_min, 0.0, "lr_min")
        one_of(self.lr_decay_style, LR_DECAY_STYLES, "lr_decay_style")
        require(
            0.0 <= self.lr_warmup_ratio <= 1.0,
            "lr_warmup_ratio",
            f"must be within [0, 1], got {self.lr_warmup_ratio}",
        )
        if self.lr_decay_style != "constant":
            require(
                self.lr_min <= self.lr,
                "lr_min",
                f"({self.lr_min}) must be <= lr ({self.lr}): the {self.lr_decay_style} decay "
                "goes from lr down to lr_min; lower lr_min or raise lr",
                reads=("lr", "lr_decay_style"),
            )
        one_of(self.loss_aggregation, LOSS_AGGREGATIONS, "loss_aggregation")
        at_least(self.weight_decay, 0.0, "weight_decay")
        require(self.eps > 0, "eps", f"must be > 0, got {self.eps}")
        require(
            len(self.betas) == 2 and all(0.0 <= b < 1.0 for b in self.betas),
            "betas",
            f"must be two numbers in [0, 1), got {list(self.betas)}",
        )


@dataclass
class CheckpointConfig:
    """``train.checkpoint``: DCP checkpoints and Hugging Face export."""

    output_dir: str = "outputs"
    """Root directory; checkpoints go to ``<output_dir>/step_<N>/`` and metrics to
    ``<output_dir>/metrics.jsonl``."""

    save_steps: int = 500
    """Save every N optimizer steps and at the end of training; 0 disables saving."""

    save_hf_weights: bool = True
    """Also export Hugging Face safetensors to ``step_<N>/hf_ckpt/`` with each save."""

    load_path: Optional[str] = None
    """Resume from this checkpoint directory (``.../step_<N>``), from the latest complete
    checkpoint under a directory holding ``step_<N>`` folders, or ``latest``: the newest complete
    checkpoint under ``output_dir`` (a fresh start, with a warning, when there is none)."""

    save_async: bool = False
    """Write checkpoints in the background (state is snapshotted first, never torn)."""

    @validated
    def __post_init__(self) -> None:
        require(bool(self.output_dir), "output_dir", "must be a non-empty directory path")
        at_least(self.save_steps, 0, "save_steps")


@dataclass
class LoggingConfig:
    """``train.logging``: console and metrics-file logging."""

    report_to: str = "none"
    """``wandb`` logs to Weights & Biases, as ``train.wandb.enabled: true`` does; ``none``
    leaves that to ``train.wandb.enabled`` (TensorBoard has ``train.tensorboard.enabled``)."""

    report_global_loss: bool = False
    """Read but never acted on by the legacy trainer; the logged loss is always the global one.
    Refused unless at its default (the reason is in the error and the migration guide)."""

    log_steps: int = 10
    """Log every N optimizer steps."""

    report_throughput: bool = True
    """Log tokens/s (and TFLOPS / MFU when the next two fields are set)."""

    model_flops_per_token: Optional[int] = None
    """Training FLOPs per token, for TFLOPS and MFU."""

    peak_tflops: Optional[float] = None
    """Peak TFLOPS of one device, for MFU (e.g. 989.0 for an H100 in bf16)."""

    @validated
    def __post_init__(self) -> None:
        if self.report_to in ("tensorboard", "all"):
            require(False, "report_to", f"{self.report_to!r} is not a value here: TensorBoard is "
                    "switched on with train.tensorboard.enabled; choose one of: "
                    f"{', '.join(LEGACY_REPORT_TO)}")
        else:
            one_of(self.report_to, LEGACY_REPORT_TO, "report_to")
        at_least(self.log_steps, 1, "log_steps")
        if self.model_flops_per_token is not None:
            at_least(self.model_flops_per_token, 1, "model_flops_per_token")
        if self.peak_tflops is not None:
            require(self.peak_tflops > 0, "peak_tflops", f"must be > 0, got {self.peak_tflops}")


@dataclass
class TensorBoardConfig:
    """``train.tensorboard``: TensorBoard scalars."""

    enabled: bool = False
    """Write TensorBoard event files on rank 0."""

    output_dir: str = "tb_traces"
    """Directory of the event files."""

    log_steps: int = 1
    """Write scalars every N steps."""

    @validated
    def __post_init__(self) -> None:
        at_least(self.log_steps, 1, "log_steps")


@dataclass
class WandbConfig:
    """``train.wandb``: Weights & Biases logging on rank 0 (the ``wandb`` package:
    ``pip install hyper_parallel[wandb]``); offline, for a later ``wandb sync``, without an API
    key or network."""

    enabled: bool = False
    """Log the step metrics to Weights & Biases."""

    project: str = "hyper-parallel"
    """Weights & Biases project."""

    run_name: Optional[str] = None
    """Weights & Biases run name (unset: W&B's own)."""

    log_steps: int = 1
    """Log every N steps."""

    @validated
    def __post_init__(self) -> None:
        require(bool(self.project), "project", "must be a non-empty project name")
        if self.run_name is not None:
            require(self.run_name != "", "run_name", "must be a non-empty name (or unset)")
        at_least(self.log_steps, 1, "log_steps")


@dataclass
class ProfileConfig:
    """``train.profile``: torch.profiler over a window of steps."""

    enabled: bool = False
    """Profile ``wait -> warmup -> active`` steps once."""

    output_dir: str = "profiler_traces"
    """Directory of the traces."""

    wait_steps: int = 1
    """Steps skipped before warming up."""

    warmup_steps: int = 1
    """Steps traced but discarded."""

    active_steps: int = 3
    """Steps recorded."""

    @validated
    def __post_init__(self) -> None:
        at_least(self.wait_steps, 0, "wait_steps")
        at_least(self.warmup_steps, 0, "warmup_steps")
        at_least(self.active_steps, 1, "active_steps")


@dataclass
class MemoryMonitorConfig:
    """``train.memory_monitor``: host and device memory logging."""

    enabled: bool = False
    """Log current and peak memory."""

    log_steps: int = 50
    """Log every N steps."""

    reset_peak_each_step: bool = False
    """Reset the device peak-memory counter every step (per-step peaks)."""

    @validated
    def __post_init__(self) -> None:
        at_least(self.log_steps, 1, "log_steps")


@dataclass
class MoeMonitorConfig:
    """``train.moe_monitor``: the expert-bias updater of mixture-of-experts models
    (auxiliary-loss-free load balancing)."""

    enabled: bool = False
    """Update the experts' routing bias from their load before every optimizer step."""

    lr: float = 1e-3
    """Update rate of the routing bias (the step each expert's bias moves by)."""

    num_recomputations: int = 1
    """Forward passes per step that count the load (2 with activation checkpointing). Refused unless at its default (the reason is in the error and the migration guide)."""

    @validated
    def __post_init__(self) -> None:
        at_least(self.lr, 0.0, "lr")
        at_least(self.num_recomputations, 1, "num_recomputations")


@dataclass
class EvalConfig:
    """``train.eval``: validation loss."""

    eval_steps: int = 0
    """Compute the validation loss every N steps; 0 disables evaluation."""

    eval_dataset: Optional[str] = None
    """Validation data, read like ``data.train_path`` with ``data.type``."""

    @validated
    def __post_init__(self) -> None:
        at_least(self.eval_steps, 0, "eval_steps")
        if self.eval_steps > 0:
            require(
                self.eval_dataset is not None,
                "eval_dataset",
                "is required when eval_steps > 0",
                reads=("eval_steps",),
            )
        else:
            require(
                self.eval_dataset is None,
                "eval_dataset",
                "is set but eval_steps is 0, so it would never be used; set eval_steps",
                reads=("eval_steps",),
            )


@dataclass
class DebugConfig:
    """``train.debug``: determinism and safety switches."""

    deterministic: bool = False
    """``torch.use_deterministic_algorithms(True)`` and deterministic cuDNN."""

    deterministic_warn_only: bool = False
    """Warn instead of failing on a non-deterministic op (with ``deterministic``)."""

    check_nan_inf: bool = False
    """Abort on a non-finite loss or gradient norm."""

    gc_steps: int = 0
    """> 0: disable automatic garbage collection and collect every N steps."""

    @validated
    def __post_init__(self) -> None:
        at_least(self.gc_steps, 0, "gc_steps")
