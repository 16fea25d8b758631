"""Gated DeltaNet (linear attention) layer of the Qwen3.5 hybrid stack, in a TP-friendly layout.

Hugging Face fuses Q, K and V into ``in_proj_qkv`` and their convolutions into one ``conv1d``.
Here they are separate so each can be column / head sharded on its own:

==================  ==========================  ========================================
parameter           shape                       HF counterpart
==================  ==========================  ========================================
conv_q_weight       (Hk*Dk, 1, K)               conv1d.weight rows [0, key_dim)
conv_k_weight       (Hk*Dk, 1, K)               conv1d.weight rows [key_dim, 2*key_dim)
conv_v_weight       (Hv*Dv, 1, K)               conv1d.weight rows [2*key_dim, end)
dt_bias             (Hv,)                       dt_bias
A_log               (Hv,)                       A_log
norm.weight         (Dv,)                       norm.weight
out_proj.weight     (hidden, Hv*Dv)             out_proj.weight
in_proj_q/k/v       (Hk*Dk | Hk*Dk | Hv*Dv, h)  in_proj_qkv.weight split on dim 0
in_proj_z/b/a       (Hv*Dv | Hv | Hv, hidden)   in_proj_z / in_proj_b / in_proj_a
==================  ==========================  ========================================

The depthwise conv weights are plain ``nn.Parameter`` s (not ``nn.Conv1d`` modules) so that a
``Shard(0)`` DTensor can be used directly through :func:`_local`.

The convolution and the delta rule run on the implementation ``config.kernels`` selects for the
device the parameters are on (:mod:`.kernels`: the torch path, or fla-core's CUDA kernels).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hyper_parallel.utils.documents import Documents, DocumentShard

from ._dtensor import _local, _match_input
from .configuration import Qwen3_5Config
from .context_parallel import ContextParallel, shifted_conv, state_passing_delta_rule
from .documents import conv_within_documents, refuse_under_context_parallelism
from .kernels import GdnKernels, select_gdn_kernels


class Qwen3_5RMSNormGated(nn.Module):
    """``weight * rmsnorm(x) * silu(z)`` over the last dim (fp32 inside; ``weight`` init ones)."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def reset_parameters(self) -> None:
        """HF init: ones (a zero weight would silence the whole GDN branch)."""
        nn.init.ones_(self.weight)

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        # Same rounding points as HF: cast the normalised value back before the weight.
        out = _match_input(self.weight, x) * normed.to(dtype)
        out = out * F.silu(gate.float())
        return out.to(dtype)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.eps}"


class Qwen3_5GatedDeltaNet(nn.Module):
    """Gated DeltaNet: projections, causal conv + SiLU, chunked gated delta rule, gated RMSNorm,
    output projection. Local head counts are inferred from tensor shapes (TP-safe)."""

    def __init__(self, config: Qwen3_5Config, layer_idx: int = 0) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.head_k_dim = config.linear_key_head_dim
        self.head_v_dim = config.linear_value_head_dim
        self.kernels = config.kernels  # requested (model.kernels); select_kernels() resolves it
        self._selected: GdnKernels | None = None
        key_dim, value_dim, hv = (
            config.linear_key_dim,
            config.linear_value_dim,
            config.linear_num_value_heads,
        )
        kernel = config.linear_conv_kernel_dim
        hidden = config.hidden_size
        # Registration order is fixed (it fixes parameters() order, hence reduction order).
        self.conv_q_weight = nn.Parameter(torch.empty(key_dim, 1, kernel))
        self.conv_k_weight = nn.Parameter(torch.empty(key_dim, 1, kernel))
        self.conv_v_weight = nn.Parameter(torch.empty(value_dim, 1, kernel))
        self.dt_bias = nn.Parameter(torch.ones(hv))
        self.A_log = nn.Parameter(torch.empty(hv))
        self.norm = Qwen3_5RMSNormGated(self.head_v_dim, eps=config.rms_norm_eps)
        self.out_proj = nn.Linear(value_dim, hidden, bias=False)
        self.in_proj_q = nn.Linear(hidden, key_dim, bias=False)
        self.in_proj_k = nn.Linear(hidden, key_dim, bias=False)
        self.in_proj_v = nn.Linear(hidden, value_dim, bias=False)
        self.in_proj_z = nn.Linear(hidden, value_dim, bias=False)
        self.in_proj_b = nn.Linear(hidden, hv, bias=False)
        self.in_proj_a = nn.Linear(hidden, hv, bias=False)
        if not self.A_log.is_meta:
            self.reset_parameters(std=config.initializer_range)

    def reset_parameters(self, std: float = 0.02) -> None:
        """HF-like init of the parameters owned directly by this module (not the Linears)."""
        with torch.no_grad():
            for w in (self.conv_q_weight, self.conv_k_weight, self.conv_v_weight):
                w.normal_(0.0, std)
            self.dt_bias.fill_(1.0)
            self.A_log.copy_(sample_A_log(self.A_log.shape, self.A_log.device))

    def select_kernels(self) -> GdnKernels:
        """The implementation this layer computes with, for the device its parameters are on now.

        Chosen on first use and again after the parameters moved to another device type (a
        :class:`~hyper_parallel.utils.errors.ConfigError` where ``kernels`` cannot run there);
        otherwise a cached attribute read, which compiled code traces without a graph break.
        """
        device_type = self.A_log.device.type
        if self._selected is None or self._selected.device_type != device_type:
            self._selected = select_gdn_kernels(self.kernels, device_type)
        return self._selected

    #: Context parallelism (:func:`~hyper_parallel.models.qwen3_5.context_parallel.apply_cp`):
    #: None on one rank's whole sequence.
    context_parallel: ContextParallel | None = None

    def forward(self, hidden_states: torch.Tensor,
                documents: Documents | DocumentShard | None = None) -> torch.Tensor:
        """``documents`` (a packed batch's, on the device; ``block_causal``): the convolution's
        window and the delta-rule state restart at each document's start
        (:mod:`.documents`; under context parallelism this shard's
        :class:`~hyper_parallel.utils.documents.DocumentShard`)."""
        kernels = self.select_kernels()
        cp = self.context_parallel
        if cp is not None and documents is not None and not isinstance(documents, DocumentShard):
            refuse_under_context_parallelism("Gated DeltaNet")
        if cp is not None and cp.linear == "ulysses":
            return self._forward_ulysses(hidden_states, kernels, cp, documents)
        batch, seq, _ = hidden_states.shape
        dk, dv = self.head_k_dim, self.head_v_dim
        q = self.in_proj_q(hidden_states)
        k = self.in_proj_k(hidden_states)
        v = self.in_proj_v(hidden_states)
        z = self.in_proj_z(hidden_states)
        b = self.in_proj_b(hidden_states)
        a = self.in_proj_a(hidden_states)

        # One depthwise conv over [q | k | v] channels (channels are independent).
        qk_width, v_width = q.shape[-1], v.shape[-1]
        conv_w = torch.cat(
            [_local(self.conv_q_weight), _local(self.conv_k_weight), _local(self.conv_v_weight)], 0
        )
        mixed = torch.cat([q, k, v], dim=-1)
        if cp is not None:  # state passing: the kernel - 1 positions before the shard
            mixed = shifted_conv(cp, kernels.conv, mixed, conv_w, documents)
        elif documents is not None:
            mixed = conv_within_documents(kernels.conv, mixed, conv_w, documents)
        else:
            mixed = kernels.conv(mixed, conv_w)
        q, k, v = mixed.split([qk_width, qk_width, v_width], dim=-1)
        q = q.reshape(batch, seq, -1, dk)
        k = k.reshape(batch, seq, -1, dk)
        v = v.reshape(batch, seq, -1, dv)

        beta = b.sigmoid()
        g = self._decay(a, _local(self.A_log), _local(self.dt_bias))
        if cp is not None:
            out = state_passing_delta_rule(cp, kernels.delta_rule_with_state, q, k, v, g, beta,
                                           documents)
        elif documents is not None:
            out = kernels.delta_rule(q, k, v, g, beta, documents=documents)
        else:
            out = kernels.delta_rule(q, k, v, g, beta)

        out = self.norm(out, z.reshape(batch, seq, -1, dv))
        return self.out_proj(out.reshape(batch, seq, -1))

    @staticmethod
    def _decay(a: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor) -> torch.Tensor:
        """The log decay ``g = -exp(A_log) * softplus(a + dt_bias)``, in fp32 so that
        ``exp(A_log)`` cannot overflow in low precision."""
        return -A_log.float().exp() * F.softplus(a.float() + dt_bias.float())

    def _forward_ulysses(
        self, hidden_states: torch.Tensor, kernels: GdnKernels, cp: ContextParallel,
        documents: DocumentShard | None = None,
    ) -> torch.Tensor:
        """Context parallelism over heads: the projections of this rank's sequence shard go
        through an all-to-all (each put as soon as it is computed), the rank runs the
        convolution and the recurrence of its heads over the whole sequence, and a second
        all-to-all brings the output back to the shard. ``documents``: the whole rows' are
        kept apart there, as on one rank."""
        batch, seq, _ = hidden_states.shape
        dk, dv = self.head_k_dim, self.head_v_dim
        exchange = cp.to_heads()
        exchange.put(self.in_proj_q(hidden_states).view(batch, seq, -1, dk))
        exchange.put(self.in_proj_k(hidden_states).view(batch, seq, -1, dk))
        exchange.put(self.in_proj_v(hidden_states).view(batch, seq, -1, dv))
        exchange.put(self.in_proj_b(hidden_states).unsqueeze(-1))
        exchange.put(self.in_proj_a(hidden_states).unsqueeze(-1))
        z = self.in_proj_z(hidden_states)
        q, k, v, b, a = exchange.take()  # (B, S, heads / cp, D): the whole sequence
        full = q.shape[1]
        # This rank's heads of the (tensor-parallel local) per-head parameters.
        key_heads = cp.heads_of_rank(_local(self.conv_q_weight).shape[0] // dk)
        value_heads = cp.heads_of_rank(_local(self.A_log).shape[0])
        key_rows = slice(key_heads.start * dk, key_heads.stop * dk)
        value_rows = slice(value_heads.start * dv, value_heads.stop * dv)
        conv_w = torch.cat([
            _local(self.conv_q_weight)[key_rows], _local(self.conv_k_weight)[key_rows],
            _local(self.conv_v_weight)[value_rows],
        ], 0)
        qk_width, v_width = q.shape[2] * dk, v.shape[2] * dv
        mixed = torch.cat([q.flatten(2), k.flatten(2), v.flatten(2)], dim=-1)
        whole = None if documents is None else documents.whole
        if whole is None:
            mixed = kernels.conv(mixed, conv_w)
        else:
            mixed = conv_within_documents(kernels.conv, mixed, conv_w, whole)
        q, k, v = mixed.split([qk_width, qk_width, v_width], dim=-1)
        q = q.reshape(batch, full, -1, dk)
        k = k.reshape(batch, full, -1, dk)
        v = v.reshape(batch, full, -1, dv)
        beta = b.squeeze(-1).sigmoid()
        g = self._decay(
            a.squeeze(-1), _local(self.A_log)[value_heads], _local(self.dt_bias)[value_heads]
        )
        resets = {} if whole is None else {"documents": whole}
        out = cp.to_sequence(kernels.delta_rule(q, k, v, g, beta, **resets))
        out = self.norm(out, z.reshape(batch, seq, -1, dv))
        return self.out_proj(out.reshape(batch, seq, -1))


def sample_A_log(
    shape: torch.Size | tuple[int, ...], device: torch.device | str | None = None
) -> torch.Tensor:
    """HF's A_log init: ``log(U(0.01, 16))`` (the lower bound keeps log(A) finite)."""
    return torch.empty(shape, device=device).uniform_(0.01, 16.0).log_()
