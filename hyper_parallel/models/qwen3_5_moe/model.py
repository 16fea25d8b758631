"""Qwen3.5 mixture-of-experts causal LM: the dense hybrid decoder with a MoE feed-forward.

The module tree and the state-dict names are the dense model's
(:mod:`hyper_parallel.models.qwen3_5.model`) except each layer's ``mlp``, which is a
:class:`~.moe.SparseMoeBlock` named as Hugging Face's ``Qwen3_5MoeSparseMoeBlock``::

    model.layers.{i}.mlp.{gate.weight, gate.expert_bias, experts.gate_up_proj,
    experts.down_proj, shared_expert.{gate,up,down}_proj.weight, shared_expert_gate.weight}

``gate.expert_bias`` is this project's (the auxiliary-loss-free balancing bias; zeros unless the
run's ``moe.load_balance_coeff`` moves it); the state-dict adapter leaves it out of a Hugging
Face export and fills zeros on import.

``Qwen3_5MoeModel`` is the model on the protocol layer (its ``Config`` is
:class:`~.model_config.Qwen3_5MoeModelConfig`); FLOPs per token count the active parameters
only (the shared expert and ``num_experts_per_tok`` routed experts per layer), so the logged MFU
is right for a sparse model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from torch import nn

from hyper_parallel.models.qwen3_5.model import (
    Qwen3_5Decoder,
    Qwen3_5DecoderLayer,
    Qwen3_5ForCausalLM,
    token_mixing_flops_per_token,
)
from hyper_parallel.models.qwen3_5.model import (
    param_count_from_config as dense_param_count,
)
from hyper_parallel.models.qwen3_5.protocol import Qwen3_5Model
from hyper_parallel.protocols.model import BaseModel

from .configuration import Qwen3_5MoeConfig
from .model_config import Qwen3_5MoeModelConfig
from .moe import GroupedExperts, SparseMoeBlock, TopKRouter

__all__ = [
    "Qwen3_5MoeDecoderLayer",
    "Qwen3_5MoeForCausalLM",
    "Qwen3_5MoeModel",
    "flops_per_token",
    "moe_blocks",
    "param_count_from_config",
]


class Qwen3_5MoeDecoderLayer(Qwen3_5DecoderLayer):
    """The dense decoder layer with a mixture of experts as its feed-forward."""

    def _build_mlp(self, config: Qwen3_5MoeConfig) -> nn.Module:
        return SparseMoeBlock(
            hidden_size=config.hidden_size,
            num_experts=config.num_experts,
            top_k=config.num_experts_per_tok,
            moe_intermediate_size=config.moe_intermediate_size,
            shared_expert_intermediate_size=config.shared_expert_intermediate_size,
            implementation=config.experts_implementation,
        )


class Qwen3_5MoeDecoder(Qwen3_5Decoder):
    """The dense decoder over :class:`Qwen3_5MoeDecoderLayer` s."""

    layer_class = Qwen3_5MoeDecoderLayer


class Qwen3_5MoeForCausalLM(Qwen3_5ForCausalLM):
    """Qwen3.5 MoE causal LM: ``forward(input_ids, position_ids=None) -> logits (B, S, vocab)``.

    ``init_weights`` is the dense model's plus Hugging Face's rules for the router (normal) and
    the fused expert weights (normal); the expert bias and the token counts start at zero.
    """

    decoder_class = Qwen3_5MoeDecoder

    def _init_extra(self, module: nn.Module, live: nn.Module | None, init: Callable,
                    normal: Callable, zeros: Callable) -> None:
        if isinstance(module, TopKRouter):
            init(module.weight, normal)
            if live is not None:
                live.expert_bias.zero_()
        elif isinstance(module, GroupedExperts):
            init(module.gate_up_proj, normal)
            init(module.down_proj, normal)
        elif isinstance(module, SparseMoeBlock) and live is not None:
            live.reset_tokens_per_expert()


class Qwen3_5MoeModel(Qwen3_5MoeForCausalLM, Qwen3_5Model):
    """Qwen3.5 MoE causal LM as a ``BaseModel`` (see :class:`~hyper_parallel.models.qwen3_5.
    protocol.Qwen3_5Model`, whose protocol checks and construction it shares)."""

    Config = Qwen3_5MoeModelConfig

    def __init__(self, config: Qwen3_5MoeModelConfig) -> None:
        BaseModel.__init__(self, config)
        self._init_modules(config)

    def num_flops_per_token(self, seq_len: int) -> float:
        """Training FLOPs per token of the *active* weights: :func:`flops_per_token`."""
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
            raise ValueError(f"seq_len must be a positive int, got {seq_len!r}")
        return flops_per_token(self.config, seq_len)


def moe_blocks(model: nn.Module) -> Iterator[SparseMoeBlock]:
    """Every mixture-of-experts block of ``model``, in layer order (none for a dense model)."""
    return (m for m in model.modules() if isinstance(m, SparseMoeBlock))


# ---------------------------------------------------------------------- size & FLOPs
def param_count_from_config(config: Qwen3_5MoeConfig) -> dict[str, int]:
    """Parameter counts from the config alone: ``embedding``, ``lm_head`` (0 when tied),
    ``layers``, ``total`` (every parameter) and ``active`` (what one token uses: all but the
    ``num_experts - num_experts_per_tok`` routed experts it is not sent to, per layer).

    The expert bias is a buffer, not a parameter."""
    h, n_layers = config.hidden_size, config.num_hidden_layers
    # The dense count with no feed-forward: every layer's mixer and norms, the embeddings.
    dense = dense_param_count(config)
    mixers = dense["layers"] - n_layers * 3 * h * config.intermediate_size
    expert = 3 * h * config.moe_intermediate_size
    shared = 3 * h * config.shared_expert_intermediate_size + h  # + its sigmoid gate
    router = config.num_experts * h
    layers = mixers + n_layers * (router + shared + config.num_experts * expert)
    inactive = n_layers * (config.num_experts - config.num_experts_per_tok) * expert
    total = dense["total"] - dense["layers"] + layers
    return {
        "embedding": dense["embedding"],
        "lm_head": dense["lm_head"],
        "layers": layers,
        "total": total,
        "active": total - inactive,
    }


def flops_per_token(config: Qwen3_5MoeConfig, seq_len: int) -> float:
    """Training model FLOPs per token: ``6 * N_active`` (every active weight used in a matmul:
    the embedding table is a lookup, a tied ``lm_head`` is its matmul) plus the weight-free token
    mixing (:func:`~hyper_parallel.models.qwen3_5.model.token_mixing_flops_per_token`)."""
    counts = param_count_from_config(config)
    lm_head_matmul = config.vocab_size * config.hidden_size
    matmul_params = counts["active"] - counts["embedding"] + (
        lm_head_matmul if config.tie_word_embeddings else 0
    )
    return float(6 * matmul_params) + token_mixing_flops_per_token(config, seq_len)
