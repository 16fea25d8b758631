"""The hand-written halves of the field table's ``transform`` rows.

A legacy field that does not map one-to-one onto a field of the new tree is a ``transform`` row
in ``codegen/field_table.yaml``. The row names three plain functions defined here:

* ``forward(**legacy_values, **read_values) -> {new_name: value}`` -- legacy -> new, called by
  the generated ``legacy_to_trainer_config``;
* ``backward(**new_values, **read_values) -> {legacy_name: value}`` -- new -> legacy, called by
  the generated ``trainer_config_to_legacy``;
* ``canonical(**legacy_values, **read_values) -> {legacy_name: (canonical_value, why)}`` -- the
  legacy fields whose value is one of several spellings of the same behaviour, rewritten to the
  one spelling that ``backward`` produces, each with the reason; called by the generated
  ``canonicalize_legacy``. It returns only the fields it changes.

The keyword names are the row's local names (the keys of its ``legacy`` / ``new`` / ``reads`` /
``reads_new`` mappings), so the generated call sites read like the table. The contract, checked
by ``tests/torch/ut/config/test_legacy_roundtrip.py`` over random legacy configs::

    backward(forward(x)) == canonical(x)        forward(backward(forward(x))) == forward(x)

A ``ValueError`` raised by ``backward`` (a new-tree value with no legacy spelling) is turned into
a ``ConfigError`` naming the new-tree fields by the generated adapter.

This module imports no framework (no torch, no mindspore): the warmup rule it shares with the LR
schedule is the framework-free ``hyper_parallel.utils.lr_warmup.warmup_steps_from_ratio``; the
legacy trainer's other rule that it mirrors (the FSDP2 no-op casts) is restated here and pinned
by tests against the original.
"""

from __future__ import annotations

import math
from typing import Any

from hyper_parallel.platform.dtypes import canonical_dtype_name
from hyper_parallel.utils.choices import (
    ASYNC_MODES,
    ATTN_MASK_TYPES,
    DEFAULT_ATTN_MASK_TYPE,
    OPTIMIZER_NAME_OF_TYPE,
    PP_SCHEDULE_OF_LEGACY,
    normalized_pp_schedule,
)
from hyper_parallel.utils.data_types import TEMPLATES, setting_problems
from hyper_parallel.utils.lr_warmup import warmup_steps_from_ratio

Changes = dict[str, tuple[Any, str]]

# ----------------------------------------------------------------------------------------------
# train.accelerator.dp_shard + dp  <->  parallelism.data_parallel_shard_degree
# ----------------------------------------------------------------------------------------------


_DP_FOLDED = (
    "the legacy alias train.accelerator.dp is read as dp_shard when dp_shard is unset; "
    "written as dp_shard"
)
_DP_IGNORED = (
    "ignored: train.accelerator.dp_shard is set, and dp is only read when dp_shard is unset"
)


def dp_shard_forward(*, dp_shard: int | None, dp: int | None) -> dict[str, Any]:
    """The FSDP degree the legacy ``ParallelDims.from_config`` uses: ``dp_shard``, else the old
    single ``dp`` field, else unset (which means 1)."""
    return {"data_parallel_shard_degree": dp_shard if dp_shard is not None else dp}


def dp_shard_backward(*, data_parallel_shard_degree: int | None) -> dict[str, Any]:
    """Always written to ``dp_shard``; the legacy alias ``dp`` stays unset."""
    return {"dp_shard": data_parallel_shard_degree, "dp": None}


def dp_shard_canonical(*, dp_shard: int | None, dp: int | None) -> Changes:
    """``dp`` is an alias read only when ``dp_shard`` is unset: fold it into ``dp_shard``."""
    if dp is None:
        return {}
    if dp_shard is None:
        return {
            "dp_shard": (dp, _DP_FOLDED),
            "dp": (None, "folded into train.accelerator.dp_shard"),
        }
    return {"dp": (None, _DP_IGNORED)}


# ----------------------------------------------------------------------------------------------
# train.mixed_precision.{enabled, param_dtype, reduce_dtype, output_dtype}
#   <->  training.mixed_precision_{param, reduce, output}
# ----------------------------------------------------------------------------------------------

#: The legacy defaults of the dtype fields (what a disabled section is written back as).
_MP_DEFAULTS = {"param_dtype": "bfloat16", "reduce_dtype": "float32", "output_dtype": None}
#: The new-tree spelling of "no mixed precision": FSDP2 skips a cast to the parameter dtype
#: (float32 masters) and a reduce dtype equal to the param dtype, so this policy changes nothing.
_MP_OFF = ("float32", "float32", None)


_MP_UNREAD = "unread while train.mixed_precision.enabled is false; reset to its default"
_MP_UNREAD_OFF = "unread once mixed precision is off; reset to its default"
_MP_NOOP = (
    "a float32 param / float32 reduce policy without an output dtype casts nothing (the "
    "masters are float32): mixed precision is off"
)


def _dtype(name: str | None) -> str | None:
    return None if name is None else canonical_dtype_name(name)


def mixed_precision_forward(
    *, enabled: bool, param_dtype: str, reduce_dtype: str, output_dtype: str | None
) -> dict[str, Any]:
    """Disabled -> float32 / float32 / unset; enabled -> the canonical dtype names."""
    if not enabled:
        param, reduce, output = _MP_OFF
    else:
        param, reduce, output = _dtype(param_dtype), _dtype(reduce_dtype), _dtype(output_dtype)
    return {
        "mixed_precision_param": param,
        "mixed_precision_reduce": reduce,
        "mixed_precision_output": output,
    }


def mixed_precision_backward(
    *,
    mixed_precision_param: str,
    mixed_precision_reduce: str,
    mixed_precision_output: str | None,
) -> dict[str, Any]:
    """float32 / float32 / unset -> disabled (dtype fields at their defaults); else enabled."""
    policy = (mixed_precision_param, mixed_precision_reduce, mixed_precision_output)
    if policy == _MP_OFF:
        return {"enabled": False, **_MP_DEFAULTS}
    return {
        "enabled": True,
        "param_dtype": mixed_precision_param,
        "reduce_dtype": mixed_precision_reduce,
        "output_dtype": mixed_precision_output,
    }


def mixed_precision_canonical(
    *, enabled: bool, param_dtype: str, reduce_dtype: str, output_dtype: str | None
) -> Changes:
    """Disabled: the dtype fields are unread, so they go back to their defaults. Enabled:
    dtype aliases (``bf16``, ``fp32``, ``half``, ...) become their canonical names, and a
    float32 / float32 / unset policy (a no-op for FSDP2) becomes ``enabled: false``."""
    current = {"param_dtype": param_dtype, "reduce_dtype": reduce_dtype,
               "output_dtype": output_dtype}
    changes: Changes = {}
    if not enabled:
        for name, default in _MP_DEFAULTS.items():
            if current[name] != default:
                changes[name] = (default, _MP_UNREAD)
        return changes
    canonical = {name: _dtype(value) for name, value in current.items()}
    if (canonical["param_dtype"], canonical["reduce_dtype"], canonical["output_dtype"]) == _MP_OFF:
        changes["enabled"] = (False, _MP_NOOP)
        for name, default in _MP_DEFAULTS.items():
            if current[name] != default:
                changes[name] = (default, _MP_UNREAD_OFF)
        return changes
    for name, value in canonical.items():
        if value != current[name]:
            why = f"dtype alias {current[name]!r} written as its canonical name {value!r}"
            changes[name] = (value, why)
    return changes


# ----------------------------------------------------------------------------------------------
# train.optimizer.lr_warmup_ratio (+ train.max_steps)  <->  lr_scheduler.warmup_steps
# ----------------------------------------------------------------------------------------------


def ratio_for_warmup_steps(warmup_steps: int, max_steps: int) -> float:
    """The ratio closest to ``warmup_steps / max_steps`` for which the legacy rule gives back
    exactly ``warmup_steps`` (after clamping to ``[0, max_steps]``)."""
    steps = min(max(warmup_steps, 0), max_steps)
    ratio = steps / max_steps
    # ``steps / max_steps`` can round up so that ceil(max_steps * ratio) == steps + 1; walk to
    # the neighbouring doubles until the legacy rule reproduces ``steps``.
    while ratio > 0.0 and warmup_steps_from_ratio(max_steps, ratio) > steps:
        ratio = math.nextafter(ratio, 0.0)
    while ratio < 1.0 and warmup_steps_from_ratio(max_steps, ratio) < steps:
        ratio = math.nextafter(ratio, 1.0)
    return ratio


def warmup_forward(*, lr_warmup_ratio: float, max_steps: int) -> dict[str, Any]:
    """Warmup steps = ``ceil(max_steps * lr_warmup_ratio)`` (the legacy rule)."""
    return {"warmup_steps": warmup_steps_from_ratio(max_steps, lr_warmup_ratio)}


def warmup_backward(*, warmup_steps: int, steps: int) -> dict[str, Any]:
    """The ratio that gives ``warmup_steps`` over ``training.steps``. The LR scheduler clamps a
    warmup longer than the run to the run, so more steps than ``steps`` are written as 1.0."""
    return {"lr_warmup_ratio": ratio_for_warmup_steps(warmup_steps, steps)}


def warmup_canonical(*, lr_warmup_ratio: float, max_steps: int) -> Changes:
    """Only ``ceil(max_steps * ratio)`` matters: every ratio is written as the canonical ratio
    of its number of warmup steps."""
    steps = warmup_steps_from_ratio(max_steps, lr_warmup_ratio)
    ratio = ratio_for_warmup_steps(steps, max_steps)
    if ratio == lr_warmup_ratio:
        return {}
    why = (
        f"with train.max_steps={max_steps} the ratio {lr_warmup_ratio!r} gives "
        f"ceil({max_steps} x {lr_warmup_ratio!r}) = {steps} warmup steps, and {ratio!r} is "
        f"the canonical ratio for {steps} steps"
    )
    return {"lr_warmup_ratio": (ratio, why)}


# ----------------------------------------------------------------------------------------------
# train.optimizer.type  <->  optimizer.name
# ----------------------------------------------------------------------------------------------

#: Legacy ``train.optimizer.type`` -> ``OptimizersContainer.Config.name`` (torch class names).
OPTIMIZER_CLASS_NAMES = OPTIMIZER_NAME_OF_TYPE


def optimizer_name_forward(*, type: str) -> dict[str, Any]:
    return {"name": OPTIMIZER_CLASS_NAMES[type]}


def optimizer_name_backward(*, name: str) -> dict[str, Any]:
    legacy = {cls: key for key, cls in OPTIMIZER_CLASS_NAMES.items()}
    if name not in legacy:
        raise ValueError(
            f"optimizer {name!r} has no legacy train.optimizer.type; the legacy schema knows "
            f"{', '.join(sorted(legacy))}"
        )
    return {"type": legacy[name]}


# ----------------------------------------------------------------------------------------------
# train.checkpoint.save_async  <->  checkpoint.async_mode
# ----------------------------------------------------------------------------------------------


def async_mode_forward(*, save_async: bool) -> dict[str, Any]:
    return {"async_mode": "async" if save_async else "disabled"}


def async_mode_backward(*, async_mode: str) -> dict[str, Any]:
    if async_mode not in ASYNC_MODES:
        raise ValueError(f"async_mode {async_mode!r} has no legacy train.checkpoint.save_async")
    return {"save_async": async_mode == "async"}


# ----------------------------------------------------------------------------------------------
# model.tokenizer_path -> tokenizer.path, train.checkpoint.load_path -> checkpoint.load_path
# ----------------------------------------------------------------------------------------------


def empty_is_unset_forward(*, path: str | None) -> dict[str, Any]:
    """The legacy trainer tests these paths for truth, so ``""`` behaves as unset; the new
    Configs accept only a non-empty path or None."""
    return {"path": None if path == "" else path}


def empty_is_unset_backward(*, path: str | None) -> dict[str, Any]:
    return {"path": path}


def empty_is_unset_canonical(*, path: str | None) -> Changes:
    if path == "":
        return {"path": (None, "an empty path is read as unset by the legacy trainer")}
    return {}




# ----------------------------------------------------------------------------------------------
# model.config_overrides (its attn_mask_type)  <->  model.config_overrides + model.attn_mask_type
# ----------------------------------------------------------------------------------------------

#: The key of ``model.config_overrides`` that the new tree holds as ``model.attn_mask_type``.
ATTN_MASK_TYPE_KEY = "attn_mask_type"


def attn_mask_type_forward(*, config_overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The legacy schema sets the mask as a model-config field, in ``config_overrides``; the new
    tree has its own field for it. A value it does not take stays in ``config_overrides``,
    where the model's check names it (with the valid ones)."""
    value = (config_overrides or {}).get(ATTN_MASK_TYPE_KEY)
    if value not in ATTN_MASK_TYPES:
        return {"config_overrides": config_overrides, "attn_mask_type": DEFAULT_ATTN_MASK_TYPE}
    rest = {k: v for k, v in config_overrides.items() if k != ATTN_MASK_TYPE_KEY}
    return {"config_overrides": rest or None, "attn_mask_type": value}


def attn_mask_type_backward(
    *, config_overrides: dict[str, Any] | None, attn_mask_type: str
) -> dict[str, Any]:
    """``model.attn_mask_type`` into ``config_overrides`` when it is not the default. A
    ``config_overrides`` that states the mask itself keeps it: it is what the new tree applies
    too (config_overrides is merged last)."""
    if attn_mask_type == DEFAULT_ATTN_MASK_TYPE:
        return {"config_overrides": config_overrides}
    return {"config_overrides": {ATTN_MASK_TYPE_KEY: attn_mask_type, **(config_overrides or {})}}


def attn_mask_type_canonical(*, config_overrides: dict[str, Any] | None) -> Changes:
    if (config_overrides or {}).get(ATTN_MASK_TYPE_KEY) != DEFAULT_ATTN_MASK_TYPE:
        return {}
    rest = {k: v for k, v in config_overrides.items() if k != ATTN_MASK_TYPE_KEY}
    why = f"{ATTN_MASK_TYPE_KEY}: {DEFAULT_ATTN_MASK_TYPE} is the default"
    return {"config_overrides": (rest or None, why)}


# ----------------------------------------------------------------------------------------------
# data.template  <->  dataloader.template
# ----------------------------------------------------------------------------------------------

#: The legacy trainer formats a ``json_file`` record as prompt-masked SFT for ``empty`` and as
#: ``Human: ...`` / ``Assistant: ...`` text for every other template name.
MASKED_TEMPLATE, HUMAN_ASSISTANT = TEMPLATES


def template_forward(*, template: str) -> dict[str, Any]:
    return {"template": MASKED_TEMPLATE if template == MASKED_TEMPLATE else HUMAN_ASSISTANT}


def template_backward(*, template: str) -> dict[str, Any]:
    return {"template": template}


def template_canonical(*, template: str) -> Changes:
    if template in TEMPLATES:
        return {}
    why = (f"the legacy trainer formats every template but {MASKED_TEMPLATE!r} as "
           f"Human/Assistant text, written {HUMAN_ASSISTANT!r}")
    return {"template": (HUMAN_ASSISTANT, why)}


# ----------------------------------------------------------------------------------------------
# data.shuffle (+ data.type)  <->  dataloader.shuffle
# ----------------------------------------------------------------------------------------------


def shuffle_forward(*, shuffle: bool, type: str) -> dict[str, Any]:
    """Replayed batches keep their file order: the legacy trainer never shuffles them."""
    return {"shuffle": shuffle and not setting_problems(type, shuffle=shuffle)}


def shuffle_backward(*, shuffle: bool) -> dict[str, Any]:
    return {"shuffle": shuffle}


def shuffle_canonical(*, shuffle: bool, type: str) -> Changes:
    if setting_problems(type, shuffle=shuffle):
        return {"shuffle": (False, f"data.type {type} replays the file's batches in order; the "
                                   "legacy trainer never shuffles them")}
    return {}


# ----------------------------------------------------------------------------------------------
# train.moe_monitor.{enabled, lr} -> moe.load_balance_coeff
# ----------------------------------------------------------------------------------------------
#: The legacy default of ``train.moe_monitor.lr`` (what an unset coefficient converts back to).
_MOE_MONITOR_LR = 1e-3


def expert_bias_forward(*, enabled: bool, lr: float) -> dict[str, Any]:
    """The legacy switch and rate are one setting here: the rate, or unset for off."""
    return {"coeff": lr if enabled else None}


def expert_bias_backward(*, coeff: float | None) -> dict[str, Any]:
    if coeff is None:
        return {"enabled": False, "lr": _MOE_MONITOR_LR}
    return {"enabled": True, "lr": coeff}


def expert_bias_canonical(*, enabled: bool, lr: float) -> Changes:
    if not enabled and lr != _MOE_MONITOR_LR:
        return {"lr": (_MOE_MONITOR_LR,
                       "train.moe_monitor.enabled is false, so its lr is never used")}
    return {}


# ----------------------------------------------------------------------------------------------
# train.wandb.enabled + train.logging.report_to  <->  metrics.enable_wandb
# ----------------------------------------------------------------------------------------------
#: The ``report_to`` value that switches Weights & Biases on (the legacy schema allows it and
#: ``none``).
_REPORT_TO_WANDB = "wandb"


def wandb_switch_forward(*, enabled: bool, report_to: str) -> dict[str, Any]:
    """``report_to: wandb`` is another spelling of ``train.wandb.enabled: true``."""
    return {"enable": enabled or report_to == _REPORT_TO_WANDB}


def wandb_switch_backward(*, enable: bool) -> dict[str, Any]:
    return {"enabled": enable, "report_to": "none"}


def wandb_switch_canonical(*, enabled: bool, report_to: str) -> Changes:
    if report_to != _REPORT_TO_WANDB:
        return {}
    why = "train.logging.report_to: wandb is written as train.wandb.enabled: true"
    changes: Changes = {"report_to": ("none", why)}
    if not enabled:
        changes["enabled"] = (True, why)
    return changes


#: The ``forward`` functions above that hand their new fields values of the row's first legacy
#: field unchanged -> for each new field, in the row's order, where in that legacy field its
#: value is ("" for the field itself, ".key" for a key of a mapping), so that an error about
#: the new field can name that legacy key instead (``LLMTrainer``'s error translation:
#: ``model.attn_mask_type`` -> ``model.config_overrides.attn_mask_type``, an error on
#: ``model.config_overrides.flavor`` -> the same key). The other transforms change the value (a
#: ratio into steps, a bool into a mode, a dtype alias into its name), so an error about their
#: new field keeps the new name and only mentions the legacy fields.
VALUE_PRESERVING_FORWARDS: dict[str, tuple[str, ...]] = {
    "dp_shard_forward": ("",),
    "empty_is_unset_forward": ("",),
    # config_overrides keeps its other keys as written; a valid mask type is its own key's.
    "attn_mask_type_forward": ("", f".{ATTN_MASK_TYPE_KEY}"),
}


__all__ = [
    "OPTIMIZER_CLASS_NAMES",
    "VALUE_PRESERVING_FORWARDS",
    "async_mode_backward",
    "async_mode_forward",
    "dp_shard_backward",
    "dp_shard_canonical",
    "dp_shard_forward",
    "empty_is_unset_backward",
    "empty_is_unset_canonical",
    "empty_is_unset_forward",
    "expert_bias_backward",
    "expert_bias_canonical",
    "expert_bias_forward",
    "mixed_precision_backward",
    "mixed_precision_canonical",
    "mixed_precision_forward",
    "optimizer_name_backward",
    "optimizer_name_forward",
    "ratio_for_warmup_steps",
    "wandb_switch_backward",
    "wandb_switch_canonical",
    "wandb_switch_forward",
    "warmup_backward",
    "warmup_canonical",
    "warmup_forward",
    "warmup_steps_from_ratio",
]


# ----------------------------------------------------------------------------------------------
# train.accelerator.pp_schedule + pp_vpp  <->  parallelism.pipeline_parallel_schedule +
# pipeline_parallel_stages_per_rank
# ----------------------------------------------------------------------------------------------


def pp_schedule_forward(*, pp_schedule: str, pp_vpp: int) -> dict[str, Any]:
    """The legacy trainer runs interleaved 1F1B whenever a rank holds several stages."""
    name = normalized_pp_schedule(pp_schedule)
    schedule = "Interleaved1F1B" if pp_vpp > 1 else PP_SCHEDULE_OF_LEGACY.get(name, pp_schedule)
    return {"schedule": schedule, "stages_per_rank": pp_vpp if pp_vpp > 1 else None}


def pp_schedule_backward(*, schedule: str, stages_per_rank: int | None) -> dict[str, Any]:
    if schedule in ("GPipe", "1F1B"):
        if stages_per_rank not in (None, 1):
            raise ValueError(
                f"{schedule} with {stages_per_rank} stages per rank has no legacy spelling "
                "(pp_vpp > 1 runs interleaved 1F1B)"
            )
        return {"pp_schedule": schedule.lower(), "pp_vpp": 1}
    if schedule == "Interleaved1F1B":
        return {"pp_schedule": "1f1b", "pp_vpp": stages_per_rank or 2}
    raise ValueError(
        f"the pipeline schedule {schedule!r} has no legacy train.accelerator.pp_schedule; the "
        f"legacy schema runs {', '.join(PP_SCHEDULE_OF_LEGACY.values())}"
    )


def pp_schedule_canonical(*, pp_schedule: str, pp_vpp: int) -> Changes:
    name = normalized_pp_schedule(pp_schedule)
    if pp_vpp > 1 and name != "1f1b":
        return {"pp_schedule": ("1f1b", "pp_vpp > 1 runs interleaved 1F1B; written as 1f1b")}
    if name != pp_schedule:
        return {"pp_schedule": (name, "schedule names ignore case and '-' / '_'")}
    return {}
