"""Partial, interleaved multimodal RoPE (mRoPE) of the Qwen3.5 full-attention layers.

Only the first ``rotary_dim = head_dim * partial_rotary_factor`` channels of each head are
rotated (rotate-half convention); the rest pass through. Positions may carry three rows
(temporal, height, width); for text all three rows are equal, which makes the interleaving a
no-op, but the recomposition is implemented so that explicit 3-row positions also match HF.
"""

from __future__ import annotations

import torch
from torch import nn

from .configuration import Qwen3_5Config


def _inv_freq(
    rotary_dim: int, theta: float, device: torch.device | str | None = None
) -> torch.Tensor:
    # Same expression (and fp32 rounding) as HF's default RoPE init.
    exponent = torch.arange(0, rotary_dim, 2, dtype=torch.float, device=device) / rotary_dim
    return 1.0 / (theta**exponent)


class Qwen3_5RotaryEmbedding(nn.Module):
    """Computes ``(cos, sin)`` of shape ``(B, S, rotary_dim)`` once per forward, shared by all
    full-attention layers. ``inv_freq`` is a non-persistent fp32 buffer (not checkpointed);
    :meth:`reset_inv_freq` rebuilds it after meta-device materialisation."""

    def __init__(self, config: Qwen3_5Config) -> None:
        super().__init__()
        self.rotary_dim = config.rotary_dim
        self.theta = float(config.rope_theta)
        self.mrope_section = list(config.mrope_section)
        self.register_buffer("inv_freq", _inv_freq(self.rotary_dim, self.theta), persistent=False)

    def reset_inv_freq(self, device: torch.device | str | None = None) -> None:
        """Recompute ``inv_freq`` on ``device`` (default: where the buffer already lives)."""
        if device is None:
            device = self.inv_freq.device
        if torch.device(device).type == "meta":
            raise RuntimeError(
                "Qwen3_5RotaryEmbedding.reset_inv_freq: buffer is on the meta device; call "
                "model.to_empty(device=...) first or pass buffer_device."
            )
        self.inv_freq = _inv_freq(self.rotary_dim, self.theta, device=device)

    def _recompose(self, freqs: torch.Tensor) -> torch.Tensor:
        """Interleaved mRoPE: start from the T row; the H (offset 1) and W (offset 2) rows own
        every third slot among the first ``3 * mrope_section[d]`` frequencies."""
        out = freqs[0].clone()
        for axis, offset in ((1, 1), (2, 2)):
            length = 3 * self.mrope_section[axis]
            out[..., offset:length:3] = freqs[axis, ..., offset:length:3]
        return out

    def forward(
        self, position_ids: torch.Tensor, dtype: torch.dtype = torch.float32
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``position_ids``: ``(S)``, ``(B, S)`` or ``(3, B, S)``. Returns ``cos, sin`` in ``dtype``."""
        if position_ids.dim() == 1:
            position_ids = position_ids.unsqueeze(0)
        if position_ids.dim() == 2:
            position_ids = position_ids.unsqueeze(0).expand(3, -1, -1)
        if position_ids.dim() != 3 or position_ids.shape[0] != 3:
            raise ValueError(
                "position_ids must have shape (S), (B, S) or (3, B, S); got "
                f"{tuple(position_ids.shape)}."
            )
        # fp32 angles regardless of autocast: bf16 positions lose integer precision past 256.
        with torch.autocast(device_type=position_ids.device.type, enabled=False):
            inv_freq = self.inv_freq.to(device=position_ids.device, dtype=torch.float32)
            freqs = position_ids[..., None].float() * inv_freq  # (3, B, S, rotary_dim/2)
            freqs = self._recompose(freqs)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
        return cos.to(dtype), sin.to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first ``cos.shape[-1]`` channels of ``x`` (``(B, S, H, D)``); ``cos``/``sin``
    are ``(B, S, rotary_dim)``. The pass-through channels are concatenated back unchanged."""
    rot = cos.shape[-1]
    cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    x_rot = x_rot * cos + _rotate_half(x_rot) * sin
    return torch.cat((x_rot, x_pass), dim=-1)
