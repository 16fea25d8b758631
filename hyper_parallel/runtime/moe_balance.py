"""Load balancing of a mixture-of-experts model during training (the run's ``moe`` section).

Two mechanisms, either or both:

* **the auxiliary loss** (``moe.router_aux_loss_coef``): after each micro-batch's forward,
  :meth:`MoEBalancer.auxiliary_loss` gives ``coef x`` the Switch-Transformer loss over every
  MoE layer's router statistics of that forward, exactly as transformers computes it
  (:func:`~hyper_parallel.models.qwen3_5_moe.moe.load_balancing_loss`); the step adds it to the
  micro-batch's objective and reports it as ``moe_aux_loss``;
* **the expert bias** (``moe.load_balance_coeff``, auxiliary-loss-free balancing): before each
  optimizer step, :meth:`MoEBalancer.before_optimizer_step` sums every layer's tokens per
  expert over the ranks that hold different tokens (the ``loss`` group: data, expert and
  context parallel ranks; tensor-parallel peers route the same tokens and are not counted
  twice) and moves each expert's bias by ``coeff * sign(mean - count)``, centred so the biases
  keep their mean. The bias only changes which experts are chosen (see ``TopKRouter``).

Every step also measures the load imbalance (``moe_load_imbalance``: max over mean tokens per
expert, averaged over the layers) from the same summed counts. A forward that activation
checkpointing recomputes is not counted again (the block skips it).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from hyper_parallel.models.qwen3_5_moe.moe import SparseMoeBlock, load_balancing_loss
from hyper_parallel.platform.collectives import all_reduce_sum, or_alone
from hyper_parallel.utils.errors import ConfigError

__all__ = ["MoEBalancer", "build_moe_balancer"]


class MoEBalancer:
    """The ``moe`` section applied to a model's MoE blocks (see the module docstring)."""

    def __init__(
        self,
        blocks: list[SparseMoeBlock],
        *,
        router_aux_loss_coef: float,
        load_balance_coeff: float | None,
        group: dist.ProcessGroup | None,
    ) -> None:
        self.blocks = blocks
        self.router_aux_loss_coef = router_aux_loss_coef
        self.load_balance_coeff = load_balance_coeff
        self.group = group
        self.num_experts = blocks[0].num_experts
        self._imbalance: float | None = None
        for block in blocks:
            block.gate.use_expert_bias = load_balance_coeff is not None
            block.router_stats_need_grad = bool(router_aux_loss_coef)

    def auxiliary_loss(self) -> torch.Tensor | None:
        """``router_aux_loss_coef x`` the load-balancing loss of the forward that just ran
        (None when the coefficient is 0)."""
        if not self.router_aux_loss_coef:
            return None
        stats = [block.last_router_stats for block in self.blocks]
        return self.router_aux_loss_coef * load_balancing_loss(stats, self.num_experts)

    @torch.no_grad()
    def before_optimizer_step(self) -> None:
        """Sum the step's counts over the ranks, measure the imbalance, move the expert bias
        (when on) and start the next step's counts from zero."""
        counts = torch.stack([block.tokens_per_expert for block in self.blocks])
        counts = all_reduce_sum(counts.clone(), or_alone(self.group))
        mean = counts.mean(dim=1, keepdim=True)
        self._imbalance = float((counts.max(dim=1).values / mean.squeeze(1).clamp_min(1e-12))
                                .mean())
        if self.load_balance_coeff is not None:
            delta = self.load_balance_coeff * torch.sign(mean - counts)
            delta -= delta.mean(dim=1, keepdim=True)
            for block, step in zip(self.blocks, delta):
                block.gate.expert_bias.add_(step.to(block.gate.expert_bias.device))
        for block in self.blocks:
            block.reset_tokens_per_expert()

    def step_metrics(self, aux_loss: float | None) -> dict[str, float]:
        """The step's MoE metrics for the log (``moe_aux_loss`` when the loss is on,
        ``moe_load_imbalance``)."""
        out: dict[str, float] = {}
        if aux_loss is not None:
            out["moe_aux_loss"] = aux_loss
        if self._imbalance is not None:
            out["moe_load_imbalance"] = self._imbalance
        return out

    @property
    def expert_bias(self) -> list[list[float]]:
        """Every layer's expert bias (for logs and probes)."""
        return [block.gate.expert_bias.tolist() for block in self.blocks]


def build_moe_balancer(
    model: torch.nn.Module, moe: Any, group: dist.ProcessGroup | None
) -> MoEBalancer | None:
    """The balancer of ``model`` under the ``moe`` section; None for a model without MoE blocks.

    A dense model with a balancing setting that is not off is a :class:`ConfigError` naming the
    field (it would have no effect)."""
    blocks = [m for m in model.modules() if isinstance(m, SparseMoeBlock)]
    if not blocks:
        for name, off in (("router_aux_loss_coef", 0.0), ("load_balance_coeff", None)):
            value = getattr(moe, name)
            if value != off:
                raise ConfigError(
                    f"{value!r}: the model has no mixture-of-experts layers to balance; unset it "
                    "or train a MoE model (model.name: qwen3_5_moe)",
                    path=f"moe.{name}",
                )
        return None
    return MoEBalancer(
        blocks,
        router_aux_loss_coef=moe.router_aux_loss_coef,
        load_balance_coeff=moe.load_balance_coeff,
        group=group,
    )
