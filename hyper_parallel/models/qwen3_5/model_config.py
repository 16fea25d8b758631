"""``Qwen3_5Model.Config`` and the flavors, without the framework: the Qwen3.5 architecture as
configuration.

``Qwen3_5ModelConfig`` is what :class:`~hyper_parallel.models.qwen3_5.protocol.Qwen3_5Model`
adopts as its ``Config`` (``Qwen3_5Model.Config is Qwen3_5ModelConfig``). It lives here, apart
from the model, because recipes, the spec registry and the code generator hold model Configs
and must not import torch: ``build()`` imports the model (its owner, a
:class:`~hyper_parallel.protocols.lazy.LazyOwner`) only when a model is built.

* ``Qwen3_5ModelConfig`` -- a ``BaseModel.Config`` (``kw_only``, ``slots``) that *is* a
  :class:`Qwen3_5Config`: it declares no field of its own, so every architecture field, default,
  rule and derived size (``rotary_dim``, ``linear_key_dim``, ``to_hf_dict()``) is written once,
  in ``configuration.py``. A ``layer_types`` that is the ``full_attention_interval`` pattern of
  another length is re-derived when ``num_hidden_layers`` changes
  (``dataclasses.replace(flavor, num_hidden_layers=4)``), like ``Qwen3_5Config.replace``.
* ``Config.update_from_config(trainer_config=...)`` -- the ``model`` section's architecture
  overrides, the parallel degrees the model cannot run, ``training.seq_len`` vs the context
  length (see its docstring). ``Config.replace(**changes)`` is the legacy ``replace``.
* :func:`flavor_config` -- the legacy ``FLAVORS`` table as ``Qwen3_5Model.Config`` (one source of
  truth: the sizes are only written in ``qwen3_5/configuration.py``);
  :func:`config_from_model_section`, :func:`tp_divisibility_problems`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

from hyper_parallel.models.qwen3_5.configuration import (
    DEFAULT_FLAVOR,
    FLAVORS,
    FULL_ATTENTION,
    LINEAR_ATTENTION,
    Qwen3_5Config,
    merge_vision_override,
)
from hyper_parallel.models.qwen3_5.context_parallel_rules import check_context_parallel
from hyper_parallel.models.qwen3_5.model_section import apply_model_section
from hyper_parallel.protocols.lazy import LazyOwner
from hyper_parallel.protocols.model_config import BaseModelConfig
from hyper_parallel.utils.choices import BLOCK_CAUSAL
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.suggest import did_you_mean

__all__ = [
    "DEFAULT_FLAVOR",
    "FLAVOR_NAMES",
    "Qwen3_5ModelConfig",
    "config_from_model_section",
    "flavor_config",
    "tp_divisibility_problems",
]

FLAVOR_NAMES: tuple[str, ...] = tuple(FLAVORS)
"""The named sizes, in the legacy table's order (``debugmodel``, ``0.8b``, ... ``27b``)."""

_LEGACY_NAME = "Qwen3_5Config"
_DERIVED_FLAG = "_layer_types_derived"
_NAME = "Qwen3_5Model.Config"


@dataclass(kw_only=True, slots=True)
class Qwen3_5ModelConfig(BaseModelConfig, Qwen3_5Config):
    """Architecture of a Qwen3.5 dense text decoder; defaults are Qwen3.5-0.8B(-Base).

    Every field, its default, its validation and the derived sizes (``rotary_dim``,
    ``linear_key_dim``, ...) are the one declaration in :class:`Qwen3_5Config` (Hugging Face
    ``Qwen3_5TextConfig`` names; RoPE flat rather than nested in ``rope_parameters``); this
    class adds the protocol (``build``, ``update_from_config``). A ``layer_types`` that is
    the ``full_attention_interval`` pattern of another length is re-derived when the layer
    count changes (``dataclasses.replace(flavor, num_hidden_layers=4)``).
    """

    def __post_init__(self) -> None:
        if _is_interval_pattern(self.layer_types, self.full_attention_interval):
            self.layer_types = None  # re-derived for the current length
        try:
            _plain_class(type(self)).__post_init__(self)
        except ValueError as exc:
            raise ValueError(
                str(exc)
                .replace(_legacy_name(type(self)), _protocol_name(type(self)))
                .replace(_LEGACY_NAME, _protocol_name(type(self)))
            ) from None

    # ------------------------------------------------------------ legacy bridge
    def to_legacy(self) -> Qwen3_5Config:
        """A plain config of the architecture class this one extends (:class:`Qwen3_5Config`,
        or the MoE family's) with the same values (a fresh one)."""
        plain = _plain_class(type(self))
        return plain(**{f.name: copy.deepcopy(getattr(self, f.name))
                        for f in dataclasses.fields(plain)})

    @classmethod
    def from_legacy(cls, legacy: Qwen3_5Config) -> Qwen3_5ModelConfig:
        """The protocol config with the values of a plain one."""
        return cls(**{f.name: copy.deepcopy(getattr(legacy, f.name))
                      for f in dataclasses.fields(_plain_class(cls))})

    def replace(self, **changes: Any) -> Qwen3_5ModelConfig:
        """A validated copy with ``changes`` applied; a ``layer_types`` that is the interval
        pattern is re-derived unless ``changes`` sets it. Unknown names are a
        ``TypeError``."""
        unused = sorted(set(changes) & set(self.UNUSED_FIELDS))
        if unused:
            raise TypeError(f"{_protocol_name(type(self))} has no field {unused[0]!r}")
        if "layer_types" not in changes and _is_interval_pattern(
            self.layer_types, self.full_attention_interval
        ):
            changes["layer_types"] = None
        changes = merge_vision_override(self.vision_config, changes, _protocol_name(type(self)))
        return dataclasses.replace(self, **copy.deepcopy(changes))

    def __setattr__(self, name: str, value: Any) -> None:
        # Qwen3_5Config keeps a __dict__ (its derived-layer_types flag), which would let a
        # misspelt field through; the protocol's rule is that a typo is an error.
        names = _field_names(type(self))
        if name not in names and name != _DERIVED_FLAG:
            raise AttributeError(
                f"{_protocol_name(type(self))} has no field {name!r}{did_you_mean(name, names)}"
            )
        object.__setattr__(self, name, value)

    # ------------------------------------------------------------ trainer hook
    def update_from_config(self, *, trainer_config: Any) -> None:
        """Fit this architecture to the run, in place; called once before ``build``.

        Reads (each section optional; a missing one is skipped):

        1. ``model`` -- the legacy-style architecture overrides, so that a run can change
           the architecture from the command line (``model_spec`` itself is hidden from it):
           ``model.config_overrides['flavor']`` first re-bases every field on that flavor,
           then the non-``None`` ``model.{num_hidden_layers, hidden_size, ...}`` fields, then
           the other ``model.config_overrides`` keys (HF field names) -- the precedence of
           the legacy ``config_from_legacy``. Without a ``flavor`` key the current values are
           the base. Applying the same section twice changes nothing. All-or-nothing: an
           invalid result raises and leaves this config untouched.
        2. ``parallelism`` -- ``context_parallel_degree``,
           ``expert_parallel_degree`` and ``expert_tensor_parallel_degree`` above 1 raise
           a ``ConfigError`` (not supported for this dense model); ``tensor_parallel_degree``
           must divide every dimension TP shards (a ``ConfigError`` listing each one; see
           :func:`tp_divisibility_problems`).
           With ``attn_mask_type: block_causal``, what cannot keep documents apart yet is
           refused too (:func:`refuse_block_causal`).
        3. ``training.seq_len`` must not exceed ``max_position_embeddings`` (``ConfigError``):
           RoPE itself is computed on the fly, but the exported ``config.json`` would claim
           a context the model was never trained for.

        Nothing else is derived: the RoPE tables need no resizing (computed per batch), and
        precision / checkpointing are parallelisation settings, not architecture.
        """
        section = getattr(trainer_config, "model", None)
        if section is not None:
            updated = self._with_model_section(section)
            for f in dataclasses.fields(self):
                setattr(self, f.name, getattr(updated, f.name))

        parallelism = getattr(trainer_config, "parallelism", None)
        if parallelism is not None:
            if self.vision_config is not None:
                refuse_degrees(parallelism, "the image-text model", IMAGE_TEXT_REFUSALS)
            self._check_parallelism(parallelism)
        if self.attn_mask_type == BLOCK_CAUSAL:
            refuse_block_causal(trainer_config)
        else:
            refuse_packing_without_documents(trainer_config)

        training = getattr(trainer_config, "training", None)
        seq_len = getattr(training, "seq_len", None)
        if seq_len is not None and seq_len > self.max_position_embeddings:
            raise ConfigError(
                f"{seq_len} exceeds the model's max_position_embeddings="
                f"{self.max_position_embeddings}: lower it, or raise max_position_embeddings "
                "(model.max_position_embeddings)",
                path="training.seq_len",
            )


    def _with_model_section(self, section: Any) -> Qwen3_5ModelConfig:
        """This config with a ``model`` section applied (a copy); a subclass re-bases on its
        own flavors."""
        return _apply_model_section(self, section)

    def _check_parallelism(self, parallelism: Any) -> None:
        """The parallel degrees this model cannot run are a ``ConfigError`` naming the field:
        EP above 1, ETP above 1 (no experts), a TP degree that does not divide every dimension
        TP shards, and context-parallel settings its head counts cannot split
        (:func:`~.context_parallel_rules.check_context_parallel`)."""
        refuse_degrees(parallelism, "qwen3_5_v2", (
            ("expert_parallel_degree", "expert parallelism (the dense model has no experts)"),
        ))
        etp = getattr(parallelism, "expert_tensor_parallel_degree", 1) or 1
        if etp > 1:
            raise ConfigError(
                f"{etp}: the dense model has no experts to shard; set it to 1",
                path="parallelism.expert_tensor_parallel_degree",
            )
        self._check_tensor_parallel(parallelism)
        check_context_parallel(self, parallelism)

    def _check_tensor_parallel(self, parallelism: Any) -> None:
        tp = getattr(parallelism, "tensor_parallel_degree", 1) or 1
        problems = tp_divisibility_problems(self, tp)
        if problems:
            raise ConfigError(
                f"{tp} cannot shard this Qwen3.5 model evenly: {'; '.join(problems)}. "
                "Choose a tensor_parallel_degree that divides them (or change the model "
                "dimensions).",
                path="parallelism.tensor_parallel_degree",
            )


# The model (a torch module) owns this Config; it is imported only when a model is built.
Qwen3_5ModelConfig._owner = LazyOwner(  # type: ignore[assignment]
    "hyper_parallel.models.qwen3_5.protocol:Qwen3_5Model"
)


BLOCK_CAUSAL_REFUSALS: tuple[tuple[str, str, str], ...] = (
    # (pipeline parallelism keeps them apart: each micro-batch carries its rows' documents
    # through the schedule, runtime/pipeline_step.py)
)
"""The settings a ``block_causal`` model refuses for now, and why (:func:`refuse_block_causal`):
``(section, field, why)``, refused above 1."""

def refuse_block_causal(trainer_config: Any) -> None:
    """A ``ConfigError`` (path ``model.attn_mask_type``) for a run whose layout or compilation
    cannot keep a packed row's documents apart yet: the parallel degrees of
    :data:`BLOCK_CAUSAL_REFUSALS` above 1 (context parallelism keeps them apart: each shard
    carries its part of the whole rows' boundaries, which a pipeline cuts with the shard's
    rows), or compiled decoder layers (their full
    graph cannot hold the per-document work the host's boundaries size). Nothing then mixes
    documents silently."""
    for section, name, why in BLOCK_CAUSAL_REFUSALS:
        degree = getattr(getattr(trainer_config, section, None), name, 1) or 1
        if degree > 1:
            raise ConfigError(
                f"block_causal: {why} ({section}.{name}={degree}); set {section}.{name} to 1, "
                "or model.attn_mask_type to causal",
                path="model.attn_mask_type",
            )
    compile_section = getattr(trainer_config, "compile", None)
    components = getattr(compile_section, "components", None)
    if getattr(compile_section, "enable", False) and (components is None
                                                     or "model" in components):
        raise ConfigError(
            "block_causal: compiled decoder layers (compile.enable with 'model' in "
            "compile.components) cannot hold the per-document attention and convolution, "
            "which the documents' host offsets size, in one graph yet; remove 'model' from "
            "compile.components, or set model.attn_mask_type to causal",
            path="model.attn_mask_type",
        )


def refuse_packing_without_documents(trainer_config: Any) -> None:
    """A ``ConfigError`` (path ``dataloader.packing``) for packed data under ``causal``
    attention: every token would attend to, and the delta rule carry its state across, the
    other samples of its row -- packing would mix them silently. Packing does not switch the
    model's attention itself: the model's config (exported with it) says what it was trained
    as, so the user sets it, once."""
    if getattr(getattr(trainer_config, "dataloader", None), "packing", False):
        raise ConfigError(
            "True packs several samples into a row, which the model's attn_mask_type "
            "'causal' would let attend to each other; set model.attn_mask_type to "
            "block_causal, or packing to False",
            path="dataloader.packing",
        )


IMAGE_TEXT_REFUSALS = (
    (
        "context_parallel_degree",
        "context parallelism (a sequence's image tokens would be split from the image the "
        "tower encodes whole)",
    ),
)
"""The parallel degrees the image-text model refuses for now, and why (``refuse_degrees``)."""


def refuse_degrees(parallelism: Any, model: str, refused: tuple[tuple[str, str], ...]) -> None:
    """A ``ConfigError`` for the first ``parallelism.<name>`` of ``refused`` (``(name, what
    it is)`` pairs) above 1: ``model`` does not support it yet."""
    for name, what in refused:
        degree = getattr(parallelism, name, 1) or 1
        if degree > 1:
            raise ConfigError(
                f"{degree}: {what} is not supported by {model} yet; set it to 1",
                path=f"parallelism.{name}",
            )


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


def _plain_class(cls: type) -> type:
    """The plain architecture class a protocol config extends (``Qwen3_5Config``,
    ``Qwen3_5MoeConfig``): its rules validate, and its name is in their messages."""
    return next(
        b for b in cls.__mro__
        if issubclass(b, Qwen3_5Config) and not issubclass(b, BaseModelConfig)
    )


def _legacy_name(cls: type) -> str:
    return _plain_class(cls).__name__


def _protocol_name(cls: type) -> str:
    """``Qwen3_5Model.Config`` / ``Qwen3_5MoeModel.Config``: how messages name the config."""
    return cls.__name__.removesuffix("Config") + ".Config" if cls.__name__.endswith(
        "ModelConfig") else _NAME


def _is_interval_pattern(layer_types: Any, interval: int) -> bool:
    """Whether ``layer_types`` is what ``full_attention_interval`` derives for its length."""
    if not isinstance(layer_types, (list, tuple)):
        return False
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        return False  # invalid: the legacy validation reports it
    kinds = list(layer_types)
    return kinds == [
        FULL_ATTENTION if (i + 1) % interval == 0 else LINEAR_ATTENTION for i in range(len(kinds))
    ]


# ---------------------------------------------------------------------- flavors & overrides
def flavor_config(name: str) -> Qwen3_5ModelConfig:
    """A fresh ``Qwen3_5ModelConfig`` of the named size (from the legacy ``FLAVORS`` table)."""
    if name not in FLAVORS:
        raise ValueError(
            f"unknown Qwen3.5 flavor {name!r}{did_you_mean(str(name), FLAVORS)}; "
            f"valid flavors: {', '.join(FLAVOR_NAMES)}"
        )
    return Qwen3_5ModelConfig.from_legacy(FLAVORS[name])


def _apply_model_section(base: Qwen3_5ModelConfig, section: Any) -> Qwen3_5ModelConfig:
    """``base`` with a ``model`` section's overrides applied (see ``update_from_config``)."""
    return apply_model_section(base, section, flavor_config)


def config_from_model_section(section: Any) -> Qwen3_5ModelConfig:
    """The config a legacy-style ``model`` section describes, exactly as the legacy trainer reads
    it (``config_from_legacy``): the base is ``config_overrides['flavor']``, default ``0.8b``."""
    return _apply_model_section(flavor_config(DEFAULT_FLAVOR), section)


def tp_divisibility_problems(config: Any, tp: int) -> list[str]:
    """Every dimension that tensor parallelism shards and ``tp`` does not divide (empty: fine).

    The rule of the TP plan (``qwen3_5.parallelize.validate_tp_degree``, which ``apply_tp``
    enforces again): ``vocab_size`` and ``intermediate_size`` always; the attention head counts
    only when the model has full-attention layers; the GDN head counts only when it has Gated
    DeltaNet layers. ``config`` is a ``Qwen3_5ModelConfig`` or a legacy ``Qwen3_5Config``.
    """
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tensor parallel degree must be a positive int, got {tp!r}")
    kinds = set(config.layer_types)
    # A mixture-of-experts model shards its shared expert; its routed experts are replicated
    # over the TP ranks (expert tensor parallelism is not implemented).
    ffn = "shared_expert_intermediate_size" if hasattr(config, "num_experts") else (
        "intermediate_size"
    )
    fields = ["vocab_size", ffn]
    if FULL_ATTENTION in kinds:
        fields += ["num_attention_heads", "num_key_value_heads"]
    if LINEAR_ATTENTION in kinds:
        fields += ["linear_num_key_heads", "linear_num_value_heads"]
    return [
        f"{name}={getattr(config, name)} is not divisible by tp={tp}"
        for name in fields
        if getattr(config, name) % tp
    ]
