"""Which datasets hold images, and how they are built against the model's vision tower.

Two kinds of data give image-text batches (``pixel_values`` / ``image_grid_thw`` beside the
tokens): ``vl_dummy`` (synthetic, at the ``vl_grid_*`` patch grid) and ``json_file`` chat
records (``messages_key``; images under ``image_key``), told by the first record like the other
``json_file`` kinds. Both need an image-text model: the placeholder ids and the patch geometry
are the tower's (``vision_config``), and the tokenizer's vision tokens must be the same ids.
Chat records are loaded (:func:`build_vision_dataset`: every record checked before step 1, each
rank its share) or streamed (:func:`~.streaming.build_image_text_stream`: each rank reads its
share as it comes); both take the model's tokens and the image processor from
:func:`chat_setup`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hyper_parallel.data.sft import resolve_json_files
from hyper_parallel.utils.data_types import LEGACY_DATA_FIELDS


def holds_images(dataset: Any) -> bool:
    """Whether ``dataset``'s samples carry images (its ``holds_images``; through a ``Subset``)."""
    return bool(getattr(getattr(dataset, "dataset", dataset), "holds_images", False))


def holds_chat_records(path: str, messages_key: str, path_field: str) -> bool:
    """Whether the first record of the ``json_file`` data at ``path`` is a chat record (has
    ``messages_key``): the kind of a ``json_file`` dataset is told by its first record. A path
    that names no file is not (the ``json_file`` reader says what is missing)."""
    try:
        files = resolve_json_files(path, path_field)
    except FileNotFoundError:
        return False
    for file in files:
        with open(file, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    first = json.loads(line)
                except json.JSONDecodeError:
                    return False  # a JSON array file, or broken: the other readers say which
                return isinstance(first, dict) and messages_key in first
    return False


def build_vision_dataset(
    type: str,
    *,
    vision: Any,
    train_path: str | None,
    max_seq_len: int,
    tokenizer: Any,
    vocab_size: int | None,
    num_samples: int | None,
    seed: int = 42,
    messages_key: str = "messages",
    image_key: str = "image",
    processor_path: str | None = None,
    vl_grid: tuple[int, int, int] = (2, 2, 2),
    fields: Mapping[str, str] | None = None,
    limit: int | None = None,
    packing: bool = False,
) -> Any:
    """The image-text dataset of ``type`` (``vl_dummy``, or ``json_file`` chat records) for a
    model whose tower is ``vision`` (a ``Qwen3_5VisionConfig``; None is an error naming the
    fix). ``limit`` (``max_samples``): only the first ``limit`` chat records are read and
    checked. ``packing``: the chat records' sample lengths are counted in that check, for the
    packer (the caller packs them: :class:`~.packing.PackedSequenceDataset`)."""
    from hyper_parallel.data.vision import ImageTextDataset, VisionDummyDataset

    names = {**LEGACY_DATA_FIELDS, **(fields or {})}
    tokens = model_tokens(type, vision, names)
    if type == "vl_dummy":
        if num_samples is None:
            raise ValueError("vl_dummy needs num_samples (training.steps * global_batch_size)")
        try:
            return VisionDummyDataset(
                num_samples, max_seq_len, vocab_size or vision.image_token_id + 1,
                tokens=tokens, grid_thw=tuple(vl_grid), patch_dim=vision.patch_dim,
                merge_size=vision.spatial_merge_size, seed=seed,
            )
        except ValueError as exc:
            raise ValueError(f"{names['vl_grid']}={tuple(vl_grid)}: {exc}") from None
    tokens, processor = chat_setup(vision, tokenizer, processor_path, names)
    return ImageTextDataset(
        train_path, tokenizer=tokenizer, max_seq_len=max_seq_len, processor=processor,
        tokens=tokens, messages_key=messages_key, image_key=image_key,
        path_field=names["path"], length_field=names.get("max_seq_len", "data.max_seq_len"),
        limit=limit, count_lengths=packing,
    )


def model_tokens(type: str, vision: Any, names: Mapping[str, str]) -> Any:
    """The model's vision token ids; a model without a tower is an error naming the fix."""
    from hyper_parallel.data.vision_tokens import VisionTokens

    if vision is None:
        raise ValueError(
            f"{names['type']}={type!r} gives image-text batches, but the model has no vision "
            "tower; train an image-text flavor (model.config_overrides.flavor: debugmodel_vl, "
            "9b_vl, ...) or set model.config_overrides.vision_config"
        )
    return VisionTokens(
        image_token_id=vision.image_token_id,
        video_token_id=vision.video_token_id,
        vision_start_token_id=vision.vision_start_token_id,
        vision_end_token_id=vision.vision_end_token_id,
    )


def chat_setup(vision: Any, tokenizer: Any, processor_path: str | None,
               names: Mapping[str, str]) -> tuple[Any, Any]:
    """The tokenizer's vision tokens (checked to be the model's) and the image processor
    (checked to cut the tower's patches) of chat records for the model whose tower is
    ``vision`` (None is an error naming the fix)."""
    from hyper_parallel.data.vision import image_processor
    from hyper_parallel.data.vision_tokens import vision_tokens

    model_tokens("json_file", vision, names)
    tokens = vision_tokens(tokenizer, chat=True)
    for name in ("image_token_id", "video_token_id", "vision_start_token_id",
                 "vision_end_token_id"):
        if getattr(tokens, name) != getattr(vision, name):
            raise ValueError(
                f"the tokenizer's {name} is {getattr(tokens, name)} but the model's "
                f"(vision_config.{name}) is {getattr(vision, name)}; use the tokenizer of the "
                "checkpoint (pkg://tokenizer_vl with the debug image-text flavors)"
            )
    processor = image_processor(
        processor_path,
        patch_size=vision.patch_size,
        temporal_patch_size=vision.temporal_patch_size,
        merge_size=vision.spatial_merge_size,
    )
    geometry = (processor.patch_size, processor.temporal_patch_size, processor.merge_size)
    expected = (vision.patch_size, vision.temporal_patch_size, vision.spatial_merge_size)
    if tuple(int(g) for g in geometry) != expected:
        raise ValueError(
            f"{names['processor_path']}={processor_path!r}: the image processor cuts "
            f"(patch, temporal patch, merge) = {geometry} but the model's tower expects "
            f"{expected}"
        )
    return tokens, processor
