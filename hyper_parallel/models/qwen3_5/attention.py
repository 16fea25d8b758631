"""Gated grouped-query full attention of the Qwen3.5 hybrid stack."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hyper_parallel.utils.documents import Documents, DocumentShard

from .configuration import Qwen3_5Config
from .context_parallel import ContextParallel, attention_forward
from .documents import block_causal_attention, refuse_under_context_parallelism
from .norms import Qwen3_5RMSNorm
from .rope import apply_rotary


class Qwen3_5Attention(nn.Module):
    """Causal (or block-causal) GQA with per-head q/k RMSNorm, partial RoPE and an optional sigmoid output gate.

    ``q_proj`` emits, per head, ``[Q_h | gate_h]`` (width ``2 * head_dim``) so that head-aligned
    column sharding keeps a head's query and gate together. Head counts are inferred from the
    projected tensors, never from the config, so column-sharded (tensor-parallel) projections
    work on rank-local tensors unchanged. Under context parallelism ``hidden_states`` is this
    rank's shard of the sequence and :mod:`.context_parallel` supplies the rest.
    """

    def __init__(self, config: Qwen3_5Config, layer_idx: int = 0) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.attn_output_gate = config.attn_output_gate
        self.scaling = config.head_dim**-0.5
        q_out = config.num_attention_heads * config.head_dim * (2 if config.attn_output_gate else 1)
        kv_out = config.num_key_value_heads * config.head_dim
        bias = config.attention_bias
        self.q_proj = nn.Linear(config.hidden_size, q_out, bias=bias)
        self.k_proj = nn.Linear(config.hidden_size, kv_out, bias=bias)
        self.v_proj = nn.Linear(config.hidden_size, kv_out, bias=bias)
        self.o_proj = nn.Linear(
            config.num_attention_heads * config.head_dim, config.hidden_size, bias=bias
        )
        self.q_norm = Qwen3_5RMSNorm(config.head_dim, eps=config.rms_norm_eps)
        self.k_norm = Qwen3_5RMSNorm(config.head_dim, eps=config.rms_norm_eps)

    #: Context parallelism (:func:`~hyper_parallel.models.qwen3_5.context_parallel.apply_cp`):
    #: None on one rank's whole sequence.
    context_parallel: ContextParallel | None = None

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        documents: Documents | DocumentShard | None = None,
    ) -> torch.Tensor:
        """``documents`` (a packed batch's, on the device; ``block_causal``): each token attends
        to the earlier tokens of its own document (:func:`.documents.block_causal_attention`;
        under context parallelism this shard's
        :class:`~hyper_parallel.utils.documents.DocumentShard`)."""
        batch, seq, _ = hidden_states.shape
        hd = self.head_dim
        cos, sin = position_embeddings
        cp = self.context_parallel
        if cp is not None and documents is not None and not isinstance(documents, DocumentShard):
            refuse_under_context_parallelism("full attention")
        # Query, key, value one after the other, each ready for attention (norm on (B, S, H, D)
        # before the transpose, RoPE on the same layout), so that under context parallelism
        # the query's all-to-all can travel while the key and value are computed.
        q = self.q_proj(hidden_states)
        gate = None
        if self.attn_output_gate:
            q, gate = q.view(batch, seq, -1, 2 * hd).chunk(2, dim=-1)
            gate = gate.reshape(batch, seq, -1)
        else:
            q = q.view(batch, seq, -1, hd)
        q = apply_rotary(self.q_norm(q), cos, sin)
        exchange = None
        if cp is not None and cp.attention == "ulysses":
            exchange = cp.to_heads()
            exchange.put(q)
        k = apply_rotary(self.k_norm(self.k_proj(hidden_states).view(batch, seq, -1, hd)), cos, sin)
        v = self.v_proj(hidden_states).view(batch, seq, -1, hd)

        if cp is not None:
            out = attention_forward(cp, q, k, v, self.scaling, exchange, documents)
            out = out.reshape(batch, seq, -1)
        elif documents is not None:
            out = block_causal_attention(q, k, v, self.scaling, documents)
        else:
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            # Query head i reads kv head i // (Hq / Hkv), the same grouping as HF's repeat_kv.
            # No explicit mask (is_causal instead) and native GQA: on CUDA in bf16 / fp16 this
            # is what SDPA's flash-attention kernel takes (head_dim up to 256); elsewhere SDPA
            # picks the memory-efficient or math kernel.
            out = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, scale=self.scaling, enable_gqa=q.shape[1] != k.shape[1]
            )
            out = out.transpose(1, 2).reshape(batch, seq, -1)
        if gate is not None:
            out = out * torch.sigmoid(gate)
        return self.o_proj(out)
