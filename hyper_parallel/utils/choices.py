"""The fixed choice lists of the configuration, and two fixed values: one home for each,
framework-free.

Each list is written once, as the ``Literal`` a Config field is annotated with (tyro and the
generator read the annotation), and the tuple of its values is derived from it (for
``one_of`` checks and error messages). The legacy schema, the new component Configs and the
runtime helpers import them from here, so a value is added or removed in one place.

``NO_DECAY_KEYWORDS`` and ``IGNORE_INDEX`` are here because a Config defaults to them and the
runtime reads them, and neither may pull in torch. The data types and the ``json_file``
templates live in :mod:`hyper_parallel.utils.data_types` with the rest of what a data type
needs.
"""

from __future__ import annotations

from typing import Literal, get_args

#: The LR shape after warmup (``lr_scheduler.decay_style``, legacy
#: ``train.optimizer.lr_decay_style``).
DecayStyle = Literal["cosine", "linear", "constant"]
DECAY_STYLES: tuple[str, ...] = get_args(DecayStyle)

#: How token losses are aggregated over micro-batches and data-parallel ranks
#: (``loss.aggregation``, legacy ``train.optimizer.loss_aggregation``).
LossAggregation = Literal["token_weighted", "rank_average"]
LOSS_AGGREGATIONS: tuple[str, ...] = get_args(LossAggregation)

#: Activation checkpointing of the decoder layers (``activation_checkpoint.mode``, legacy
#: ``train.gradient_checkpointing.mode``); ``off`` and ``none`` both disable it.
ActivationCheckpointMode = Literal["off", "none", "full", "selective"]
AC_MODES: tuple[str, ...] = get_args(ActivationCheckpointMode)

#: ``optimizer.name``: the torch class names.
OptimizerName = Literal["AdamW", "Adam"]
OPTIMIZER_NAMES: tuple[str, ...] = get_args(OptimizerName)

#: The legacy ``train.optimizer.type`` spelling of each ``optimizer.name`` (lower case; the
#: runtime looks its optimizer class up by it).
OPTIMIZER_TYPE_OF_NAME: dict[str, str] = {name: name.lower() for name in OPTIMIZER_NAMES}
OPTIMIZER_TYPES: tuple[str, ...] = tuple(OPTIMIZER_TYPE_OF_NAME.values())
OPTIMIZER_NAME_OF_TYPE: dict[str, str] = {t: n for n, t in OPTIMIZER_TYPE_OF_NAME.items()}

#: ``checkpoint.async_mode`` (legacy ``train.checkpoint.save_async``: false / true).
AsyncMode = Literal["disabled", "async"]
ASYNC_MODES: tuple[str, ...] = get_args(AsyncMode)

#: ``checkpoint.export_hf_policy``: which saves ``checkpoint.export_hf`` exports -- ``final``,
#: the save at the end of training only; ``every_save``, each one (the legacy behaviour).
HfExportPolicy = Literal["final", "every_save"]
HF_EXPORT_POLICIES: tuple[str, ...] = get_args(HfExportPolicy)

#: ``checkpoint.export_hf_dtype``: the dtype of the Hugging Face export's floating tensors --
#: ``auto``, each tensor's dtype in the run's source checkpoint (the model's without one); or
#: one dtype for all of them.
HfExportDtype = Literal["auto", "float32", "bfloat16", "float16"]
HF_EXPORT_DTYPES: tuple[str, ...] = get_args(HfExportDtype)

#: ``parallelism.pipeline_parallel_schedule``: the ``torch.distributed.pipelining`` schedules
#: the trainer runs, by their torch names. ``GPipe`` and ``1F1B`` hold one stage per rank;
#: ``Interleaved1F1B`` and ``LoopedBFS`` several (looped placement: rank ``r`` holds stages
#: ``r, r + pp, ...``).
PipelineSchedule = Literal["GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS"]
PIPELINE_SCHEDULES: tuple[str, ...] = get_args(PipelineSchedule)
#: The schedules of :data:`PIPELINE_SCHEDULES` that hold one stage per rank.
SINGLE_STAGE_SCHEDULES: tuple[str, ...] = ("GPipe", "1F1B")
#: torch's other schedules, refused with the reason.
REFUSED_PIPELINE_SCHEDULES: dict[str, str] = {
    name: "it splits every backward into an input-gradient and a weight-gradient pass, which "
    "this trainer has not validated with FSDP's gradient reduction and the Gated DeltaNet's "
    "autograd; use 1F1B or Interleaved1F1B"
    for name in ("InterleavedZeroBubble", "ZBVZeroBubble", "DualPipeV")
}

#: The legacy ``train.accelerator.pp_schedule`` names (after :func:`normalized_pp_schedule`)
#: and the schedule each runs; ``1f1b`` with ``pp_vpp > 1`` runs ``Interleaved1F1B`` too.
PP_SCHEDULE_OF_LEGACY: dict[str, str] = {
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved_1f1b": "Interleaved1F1B",
}
LEGACY_PP_SCHEDULES: tuple[str, ...] = tuple(PP_SCHEDULE_OF_LEGACY)


def normalized_pp_schedule(name: object) -> str:
    """A legacy ``pp_schedule`` spelled as :data:`LEGACY_PP_SCHEDULES` spells it: case and
    ``-`` / ``_`` are not significant (``1F1B``, ``Interleaved-1F1B``)."""
    return str(name).strip().lower().replace("-", "_")


#: A parameter whose lower-cased name contains one of these is not weight-decayed (the default
#: of ``optimizer.no_decay_keywords``). A substring rule: ``q_norm``, ``input_layernorm``,
#: ``linear_attn.norm`` and ``dt_bias`` match.
NO_DECAY_KEYWORDS: tuple[str, ...] = ("bias", "layernorm", "norm", "rmsnorm")

#: The label value excluded from the loss: collate pads labels with it and the next-token shift
#: pads the last position with it.
IGNORE_INDEX = -100

#: The kernel back ends of a model (``model.kernels``, legacy ``model.kernels``): ``auto`` --
#: fla-core's kernels when the layer's parameters are on a CUDA device and the package imports,
#: the plain torch path otherwise; ``torch`` -- always the plain torch path (the reference, any
#: device); ``fla`` -- always fla-core's kernels, a ``ConfigError`` on a CPU or without the
#: package.
KernelChoice = Literal["auto", "torch", "fla"]
KERNEL_CHOICES: tuple[str, ...] = get_args(KernelChoice)
#: The choice a model runs with when nothing is said.
DEFAULT_KERNELS = "auto"

#: Which tokens a token attends to (``model.attn_mask_type``, legacy
#: ``model.config_overrides.attn_mask_type``; torchtitan's name and values): ``causal`` --
#: every earlier token of its row; ``block_causal`` -- the earlier tokens of its own document,
#: where a row's ``position_ids`` restart at 0 each document starts (every token mixer of the
#: model keeps the documents apart: :mod:`hyper_parallel.utils.documents`).
AttnMaskType = Literal["causal", "block_causal"]
ATTN_MASK_TYPES: tuple[str, ...] = get_args(AttnMaskType)
#: The mask a model runs with when nothing is said (the whole row, as before packing).
DEFAULT_ATTN_MASK_TYPE = "causal"
#: The mask that keeps a packed row's documents apart.
BLOCK_CAUSAL = "block_causal"

#: How a mixture-of-experts layer computes its experts (``experts_implementation`` of the MoE
#: model): ``grouped_mm`` -- one grouped GEMM per projection over every expert's rows
#: (``torch._grouped_mm``); ``loop`` -- one matmul per expert, the reference it is tested
#: against.
ExpertsImplementation = Literal["grouped_mm", "loop"]
EXPERTS_IMPLEMENTATIONS: tuple[str, ...] = get_args(ExpertsImplementation)
DEFAULT_EXPERTS_IMPLEMENTATION = "grouped_mm"

#: How the Gated DeltaNet layers run under context parallelism
#: (``parallelism.context_parallel_linear_attention_mode``, legacy
#: ``train.accelerator.linear_attention_cp_mode``): ``ulysses`` -- an all-to-all gives each rank
#: the whole sequence of its share of the heads (key and value heads must divide by the
#: degree); ``p2p`` -- state passing: each rank keeps its shard of every head and receives the
#: recurrent state of the shards before it.
CpLinearAttentionMode = Literal["ulysses", "p2p"]
CP_LINEAR_ATTENTION_MODES: tuple[str, ...] = get_args(CpLinearAttentionMode)
#: How the full-attention layers run under context parallelism, as
#: ``parallelism.context_parallel_ulysses_degree`` selects it: ``ulysses`` (unset or equal to
#: the degree) -- an all-to-all from sequence shards to head shards and back; ``allgather``
#: (1) -- K and V all-gathered, each rank attends its own queries.
CP_ATTENTION_MODES: tuple[str, ...] = ("ulysses", "allgather")

#: The legacy ``train.logging.report_to`` values: ``wandb`` is another spelling of
#: ``train.wandb.enabled: true`` (``metrics.enable_wandb``); ``none`` leaves the switch to it.
#: TensorBoard has its own switch (``train.tensorboard.enabled``).
LEGACY_REPORT_TO: tuple[str, ...] = ("none", "wandb")


__all__ = [
    "AC_MODES",
    "ASYNC_MODES",
    "ATTN_MASK_TYPES",
    "BLOCK_CAUSAL",
    "CP_ATTENTION_MODES",
    "CP_LINEAR_ATTENTION_MODES",
    "DECAY_STYLES",
    "DEFAULT_ATTN_MASK_TYPE",
    "DEFAULT_EXPERTS_IMPLEMENTATION",
    "DEFAULT_KERNELS",
    "EXPERTS_IMPLEMENTATIONS",
    "HF_EXPORT_DTYPES",
    "HF_EXPORT_POLICIES",
    "IGNORE_INDEX",
    "KERNEL_CHOICES",
    "LEGACY_PP_SCHEDULES",
    "LEGACY_REPORT_TO",
    "LOSS_AGGREGATIONS",
    "NO_DECAY_KEYWORDS",
    "OPTIMIZER_NAMES",
    "OPTIMIZER_NAME_OF_TYPE",
    "OPTIMIZER_TYPES",
    "OPTIMIZER_TYPE_OF_NAME",
    "PIPELINE_SCHEDULES",
    "PP_SCHEDULE_OF_LEGACY",
    "REFUSED_PIPELINE_SCHEDULES",
    "SINGLE_STAGE_SCHEDULES",
    "ActivationCheckpointMode",
    "AsyncMode",
    "AttnMaskType",
    "CpLinearAttentionMode",
    "DecayStyle",
    "ExpertsImplementation",
    "HfExportDtype",
    "HfExportPolicy",
    "KernelChoice",
    "LossAggregation",
    "OptimizerName",
    "PipelineSchedule",
    "normalized_pp_schedule",
]
