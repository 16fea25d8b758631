"""Qwen3.5 mixture-of-experts text-model configuration and its size flavors.

``Qwen3_5MoeConfig`` is the dense :class:`~hyper_parallel.models.qwen3_5.configuration.
Qwen3_5Config` (the same hybrid decoder: Gated DeltaNet and gated full attention, 3:1) with the
feed-forward of every layer a mixture of experts, in Hugging Face's ``Qwen3_5MoeTextConfig``
names (``model_type='qwen3_5_moe_text'``), so a ``config.json`` maps onto it one-to-one:

* ``num_experts`` routed experts, ``num_experts_per_tok`` of them per token (softmax router in
  fp32, top-k, renormalised), each a SwiGLU of width ``moe_intermediate_size``;
* one shared expert of width ``shared_expert_intermediate_size`` on every token, scaled by a
  sigmoid gate.

The dense ``intermediate_size`` is inherited but not part of this architecture
(:attr:`UNUSED_FIELDS`): it is never written to ``config.json`` and setting it is refused.
``experts_implementation`` (``grouped_mm`` / ``loop``) is this project's, like ``kernels``: how
the experts are computed, not what they compute.

The load-balancing settings (the auxiliary loss, the expert bias) are training settings, in the
run's ``moe`` section, not here. This module imports no framework.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hyper_parallel.models.qwen3_5.configuration import NON_HF_FIELDS as DENSE_NON_HF_FIELDS
from hyper_parallel.models.qwen3_5.vision_config import image_text_flavor
from hyper_parallel.models.qwen3_5.configuration import Qwen3_5Config
from hyper_parallel.utils.choices import (
    DEFAULT_EXPERTS_IMPLEMENTATION,
    EXPERTS_IMPLEMENTATIONS,
    ExpertsImplementation,
)
from hyper_parallel.utils.suggest import did_you_mean

__all__ = ["DEFAULT_FLAVOR", "FLAVORS", "HF_TEXT_MODEL_TYPE", "Qwen3_5MoeConfig"]

HF_TEXT_MODEL_TYPE = "qwen3_5_moe_text"
"""``model_type`` that transformers maps to ``Qwen3_5MoeTextConfig`` / ``Qwen3_5MoeForCausalLM``."""

DEFAULT_FLAVOR = "35b_a3b"

_MOE_POSITIVE_INT_FIELDS = (
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
)


@dataclass(kw_only=True)
class Qwen3_5MoeConfig(Qwen3_5Config):
    """Architecture of a Qwen3.5 mixture-of-experts text decoder. Defaults are Qwen3.5-35B-A3B."""

    vocab_size: int = 248320
    """Vocabulary size (rows of ``embed_tokens`` and ``lm_head``)."""
    hidden_size: int = 2048
    """Residual-stream width."""
    num_hidden_layers: int = 40
    """Number of decoder layers (every one has a mixture-of-experts feed-forward)."""
    num_attention_heads: int = 16
    """Query heads of the full-attention layers."""
    num_key_value_heads: int = 2
    """Key/value heads of the full-attention layers (GQA); must divide ``num_attention_heads``."""
    tie_word_embeddings: bool = False
    """Share ``lm_head.weight`` with ``model.embed_tokens.weight``."""
    linear_num_value_heads: int = 32
    """Gated DeltaNet value heads (``Hv``)."""
    num_experts: int = 256
    """Routed experts of every layer."""
    num_experts_per_tok: int = 8
    """Experts each token is routed to (top-k of the router's softmax, renormalised)."""
    moe_intermediate_size: int = 512
    """SwiGLU hidden width of each routed expert."""
    shared_expert_intermediate_size: int = 512
    """SwiGLU hidden width of the shared expert, which every token passes through."""
    experts_implementation: ExpertsImplementation = DEFAULT_EXPERTS_IMPLEMENTATION
    """How the routed experts are computed: ``grouped_mm`` (one grouped GEMM per projection
    over all experts' rows, ``torch._grouped_mm``) or ``loop`` (one matmul per expert, the
    reference). The same function either way. Not architecture: not written to ``config.json``."""

    HF_ARCHITECTURE = "Qwen3_5MoeForCausalLM"
    HF_MODEL_TYPE = HF_TEXT_MODEL_TYPE
    HF_IMAGE_TEXT_ARCHITECTURE = "Qwen3_5MoeForConditionalGeneration"
    HF_IMAGE_TEXT_MODEL_TYPE = "qwen3_5_moe"
    NON_HF_FIELDS: ClassVar[tuple[str, ...]] = (*DENSE_NON_HF_FIELDS, "experts_implementation")
    UNUSED_FIELDS: ClassVar[tuple[str, ...]] = ("intermediate_size",)

    def __post_init__(self) -> None:
        super().__post_init__()
        name = "Qwen3_5MoeConfig"
        for field_name in _MOE_POSITIVE_INT_FIELDS:
            value = getattr(self, field_name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}.{field_name} must be a positive int, got {value!r}.")
        if self.num_experts_per_tok > self.num_experts:
            raise ValueError(
                f"{name}.num_experts_per_tok ({self.num_experts_per_tok}) must not exceed "
                f"num_experts ({self.num_experts})."
            )
        if self.experts_implementation not in EXPERTS_IMPLEMENTATIONS:
            raise ValueError(
                f"{name}.experts_implementation={self.experts_implementation!r} is invalid"
                f"{did_you_mean(str(self.experts_implementation), EXPERTS_IMPLEMENTATIONS)}; "
                f"choose from {list(EXPERTS_IMPLEMENTATIONS)}."
            )


def _published(**kw: Any) -> Qwen3_5MoeConfig:
    """Common to the published sizes: vocab 248320, head_dim 256, rotary 64, mRoPE [11, 11, 10],
    theta 1e7, GDN head dims 128/128 with 16 key heads, conv kernel 4, full attention every 4th
    layer, untied embeddings, 262,144 positions."""
    return Qwen3_5MoeConfig(max_position_embeddings=262144, linear_num_key_heads=16, **kw)


FLAVORS: dict[str, Qwen3_5MoeConfig] = {
    # ~0.4M parameters for CPU tests and the demo: 8 layers (6 Gated DeltaNet, 2 gated full
    # attention), 8 experts of which 2 per token, head counts divisible by 2 (tensor
    # parallelism) and experts by 2 and 4 (expert parallelism). Untied, like the published sizes.
    "debugmodel": Qwen3_5MoeConfig(
        vocab_size=2048,
        hidden_size=32,
        num_hidden_layers=8,
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
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
    ),
    "35b_a3b": _published(
        hidden_size=2048,
        num_hidden_layers=40,
        num_attention_heads=16,
        num_key_value_heads=2,
        linear_num_value_heads=32,
        num_experts=256,
        num_experts_per_tok=8,
        moe_intermediate_size=512,
        shared_expert_intermediate_size=512,
    ),
    "122b_a10b": _published(
        hidden_size=3072,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=2,
        linear_num_value_heads=64,
        num_experts=256,
        num_experts_per_tok=8,
        moe_intermediate_size=1024,
        shared_expert_intermediate_size=1024,
    ),
    "397b_a17b": _published(
        hidden_size=4096,
        num_hidden_layers=60,
        num_attention_heads=32,
        num_key_value_heads=2,
        linear_num_value_heads=64,
        num_experts=512,
        num_experts_per_tok=10,
        moe_intermediate_size=1024,
        shared_expert_intermediate_size=1024,
    ),
}
# Every published Qwen3.5 MoE is image-text: each flavor has an image-text one (``<name>_vl``),
# written out key by key (the legacy parser reads the names from this file's text).
FLAVORS.update(
    {
        "debugmodel_vl": image_text_flavor(FLAVORS["debugmodel"], debug=True),
        "35b_a3b_vl": image_text_flavor(FLAVORS["35b_a3b"]),
        "122b_a10b_vl": image_text_flavor(FLAVORS["122b_a10b"]),
        "397b_a17b_vl": image_text_flavor(FLAVORS["397b_a17b"]),
    }
)
"""Named sizes: the published Qwen3.5 MoE sizes and the CPU debug model, then the image-text
flavor of each (``<name>_vl``). Treat as read-only; use ``FLAVORS[name].replace(...)``."""
