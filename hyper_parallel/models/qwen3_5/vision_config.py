"""The vision tower of image-text Qwen3.5, as configuration (no framework).

Every published Qwen3.5 checkpoint, dense and MoE, is an image-text model: a vision transformer
(Hugging Face ``Qwen3_5VisionConfig``) in front of the decoder, whose merged patch features
replace the image placeholder tokens' embeddings. :class:`Qwen3_5VisionConfig` holds the tower's
architecture by Hugging Face's names, plus the four placeholder token ids that Hugging Face keeps
at the top of the image-text ``config.json`` (``image_token_id``, ...): they belong to the
image-text model, not to the text decoder, so they live here rather than beside the text fields.

One size is not a field: the merger's output width (HF ``out_hidden_size``) is always the text
model's ``hidden_size`` (the features become token embeddings), so it is derived where the two
meet (:meth:`to_hf_dict` takes it) instead of being stored twice.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hyper_parallel.utils.numbers import is_finite_number
from hyper_parallel.utils.suggest import did_you_mean

HF_VISION_MODEL_TYPE = "qwen3_5_vision"

#: The top-level keys of an image-text ``config.json`` that this class holds.
TOKEN_ID_FIELDS = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")

_POSITIVE_INT_FIELDS = (
    "depth",
    "hidden_size",
    "intermediate_size",
    "num_heads",
    "in_channels",
    "patch_size",
    "spatial_merge_size",
    "temporal_patch_size",
    "num_position_embeddings",
)


@dataclass(kw_only=True)
class Qwen3_5VisionConfig:
    """Architecture of the Qwen3.5 vision tower; defaults are the published configs' (27 blocks
    of width 1152, 16x16 patches, 2 frames per temporal patch, a 2x2 patch merger)."""

    depth: int = 27
    """Vision transformer blocks."""
    hidden_size: int = 1152
    """Width of the vision blocks."""
    hidden_act: str = "gelu_pytorch_tanh"
    """Activation of the blocks' MLP (tanh-approximated GELU; the merger's is the exact GELU)."""
    intermediate_size: int = 4304
    """Hidden width of the blocks' MLP."""
    num_heads: int = 16
    """Attention heads of every block (must divide ``hidden_size``)."""
    in_channels: int = 3
    """Image channels (RGB)."""
    patch_size: int = 16
    """Side of a square patch, in pixels."""
    spatial_merge_size: int = 2
    """The merger joins ``spatial_merge_size x spatial_merge_size`` neighbouring patches into one
    token of the text model (so an image of ``h x w`` patches becomes ``h*w/4`` tokens)."""
    temporal_patch_size: int = 2
    """Frames per patch (an image is repeated to fill them)."""
    num_position_embeddings: int = 2304
    """Learned absolute positions, a square grid (48 x 48) resampled bilinearly to each image."""
    initializer_range: float = 0.02
    """Std of the normal init of the tower's linear, conv and embedding weights."""
    rope_theta: float = 10000.0
    """Base of the tower's 2-D rotary embedding (HF: ``rope_parameters['rope_theta']``)."""
    image_token_id: int = 248056
    """The placeholder token each merged image patch replaces (HF: top-level key)."""
    video_token_id: int = 248057
    """The placeholder token of video frames (HF: top-level key)."""
    vision_start_token_id: int = 248053
    """The token that opens an image span (HF: top-level key)."""
    vision_end_token_id: int = 248054
    """The token that closes an image span (HF: top-level key)."""

    def __post_init__(self) -> None:
        for name in (*_POSITIVE_INT_FIELDS, *TOKEN_ID_FIELDS):
            value = getattr(self, name)
            minimum = 0 if name in TOKEN_ID_FIELDS else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(
                    f"vision_config.{name} must be an int >= {minimum}, got {value!r}."
                )
        for name in ("initializer_range", "rope_theta"):
            value = getattr(self, name)
            if not is_finite_number(value) or value <= 0:
                raise ValueError(f"vision_config.{name} must be a finite number > 0, got {value!r}.")
        if self.hidden_act != "gelu_pytorch_tanh":
            raise ValueError(
                f"vision_config.hidden_act={self.hidden_act!r} is not supported; the published "
                "towers use 'gelu_pytorch_tanh'."
            )
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"vision_config.hidden_size ({self.hidden_size}) must be a multiple of num_heads "
                f"({self.num_heads})."
            )
        if self.head_dim % 4:
            raise ValueError(
                f"vision_config: the head width hidden_size/num_heads = {self.head_dim} must be a "
                "multiple of 4 (the 2-D rotary embedding splits each half between height and width)."
            )
        side = round(self.num_position_embeddings**0.5)
        if side * side != self.num_position_embeddings:
            raise ValueError(
                "vision_config.num_position_embeddings must be a square (the learned positions "
                f"are a grid), got {self.num_position_embeddings}."
            )
        ids = [getattr(self, n) for n in TOKEN_ID_FIELDS]
        if len(set(ids)) != len(ids):
            raise ValueError(f"vision_config: the token ids {dict(zip(TOKEN_ID_FIELDS, ids))} must differ.")

    # ----------------------------------------------------------------- derived sizes
    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden_size // self.num_heads

    @property
    def patch_dim(self) -> int:
        """Values of one flattened patch (``pixel_values``' second dimension)."""
        return self.in_channels * self.temporal_patch_size * self.patch_size**2

    @property
    def position_grid_side(self) -> int:
        """Side of the square grid of learned positions."""
        return round(self.num_position_embeddings**0.5)

    @property
    def merge_unit(self) -> int:
        """Patches per text token."""
        return self.spatial_merge_size**2

    def num_params(self, out_hidden_size: int) -> int:
        """Parameters of the tower whose merger emits ``out_hidden_size`` (the text width)."""
        h, inter, merged = self.hidden_size, self.intermediate_size, self.hidden_size * self.merge_unit
        block = 2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * inter + inter) + (inter * h + h)
        patch = self.patch_dim * h + h
        merger = 2 * h + merged * merged + merged + merged * out_hidden_size + out_hidden_size
        return patch + self.num_position_embeddings * h + self.depth * block + merger

    def decoder_positions(self, input_ids: Any, image_grid_thw: Any,
                          packed_positions: Any = None) -> Any:
        """The three-row positions of a batch whose rows hold these images
        (:func:`~.vision_positions.decoder_positions` with this tower's placeholder and merge):
        what the data pipeline computes on the host, so the model need not read the ids back
        from the device. ``packed_positions``: packed rows' 1-D positions, each sample's three
        rows then restarting at its first token."""
        from hyper_parallel.models.qwen3_5.vision_positions import decoder_positions

        return decoder_positions(input_ids, image_grid_thw, image_token_id=self.image_token_id,
                                 merge=self.spatial_merge_size, packed_positions=packed_positions)

    def tokens_per_image(self, grid_t: int, grid_h: int, grid_w: int) -> int:
        """Placeholder tokens of one image of ``grid_t x grid_h x grid_w`` patches."""
        return grid_t * grid_h * grid_w // self.merge_unit

    # ----------------------------------------------------------------- HF config.json
    def to_hf_dict(self, out_hidden_size: int) -> dict[str, Any]:
        """The Hugging Face ``vision_config`` (the token ids are not in it: see
        :meth:`token_ids`)."""
        out: dict[str, Any] = {"model_type": HF_VISION_MODEL_TYPE}
        for f in dataclasses.fields(self):
            if f.name in TOKEN_ID_FIELDS or f.name == "rope_theta":
                continue
            out[f.name] = copy.deepcopy(getattr(self, f.name))
        out["out_hidden_size"] = out_hidden_size
        out["rope_parameters"] = {"rope_type": "axial", "rope_theta": self.rope_theta}
        return out

    def token_ids(self) -> dict[str, int]:
        """The placeholder token ids, by their top-level ``config.json`` keys."""
        return {name: getattr(self, name) for name in TOKEN_ID_FIELDS}

    @classmethod
    def from_hf_dict(
        cls, vision: Mapping[str, Any], top: Mapping[str, Any] | None = None
    ) -> Qwen3_5VisionConfig:
        """From an HF ``vision_config`` dict and the image-text config that holds it (for the
        token ids). Keys this tower does not use are ignored; ``out_hidden_size`` is checked by
        the caller, which knows the text width."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: copy.deepcopy(v) for k, v in vision.items() if k in names}
        rope = dict(vision.get("rope_parameters") or {})
        if rope.get("rope_type", "axial") != "axial":
            raise NotImplementedError(
                f"HF vision_config has rope_type={rope.get('rope_type')!r}; only 'axial' is implemented."
            )
        if "rope_theta" in rope:
            values["rope_theta"] = rope["rope_theta"]
        for name in TOKEN_ID_FIELDS:
            if top is not None and name in top:
                values[name] = top[name]
        return cls(**values)

    @classmethod
    def from_overrides(
        cls, base: Qwen3_5VisionConfig | None, overrides: Mapping[str, Any], where: str
    ) -> Qwen3_5VisionConfig:
        """``base`` (the published tower when None) with ``overrides`` applied: how a
        ``vision_config`` mapping in ``model.config_overrides`` is read. Unknown keys are a
        ``ValueError`` with a suggestion."""
        valid = [f.name for f in dataclasses.fields(cls)]
        for key in overrides:
            if key not in valid:
                raise ValueError(
                    f"{where}: unknown vision_config key {key!r}{did_you_mean(str(key), valid)}. "
                    f"Valid keys: {', '.join(valid)}."
                )
        start = base if base is not None else cls()
        return dataclasses.replace(start, **copy.deepcopy(dict(overrides)))


IMAGE_TEXT_SUFFIX = "_vl"
"""An image-text flavor is its text flavor's name plus this (``9b_vl``, ``debugmodel_vl``)."""

DEBUG_VISION = Qwen3_5VisionConfig(
    depth=2,
    hidden_size=64,
    intermediate_size=128,
    num_heads=4,
    num_position_embeddings=64,
    # The placeholder ids of the shipped image-text tokenizer (``pkg://tokenizer_vl``: the
    # shipped 2048-token BPE plus the ChatML and vision tokens at 2048..2053).
    image_token_id=2052,
    video_token_id=2053,
    vision_start_token_id=2050,
    vision_end_token_id=2051,
)
"""The CPU debug tower: two blocks of width 64 with the published patch geometry (16 x 16
pixels, 2 frames, 2 x 2 merge), so the shipped demo images and the processor's settings are the
published ones."""

DEBUG_VL_VOCAB_SIZE = 2056
"""The debug image-text models' vocabulary: the shipped image-text tokenizer's 2054 tokens,
rounded up to a multiple of 8 (tensor parallelism splits the embedding)."""


def image_text_flavor(text: Any, *, debug: bool = False) -> Any:
    """The image-text flavor of the text flavor ``text``: the published tower (and Qwen's token
    ids) on a published size; with ``debug``, :data:`DEBUG_VISION` and the shipped image-text
    tokenizer's vocabulary (:data:`DEBUG_VL_VOCAB_SIZE`)."""
    if debug:
        return text.replace(vocab_size=DEBUG_VL_VOCAB_SIZE, vision_config=DEBUG_VISION)
    return text.replace(vision_config=Qwen3_5VisionConfig())
