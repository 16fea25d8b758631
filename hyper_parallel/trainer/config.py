"""The legacy configuration: ``HyperTrainerConfig`` and its ``model`` / ``data`` / ``train`` sections.

This is the schema users' existing YAML files are written against. Every field is honoured by the
legacy trainer or rejected by validation; nothing is accepted and ignored. Field docstrings are the
``--help`` text. Validation in ``__post_init__`` raises :class:`ConfigValueError` (a ``ValueError``)
naming the field and the allowed values -- every problem of the section at once, one per field;
the parser turns each into a :class:`ConfigError` carrying the dotted path and the file and line
the value came from, and reports all of a file's problems together. Besides each field's own
rules, every number must be finite and every integer at most :data:`MAX_INT`: a value that cannot
train is refused before the run starts.

Read a YAML with :func:`parse_args`; print the resolved config with
``python -m hyper_parallel.trainer.config old.yaml [--a.b=c ...]``.

This module imports no framework (no torch, no mindspore).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from hyper_parallel.platform.dtypes import DTYPE_NAMES
from hyper_parallel.utils.choices import AC_MODES, DECAY_STYLES, LOSS_AGGREGATIONS, OPTIMIZER_TYPES
from hyper_parallel.utils.data_types import DATA_TYPES, REFUSED_DATA_TYPES
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.field_problems import ConfigValueError, FieldProblem
from hyper_parallel.utils.kernel_choices import DEFAULT_KERNELS, KERNEL_CHOICES
from hyper_parallel.utils.numbers import MAX_INT
from hyper_parallel.utils.suggest import did_you_mean

__all__ = [
    "MAX_INT",
    "AcceleratorConfig",
    "CheckpointConfig",
    "ConfigError",
    "ConfigValueError",
    "DataConfig",
    "DebugConfig",
    "EvalConfig",
    "FieldProblem",
    "GradientCheckpointingConfig",
    "HyperTrainerConfig",
    "LoggingConfig",
    "MemoryMonitorConfig",
    "MixedPrecisionConfig",
    "ModelConfig",
    "MoeMonitorConfig",
    "OptimizerConfig",
    "ProfileConfig",
    "TensorBoardConfig",
    "TrainConfig",
    "WandbConfig",
    "parse_args",
]

ACTIVATION_CHECKPOINT_MODES = AC_MODES
LR_DECAY_STYLES = DECAY_STYLES
BACKENDS = ("torch", "mindspore")
INIT_DEVICES = ("meta", "cpu", "cuda", "npu")
COMM_BACKENDS = ("gloo", "nccl", "hccl", "mpi", "ucc")


MAX_TIMEOUT_SECONDS = 604800
"""The longest collective timeout (a week), as the new tree's ``comm`` section allows."""


_collecting = threading.local()


def _validated(post_init: Callable[[Any], None]) -> Callable[[Any], None]:
    """Run a ``__post_init__`` whose checks collect their problems instead of stopping at the
    first; raise one :class:`ConfigValueError` with all of them. A field keeps its first
    problem only, and a cross-field rule that reads a field already wrong is skipped."""

    @functools.wraps(post_init)
    def run(self: Any) -> None:
        stack = _collecting.__dict__.setdefault("stack", [])
        found: list[FieldProblem] = []
        stack.append(found)
        try:
            _numbers(self)
            post_init(self)
        finally:
            stack.pop()
        kept: list[FieldProblem] = []
        wrong: set[str] = set()
        for problem in found:
            if problem.field in wrong or wrong.intersection(problem.reads):
                continue
            kept.append(problem)
            wrong.add(problem.field)
        if kept:
            raise ConfigValueError(kept[0].field, kept[0].message, problems=kept)

    return run


def _require(
    condition: bool, field_name: str, message: str, *, reads: Sequence[str] = ()
) -> None:
    """A rule of ``field_name``; ``reads`` names the other fields a cross-field rule uses."""
    if condition:
        return
    problem = FieldProblem(field_name, message, tuple(reads))
    stack = getattr(_collecting, "stack", None)
    if not stack:  # called outside a __post_init__
        raise ConfigValueError(field_name, message, problems=[problem])
    stack[-1].append(problem)


def _numbers(section: Any) -> None:
    """Every number of ``section`` is finite and every integer at most :data:`MAX_INT` (also in
    lists and tuples; mappings are the model's, checked by the parser)."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, bool):
                continue
            if isinstance(item, float) and not math.isfinite(item):
                shown = f"{value!r}" if item is value else f"{list(value)!r}"
                _require(False, f.name, f"must be a finite number, got {shown}")
            elif isinstance(item, int) and abs(item) > MAX_INT:
                _require(False, f.name, f"must be <= {MAX_INT} (2**53 - 1) in magnitude, got "
                         f"{item}; it is far beyond any real run")


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _one_of(value: Any, choices: Sequence[Any], field_name: str) -> None:
    if value in choices:
        return  # (the message, with its did-you-mean, only for a wrong value)
    _require(
        False,
        field_name,
        f"{_cut(repr(value))} is not allowed{did_you_mean(str(value), map(str, choices))}; "
        f"choose one of: {', '.join(map(str, choices))}",
    )


def _at_least(value: Any, minimum: float, field_name: str) -> None:
    _require(value >= minimum, field_name, f"must be >= {minimum}, got {value!r}")


def _at_most(value: Any, maximum: float, field_name: str) -> None:
    _require(value <= maximum, field_name, f"must be <= {maximum}, got {value!r}")


@dataclass
class ModelConfig:
    """``model``: which model to build and how its architecture is overridden."""

    name: str = "qwen3_5"
    """Model spec key; also the import path ``hyper_parallel.models.<name>`` (or a dotted module
    path) whose import registers the spec."""

    weights_path: Optional[str] = None
    """Pretrained weights, loaded after parallelization: a Hugging Face checkpoint directory
    (``model.safetensors`` or a sharded index), a DCP directory, or a ``.pt`` state-dict file.
    Also the tokenizer fallback when ``tokenizer_path`` is unset."""

    tokenizer_path: Optional[str] = None
    """A ``tokenizer.json`` file or a directory holding one (text datasets). Unset: the
    tokenizer next to ``weights_path``, else the tokenizer shipped with hyper_parallel."""

    freeze_modules: Optional[list[str]] = None
    """Substrings of parameter names to freeze (``requires_grad=False``; stored in
    ``param_dtype`` when mixed precision is on)."""

    tp_plan: Optional[dict[str, Any]] = None
    """Reserved by the legacy schema for a tensor-parallel plan; never read there. Refused unless at its default (the reason is in the error and the migration guide)."""

    cp_modules: Optional[list[str]] = None
    """Reserved by the legacy schema for context-parallel modules; never read there. Refused unless at its default (the reason is in the error and the migration guide)."""

    ep_modules: Optional[list[str]] = None
    """Reserved by the legacy schema for expert-parallel modules; never read there. Refused unless at its default (the reason is in the error and the migration guide)."""

    num_hidden_layers: Optional[int] = None
    """Architecture override; wins over the flavor, loses to ``config_overrides``."""

    hidden_size: Optional[int] = None
    """Architecture override; wins over the flavor, loses to ``config_overrides``."""

    intermediate_size: Optional[int] = None
    """Architecture override; wins over the flavor, loses to ``config_overrides``."""

    num_attention_heads: Optional[int] = None
    """Architecture override; wins over the flavor, loses to ``config_overrides``."""

    num_key_value_heads: Optional[int] = None
    """Architecture override; wins over the flavor, loses to ``config_overrides``."""

    vocab_size: Optional[int] = None
    """Architecture override; wins over the flavor, loses to ``config_overrides``."""

    max_position_embeddings: Optional[int] = None
    """Architecture override; wins over the flavor, loses to ``config_overrides``."""

    config_overrides: Optional[dict[str, Any]] = None
    """Model-config fields by their Hugging Face names (``head_dim``, ``linear_num_key_heads``,
    ...), merged last. The extra key ``flavor`` picks the base flavor (default ``0.8b``). An
    unknown key is an error."""

    kernels: str = DEFAULT_KERNELS
    """Implementation of the Gated DeltaNet layers: ``auto`` (fla-core's CUDA kernels when the
    model is on a CUDA device and the ``gpu`` extra is installed, else the plain torch path),
    ``torch`` (always the torch path) or ``fla`` (always fla-core; an error on a CPU or without
    the package). The choice is logged once."""

    @_validated
    def __post_init__(self) -> None:
        _require(bool(self.name), "name", "must be a non-empty model spec name, e.g. 'qwen3_5'")
        _one_of(self.kernels, KERNEL_CHOICES, "kernels")
        for name in (
            "num_hidden_layers",
            "hidden_size",
            "intermediate_size",
            "num_attention_heads",
            "num_key_value_heads",
            "vocab_size",
            "max_position_embeddings",
        ):
            value = getattr(self, name)
            if value is not None:
                _at_least(value, 1, name)
        if self.freeze_modules is not None:
            _require(
                all(isinstance(p, str) and p for p in self.freeze_modules),
                "freeze_modules",
                "must be a list of non-empty parameter-name substrings",
            )


@dataclass
class DataConfig:
    """``data``: the training data."""

    type: str = "dummy"
    """``dummy`` (synthetic random tokens), ``jsonl`` (JSON lines, one document per line under
    ``text_key``, packed), ``text`` (plain text files, packed), ``hf_datasets`` (a local dataset
    read with the ``datasets`` library, one truncated sample per record), ``json_file``
    (Alpaca-style instruction records, see ``template``) or ``preset_pt`` (pre-tokenized batches
    written with ``torch.save``, replayed in file order). ``megatron`` and ``vl_dummy`` are
    refused with the reason."""

    train_path: Optional[str] = None
    """Dataset file, directory or glob (required for every type but ``dummy``).
    ``pkg://corpus/...`` names the corpus shipped with hyper_parallel."""

    subset: Optional[str] = None
    """``hf_datasets``: the dataset configuration (``load_dataset(..., name=subset)``)."""

    max_seq_len: int = 2048
    """Tokens per training sample (documents are packed into samples of exactly this length)."""

    text_key: str = "text"
    """The key (column) holding the document text (``jsonl``, ``hf_datasets``)."""

    train_size: Optional[int] = None
    """Use only the first N samples of the dataset (all of them when unset)."""

    template: str = "empty"
    """``json_file``: ``empty`` trains on the response only (prompt tokens masked with -100);
    any other value formats each record as ``Human: ...\\n\\nAssistant: ...`` text, as the legacy
    trainer did (written ``human_assistant`` in a recipe)."""

    image_key: str = "image"
    """Vision-language data: the image column. Refused unless at its default (the reason is in the error and the migration guide)."""

    messages_key: str = "messages"
    """Vision-language data: the chat-messages column. Refused unless at its default (the reason is in the error and the migration guide)."""

    image_token_id: int = 151655
    """Vision-language synthetic data: the image placeholder token. Refused unless at its default (the reason is in the error and the migration guide)."""

    vl_grid_t: int = 2
    """Vision-language synthetic data: temporal patch grid. Refused unless at its default (the reason is in the error and the migration guide)."""

    vl_grid_h: int = 2
    """Vision-language synthetic data: patch grid height. Refused unless at its default (the reason is in the error and the migration guide)."""

    vl_grid_w: int = 2
    """Vision-language synthetic data: patch grid width. Refused unless at its default (the reason is in the error and the migration guide)."""

    streaming: bool = False
    """Stream the dataset instead of loading it. Refused unless at its default (the reason is in the error and the migration guide)."""

    num_workers: int = 0
    """DataLoader worker processes."""

    prefetch_factor: Optional[int] = None
    """Batches prefetched per worker; only valid with ``num_workers > 0``."""

    pin_memory: bool = True
    """Pin host memory of batches (useful with an accelerator)."""

    shuffle: bool = True
    """Shuffle samples each epoch (DistributedSampler, seeded with ``train.seed``)."""

    @_validated
    def __post_init__(self) -> None:
        if self.type in REFUSED_DATA_TYPES:
            _require(False, "type", f"{self.type!r} is not supported: "
                     f"{REFUSED_DATA_TYPES[self.type]}")
        else:
            _one_of(self.type, DATA_TYPES, "type")
        if self.train_size is not None:
            _at_least(self.train_size, 1, "train_size")
        if self.type != "dummy":
            _require(
                self.train_path is not None,
                "train_path",
                f"is required for data.type={self.type!r} (a file or directory to read)",
                reads=("type",),
            )
        _at_least(self.max_seq_len, 2, "max_seq_len")
        _require(bool(self.text_key), "text_key", "must be a non-empty key")
        _at_least(self.num_workers, 0, "num_workers")
        if self.prefetch_factor is not None:
            _at_least(self.prefetch_factor, 1, "prefetch_factor")
            _require(
                self.num_workers > 0,
                "prefetch_factor",
                "only applies with worker processes; set data.num_workers > 0 or remove it",
                reads=("num_workers",),
            )


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
    """Context-parallel degree (not supported by the Qwen3.5 trainer yet)."""

    pp: int = 1
    """Pipeline-parallel degree (not supported yet)."""

    ep: int = 1
    """Expert-parallel degree (its own mesh axis; dense models have no experts)."""

    etp: int = 1
    """Expert tensor-parallel degree; with ``ep > 1`` it must be 1 or ``tp``."""

    zero_stage: int = 0
    """Never read by the legacy trainer; FSDP shards parameters, gradients and optimizer state
    over ``dp_shard``. Refused unless at its default (the reason is in the error and the migration guide)."""

    reshard_after_forward: bool = True
    """FSDP: free gathered parameters after forward (saves memory, re-gathers in backward)."""

    async_cp: bool = False
    """Asynchronous context-parallel communication. Refused unless at its default (the reason is in the error and the migration guide)."""

    ulysses_degree: Optional[int] = None
    """Ulysses sub-degree of ``cp``. Refused unless at its default (the reason is in the error and the migration guide)."""

    comm_fusion: bool = True
    """One bucketed all-gather / reduce-scatter per FSDP unit, which is how torch's
    ``fully_shard`` always communicates; ``false`` is refused."""

    pp_micro_batch_num: int = 1
    """Pipeline micro-batches per step. Refused unless at its default (the reason is in the error and the migration guide)."""

    pp_schedule: str = "1f1b"
    """Pipeline schedule (``1f1b``, ``gpipe``). Refused unless at its default (the reason is in the error and the migration guide)."""

    pp_vpp: int = 1
    """Virtual pipeline stages per rank. Refused unless at its default (the reason is in the error and the migration guide)."""

    pp_layer_split: Optional[list[int]] = None
    """Decoder layers per pipeline stage. Refused unless at its default (the reason is in the error and the migration guide)."""

    cpu_offload: bool = False
    """FSDP keeps parameters, gradients and optimizer state in host memory and copies each unit
    to the device for its forward and backward (the optimizer steps on the CPU)."""

    linear_attention_cp_mode: str = "ulysses"
    """How the Gated DeltaNet layers split the sequence under context parallelism. Refused unless at its default (the reason is in the error and the migration guide)."""

    @_validated
    def __post_init__(self) -> None:
        if self.dp is not None:
            _at_least(self.dp, 1, "dp")
        for name in ("dp_replicate", "tp", "cp", "pp", "ep", "etp"):
            _at_least(getattr(self, name), 1, name)
        if self.dp_shard is not None:
            _require(
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

    @_validated
    def __post_init__(self) -> None:
        _one_of(self.param_dtype, DTYPE_NAMES, "param_dtype")
        _one_of(self.reduce_dtype, DTYPE_NAMES, "reduce_dtype")
        if self.output_dtype is not None:
            _one_of(self.output_dtype, DTYPE_NAMES, "output_dtype")


@dataclass
class GradientCheckpointingConfig:
    """``train.gradient_checkpointing``: activation checkpointing."""

    activation_checkpoint: str = "off"
    """``off`` / ``none``: keep activations; ``full``: recompute every decoder layer;
    ``selective``: save matmul outputs and recompute the rest."""

    @_validated
    def __post_init__(self) -> None:
        _one_of(self.activation_checkpoint, ACTIVATION_CHECKPOINT_MODES, "activation_checkpoint")


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

    @_validated
    def __post_init__(self) -> None:
        _one_of(self.type, OPTIMIZER_TYPES, "type")
        _at_least(self.lr, 0.0, "lr")
        _at_least(self.lr_min, 0.0, "lr_min")
        _one_of(self.lr_decay_style, LR_DECAY_STYLES, "lr_decay_style")
        _require(
            0.0 <= self.lr_warmup_ratio <= 1.0,
            "lr_warmup_ratio",
            f"must be within [0, 1], got {self.lr_warmup_ratio}",
        )
        if self.lr_decay_style != "constant":
            _require(
                self.lr_min <= self.lr,
                "lr_min",
                f"({self.lr_min}) must be <= lr ({self.lr}): the {self.lr_decay_style} decay "
                "goes from lr down to lr_min; lower lr_min or raise lr",
                reads=("lr", "lr_decay_style"),
            )
        _one_of(self.loss_aggregation, LOSS_AGGREGATIONS, "loss_aggregation")
        _at_least(self.weight_decay, 0.0, "weight_decay")
        _require(self.eps > 0, "eps", f"must be > 0, got {self.eps}")
        _require(
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

    @_validated
    def __post_init__(self) -> None:
        _require(bool(self.output_dir), "output_dir", "must be a non-empty directory path")
        _at_least(self.save_steps, 0, "save_steps")


@dataclass
class LoggingConfig:
    """``train.logging``: console and metrics-file logging."""

    report_to: str = "none"
    """Never read by the legacy trainer (TensorBoard is ``train.tensorboard``). Refused unless at its default (the reason is in the error and the migration guide)."""

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

    @_validated
    def __post_init__(self) -> None:
        _at_least(self.log_steps, 1, "log_steps")
        if self.model_flops_per_token is not None:
            _at_least(self.model_flops_per_token, 1, "model_flops_per_token")
        if self.peak_tflops is not None:
            _require(self.peak_tflops > 0, "peak_tflops", f"must be > 0, got {self.peak_tflops}")


@dataclass
class TensorBoardConfig:
    """``train.tensorboard``: TensorBoard scalars."""

    enabled: bool = False
    """Write TensorBoard event files on rank 0."""

    output_dir: str = "tb_traces"
    """Directory of the event files."""

    log_steps: int = 1
    """Write scalars every N steps."""

    @_validated
    def __post_init__(self) -> None:
        _at_least(self.log_steps, 1, "log_steps")


@dataclass
class WandbConfig:
    """``train.wandb``: Weights & Biases logging. Refused unless at its default (the reason is in the error and the migration guide)."""

    enabled: bool = False
    """Log to Weights & Biases. Refused unless at its default (the reason is in the error and the migration guide)."""

    project: str = "hyper-parallel"
    """Weights & Biases project. Refused unless at its default (the reason is in the error and the migration guide)."""

    run_name: Optional[str] = None
    """Weights & Biases run name. Refused unless at its default (the reason is in the error and the migration guide)."""

    log_steps: int = 1
    """Log every N steps. Refused unless at its default (the reason is in the error and the migration guide)."""


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

    @_validated
    def __post_init__(self) -> None:
        _at_least(self.wait_steps, 0, "wait_steps")
        _at_least(self.warmup_steps, 0, "warmup_steps")
        _at_least(self.active_steps, 1, "active_steps")


@dataclass
class MemoryMonitorConfig:
    """``train.memory_monitor``: host and device memory logging."""

    enabled: bool = False
    """Log current and peak memory."""

    log_steps: int = 50
    """Log every N steps."""

    reset_peak_each_step: bool = False
    """Reset the device peak-memory counter every step (per-step peaks)."""

    @_validated
    def __post_init__(self) -> None:
        _at_least(self.log_steps, 1, "log_steps")


@dataclass
class MoeMonitorConfig:
    """``train.moe_monitor``: the expert-bias updater of MoE models. Refused unless at its default (the reason is in the error and the migration guide)."""

    enabled: bool = False
    """Update the experts' routing bias from their load. Refused unless at its default (the reason is in the error and the migration guide)."""

    lr: float = 1e-3
    """Update rate of the routing bias. Refused unless at its default (the reason is in the error and the migration guide)."""

    num_recomputations: int = 1
    """Forward passes per step that count the load (2 with activation checkpointing). Refused unless at its default (the reason is in the error and the migration guide)."""


@dataclass
class EvalConfig:
    """``train.eval``: validation loss."""

    eval_steps: int = 0
    """Compute the validation loss every N steps; 0 disables evaluation."""

    eval_dataset: Optional[str] = None
    """Validation data, read like ``data.train_path`` with ``data.type``."""

    @_validated
    def __post_init__(self) -> None:
        _at_least(self.eval_steps, 0, "eval_steps")
        if self.eval_steps > 0:
            _require(
                self.eval_dataset is not None,
                "eval_dataset",
                "is required when eval_steps > 0",
                reads=("eval_steps",),
            )
        else:
            _require(
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

    @_validated
    def __post_init__(self) -> None:
        _at_least(self.gc_steps, 0, "gc_steps")


@dataclass
class TrainConfig:
    """``train``: the training run."""

    max_steps: int = 100
    """Total optimizer steps (also the LR schedule horizon)."""

    num_train_epochs: int = 1
    """Upper bound on passes over the data."""

    global_batch_size: int = 8
    """Samples per optimizer step over all data-parallel ranks; must be a multiple of
    ``micro_batch_size x dp size``."""

    micro_batch_size: int = 1
    """Samples per forward/backward on one rank."""

    seed: int = 42
    """Seed of the model init, the sampler and the dummy data."""

    backend: str = "torch"
    """Framework: ``torch`` (the trainer runs on torch; ``mindspore`` is reported unsupported)."""

    init_device: str = "meta"
    """Where the model is first built: ``meta`` (no memory; materialized after sharding) or a
    real device (``cpu``, ``cuda``, ``npu``)."""

    comm_backend: Optional[str] = None
    """``torch.distributed`` backend (``gloo``, ``nccl``, ``hccl``, ...); unset picks one for the
    device."""

    local_rank: int = 0
    """Set by the launcher through ``LOCAL_RANK``; not a YAML key."""

    init_timeout_seconds: int = 300
    """Collective timeout (seconds) while the job starts and during its first step."""

    train_timeout_seconds: int = 100
    """Collective timeout (seconds) after the first step."""

    accelerator: AcceleratorConfig = field(default_factory=AcceleratorConfig)
    """Parallel layout."""

    mixed_precision: MixedPrecisionConfig = field(default_factory=MixedPrecisionConfig)
    """Mixed precision."""

    gradient_checkpointing: GradientCheckpointingConfig = field(
        default_factory=GradientCheckpointingConfig
    )
    """Activation checkpointing."""

    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    """Optimizer and LR schedule."""

    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    """Checkpointing."""

    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """Logging."""

    tensorboard: TensorBoardConfig = field(default_factory=TensorBoardConfig)
    """TensorBoard."""

    wandb: WandbConfig = field(default_factory=WandbConfig)
    """Weights & Biases (not supported)."""

    profile: ProfileConfig = field(default_factory=ProfileConfig)
    """Profiler."""

    memory_monitor: MemoryMonitorConfig = field(default_factory=MemoryMonitorConfig)
    """Memory monitor."""

    moe_monitor: MoeMonitorConfig = field(default_factory=MoeMonitorConfig)
    """MoE expert-bias updater (not supported)."""

    eval: EvalConfig = field(default_factory=EvalConfig)
    """Evaluation."""

    debug: DebugConfig = field(default_factory=DebugConfig)
    """Debug switches."""

    @_validated
    def __post_init__(self) -> None:
        _at_least(self.max_steps, 1, "max_steps")
        _at_least(self.num_train_epochs, 1, "num_train_epochs")
        _at_least(self.global_batch_size, 1, "global_batch_size")
        _at_least(self.micro_batch_size, 1, "micro_batch_size")
        _at_least(self.seed, 0, "seed")
        _one_of(self.backend, BACKENDS, "backend")
        _one_of(self.init_device, INIT_DEVICES, "init_device")
        if self.comm_backend is not None:
            # torch also accepts "cpu:gloo,cuda:nccl" device-to-backend maps.
            parts = [p.split(":")[-1] for p in self.comm_backend.split(",")]
            _require(
                all(p in COMM_BACKENDS for p in parts),
                "comm_backend",
                f"{self.comm_backend!r} is not allowed; choose one of: {', '.join(COMM_BACKENDS)}"
                " (or a map such as 'cpu:gloo,cuda:nccl')",
            )
        _at_least(self.local_rank, 0, "local_rank")
        for name in ("init_timeout_seconds", "train_timeout_seconds"):
            _at_least(getattr(self, name), 1, name)
            _at_most(getattr(self, name), MAX_TIMEOUT_SECONDS, name)
        _require(
            self.global_batch_size >= self.micro_batch_size,
            "global_batch_size",
            f"({self.global_batch_size}) must be >= micro_batch_size ({self.micro_batch_size})",
            reads=("micro_batch_size",),
        )


@dataclass
class HyperTrainerConfig:
    """The legacy configuration root: exactly the ``model``, ``data`` and ``train`` sections."""

    model: ModelConfig = field(default_factory=ModelConfig)
    """What to train."""

    data: DataConfig = field(default_factory=DataConfig)
    """What to train on."""

    train: TrainConfig = field(default_factory=TrainConfig)
    """How to train."""

    @property
    def train_steps(self) -> int:
        """Total optimizer steps (mirrors ``train.max_steps``; kept for legacy callers)."""
        return self.train.max_steps


def parse_args(root_class: type = HyperTrainerConfig, argv: Sequence[str] | None = None):
    """Parse ``old.yaml [--a.b.c=value | --a.b.c value ...]`` into ``root_class``.

    See :mod:`hyper_parallel.trainer.config_parser` for the rules. ``argv`` defaults to
    ``sys.argv[1:]``. Every problem is a :class:`ConfigError`.
    """
    # Imported when called: reading a YAML needs the YAML loader, the schema alone does not.
    # The parser's parts sit below this module (they never import it).
    from hyper_parallel.trainer.legacy_parsing.load import parse_args as _parse_args

    return _parse_args(root_class, argv)


if __name__ == "__main__":  # python -m hyper_parallel.trainer.config old.yaml [overrides]
    from hyper_parallel.trainer.legacy_parsing.show import main

    raise SystemExit(main(HyperTrainerConfig))
