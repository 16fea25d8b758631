"""The adapter's contract, as property tests over random legacy configs.

With ``f = legacy_to_trainer_config``, ``g = trainer_config_to_legacy`` and
``canon = canonicalize_legacy``:

* ``g(f(x)) == canon(x)``;
* ``f(g(y)) == y`` for ``y = f(x)``;
* ``canon`` is idempotent, changes exactly the fields it reports (with the old and new values),
  and changes no meaning: ``f(canon(x)) == f(x)``;
* every example YAML is canonical and round-trips field for field.

The random configs are generated from the legacy schema itself: every leaf field of
``HyperTrainerConfig`` is drawn according to its declared type (walked with ``dataclasses``),
string fields with a closed set of values draw from the schema module's own constants
(``DATA_TYPES``, ``DTYPE_NAMES``, ...), and numbers from the bounds its ``__post_init__`` enforces
-- ``test_bounds_are_the_schema_s_own`` proves each bound is tight. At least 500 examples run by
default; ``HYPER_PARALLEL_FUZZ_CASES=N`` runs N.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import operator
import os
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hyper_parallel.trainer.config as schema
import hyper_parallel.trainer.legacy_rules as rules
from hyper_parallel.config import transforms
from hyper_parallel.config.legacy_adapter import (
    FIELD_MAP,
    legacy_to_trainer_config,
    trainer_config_to_legacy,
    canonicalize_legacy,
)
from hyper_parallel.platform.dtypes import DTYPE_NAMES
from hyper_parallel.trainer.config import ConfigError, HyperTrainerConfig, parse_args
from hyper_parallel.trainer.hyper_trainer import HyperTrainer
from hyper_parallel.utils.choices import (
    AC_MODES,
    CP_LINEAR_ATTENTION_MODES,
    DECAY_STYLES,
    KERNEL_CHOICES,
    LEGACY_PP_SCHEDULES,
    LEGACY_REPORT_TO,
    LOSS_AGGREGATIONS,
    OPTIMIZER_TYPES,
    normalized_pp_schedule,
)
from hyper_parallel.utils.data_types import DATA_TYPES, PACKING_TYPES, STREAMING_TYPES

REPO = Path(__file__).resolve().parents[4]
EXAMPLES = sorted((REPO / "examples" / "yaml").glob("*.yaml"))
CASES = max(500, int(os.environ.get("HYPER_PARALLEL_FUZZ_CASES", "500")))

# ---------------------------------------------------------------------------- the schema

#: String fields with a closed set of values -> the schema's constants (and their homes).
CHOICES: dict[str, tuple] = {
    "data.type": DATA_TYPES,
    "train.init_device": rules.INIT_DEVICES,
    "train.mixed_precision.param_dtype": DTYPE_NAMES,
    "train.mixed_precision.reduce_dtype": DTYPE_NAMES,
    "train.mixed_precision.output_dtype": DTYPE_NAMES,
    "train.gradient_checkpointing.activation_checkpoint": AC_MODES,
    "train.optimizer.type": OPTIMIZER_TYPES,
    "train.optimizer.lr_decay_style": DECAY_STYLES,
    "train.optimizer.loss_aggregation": LOSS_AGGREGATIONS,
    "model.kernels": KERNEL_CHOICES,
    "train.logging.report_to": LEGACY_REPORT_TO,
    "train.accelerator.linear_attention_cp_mode": CP_LINEAR_ATTENTION_MODES,
    # Every spelling the schema accepts (case and '-' / '_' are not significant).
    "train.accelerator.pp_schedule": (*LEGACY_PP_SCHEDULES, "GPipe", "1F1B", "Interleaved-1F1B"),
}

#: Lower bounds of the integer fields (``_at_least`` in the schema's ``__post_init__``); the
#: others are >= 0 (checked by test_bounds_are_the_schema_s_own).
INT_MIN: dict[str, int] = {
    "data.max_seq_len": 2,
    "data.prefetch_factor": 1,
    "train.max_steps": 1,
    "train.num_train_epochs": 1,
    "train.global_batch_size": 1,
    "train.micro_batch_size": 1,
    "train.init_timeout_seconds": 1,
    "train.train_timeout_seconds": 1,
    "train.accelerator.dp": 1,
    "train.accelerator.dp_replicate": 1,
    "train.accelerator.dp_shard": 1,
    "train.accelerator.tp": 1,
    "train.accelerator.cp": 1,
    "train.accelerator.pp": 1,
    "train.accelerator.ep": 1,
    "train.accelerator.etp": 1,
    "train.accelerator.pp_micro_batch_num": 1,
    "train.accelerator.pp_vpp": 1,
    "train.accelerator.pp_layer_split": 1,
    "train.accelerator.ulysses_degree": 1,
    "train.logging.log_steps": 1,
    "train.logging.model_flops_per_token": 1,
    "train.tensorboard.log_steps": 1,
    "train.wandb.log_steps": 1,
    "train.profile.active_steps": 1,
    "data.train_size": 1,
    "data.vl_grid_t": 1,
    "data.vl_grid_h": 1,
    "data.vl_grid_w": 1,
    "train.memory_monitor.log_steps": 1,
    **{f"model.{n}": 1 for n in ("num_hidden_layers", "hidden_size", "intermediate_size",
                                 "num_attention_heads", "num_key_value_heads", "vocab_size",
                                 "max_position_embeddings")},
}
#: Values allowed below the bound.
INT_EXTRA: dict[str, tuple] = {"train.accelerator.dp_shard": (-1,)}

#: (low, high, low excluded) of the float fields.
FLOAT_RANGE: dict[str, tuple[float, float, bool]] = {
    "train.optimizer.lr": (0.0, 10.0, False),
    "train.optimizer.lr_min": (0.0, 10.0, False),
    "train.optimizer.lr_warmup_ratio": (0.0, 1.0, False),
    "train.optimizer.weight_decay": (0.0, 1.0, False),
    "train.optimizer.max_grad_norm": (-1.0, 1e9, False),
    "train.optimizer.eps": (0.0, 1.0, True),
    "train.logging.peak_tflops": (0.0, 1e4, True),
    "train.moe_monitor.lr": (0.0, 1.0, False),
}

#: Paths the legacy trainer tests for truth, where "" is a legal (unset) spelling.
EMPTY_OK = {"model.weights_path", "model.tokenizer_path", "train.checkpoint.load_path"}

_word = st.text(alphabet="abcxyz019_-./", min_size=1, max_size=8)


def _comm_backend() -> st.SearchStrategy:
    one = st.tuples(st.sampled_from(["", "cpu:", "cuda:", "npu:"]),
                    st.sampled_from(rules.COMM_BACKENDS)).map("".join)
    return st.lists(one, min_size=1, max_size=2).map(",".join)


def _unsupported_defaults() -> dict[str, Any]:
    """The legacy keys of ``unsupported`` rows, at their defaults: any other value is refused
    on conversion (the probes and tests/torch/ut/config/test_legacy_schema_coverage.py)."""
    defaults = _leaves(HyperTrainerConfig())
    return {key: defaults[key] for row in FIELD_MAP if not row.new for key in row.legacy}


def _leaf(path: str, tp: Any) -> st.SearchStrategy:
    """Values of one legacy field, from its declared type and the schema's constraints."""
    if path in UNSUPPORTED:
        return st.just(copy.deepcopy(UNSUPPORTED[path]))
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    union = origin in (typing.Union, types.UnionType)
    if union and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return st.none() | _leaf(path, functools.reduce(operator.or_, inner))
    if union:  # int | list[int]: either arm
        return st.one_of(*(_leaf(path, arm) for arm in args))
    if path == "train.comm_backend":
        return _comm_backend()
    if path in CHOICES:
        return st.sampled_from(CHOICES[path])
    if tp is bool:
        return st.booleans()
    if tp is int:
        low = INT_MIN.get(path, 0)
        values = st.integers(min_value=low, max_value=low + 4096)
        return st.sampled_from(INT_EXTRA[path]) | values if path in INT_EXTRA else values
    if tp is float:
        low, high, exclude = FLOAT_RANGE[path]
        return st.floats(min_value=low, max_value=high, exclude_min=exclude, allow_nan=False)
    if tp is str:
        return (st.just("") | _word) if path in EMPTY_OK else _word
    if origin is list:
        return st.lists(_leaf(path, args[0]), max_size=3)
    if origin is tuple:  # betas: two numbers in [0, 1)
        item = st.floats(min_value=0.0, max_value=1.0, exclude_max=True, allow_nan=False)
        return st.tuples(*[item for _ in args])
    if origin is dict:
        value = st.one_of(st.integers(-5, 5), _word, st.booleans(), st.none())
        return st.dictionaries(_word, value, max_size=3)
    raise TypeError(f"{path}: no strategy for {tp!r}; extend _leaf")


def _fix(path: str, kwargs: dict) -> None:
    """The schema's cross-field rules, applied to a draw instead of rejecting it."""
    if path == "data":
        if kwargs["type"] != "dummy" and kwargs["train_path"] is None:
            kwargs["train_path"] = "corpus.jsonl"
        # A stream is read by the datasets library, in the training process.
        if kwargs["type"] not in STREAMING_TYPES:
            kwargs["streaming"] = False
        if kwargs["streaming"]:
            kwargs["num_workers"] = 0
        # Packing needs documents (not the synthetic or preset types) and the whole dataset
        # (not a stream). Its other rule, model.config_overrides.attn_mask_type block_causal,
        # is the model's, refused when the model is built: conversion carries any pair.
        if kwargs["type"] not in PACKING_TYPES or kwargs["streaming"]:
            kwargs["packing"] = False
        if kwargs["num_workers"] == 0:
            kwargs["prefetch_factor"] = None
        if kwargs["type"] != "hf_datasets":
            kwargs["subset"] = None
        if kwargs["type"] != "json_file":
            kwargs["template"] = "empty"
    elif path == "train":
        kwargs["global_batch_size"] = max(kwargs["global_batch_size"], kwargs["micro_batch_size"])
    elif path == "train.optimizer":
        if kwargs["lr_decay_style"] != "constant":
            kwargs["lr_min"] = min(kwargs["lr_min"], kwargs["lr"])
    elif path == "train.accelerator":
        # Several stages per rank run interleaved 1F1B, and interleaved needs several.
        schedule = normalized_pp_schedule(kwargs["pp_schedule"])
        if kwargs["pp_vpp"] > 1 and schedule == "gpipe":
            kwargs["pp_schedule"] = "1f1b"
        if kwargs["pp_vpp"] == 1 and schedule == "interleaved_1f1b":
            kwargs["pp_vpp"] = 2
        # Backward prefetching needs the parameters resharded after the forward.
        if not kwargs["reshard_after_forward"]:
            kwargs["fsdp_backward_prefetch"] = 0
    elif path == "train.gradient_checkpointing":
        # A layer count only applies with activation checkpointing on.
        if kwargs["activation_checkpoint"] in ("off", "none"):
            kwargs["num_layers"] = None
    elif path == "train.eval":
        if kwargs["eval_steps"] == 0:
            kwargs["eval_dataset"] = None
        elif kwargs["eval_dataset"] is None:
            kwargs["eval_dataset"] = "valid.jsonl"


def _section_strategy(cls: type, prefix: str) -> st.SearchStrategy:
    """A whole section: one strategy per field (built once), then the cross-field rules."""
    hints = typing.get_type_hints(cls)
    fields = {}
    for f in dataclasses.fields(cls):
        path = f"{prefix}{f.name}"
        tp = hints[f.name]
        fields[f.name] = (
            _section_strategy(tp, path + ".") if dataclasses.is_dataclass(tp) else _leaf(path, tp)
        )

    def build(kwargs: dict) -> Any:
        _fix(prefix.rstrip("."), kwargs)
        return cls(**kwargs)

    return st.fixed_dictionaries(fields).map(build)


UNSUPPORTED: dict[str, Any] = {}


def legacy_configs() -> st.SearchStrategy:
    if not UNSUPPORTED:
        UNSUPPORTED.update(_unsupported_defaults())
    return _section_strategy(HyperTrainerConfig, "")


def _leaves(config: Any, prefix: str = "") -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out.update(_leaves(value, f"{prefix}{f.name}."))
        else:
            out[f"{prefix}{f.name}"] = value
    return out


def _differences(a: Any, b: Any) -> dict[str, tuple[Any, Any]]:
    la, lb = _leaves(a), _leaves(b)
    return {p: (la[p], lb[p]) for p in la if la[p] != lb[p] or type(la[p]) is not type(lb[p])}


# ---------------------------------------------------------------------------- properties


@settings(max_examples=CASES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(legacy_configs())
def test_round_trip_properties(x):
    original = copy.deepcopy(x)
    y = legacy_to_trainer_config(x)
    canon, notes = canonicalize_legacy(x)
    assert x == original, "the conversions must not modify their argument"

    # g(f(x)) == canon(x)
    back = trainer_config_to_legacy(y)
    assert back == canon, _differences(canon, back)
    # f(g(y)) == y
    assert legacy_to_trainer_config(back) == y
    # canon changes no meaning
    assert legacy_to_trainer_config(canon) == y
    # canon is idempotent
    again, more = canonicalize_legacy(canon)
    assert again == canon and more == []
    # canon changes exactly the fields it reports, with the right old and new values
    changed = _differences(x, canon)
    reported = {n.field: n for n in notes}
    assert set(changed) == set(reported), (changed, notes)
    assert len(reported) == len(notes), f"a field is reported twice: {notes}"
    for path, (old, new) in changed.items():
        assert reported[path].old == old and reported[path].new == new
        assert reported[path].why


@settings(max_examples=max(100, CASES // 5), deadline=None)
@given(legacy_configs())
def test_type_exact_round_trip(x):
    # == treats 1 == 1.0 == True; the round trip must also keep every value's type.
    canon, _ = canonicalize_legacy(x)
    back = trainer_config_to_legacy(legacy_to_trainer_config(x))
    la, lb = _leaves(canon), _leaves(back)
    assert {p: type(v) for p, v in la.items()} == {p: type(v) for p, v in lb.items()}


def test_bounds_are_the_schema_s_own():
    """Each integer lower bound the strategies use is the one the schema enforces."""
    sections = {"": HyperTrainerConfig}

    def walk(cls, prefix):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(hints[f.name]):
                sections[prefix + f.name] = hints[f.name]
                walk(hints[f.name], prefix + f.name + ".")

    walk(HyperTrainerConfig, "")
    context = {"data.prefetch_factor": {"num_workers": 1},
               "train.gradient_checkpointing.num_layers": {"activation_checkpoint": "full"}}
    checked = 0
    for section_path, cls in sections.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            path = f"{section_path}.{f.name}".lstrip(".")
            tp = hints[f.name]
            base = next((a for a in typing.get_args(tp) if a is not type(None)), tp)
            if base is not int or path == "train.local_rank" or path in UNSUPPORTED:
                continue
            low = INT_MIN.get(path, 0)
            extra = dict(context.get(path, {}))
            cls(**{**extra, f.name: low})  # the bound itself is valid
            below = [v for v in (low - 1, low - 2) if v not in INT_EXTRA.get(path, ())]
            with pytest.raises(schema.ConfigValueError):
                cls(**{**extra, f.name: below[0]})
            checked += 1
    assert checked >= 30


# ---------------------------------------------------------------------------- examples


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_yaml_is_canonical_and_round_trips_field_for_field(example):
    legacy = parse_args(HyperTrainerConfig, [str(example)])
    _, notes = canonicalize_legacy(legacy)
    assert notes == [], f"{example.name} is not canonical: {notes}"
    back = trainer_config_to_legacy(legacy_to_trainer_config(legacy))
    assert _differences(legacy, back) == {}
    assert back == legacy


# ---------------------------------------------------------------------------- normalisations


def _legacy(**sections: dict) -> HyperTrainerConfig:
    config = HyperTrainerConfig()
    for path, values in sections.items():
        target = config
        for part in path.split("__"):
            target = getattr(target, part)
        for name, value in values.items():
            setattr(target, name, value)
    return config


@pytest.mark.parametrize(
    ("sections", "expected"),
    [
        ({"train__accelerator": {"dp": 4}},
         {"train.accelerator.dp_shard": (None, 4), "train.accelerator.dp": (4, None)}),
        ({"train__accelerator": {"dp": 4, "dp_shard": 2}}, {"train.accelerator.dp": (4, None)}),
        ({"train__mixed_precision": {"param_dtype": "fp16"}},
         {"train.mixed_precision.param_dtype": ("fp16", "bfloat16")}),
        ({"train__mixed_precision": {"enabled": True, "param_dtype": "bf16", "output_dtype": "fp32"}},
         {"train.mixed_precision.param_dtype": ("bf16", "bfloat16"),
          "train.mixed_precision.output_dtype": ("fp32", "float32")}),
        ({"train__mixed_precision": {"enabled": True, "param_dtype": "fp32", "reduce_dtype": "float"}},
         {"train.mixed_precision.enabled": (True, False),
          "train.mixed_precision.param_dtype": ("fp32", "bfloat16"),
          "train.mixed_precision.reduce_dtype": ("float", "float32")}),
        ({"model": {"tokenizer_path": ""}}, {"model.tokenizer_path": ("", None)}),
        ({"model": {"weights_path": ""}}, {"model.weights_path": ("", None)}),
        ({"train__checkpoint": {"load_path": ""}}, {"train.checkpoint.load_path": ("", None)}),
        # The legacy rule in floats: 100 x 0.07 == 7.000000000000001, so 8 warmup steps.
        ({"train__optimizer": {"lr_warmup_ratio": 0.07}},
         {"train.optimizer.lr_warmup_ratio": (0.07, 0.08)}),
        ({"train": {"max_steps": 10}, "train__optimizer": {"lr_warmup_ratio": 0.15}},
         {"train.optimizer.lr_warmup_ratio": (0.15, 0.2)}),
    ],
)
def test_each_normalisation_is_reported(sections, expected):
    legacy = _legacy(**sections)
    canon, notes = canonicalize_legacy(legacy)
    assert {n.field: (n.old, n.new) for n in notes} == expected
    assert trainer_config_to_legacy(legacy_to_trainer_config(legacy)) == canon


def test_warmup_matches_the_legacy_trainer_rule():
    from hyper_parallel.runtime.optim import warmup_steps_from_ratio

    for steps in (1, 3, 7, 10, 30, 100, 997):
        for ratio in (0.0, 0.1, 0.15, 1 / 3, 0.2, 0.7, 1.0):
            assert transforms.warmup_steps_from_ratio(steps, ratio) == warmup_steps_from_ratio(
                steps, ratio
            )
        for k in range(steps + 1):
            assert warmup_steps_from_ratio(steps, transforms.ratio_for_warmup_steps(k, steps)) == k


def test_optimizer_names_match_the_component():
    """Every name the component accepts converts to a legacy type the legacy schema accepts,
    builds the torch class of that name, and converts back."""
    import torch

    from hyper_parallel.components.optimizer import OptimizersContainer
    from hyper_parallel.runtime.optim import OPTIMIZER_CLASSES

    names = typing.get_args(typing.get_type_hints(OptimizersContainer.Config)["name"])
    assert names
    for name in names:
        OptimizersContainer.Config(name=name)
        legacy = transforms.optimizer_name_backward(name=name)["type"]
        assert legacy in OPTIMIZER_TYPES
        assert OPTIMIZER_CLASSES[legacy] is getattr(torch.optim, name)
        assert transforms.optimizer_name_forward(type=legacy) == {"name": name}
    assert set(OPTIMIZER_TYPES) == set(transforms.OPTIMIZER_CLASS_NAMES)


# ---------------------------------------------------------------------------- errors


def test_unsupported_value_is_an_error_naming_the_field():
    legacy = _legacy(train={"backend": "mindspore"})
    for convert in (legacy_to_trainer_config, canonicalize_legacy):
        with pytest.raises(ConfigError) as info:
            convert(legacy)
        assert info.value.path == "train.backend"
        assert "torch only" in str(info.value)


@pytest.mark.parametrize(
    ("edit", "path", "words"),
    [
        (lambda c: setattr(c.optimizer, "fused", True), "optimizer.fused", "no legacy counterpart"),
        (lambda c: setattr(c, "dump_folder", "elsewhere"), "dump_folder", "no legacy counterpart"),
        (lambda c: setattr(c.compile, "enable", True), "compile.enable", "never compiles"),
        (lambda c: setattr(c.checkpoint, "keep_latest_k", 3), "checkpoint.keep_latest_k",
         "keeps every checkpoint"),
    ],
)
def test_new_only_values_do_not_convert_to_legacy(edit, path, words):
    config = HyperTrainer.Config()
    edit(config)
    with pytest.raises(ConfigError) as info:
        trainer_config_to_legacy(config)
    assert info.value.path == path
    assert words in str(info.value)


def test_a_component_config_of_another_class_does_not_convert():
    from hyper_parallel.components.tokenizer import HuggingFaceTokenizer

    @dataclasses.dataclass(kw_only=True, slots=True)
    class OtherTokenizerConfig(HuggingFaceTokenizer.Config):
        vocab: str = "x"

    config = HyperTrainer.Config(tokenizer=OtherTokenizerConfig())
    with pytest.raises(ConfigError, match="HuggingFaceTokenizer.Config") as info:
        trainer_config_to_legacy(config)
    assert info.value.path == "tokenizer"


def test_a_value_the_new_tree_rejects_names_the_legacy_field():
    # The legacy schema accepts an empty TensorBoard directory; the component rejects it when
    # TensorBoard is on (the legacy trainer failed at run time instead).
    legacy = _legacy(train__tensorboard={"enabled": True, "output_dir": ""})
    with pytest.raises(ConfigError) as info:
        legacy_to_trainer_config(legacy)
    assert info.value.path == "train.tensorboard.output_dir"
    assert "MetricsProcessor.Config.save_tb_folder" in str(info.value)


def test_field_map_covers_every_legacy_field_once():
    legacy_paths = [p for row in FIELD_MAP for p in row.legacy]
    assert sorted(legacy_paths) == sorted(_leaves(HyperTrainerConfig()))
    assert all(row.line > 0 and row.kind in ("rename", "transform", "unsupported", "new_only")
               for row in FIELD_MAP)
