"""Zero-centred RMSNorm used by every Qwen3.5 residual / q-k norm: ``normed * (1 + w)``."""

from __future__ import annotations

import torch
from torch import nn

from ._dtensor import _match_input


class Qwen3_5RMSNorm(nn.Module):
    """RMSNorm with a residual-style scale ``(1 + weight)``; ``weight`` is initialised to zeros.

    Computed in fp32 and cast back to the input dtype *after* the scale (as HF does), so that a
    bf16 run rounds once. Not weight-compatible with a ``weight * normed`` RMSNorm.
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def reset_parameters(self) -> None:
        """HF init: zeros, i.e. an identity scale."""
        nn.init.zeros_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        normed = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        weight = _match_input(self.weight, x)
        return (normed * (1.0 + weight.float())).type_as(x)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.eps}"
