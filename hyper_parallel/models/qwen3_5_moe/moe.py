"""Sparse mixture-of-experts feed-forward block of Qwen3.5-MoE (HF ``Qwen3_5MoeSparseMoeBlock``).

Every token goes through a shared SwiGLU expert (scaled by a sigmoid gate) plus ``top_k`` of
``num_experts`` routed SwiGLU experts, weighted by renormalised softmax router probabilities.
Parameter names and layouts are Hugging Face's, so checkpoints load without renaming:

=========================  ======================  ==========================================
parameter                  shape                   note
=========================  ======================  ==========================================
gate.weight                (E, hidden)             router
experts.gate_up_proj       (E, 2*I, hidden)        rows [0, I) gate, [I, 2I) up
experts.down_proj          (E, hidden, I)
shared_expert.*            Qwen3_5MLP              ``shared_expert_intermediate_size``
shared_expert_gate.weight  (1, hidden)
=========================  ======================  ==========================================

Plus one persistent buffer HF lacks: ``gate.expert_bias`` (auxiliary-loss-free balancing).

Unlike HF, which loops over experts and gathers each one's tokens with a mask, the routed slots
are sorted by expert once (:func:`permute_by_expert`, in HF's row order), so the experts see one
contiguous row block each. That is the layout a grouped GEMM (``torch._grouped_mm``) and an expert-parallel
all-to-all (``SparseMoeBlock.dispatcher``) both want.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from hyper_parallel.models.qwen3_5._dtensor import _local, _match_input
from hyper_parallel.models.qwen3_5.mlp import Qwen3_5MLP
from hyper_parallel.utils.choices import EXPERTS_IMPLEMENTATIONS

# The implementations (one home: hyper_parallel.utils.choices), re-exported under this name.
EXPERT_IMPLEMENTATIONS = EXPERTS_IMPLEMENTATIONS


class RouterStats(NamedTuple):
    """One MoE layer's routing statistics for one forward, input of :func:`load_balancing_loss`."""

    probs_sum: torch.Tensor  # [E] fp32, sum over tokens of the router probabilities (with grad)
    selected: torch.Tensor  # [E] fp32, how many top-k slots chose each expert (no grad)
    num_tokens: int


class TopKRouter(nn.Module):
    """Softmax router: fp32 probabilities over all experts, top-k, renormalised to sum to 1.

    ``expert_bias`` (zeros, fp32) implements auxiliary-loss-free load balancing (DeepSeek-V3):
    a trainer nudges it up for under-used experts. It only moves the *selection* (top-k of
    ``probs + expert_bias``); the gate weights stay the unbiased probabilities of the chosen
    experts, so the bias never enters the model's output as a value and needs no gradient. It is
    ignored unless ``use_expert_bias`` is set, so that a default run is HF bit for bit.
    """

    def __init__(self, num_experts: int, top_k: int, hidden_size: int) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.use_expert_bias = False
        self.weight = nn.Parameter(torch.empty(num_experts, hidden_size))
        # Persistent: the balancing state must survive a checkpoint resume.
        self.register_buffer(
            "expert_bias", torch.zeros(num_experts, dtype=torch.float32), persistent=True
        )
        if not self.weight.is_meta:
            self.reset_parameters()

    def reset_parameters(self, std: float = 0.02) -> None:
        """HF init: normal(0, std); the bias starts neutral."""
        with torch.no_grad():
            self.weight.normal_(0.0, std)
            self.expert_bias.zero_()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``x`` [T, H] -> (probs [T, E] fp32, scores [T, k] in ``x``'s dtype, indices [T, k])."""
        logits = F.linear(x, _match_input(self.weight, x))
        # Softmax in fp32 whatever the activation dtype, as HF: bf16 probabilities would make
        # near-ties (hence the selection) depend on rounding.
        probs = F.softmax(logits, dim=-1, dtype=torch.float32)
        choice = probs + self.expert_bias.float() if self.use_expert_bias else probs
        indices = torch.topk(choice, self.top_k, dim=-1).indices
        scores = probs.gather(-1, indices)  # unbiased, even when the bias chose the experts
        scores = scores / scores.sum(dim=-1, keepdim=True)
        return probs, scores.to(logits.dtype), indices

    def extra_repr(self) -> str:
        return f"num_experts={self.num_experts}, top_k={self.top_k}"


class _ContiguousGrad(torch.autograd.Function):
    """Identity whose backward makes the incoming gradient contiguous.

    ``torch._grouped_mm``'s backward rejects gradients whose strides are not 16-byte multiples,
    such as the stride-0 gradient of ``out.sum()`` or a transposed one (torch 2.13).

    The output is ``x.detach()``: the same memory, no copy, but not a view of ``x`` (a
    non-differentiable alias; ``_base`` is None). ``x.view_as(x)`` would be a view, and this is
    what :class:`GroupedExperts` returns, i.e. the output of an FSDP2 unit: an in-place op on a
    view output rebases its autograd history and drops FSDP's pre-backward hook (the
    all-gather of the experts' weights before their backward), which FSDP2 warns about on every
    forward. The version counter stays shared, so autograd still catches an in-place change of
    a tensor saved for backward.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        return x.detach()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad.contiguous()


class _ScaleGrad(torch.autograd.Function):
    """Identity whose backward multiplies the gradient by ``scale``."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad * ctx.scale, None


def _grouped_linear(x: torch.Tensor, weight: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    """``F.linear(rows, weight[e])`` for every expert's row block in one grouped GEMM."""
    out = torch._grouped_mm(x.contiguous(), weight.transpose(-2, -1), offs=offs)
    return _ContiguousGrad.apply(out)


class GroupedExperts(nn.Module):
    """``num_experts`` SwiGLU experts stored as 3-D tensors (HF layout), run on expert-sorted rows.

    ``implementation`` (changeable after construction) is one of :data:`EXPERT_IMPLEMENTATIONS`:

    * ``"grouped_mm"``: two ``torch._grouped_mm`` calls for all experts; no host sync, so the
      launch count does not grow with the number of experts.
    * ``"loop"``: one ``F.linear`` pair per expert over ``split`` row blocks; the reference
      (same kernels as HF's loop), and what ``grouped_mm`` falls back to where it cannot run: a
      hidden or intermediate size whose row stride is not a multiple of 16 bytes (4 fp32 /
      8 bf16 elements), which the grouped GEMM rejects.

    In torch 2.13 ``_grouped_mm`` runs eagerly on CPU for fp32 / bf16 / fp16, but its CUDA
    kernel and its meta kernel (hence ``torch.compile``, and the fake-CUDA check of the test
    suite) accept bf16 only, and it is not autocast-aware: ``x`` must already have the
    weights' dtype. So off the CPU, and under ``torch.compile``, an fp32 or fp16 run takes the
    loop.

    With expert parallelism the parameters are ``Shard(0)`` DTensors; the forward then runs on
    the local shard, i.e. on the rank's own experts, and ``counts`` has one entry per local expert.
    """

    def __init__(
        self,
        num_experts: int,
        hidden_size: int,
        intermediate_size: int,
        implementation: str = "grouped_mm",
    ) -> None:
        super().__init__()
        if implementation not in EXPERT_IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {EXPERT_IMPLEMENTATIONS}")
        self.num_experts = num_experts
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.implementation = implementation
        # Expert parallelism sets it to the EP degree: an expert's gradient then arrives summed
        # over the tokens of every EP rank, which the data-parallel average does not cover.
        # An attribute, not a tensor hook, so that it survives ``to_empty``.
        self.gradient_divide_factor = 1
        self.gate_up_proj = nn.Parameter(
            torch.empty(num_experts, 2 * intermediate_size, hidden_size)
        )
        self.down_proj = nn.Parameter(torch.empty(num_experts, hidden_size, intermediate_size))
        if not self.gate_up_proj.is_meta:
            self.reset_parameters()

    def reset_parameters(self, std: float = 0.02) -> None:
        """HF init: normal(0, std) for both projections."""
        with torch.no_grad():
            self.gate_up_proj.normal_(0.0, std)
            self.down_proj.normal_(0.0, std)

    def forward(self, x: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """``x`` [M, H], rows grouped by expert (``counts[e]`` rows for local expert ``e``, in
        ascending order) -> [M, H]. No routing weight is applied here."""
        gate_up, down = _local(self.gate_up_proj), _local(self.down_proj)
        if gate_up.dtype != x.dtype:
            # Experts outside FSDP (expert parallelism without a data-parallel axis) are not
            # cast by its mixed-precision policy: compute in the activations' dtype, as FSDP's
            # units do, with float32 master weights.
            gate_up, down = gate_up.to(x.dtype), down.to(x.dtype)
        if self.gradient_divide_factor != 1:
            scale = 1.0 / self.gradient_divide_factor
            gate_up, down = _ScaleGrad.apply(gate_up, scale), _ScaleGrad.apply(down, scale)
        if counts.shape != (gate_up.shape[0],):
            raise ValueError(
                f"counts has shape {tuple(counts.shape)}, expected ({gate_up.shape[0]},): "
                "one entry per local expert"
            )
        if self.implementation not in EXPERT_IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {EXPERT_IMPLEMENTATIONS}")
        if self.implementation == "grouped_mm" and self._grouped_mm_runs(x):
            offs = torch.cumsum(counts, 0, dtype=torch.int32)  # the kernel wants int32 ends
            gate, up = _grouped_linear(x, gate_up, offs).chunk(2, dim=-1)
            return _grouped_linear(F.silu(gate) * up, down, offs)
        return self._loop(x, counts, gate_up, down)

    @staticmethod
    def _loop(
        x: torch.Tensor, counts: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor
    ) -> torch.Tensor:
        outs = []
        # Experts with no rows still run (on zero rows): exact zero gradients, no branch.
        for e, rows in enumerate(x.split(counts.tolist())):
            gate, up = F.linear(rows, gate_up[e]).chunk(2, dim=-1)
            outs.append(F.linear(F.silu(gate) * up, down[e]))
        return torch.cat(outs)

    def _grouped_mm_runs(self, x: torch.Tensor) -> bool:
        """Whether ``torch._grouped_mm`` takes these operands: every row stride a multiple of
        16 bytes, and bf16 only on CUDA and under ``torch.compile`` (the CUDA and meta kernels'
        rule in torch 2.13; fp32 reached the CUDA kernel before the fake-CUDA check found it);
        elsewhere the loop computes the same function."""
        on_cpu = x.device.type == "cpu" and not torch.compiler.is_compiling()
        if not on_cpu and x.dtype != torch.bfloat16:
            return False
        return all(
            (dim * x.element_size()) % 16 == 0 for dim in (self.hidden_size, self.intermediate_size)
        )

    def extra_repr(self) -> str:
        return (
            f"num_experts={self.num_experts}, hidden={self.hidden_size}, "
            f"intermediate={self.intermediate_size}, implementation={self.implementation!r}"
        )


def permute_by_expert(indices: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sort the ``T * k`` routed slots by expert, in Hugging Face's row order.

    ``indices`` [T, k] -> (``order`` [T*k] int64, ``counts`` [num_experts] int64). ``order``
    lists flat slot ids (``t * k + j``: token ``t``'s ``j``-th choice) expert by expert; within
    an expert the rows are ordered by choice rank ``j`` first, then by token -- the order in
    which HF's per-expert loop gathers them (``torch.where`` over the expert's ``[k, T]`` mask).
    The same rows in another order would give a GEMM another rounding, so this order is what
    makes the loop path HF's bits. The token of a slot is ``order // k``. Counts use
    ``scatter_add_`` rather than ``bincount``: no device-to-host sync.
    """
    tokens, k = indices.shape
    # Positions j * T + t of the choice-major flattening, sorted (stably) by expert ...
    choice_major = torch.argsort(indices.t().reshape(-1), stable=True)
    # ... and turned back into flat slot ids t * k + j.
    order = (choice_major % tokens) * k + choice_major // tokens
    flat = indices.reshape(-1)
    counts = torch.zeros(num_experts, dtype=torch.int64, device=flat.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    return order, counts


class SparseMoeBlock(nn.Module):
    """Qwen3.5-MoE feed-forward: ``sigmoid(shared_gate(x)) * shared(x) + sum_k score_k * expert_k(x)``.

    ``dispatcher`` (None: every expert is local) is the expert-parallel hook: an object with
    ``dispatch(tokens [N, H], counts [E]) -> (local_tokens [M, H], local_counts [E_local],
    handle)`` and ``combine(expert_out [M, H], handle) -> [N, H]`` (rows back in dispatch's
    input order). It is called around the experts on the expert-sorted slots.

    Routing statistics for the load-balancing losses: every forward sets ``last_router_stats``
    (:class:`RouterStats`) and adds the top-k counts into the ``tokens_per_expert`` buffer,
    except an activation-checkpoint recomputation in backward, which would count the same
    tokens twice. ``probs_sum`` keeps its graph only under non-reentrant checkpointing (the
    reentrant kind runs the forward under ``no_grad``).
    """

    dispatcher = None
    #: Whether ``last_router_stats`` keeps the router probabilities' graph (an auxiliary loss
    #: differentiates them). :class:`~hyper_parallel.runtime.moe_balance.MoEBalancer` turns it
    #: off when the run has no auxiliary loss: kept without a consumer, that graph holds the
    #: layer's forward -- under activation checkpointing its whole recomputation -- until the
    #: next forward, so every layer's activations lived through the backward (preflight
    #: measured 2.25 GB a layer at 122B).
    router_stats_need_grad = True

    def __init__(
        self,
        hidden_size: int,
        num_experts: int,
        top_k: int,
        moe_intermediate_size: int,
        shared_expert_intermediate_size: int,
        implementation: str = "grouped_mm",
    ) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.gate = TopKRouter(num_experts, top_k, hidden_size)
        self.experts = GroupedExperts(
            num_experts, hidden_size, moe_intermediate_size, implementation
        )
        self.shared_expert = Qwen3_5MLP(hidden_size, shared_expert_intermediate_size)
        self.shared_expert_gate = nn.Linear(hidden_size, 1, bias=False)
        # Not persistent: a statistic for balancing / logging, reset by its consumer.
        self.register_buffer(
            "tokens_per_expert", torch.zeros(num_experts, dtype=torch.float32), persistent=False
        )
        self.last_router_stats: RouterStats | None = None

    def reset_tokens_per_expert(self) -> None:
        self.tokens_per_expert.zero_()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        shape = hidden.shape
        x = hidden.reshape(-1, shape[-1])
        # Same op order as HF (shared expert, router, routed experts, gated sum).
        shared = self.shared_expert(x)
        probs, scores, indices = self.gate(x)
        order, counts = permute_by_expert(indices, self.num_experts)
        self._record_stats(probs, counts, x.shape[0])

        token = order // self.top_k
        routed = x[token]
        if self.dispatcher is None:
            routed = self.experts(routed, counts)
        else:
            local, local_counts, handle = self.dispatcher.dispatch(routed, counts)
            routed = self.dispatcher.combine(self.experts(local, local_counts), handle)
        routed = routed * scores.reshape(-1)[order].unsqueeze(-1)
        # Rows are expert-ascending, so each token's k contributions are summed in expert order,
        # as HF's per-expert index_add_ loop does: same additions, same rounding.
        out = torch.zeros_like(x).index_add_(0, token, routed.to(x.dtype))

        # The gate's weight may be a replicated DTensor (tensor parallelism): use its local copy.
        gate_weight = _match_input(self.shared_expert_gate.weight, x)
        shared = torch.sigmoid(F.linear(x, gate_weight)) * shared
        return (out + shared).reshape(shape)

    def _record_stats(self, probs: torch.Tensor, counts: torch.Tensor, num_tokens: int) -> None:
        selected = counts.float()
        probs_sum = probs.sum(dim=0) if self.router_stats_need_grad else probs.detach().sum(0)
        self.last_router_stats = RouterStats(probs_sum, selected, num_tokens)
        # A graph task is running only inside backward, i.e. when checkpointing recomputes us.
        if torch._C._current_graph_task_id() == -1:
            self.tokens_per_expert.add_(selected)


def load_balancing_loss(stats: Sequence[RouterStats], num_experts: int) -> torch.Tensor:
    """Switch-Transformer auxiliary loss over all MoE layers, as HF's ``load_balancing_loss_func``.

    Counts and probability sums are pooled over layers and divided by the total number of rows
    (layers x tokens): ``num_experts * sum_e f_e * p_e``, with ``f_e`` the fraction of rows that
    selected expert ``e`` and ``p_e`` its mean router probability. Gradient flows through
    ``p_e`` only. One difference from HF: HF recounts the top-k of the *unbiased* softmax, while
    ``selected`` counts the experts actually chosen; they differ only when ``expert_bias`` is
    in use. No padding mask (HF's ``attention_mask``): every token counts.
    """
    if not stats:
        raise ValueError("load_balancing_loss needs the stats of at least one layer")
    selected = sum(s.selected for s in stats)
    probs_sum = sum(s.probs_sum for s in stats)
    rows = sum(s.num_tokens for s in stats)
    return num_experts * torch.sum((selected / rows) * (probs_sum / rows))
