"""The Qwen3.5 vision tower: patches of pixels in, one text-width embedding per merged
``2 x 2`` patch block out (plain torch).

Module tree and state-dict names are Hugging Face's ``Qwen3_5VisionModel`` (the published
checkpoints' ``model.visual.*``)::

    patch_embed.proj (Conv3d over 2 x 16 x 16 patches), pos_embed (learned 48 x 48 grid,
    resampled to each image), blocks.{i}.{norm1, attn.{qkv, proj}, norm2, mlp.{linear_fc1,
    linear_fc2}}, merger.{norm, linear_fc1, linear_fc2}

Each image attends within itself (frame by frame): the patches of a batch are one long sequence
cut into per-image segments. The arithmetic is Hugging Face's operation for operation (same
operators, same dtypes, same order), so the features are bit-identical to
``Qwen3_5Model.get_image_features``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .vision_config import Qwen3_5VisionConfig
from .vision_positions import (
    GridInput,
    attention_segments,
    image_grids,
    interpolation_taps,
    patch_coordinates,
)


class Qwen3_5VisionPatchEmbed(nn.Module):
    """One ``temporal_patch_size x patch_size x patch_size`` patch of ``in_channels`` -> one
    vector (a Conv3d whose kernel is the patch: a matmul with the checkpoint's weight layout)."""

    def __init__(self, config: Qwen3_5VisionConfig) -> None:
        super().__init__()
        self.patch_shape = (
            config.in_channels,
            config.temporal_patch_size,
            config.patch_size,
            config.patch_size,
        )
        kernel = self.patch_shape[1:]
        self.proj = nn.Conv3d(
            config.in_channels, config.hidden_size, kernel_size=kernel, stride=kernel, bias=True
        )

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        patches = pixel_values.view(-1, *self.patch_shape).to(self.proj.weight.dtype)
        return self.proj(patches).view(patches.shape[0], -1)


class Qwen3_5VisionRotaryEmbedding(nn.Module):
    """2-D rotary angles: half of each head's channels rotate with the patch row, half with its
    column, one frequency table for both. ``inv_freq`` is a non-persistent fp32 buffer."""

    def __init__(self, config: Qwen3_5VisionConfig) -> None:
        super().__init__()
        self.spatial_dim = config.head_dim // 2
        self.theta = float(config.rope_theta)
        self.register_buffer("inv_freq", self._inv_freq(None), persistent=False)

    def _inv_freq(self, device: torch.device | str | None) -> torch.Tensor:
        exponent = torch.arange(0, self.spatial_dim, 2, dtype=torch.float, device=device)
        return 1.0 / (self.theta ** (exponent / self.spatial_dim))

    def reset_inv_freq(self, device: torch.device | str | None = None) -> None:
        """Recompute ``inv_freq`` on ``device`` (after materialising from meta)."""
        self.inv_freq = self._inv_freq(device if device is not None else self.inv_freq.device)

    def forward(self, coords: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``coords`` ``(P, 2)`` -> ``cos, sin`` ``(P, head_dim)`` in fp32."""
        freqs = coords[..., None].float() * self.inv_freq.to(device=coords.device)
        # (row | column) frequencies, then duplicated for the rotate-half convention.
        def layout(x: torch.Tensor) -> torch.Tensor:
            both = torch.cat([x[:, 0], x[:, 1]], dim=-1)
            return torch.cat([both, both], dim=-1)

        return layout(freqs.cos()), layout(freqs.sin())


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``(P, heads, head_dim)`` in fp32 (positions past 256 need it), back to its
    dtype."""
    dtype = x.dtype
    x = x.float()
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return (x * cos + _rotate_half(x) * sin).to(dtype)


class Qwen3_5VisionAttention(nn.Module):
    """Bidirectional multi-head attention within each image (segment)."""

    def __init__(self, config: Qwen3_5VisionConfig) -> None:
        super().__init__()
        self.num_heads = config.num_heads
        self.head_dim = config.head_dim
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size, bias=True)
        self.proj = nn.Linear(config.hidden_size, config.hidden_size, bias=True)

    def forward(
        self,
        hidden_states: torch.Tensor,
        segments: list[int],
        rotary: tuple[torch.Tensor, torch.Tensor],
    ) -> torch.Tensor:
        length = hidden_states.shape[0]
        q, k, v = (
            self.qkv(hidden_states)
            .reshape(length, 3, self.num_heads, self.head_dim)
            .permute(1, 0, 2, 3)
            .unbind(0)
        )
        q, k = _apply_rotary(q, *rotary), _apply_rotary(k, *rotary)
        q, k, v = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))  # (1, heads, P, d)
        outputs = [
            F.scaled_dot_product_attention(
                qs, ks, vs, dropout_p=0.0, scale=self.head_dim**-0.5, is_causal=False
            ).transpose(1, 2)
            for qs, ks, vs in zip(
                q.split(segments, dim=2), k.split(segments, dim=2), v.split(segments, dim=2)
            )
        ]
        out = torch.cat(outputs, dim=1).reshape(length, -1).contiguous()
        return self.proj(out)


class Qwen3_5VisionMLP(nn.Module):
    """``linear_fc2(gelu_tanh(linear_fc1(x)))``."""

    def __init__(self, config: Qwen3_5VisionConfig) -> None:
        super().__init__()
        self.linear_fc1 = nn.Linear(config.hidden_size, config.intermediate_size, bias=True)
        self.linear_fc2 = nn.Linear(config.intermediate_size, config.hidden_size, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_fc2(F.gelu(self.linear_fc1(x), approximate="tanh"))


class Qwen3_5VisionBlock(nn.Module):
    """Pre-LayerNorm residual block: attention, then the MLP."""

    def __init__(self, config: Qwen3_5VisionConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.hidden_size, eps=1e-6)
        self.norm2 = nn.LayerNorm(config.hidden_size, eps=1e-6)
        self.attn = Qwen3_5VisionAttention(config)
        self.mlp = Qwen3_5VisionMLP(config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        segments: list[int],
        rotary: tuple[torch.Tensor, torch.Tensor],
    ) -> torch.Tensor:
        hidden_states = hidden_states + self.attn(self.norm1(hidden_states), segments, rotary)
        return hidden_states + self.mlp(self.norm2(hidden_states))


class Qwen3_5VisionPatchMerger(nn.Module):
    """LayerNorm each patch, join each ``merge x merge`` block (consecutive in the processor's
    order) and project it to the text width through a GELU MLP."""

    def __init__(self, config: Qwen3_5VisionConfig, out_hidden_size: int) -> None:
        super().__init__()
        self.merged_size = config.hidden_size * config.merge_unit
        self.norm = nn.LayerNorm(config.hidden_size, eps=1e-6)
        self.linear_fc1 = nn.Linear(self.merged_size, self.merged_size, bias=True)
        self.linear_fc2 = nn.Linear(self.merged_size, out_hidden_size, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x).view(-1, self.merged_size)
        return self.linear_fc2(F.gelu(self.linear_fc1(x)))


class Qwen3_5VisionModel(nn.Module):
    """``forward(pixel_values (patches, patch_dim), grid_thw (images, 3))`` -> ``(tokens,
    out_hidden_size)``, one row per placeholder token, images in order. ``grid_thw`` is host
    data (:func:`~.vision_positions.image_grids`: the batch's ``image_grid_thw`` stays on the
    host): the tower reads it as Python ints and waits for nothing."""

    def __init__(self, config: Qwen3_5VisionConfig, out_hidden_size: int) -> None:
        super().__init__()
        self.config = config
        self.patch_embed = Qwen3_5VisionPatchEmbed(config)
        self.pos_embed = nn.Embedding(config.num_position_embeddings, config.hidden_size)
        self.rotary_pos_emb = Qwen3_5VisionRotaryEmbedding(config)
        self.blocks = nn.ModuleList(Qwen3_5VisionBlock(config) for _ in range(config.depth))
        self.merger = Qwen3_5VisionPatchMerger(config, out_hidden_size)

    def forward(self, pixel_values: torch.Tensor, grid_thw: GridInput) -> torch.Tensor:
        config = self.config
        grids = image_grids(grid_thw)
        hidden_states = self.patch_embed(pixel_values)
        device = hidden_states.device
        # The taps, weights and coordinates are built on the device from the grids' Python
        # ints: a few small kernels per image, queued like the rest, instead of host tables
        # copied over (a blocking copy waits for the device's queue; every micro-batch, an
        # image-less one included, runs the tower).
        taps, weights = interpolation_taps(
            grids, config.position_grid_side, config.spatial_merge_size, device
        )
        coords = patch_coordinates(grids, config.spatial_merge_size, device)
        segments = attention_segments(grids)
        positions = (self.pos_embed(taps) * weights[:, :, None]).sum(1)
        hidden_states = hidden_states + positions.to(hidden_states.dtype)
        rotary = self.rotary_pos_emb(coords)
        for block in self.blocks:
            hidden_states = block(hidden_states, segments, rotary)
        return self.merger(hidden_states)
