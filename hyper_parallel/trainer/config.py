"""The legacy configuration: ``HyperTrainerConfig`` and its ``model`` / ``data`` / ``train`` sections.

This is the schema users' existing YAML files are written against. Every field is honoured by the
legacy trainer or rejected by validation; nothing is accepted and ignored. Field docstrings are the
``--help`` text. Validation in ``__post_init__`` raises :class:`ConfigValueError` (a ``ValueError``)
naming the field and the allowed values -- every problem of the section at once, one per field;
the parser turns each into a :class:`ConfigError` carrying the dotted path and the file and line
the value came from, and reports all of a file's problems together. Besides each field's own
rules, every number must be finite and every integer at most :data:`MAX_INT`: a value that cannot
train is refused before the run starts.

The ``model`` and ``data`` sections and the ``train`` root are here; ``train``'s sub-sections are in
:mod:`~hyper_parallel.trainer.legacy_train_sections` and the validation rules every section is
written with in :mod:`~hyper_parallel.trainer.legacy_rules` (both re-exported where callers
expect them).

Read a YAML with :func:`parse_args`; print the resolved config with
``python -m hyper_parallel.trainer.config old.yaml [--a.b=c ...]``.

``LegacyConfig`` is ``HyperTrainerConfig`` under a name that cannot be mistaken for the engine's
``HyperTrainer.Config`` (the root of the new tree); ``HyperTrainerConfig`` stays the seed's name.

This module imports no framework (no torch, no mindspore).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from hyper_parallel.trainer.legacy_rules import (
    BACKENDS,
    COMM_BACKENDS,
    INIT_DEVICES,
    MAX_TIMEOUT_SECONDS,
    at_least,
    at_most,
    one_of,
    require,
    validated,
)
from hyper_parallel.trainer.legacy_train_sections import (
    AcceleratorConfig,
    CheckpointConfig,
    DebugConfig,
    EvalConfig,
    GradientCheckpointingConfig,
    LoggingConfig,
    MemoryMonitorConfig,
    MixedPrecisionConfig,
    MoeMonitorConfig,
    OptimizerConfig,
    ProfileConfig,
    TensorBoardConfig,
    WandbConfig,
)
from hyper_parallel.utils.choices import DEFAULT_KERNELS, KERNEL_CHOICES
from hyper_parallel.utils.data_types import DATA_TYPES, REFUSED_DATA_TYPES, TYPES_NEEDING_PATH
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.field_problems import ConfigValueError, FieldProblem
from hyper_parallel.utils.legacy_model_fields import LEGACY_UNIVERSAL_FIELDS
from hyper_parallel.utils.numbers import MAX_INT

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
    "LegacyConfig",
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

    @validated
    def __post_init__(self) -> None:
        require(bool(self.name), "name", "must be a non-empty model spec name, e.g. 'qwen3_5'")
        one_of(self.kernels, KERNEL_CHOICES, "kernels")
        for name in LEGACY_UNIVERSAL_FIELDS:
            value = getattr(self, name)
            if value is not None:
                at_least(value, 1, name)
        if self.freeze_modules is not None:
            require(
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
    read with the ``datasets`` library, one truncated sample per record), ``json_file`` (JSON
    records of one kind per file, told by the first record: Alpaca instructions, see
    ``template``, or text under ``text_key``, one truncated sample each) or ``preset_pt``
    (pre-tokenized batches written with ``torch.save``, replayed in file order). ``megatron`` and
    ``vl_dummy`` are refused with the reason."""

    train_path: Optional[str] = None
    """Dataset file, directory or glob (required for every type but ``dummy``).
    ``pkg://corpus/...`` names the corpus shipped with hyper_parallel."""

    subset: Optional[str] = None
    """``hf_datasets``: the dataset configuration (``load_dataset(..., name=subset)``)."""

    max_seq_len: int = 2048
    """Tokens per training sample (documents are packed into samples of exactly this length)."""

    text_key: str = "text"
    """The key (column) holding the document text (``jsonl``, ``hf_datasets``, the text records
    of ``json_file``)."""

    train_size: Optional[int] = None
    """Use only the first N samples of the dataset (all of them when unset). With ``streaming``:
    the global sample budget of an epoch (each data-parallel rank yields its even share)."""

    template: str = "empty"
    """``json_file``: ``empty`` trains on the response only (prompt tokens masked with -100);
    any other value formats each record as ``Human: ...\\n\\nAssistant: ...`` text, as the legacy
    trainer did (written ``human_assistant`` in a recipe)."""

    image_key: str = "image"
    """``json_file`` image-text records: the key of a record's image path (or list of paths),
    relative to the file's folder."""

    messages_key: str = "messages"
    """``json_file``: the key of an image-text record's chat messages; records holding it are
    rendered as Qwen's chat and trained on the assistant answers only (an image-text model)."""

    processor_path: str | None = None
    """``json_file`` image-text records: a folder holding the checkpoint's
    ``preprocessor_config.json`` (the image processor); unset, Qwen's published settings. The
    tokenizer is ``model.tokenizer_path``."""

    image_token_id: int = 151655
    """The image placeholder token of synthetic image-text data. Refused unless at its default:
    the id is the model's (its ``vision_config``) and the tokenizer's."""

    vl_grid_t: int = 2
    """``vl_dummy``: the synthetic image's patch grid in time."""

    vl_grid_h: int = 2
    """``vl_dummy``: the synthetic image's patch grid height (a multiple of 2, the merge)."""

    vl_grid_w: int = 2
    """``vl_dummy``: the synthetic image's patch grid width (a multiple of 2, the merge)."""

    packing: bool = False
    """Pack the data into rows of ``max_seq_len`` whose documents stay apart (needs
    ``model.config_overrides.attn_mask_type: block_causal``): ``hf_datasets`` / ``json_file``
    samples first-fit in file order into rows, each keeping its prompt masking; ``jsonl`` /
    ``text`` rows carry their documents' starts. ``position_ids`` restart at 0 per document.
    Not with ``streaming``, image-text records, ``dummy``, ``vl_dummy`` or ``preset_pt``."""

    streaming: bool = False
    """``hf_datasets`` / ``json_file``: read the data as a ``datasets`` stream (record by record,
    split over the data-parallel ranks, shuffled in a seeded buffer of 10,000 records) instead
    of loading it; needs ``num_workers: 0``, and ``train_size`` on more than one
    data-parallel rank."""

    num_workers: int = 0
    """DataLoader worker processes."""

    prefetch_factor: Optional[int] = None
    """Batches prefetched per worker; only valid with ``num_workers > 0``."""

    pin_memory: bool = True
    """Pin host memory of batches (useful with an accelerator)."""

    shuffle: bool = True
    """Shuffle samples each epoch (DistributedSampler, seeded with ``train.seed``; a stream: its
    shuffle buffer, seeded the same way)."""

    load: str | None = None
    """How pipeline ranks load their data: unset, every rank its data-parallel group's whole
    batch; ``single``, the legacy MPipe schedule's in-schedule loading (each pipeline rank reads
    only the micro-batches it owns). Refused unless at its default (the reason is in the error and the migration guide)."""

    @validated
    def __post_init__(self) -> None:
        if self.type in REFUSED_DATA_TYPES:
            require(False, "type", f"{self.type!r} is not supported: "
                     f"{REFUSED_DATA_TYPES[self.type]}")
        else:
            one_of(self.type, DATA_TYPES, "type")
        if self.train_size is not None:
            at_least(self.train_size, 1, "train_size")
        if self.type in TYPES_NEEDING_PATH:
            require(
                self.train_path is not None,
                "train_path",
                f"is required for data.type={self.type!r} (a file or directory to read)",
                reads=("type",),
            )
        at_least(self.max_seq_len, 2, "max_seq_len")
        require(bool(self.text_key), "text_key", "must be a non-empty key")
        require(bool(self.messages_key), "messages_key", "must be a non-empty key")
        require(bool(self.image_key), "image_key", "must be a non-empty key")
        for name in ("vl_grid_t", "vl_grid_h", "vl_grid_w"):
            at_least(getattr(self, name), 1, name)
        at_least(self.num_workers, 0, "num_workers")
        if self.prefetch_factor is not None:
            at_least(self.prefetch_factor, 1, "prefetch_factor")
            require(
                self.num_workers > 0,
                "prefetch_factor",
                "only applies with worker processes; set data.num_workers > 0 or remove it",
                reads=("num_workers",),
            )


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

    @validated
    def __post_init__(self) -> None:
        at_least(self.max_steps, 1, "max_steps")
        at_least(self.num_train_epochs, 1, "num_train_epochs")
        at_least(self.global_batch_size, 1, "global_batch_size")
        at_least(self.micro_batch_size, 1, "micro_batch_size")
        at_least(self.seed, 0, "seed")
        one_of(self.backend, BACKENDS, "backend")
        one_of(self.init_device, INIT_DEVICES, "init_device")
        if self.comm_backend is not None:
            # torch also accepts "cpu:gloo,cuda:nccl" device-to-backend maps.
            parts = [p.split(":")[-1] for p in self.comm_backend.split(",")]
            require(
                all(p in COMM_BACKENDS for p in parts),
                "comm_backend",
                f"{self.comm_backend!r} is not allowed; choose one of: {', '.join(COMM_BACKENDS)}"
                " (or a map such as 'cpu:gloo,cuda:nccl')",
            )
        at_least(self.local_rank, 0, "local_rank")
        for name in ("init_timeout_seconds", "train_timeout_seconds"):
            at_least(getattr(self, name), 1, name)
            at_most(getattr(self, name), MAX_TIMEOUT_SECONDS, name)
        require(
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


LegacyConfig = HyperTrainerConfig
"""The legacy root under a name that says which world it belongs to: ``HyperTrainerConfig`` (the
seed's name, which ``parse_args(HyperTrainerConfig)`` and existing code use) is easily read as
the config of ``HyperTrainer``, which is ``HyperTrainer.Config``. The same class."""


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
