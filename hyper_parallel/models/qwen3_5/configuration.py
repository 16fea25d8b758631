"""Qwen3.5 dense text-model configuration, the size flavors, and the legacy-YAML bridge.

Field names are exactly those of Hugging Face's ``Qwen3_5TextConfig`` (``model_type='qwen3_5_text'``)
so that a ``config.json`` maps onto this dataclass one-to-one. Two deliberate differences:

* HF nests the RoPE settings in ``rope_parameters`` (``rope_theta``, ``partial_rotary_factor``,
  ``mrope_section``); here they are flat fields. :meth:`Qwen3_5Config.to_hf_dict` and
  :meth:`Qwen3_5Config.from_hf_dict` convert.
* ``full_attention_interval`` is kept as a field (HF consumes it while deriving ``layer_types``).

Two fields are not architecture and not Hugging Face's: ``kernels`` (``auto`` / ``torch`` /
``fla``), which implementation the Gated DeltaNet layers dispatch to
(:mod:`~hyper_parallel.models.qwen3_5.kernels`), and ``attn_mask_type`` (``causal`` /
``block_causal``), whether a packed row's documents are kept apart
(:mod:`~hyper_parallel.models.qwen3_5.documents`). They never reach or come from
``config.json``.

The legacy ``model`` section is applied to this config by :mod:`.model_section`
(``config_from_legacy``, ``apply_model_section`` and the ``model.config_overrides`` rule).
This module imports no framework.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hyper_parallel.models.qwen3_5.vision_config import Qwen3_5VisionConfig, image_text_flavor
from hyper_parallel.utils.choices import (
    ATTN_MASK_TYPES,
    DEFAULT_ATTN_MASK_TYPE,
    DEFAULT_KERNELS,
    KERNEL_CHOICES,
    AttnMaskType,
    KernelChoice,
)
from hyper_parallel.utils.numbers import is_finite_number
from hyper_parallel.utils.suggest import did_you_mean

FULL_ATTENTION = "full_attention"
LINEAR_ATTENTION = "linear_attention"
LAYER_TYPE_CHOICES = (LINEAR_ATTENTION, FULL_ATTENTION)

HF_TEXT_MODEL_TYPE = "qwen3_5_text"
"""``model_type`` that transformers maps to ``Qwen3_5TextConfig`` / ``Qwen3_5ForCausalLM``."""

VISION_CONFIG = "vision_config"
"""The field that makes the model image-text (None: the text decoder alone)."""

FLAVOR_KEY = "flavor"
"""The one non-HF key accepted in ``model.config_overrides``: the base flavor's name."""

DEFAULT_FLAVOR = "0.8b"

NON_HF_FIELDS = ("kernels", "attn_mask_type")
"""Fields that are this project's, not Hugging Face's: never written to or read from
``config.json``."""

MAX_DIM = 2**31 - 1
"""The largest size an integer field may hold: every one of them is a tensor dimension (or a
count of them), and kernels index dimensions with 32-bit integers."""

# Float fields that must be finite and > 0 (``partial_rotary_factor`` has its own range).
_POSITIVE_FLOAT_FIELDS = ("rms_norm_eps", "initializer_range", "rope_theta")

# Integer fields that must be >= 1.
_POSITIVE_INT_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
    "full_attention_interval",
    "linear_num_value_heads",
    "linear_num_key_heads",
    "linear_value_head_dim",
    "linear_key_head_dim",
    "linear_conv_kernel_dim",
)


@dataclass(kw_only=True)
class Qwen3_5Config:
    """Architecture of a Qwen3.5 dense text decoder. Defaults are Qwen3.5-0.8B(-Base)."""

    vocab_size: int = 248320
    """Vocabulary size (rows of ``embed_tokens`` and ``lm_head``)."""
    hidden_size: int = 1024
    """Residual-stream width."""
    intermediate_size: int = 3584
    """SwiGLU hidden width of every layer's MLP."""
    num_hidden_layers: int = 24
    """Number of decoder layers."""
    num_attention_heads: int = 8
    """Query heads of the full-attention layers."""
    num_key_value_heads: int = 2
    """Key/value heads of the full-attention layers (GQA); must divide ``num_attention_heads``."""
    head_dim: int = 256
    """Per-head width of the full-attention layers (not ``hidden_size / num_attention_heads``)."""
    hidden_act: str = "silu"
    """MLP / GDN-conv activation. Only ``silu`` is implemented."""
    max_position_embeddings: int = 262144
    """Longest supported position (informational: RoPE is computed on the fly)."""
    initializer_range: float = 0.02
    """Std of the normal init of linear, conv and embedding weights (``init_weights``)."""
    rms_norm_eps: float = 1e-6
    """Epsilon of every RMSNorm."""
    attention_bias: bool = False
    """Bias on the full-attention q/k/v/o projections."""
    tie_word_embeddings: bool = True
    """Share ``lm_head.weight`` with ``model.embed_tokens.weight``."""
    attn_output_gate: bool = True
    """Gate the attention output with ``sigmoid(gate)``; ``q_proj`` then emits ``[Q_h | gate_h]`` per head."""
    rope_theta: float = 1e7
    """RoPE base (HF: ``rope_parameters['rope_theta']``)."""
    partial_rotary_factor: float = 0.25
    """Fraction of ``head_dim`` that is rotated (HF: ``rope_parameters['partial_rotary_factor']``)."""
    mrope_section: list[int] = field(default_factory=lambda: [11, 11, 10])
    """Frequencies per mRoPE axis (T, H, W); ``2 * sum`` must equal the rotary dim."""
    full_attention_interval: int = 4
    """Layer ``i`` is full attention iff ``(i + 1) % interval == 0`` (when ``layer_types`` is unset)."""
    linear_num_value_heads: int = 16
    """Gated DeltaNet value heads (``Hv``)."""
    linear_num_key_heads: int = 16
    """Gated DeltaNet query/key heads (``Hk``); must divide ``linear_num_value_heads``."""
    linear_value_head_dim: int = 128
    """Gated DeltaNet value head width (``Dv``)."""
    linear_key_head_dim: int = 128
    """Gated DeltaNet query/key head width (``Dk``)."""
    linear_conv_kernel_dim: int = 4
    """Kernel size of the causal depthwise convolution in front of the delta rule."""
    layer_types: list[str] | None = None
    """Per-layer mixer, ``linear_attention`` or ``full_attention``; derived from the interval when unset."""
    pad_token_id: int | None = None
    """Written to ``config.json`` only: the embedding has no ``padding_idx`` here."""
    bos_token_id: int | None = None
    """Written to ``config.json`` only."""
    eos_token_id: int | list[int] | None = None
    """Written to ``config.json`` only."""
    vision_config: Qwen3_5VisionConfig | None = None
    """The vision tower (:class:`~.vision_config.Qwen3_5VisionConfig`) that makes this the
    image-text model Hugging Face publishes (``...ForConditionalGeneration``); None (the
    default) is the text decoder alone. In ``model.config_overrides`` a mapping of the tower's
    fields, applied over the flavor's tower (or the published one); ``null`` removes it."""
    kernels: KernelChoice = DEFAULT_KERNELS
    """Implementation of the Gated DeltaNet layers: ``auto`` (fla-core's CUDA kernels when the
    parameters are on CUDA and the package imports, else the torch path), ``torch`` or ``fla``
    (fla-core, an error where it cannot run). Not architecture: not written to ``config.json``."""
    attn_mask_type: AttnMaskType = DEFAULT_ATTN_MASK_TYPE
    """Which earlier tokens a token mixes with: ``causal`` (every one of its row) or
    ``block_causal`` (those of its own document, where the batch's ``position_ids`` restart at
    0: the full attention, the Gated DeltaNet's convolution window and its state all stop at a
    document's start; :mod:`~hyper_parallel.models.qwen3_5.documents`). torchtitan's name and
    values. Not architecture (the weights are the same): not written to ``config.json``."""

    # What Hugging Face calls this architecture, and the fields config.json does not carry
    # (a subclass -- the MoE family -- names its own).
    HF_ARCHITECTURE = "Qwen3_5ForCausalLM"
    HF_MODEL_TYPE = HF_TEXT_MODEL_TYPE
    HF_IMAGE_TEXT_ARCHITECTURE = "Qwen3_5ForConditionalGeneration"
    HF_IMAGE_TEXT_MODEL_TYPE = "qwen3_5"
    NON_HF_FIELDS: ClassVar[tuple[str, ...]] = NON_HF_FIELDS
    UNUSED_FIELDS: ClassVar[tuple[str, ...]] = ()
    """Inherited fields this architecture does not use: never written to ``config.json``, and
    refused when set (see :func:`~.model_section.check_config_overrides`)."""

    def __post_init__(self) -> None:
        self._check_vision()
        for name in _POSITIVE_INT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Qwen3_5Config.{name} must be a positive int, got {value!r}.")
            if value > MAX_DIM:
                raise ValueError(
                    f"Qwen3_5Config.{name} must be a positive int <= {MAX_DIM} (2**31 - 1), got "
                    f"{value!r}."
                )
        for name in (*_POSITIVE_FLOAT_FIELDS, "partial_rotary_factor"):
            value = getattr(self, name)
            if not is_finite_number(value):
                raise ValueError(f"Qwen3_5Config.{name} must be a finite number, got {value!r}.")
        if self.kernels not in KERNEL_CHOICES:
            raise ValueError(
                f"Qwen3_5Config.kernels={self.kernels!r} is invalid"
                f"{did_you_mean(str(self.kernels), KERNEL_CHOICES)}; choose from "
                f"{list(KERNEL_CHOICES)}."
            )
        if self.attn_mask_type not in ATTN_MASK_TYPES:
            raise ValueError(
                f"Qwen3_5Config.attn_mask_type={self.attn_mask_type!r} is invalid"
                f"{did_you_mean(str(self.attn_mask_type), ATTN_MASK_TYPES)}; choose from "
                f"{list(ATTN_MASK_TYPES)}."
            )
        if self.hidden_act != "silu":
            raise ValueError(
                f"Qwen3_5Config.hidden_act={self.hidden_act!r} is not supported; use 'silu'."
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"Qwen3_5Config.num_attention_heads ({self.num_attention_heads}) must be a multiple "
                f"of num_key_value_heads ({self.num_key_value_heads})."
            )
        if self.linear_num_value_heads % self.linear_num_key_heads:
            raise ValueError(
                f"Qwen3_5Config.linear_num_value_heads ({self.linear_num_value_heads}) must be a "
                f"multiple of linear_num_key_heads ({self.linear_num_key_heads})."
            )
        if not 0.0 < self.partial_rotary_factor <= 1.0:
            raise ValueError(
                "Qwen3_5Config.partial_rotary_factor must be in (0, 1], got "
                f"{self.partial_rotary_factor!r}."
            )
        if self.head_dim * self.partial_rotary_factor != self.rotary_dim or self.rotary_dim % 2:
            raise ValueError(
                f"Qwen3_5Config: head_dim ({self.head_dim}) * partial_rotary_factor "
                f"({self.partial_rotary_factor}) must be an even integer (the rotary dim)."
            )
        self.mrope_section = [int(s) for s in self.mrope_section]
        if len(self.mrope_section) != 3 or any(s < 0 for s in self.mrope_section):
            raise ValueError(
                "Qwen3_5Config.mrope_section must be three non-negative ints (T, H, W), got "
                f"{self.mrope_section!r}."
            )
        if 2 * sum(self.mrope_section) != self.rotary_dim:
            raise ValueError(
                f"Qwen3_5Config: sum(mrope_section)*2 = {2 * sum(self.mrope_section)} must equal "
                f"head_dim*partial_rotary_factor = {self.rotary_dim}; fix mrope_section (e.g. "
                f"{_suggest_mrope(self.rotary_dim // 2)})."
            )
        for name in _POSITIVE_FLOAT_FIELDS:
            if getattr(self, name) <= 0:
                raise ValueError(
                    f"Qwen3_5Config.{name} must be > 0, got {getattr(self, name)!r} "
                    "(rms_norm_eps, initializer_range and rope_theta must be > 0)."
                )
        # Whether layer_types was derived (vs given); lets replace() re-derive it. Not a field,
        # so equality and asdict() ignore it.
        derived = self.layer_types is None
        object.__setattr__(self, "_layer_types_derived", derived)
        if derived:
            self.layer_types = _derive_layer_types(
                self.num_hidden_layers, self.full_attention_interval
            )
        else:
            self.layer_types = list(self.layer_types)
        if len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(
                f"Qwen3_5Config.layer_types has {len(self.layer_types)} entries but "
                f"num_hidden_layers={self.num_hidden_layers}; give one entry per layer or pass "
                "layer_types=None to derive it from full_attention_interval."
            )
        for i, kind in enumerate(self.layer_types):
            if kind not in LAYER_TYPE_CHOICES:
                raise ValueError(
                    f"Qwen3_5Config.layer_types[{i}]={kind!r} is invalid"
                    f"{did_you_mean(str(kind), LAYER_TYPE_CHOICES)}; choose from "
                    f"{list(LAYER_TYPE_CHOICES)}."
                )

    def _check_vision(self) -> None:
        """``vision_config`` given as a mapping (a YAML, ``config_overrides``) becomes the
        dataclass; its placeholder ids must be tokens of this vocabulary."""
        vision = self.vision_config
        if vision is None:
            return
        if isinstance(vision, Mapping):
            vision = Qwen3_5VisionConfig.from_overrides(None, vision, f"{type(self).__name__}")
            self.vision_config = vision
        if not isinstance(vision, Qwen3_5VisionConfig):
            raise ValueError(
                f"Qwen3_5Config.vision_config must be a mapping of the vision tower's fields or "
                f"null, got {vision!r}."
            )
        for name, token in vision.token_ids().items():
            if token >= self.vocab_size:
                raise ValueError(
                    f"Qwen3_5Config.vision_config: {name}={token} is not a token of the "
                    f"vocabulary (vocab_size={self.vocab_size})."
                )

    @property
    def is_image_text(self) -> bool:
        """Whether the model has a vision tower (``vision_config`` set)."""
        return self.vision_config is not None

    # ----------------------------------------------------------------- derived sizes
    @property
    def rotary_dim(self) -> int:
        """Number of rotated channels per full-attention head."""
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def linear_key_dim(self) -> int:
        """Width of the GDN query (and key) projection: ``Hk * Dk``."""
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def linear_value_dim(self) -> int:
        """Width of the GDN value (and z-gate) projection: ``Hv * Dv``."""
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def num_full_attention_layers(self) -> int:
        """How many layers are full (softmax) attention."""
        return sum(t == FULL_ATTENTION for t in self.layer_types)

    @property
    def num_linear_attention_layers(self) -> int:
        """How many layers are Gated DeltaNet."""
        return sum(t == LINEAR_ATTENTION for t in self.layer_types)

    # ----------------------------------------------------------------- copies
    def replace(self, **changes: Any) -> Qwen3_5Config:
        """A validated copy with ``changes`` applied.

        Unlike ``dataclasses.replace``, a ``layer_types`` list that was derived (not given) is
        re-derived, so ``cfg.replace(num_hidden_layers=4)`` just works.
        """
        _check_keys(changes, f"{type(self).__name__}.replace()", cls=type(self))
        values = {f.name: copy.deepcopy(getattr(self, f.name)) for f in dataclasses.fields(self)}
        if getattr(self, "_layer_types_derived", False) and "layer_types" not in changes:
            values["layer_types"] = None
        changes = merge_vision_override(self.vision_config, changes, type(self).__name__)
        values.update(changes)
        return type(self)(**values)

    # ----------------------------------------------------------------- HF config.json
    def to_hf_dict(self) -> dict[str, Any]:
        """The Hugging Face config as a JSON-able dict: the text config (``model_type=
        'qwen3_5_text'``, what ``Qwen3_5ForCausalLM.from_pretrained`` reads), or, with a vision
        tower, the image-text config (``model_type='qwen3_5'``: ``text_config``,
        ``vision_config`` and the placeholder token ids, what
        ``Qwen3_5ForConditionalGeneration.from_pretrained`` reads).
        """
        text = self._text_hf_dict()
        if self.vision_config is None:
            return text
        return {
            "architectures": [self.HF_IMAGE_TEXT_ARCHITECTURE],
            "model_type": self.HF_IMAGE_TEXT_MODEL_TYPE,
            "text_config": text,
            "vision_config": self.vision_config.to_hf_dict(self.hidden_size),
            **self.vision_config.token_ids(),
            "tie_word_embeddings": self.tie_word_embeddings,
        }

    def _text_hf_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "architectures": [self.HF_ARCHITECTURE],
            "model_type": self.HF_MODEL_TYPE,
        }
        rope_keys = {"rope_theta", "partial_rotary_factor", "mrope_section"}
        skipped = {
            "full_attention_interval", VISION_CONFIG, *self.NON_HF_FIELDS, *self.UNUSED_FIELDS
        }
        for f in dataclasses.fields(self):
            if f.name in rope_keys or f.name in skipped:
                continue
            out[f.name] = copy.deepcopy(getattr(self, f.name))
        out["rope_parameters"] = {
            "rope_type": "default",
            "rope_theta": self.rope_theta,
            "partial_rotary_factor": self.partial_rotary_factor,
            "mrope_section": list(self.mrope_section),
            "mrope_interleaved": True,
        }
        # HF consumes the interval while deriving layer_types; keep it for readers that look.
        out["full_attention_interval"] = self.full_attention_interval
        return out

    @classmethod
    def from_hf_dict(cls, hf: Mapping[str, Any]) -> Qwen3_5Config:
        """Build from an HF ``config.json`` dict: a ``qwen3_5_text`` config, or a full
        ``qwen3_5`` (image-text) config, whose ``text_config`` is the decoder and whose
        ``vision_config`` and token ids the tower. Keys this model does not use (dropout,
        cache, ...) are ignored; a non-default RoPE type is rejected.
        """
        text = dict(hf.get("text_config") or hf)
        if "tie_word_embeddings" not in text and "tie_word_embeddings" in hf:
            text["tie_word_embeddings"] = hf["tie_word_embeddings"]
        rope = dict(text.get("rope_parameters") or text.get("rope_scaling") or {})
        rope_type = rope.get("rope_type", rope.get("type", "default"))
        if rope_type != "default":
            raise NotImplementedError(
                f"HF config has rope_type={rope_type!r}; only 'default' RoPE is implemented."
            )
        names = {f.name for f in dataclasses.fields(cls)} - {
            VISION_CONFIG, *cls.NON_HF_FIELDS, *cls.UNUSED_FIELDS
        }
        values = {k: copy.deepcopy(v) for k, v in text.items() if k in names}
        for key in ("rope_theta", "partial_rotary_factor", "mrope_section"):
            if key in rope:
                values[key] = rope[key]
        if "mrope_section" not in values:
            values["mrope_section"] = [11, 11, 10]  # HF's fallback when the key is absent
        # HF always stores the derived layer_types (and drops the interval). When the list is the
        # periodic pattern, keep it as "derived" so replace(num_hidden_layers=...) re-derives it.
        layer_types = values.get("layer_types")
        if layer_types:
            if "full_attention_interval" not in values and FULL_ATTENTION in layer_types:
                values["full_attention_interval"] = layer_types.index(FULL_ATTENTION) + 1
            interval = values.get("full_attention_interval", 4)
            if list(layer_types) == _derive_layer_types(len(layer_types), interval):
                values["layer_types"] = None
        if hf.get("vision_config") is not None and "text_config" in hf:
            vision = Qwen3_5VisionConfig.from_hf_dict(hf["vision_config"], hf)
            width = hf["vision_config"].get("out_hidden_size", values.get("hidden_size"))
            if width is not None and width != values.get("hidden_size", width):
                raise ValueError(
                    f"HF config: vision_config.out_hidden_size ({width}) must equal the text "
                    f"model's hidden_size ({values.get('hidden_size')})."
                )
            values[VISION_CONFIG] = vision
        return cls(**values)


def merge_vision_override(
    current: Qwen3_5VisionConfig | None, changes: Mapping[str, Any], where: str
) -> dict[str, Any]:
    """``changes`` with a ``vision_config`` mapping applied over ``current`` (the published
    tower when there is none): how ``config_overrides: {vision_config: {depth: 2}}`` changes
    one size of the flavor's tower."""
    vision = changes.get(VISION_CONFIG)
    if not isinstance(vision, Mapping):
        return dict(changes)
    return {
        **changes,
        VISION_CONFIG: Qwen3_5VisionConfig.from_overrides(current, vision, where),
    }


def _derive_layer_types(num_layers: int, interval: int) -> list[str]:
    """Layer ``i`` is full attention iff ``(i + 1) % interval == 0``."""
    return [
        FULL_ATTENTION if (i + 1) % interval == 0 else LINEAR_ATTENTION for i in range(num_layers)
    ]


def _suggest_mrope(half: int) -> list[int]:
    """An interleaved-mRoPE split of ``half`` frequencies close to HF's (T, H, W) proportions."""
    t = h = -(-half * 11 // 32)  # ceil(11/32 * half)
    t, h = min(t, half), min(h, max(half - t, 0))
    return [t, h, half - t - h]


def field_names(cls: type | None = None) -> list[str]:
    """The fields of ``cls`` (default :class:`Qwen3_5Config`) a config may set: all but the
    :attr:`~Qwen3_5Config.UNUSED_FIELDS` it inherits."""
    cls = cls or Qwen3_5Config
    return [f.name for f in dataclasses.fields(cls) if f.name not in cls.UNUSED_FIELDS]


def _check_keys(
    keys: Mapping[str, Any], where: str, extra: tuple[str, ...] = (), cls: type | None = None
) -> None:
    valid = field_names(cls) + list(extra)
    for key in keys:
        if key not in valid:
            raise ValueError(
                f"{where}: unknown key {key!r}{did_you_mean(str(key), valid)}. "
                f"Valid keys: {', '.join(valid)}."
            )


# --------------------------------------------------------------------------- flavors
def _full_size(**kw: Any) -> Qwen3_5Config:
    """Common to the public sizes: vocab 248320, head_dim 256, rotary 64, mRoPE [11, 11, 10],
    theta 1e7, GDN head dims 128/128, conv kernel 4, full attention every 4th layer."""
    return Qwen3_5Config(**kw)


FLAVORS: dict[str, Qwen3_5Config] = {
    # ~6M parameters; small vocab matching the shipped 2048-token BPE tokenizer. Untied so
    # embedding and lm_head can be sharded differently (row- vs column-wise) under TP.
    "debugmodel": Qwen3_5Config(
        vocab_size=2048,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=8,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
        partial_rotary_factor=0.25,
        mrope_section=[3, 3, 2],
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=64,
        linear_value_head_dim=64,
        tie_word_embeddings=False,
    ),
    # ~190k parameters (most of them the two 2048 x 32 embeddings), every layer kind once or
    # more: 3 Gated DeltaNet layers and 1 gated full-attention layer, head counts divisible by
    # 2 so tensor parallelism over 2 ranks splits each. For tests that compare layouts and
    # entries, where a step of the debug model would cost 10-20 times as much.
    "tiny": Qwen3_5Config(
        vocab_size=2048,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=4096,
        partial_rotary_factor=0.5,
        mrope_section=[2, 1, 1],
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        tie_word_embeddings=False,
    ),
    "0.8b": _full_size(
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=8,
        num_key_value_heads=2,
        intermediate_size=3584,
        linear_num_key_heads=16,
        linear_num_value_heads=16,
        tie_word_embeddings=True,
    ),
    "2b": _full_size(
        hidden_size=2048,
        num_hidden_layers=24,
        num_attention_heads=8,
        num_key_value_heads=2,
        intermediate_size=6144,
        linear_num_key_heads=16,
        linear_num_value_heads=16,
        tie_word_embeddings=True,
    ),
    "4b": _full_size(
        hidden_size=2560,
        num_hidden_layers=32,
        num_attention_heads=16,
        num_key_value_heads=4,
        intermediate_size=9216,
        linear_num_key_heads=16,
        linear_num_value_heads=32,
        tie_word_embeddings=True,
    ),
    "9b": _full_size(
        hidden_size=4096,
        num_hidden_layers=32,
        num_attention_heads=16,
        num_key_value_heads=4,
        intermediate_size=12288,
        linear_num_key_heads=16,
        linear_num_value_heads=32,
        tie_word_embeddings=False,
    ),
    "27b": _full_size(
        hidden_size=5120,
        num_hidden_layers=64,
        num_attention_heads=24,
        num_key_value_heads=4,
        intermediate_size=17408,
        linear_num_key_heads=16,
        linear_num_value_heads=48,
        tie_word_embeddings=False,
    ),
}
# Every published Qwen3.5 is image-text: each text flavor has an image-text one, the same
# decoder plus the vision tower (not ``tiny``, a layout-test model). Written out, key by key:
# the legacy parser reads the flavor names from this file without importing it.
FLAVORS.update(
    {
        "debugmodel_vl": image_text_flavor(FLAVORS["debugmodel"], debug=True),
        "0.8b_vl": image_text_flavor(FLAVORS["0.8b"]),
        "2b_vl": image_text_flavor(FLAVORS["2b"]),
        "4b_vl": image_text_flavor(FLAVORS["4b"]),
        "9b_vl": image_text_flavor(FLAVORS["9b"]),
        "27b_vl": image_text_flavor(FLAVORS["27b"]),
    }
)
"""Named sizes: the published Qwen3.5 dense sizes, the CPU debug model and the tiny test model,
then the image-text flavor of each but ``tiny`` (``<name>_vl``). Treat as read-only; use
``FLAVORS[name].replace(...)``."""
