"""Qwen's vision and chat special tokens: their strings, their ids in a tokenizer, an image's span.

An image is ``<|vision_start|>`` + N x ``<|image_pad|>`` + ``<|vision_end|>`` in the text, with
``N = t * h * w / merge_size**2`` for its patch grid ``(t, h, w)``. The one home of these facts
for the samples (:mod:`.vision`) and the chat records (:mod:`.chat_records`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch

IMAGE_TOKEN = "<|image_pad|>"
VIDEO_TOKEN = "<|video_pad|>"
VISION_START_TOKEN = "<|vision_start|>"
VISION_END_TOKEN = "<|vision_end|>"
IM_START_TOKEN = "<|im_start|>"
IM_END_TOKEN = "<|im_end|>"
#: Where an image goes inside a user message's text (LLaVA / LLaMA-Factory convention).
IMAGE_MARKER = "<image>"
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class VisionTokens:
    """The ids of the vision (and ChatML) special tokens of a tokenizer / model vocabulary."""

    image_token_id: int
    video_token_id: int
    vision_start_token_id: int
    vision_end_token_id: int
    im_start_token_id: int | None = None
    im_end_token_id: int | None = None

    @property
    def ids(self) -> tuple[int, ...]:
        """Every id that is set: tokens no text may produce (they mean structure)."""
        return tuple(v for f in fields(self) if (v := getattr(self, f.name)) is not None)


_TOKEN_FIELDS = {"image_token_id": IMAGE_TOKEN, "video_token_id": VIDEO_TOKEN,
                 "vision_start_token_id": VISION_START_TOKEN,
                 "vision_end_token_id": VISION_END_TOKEN}
_CHAT_FIELDS = {"im_start_token_id": IM_START_TOKEN, "im_end_token_id": IM_END_TOKEN}


def _token_id(tokenizer: Any, token: str) -> int | None:
    """``token``'s id in a ``TextTokenizer``, a HF ``tokenizers.Tokenizer`` or a transformers
    tokenizer; None when it has none."""
    backend = getattr(tokenizer, "backend", tokenizer)
    if hasattr(backend, "token_to_id"):
        return backend.token_to_id(token)
    found = tokenizer.convert_tokens_to_ids(token)
    return None if found is None or found == getattr(tokenizer, "unk_token_id", None) else found


def vision_tokens(tokenizer: Any, *, chat: bool = True) -> VisionTokens:
    """The :class:`VisionTokens` of ``tokenizer``, looked up by their token strings
    (``<|image_pad|>``, ``<|video_pad|>``, ``<|vision_start|>``, ``<|vision_end|>`` and, with
    ``chat``, ``<|im_start|>`` / ``<|im_end|>``). A ``ValueError`` names every missing one."""
    wanted = {**_TOKEN_FIELDS, **(_CHAT_FIELDS if chat else {})}
    ids = {name: _token_id(tokenizer, token) for name, token in wanted.items()}
    missing = [wanted[name] for name, value in ids.items() if value is None]
    if missing:
        where = getattr(tokenizer, "path", None) or type(tokenizer).__name__
        raise ValueError(
            f"the tokenizer {where!r} has no {', '.join(missing)} token"
            f"{'s' if len(missing) > 1 else ''}; image-text data needs Qwen's vision tokens "
            f"(the shipped pkg://tokenizer_vl has them)")
    return VisionTokens(**ids)


def image_span(num_tokens: int, tokens: VisionTokens) -> list[int]:
    """The ids of one image in the text: start, ``num_tokens`` pads, end."""
    return [tokens.vision_start_token_id, *[tokens.image_token_id] * num_tokens,
            tokens.vision_end_token_id]


def placeholder_counts(image_grid_thw: torch.Tensor, merge_size: int) -> list[int]:
    """Placeholder tokens per image: ``t * h * w / merge_size**2`` for each grid row."""
    patches = image_grid_thw.prod(dim=-1)
    if bool((patches % (merge_size * merge_size)).any()):
        raise ValueError(f"image_grid_thw {image_grid_thw.tolist()}: h * w must be a multiple "
                         f"of merge_size**2 = {merge_size ** 2}")
    return (patches // (merge_size * merge_size)).tolist()


__all__ = ["IMAGE_MARKER", "IMAGE_TOKEN", "IM_END_TOKEN", "IM_START_TOKEN", "ROLES",
           "VIDEO_TOKEN", "VISION_END_TOKEN", "VISION_START_TOKEN", "VisionTokens",
           "image_span", "placeholder_counts", "vision_tokens"]
