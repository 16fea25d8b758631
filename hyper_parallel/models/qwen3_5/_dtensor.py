"""Tiny DTensor helpers shared by the Qwen3.5 modules (kept import-light)."""

from __future__ import annotations

import torch
from torch.distributed.tensor import DTensor


def _local(t: torch.Tensor) -> torch.Tensor:
    """``t.to_local()`` for a DTensor, else ``t`` itself.

    Modules that use a parameter directly (not through ``nn.Linear``) call this so that a
    head-sharded (``Shard(0)``) tensor-parallel parameter meets the rank-local activations it
    belongs to. Gradients flow back into the DTensor unchanged (placements preserved).
    """
    return t.to_local() if isinstance(t, DTensor) else t


def _match_input(weight: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The weight in the same world as ``x``: local if ``x`` is a plain tensor, as-is otherwise.

    Lets a norm whose weight was replicated as a DTensor run on rank-local activations (the
    usual case inside a tensor-parallel attention block) without an explicit input wrapper.
    """
    if isinstance(weight, DTensor) and not isinstance(x, DTensor):
        return weight.to_local()
    return weight
