"""Image-text (vision-language) samples for Qwen3.5: synthetic, from chat records, and collate.

An image enters the model twice: as pixel patches for the vision tower and as placeholder tokens
in the text, whose embeddings the model replaces by the vision tower's output. In a sequence an
image is ``<|vision_start|>`` + N x ``<|image_pad|>`` + ``<|vision_end|>``, with
``N = t * h * w / merge_size**2`` for its patch grid ``image_grid_thw = (t, h, w)``. The two must
agree exactly, so a sample is never cut inside an image span.

A sample is a dict of ``input_ids`` and ``labels`` (1-D int64; ``labels`` = ``input_ids`` on the
trained tokens, -100 elsewhere, unshifted: the model shifts them) and, when it has images,
``pixel_values`` (``(patches, 3 * temporal_patch_size * patch_size**2)`` float32) and
``image_grid_thw`` (``(images, 3)`` int64). The placeholders and their start/end tokens are
always -100: there is nothing to predict about them.

* :class:`VisionDummyDataset` -- synthetic samples (the legacy ``vl_dummy``): one random image and
  random text, no files;
* :class:`ImageTextDataset` -- chat records with images from JSON lines files, loss only on the
  assistant answers (the records themselves: :mod:`~hyper_parallel.data.chat_records`); images
  are preprocessed by transformers' ``Qwen2VLImageProcessor`` (:func:`image_processor`) in
  ``__getitem__``, so DataLoader workers do the work, within the pixel budget that makes each
  record fit its row (:mod:`~hyper_parallel.data.image_budget`);
* :func:`collate_vision` -- rows right-padded (:func:`~.loader.collate`); pixels and grids of
  the batch's images concatenated in row order.

A row is one sample, padded; or, with ``data.packing``, several chat records' samples
(:class:`~.packing.PackedSequenceDataset`: a row's images are its samples', in order): its 1-D
``position_ids`` restart at each sample's first token, and :func:`collate_vision` makes each
sample's three-row positions restart there too, as the sample alone has them (the
``block_causal`` model keeps the samples apart). Videos are not read (``<|video_pad|>`` is only
looked up, so the token table is complete).

PIL and transformers are imported only when images are read or an image processor is built, so
importing this module costs no more than the rest of :mod:`hyper_parallel.data`.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from torch.utils.data import Dataset

from hyper_parallel import assets
from hyper_parallel.data.files import json_lines, resolve_data_files
from hyper_parallel.data.loader import collate
from hyper_parallel.data.vision_tokens import (
    IMAGE_MARKER,
    VisionTokens,
    image_span,
    placeholder_counts,
    vision_tokens,
)
from hyper_parallel.utils.choices import IGNORE_INDEX
from hyper_parallel.utils.data_types import IMAGE_KEYS, IMAGES_PER_ROW

# Qwen3-VL's published preprocessor settings (the vision tower of Qwen3.5 is Qwen3-VL's): patch
# 16, temporal patch 2, merge 2, mean = std = 0.5, images scaled to 256*256 .. 4096*4096 pixels.
DEFAULT_MIN_PIXELS = 256 * 256
DEFAULT_MAX_PIXELS = 4096 * 4096
PROCESSOR_CONFIG_FILE = "preprocessor_config.json"


# ----------------------------------------------------------------------------------------------
# Image processor
# ----------------------------------------------------------------------------------------------


def image_processor(processor_path: str | None = None, *, patch_size: int = 16,
                    temporal_patch_size: int = 2, merge_size: int = 2,
                    min_pixels: int = DEFAULT_MIN_PIXELS,
                    max_pixels: int = DEFAULT_MAX_PIXELS) -> Any:
    """A transformers ``Qwen2VLImageProcessor``: loaded from ``processor_path`` (a local folder
    holding ``preprocessor_config.json``, or that file; ``pkg://vl_corpus`` is the demo
    corpus's) or, when it is None, built from the keyword sizes (Qwen3-VL's by default).

    The keywords are ignored when a path is given: the file is the one statement of a
    checkpoint's settings. The torchvision backend is used when torchvision is installed, else
    the PIL/numpy one (the same patches, up to the interpolation of images it has to resize).
    Never reaches the network.
    """
    if importlib.util.find_spec("torchvision") is not None:
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import (
            Qwen2VLImageProcessor as cls,
        )
    else:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
            Qwen2VLImageProcessorPil as cls,
        )
    if processor_path is None:
        return cls(patch_size=patch_size, temporal_patch_size=temporal_patch_size,
                   merge_size=merge_size, min_pixels=min_pixels, max_pixels=max_pixels,
                   image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    path = assets.resolve_path(os.path.expanduser(processor_path))
    if os.path.isfile(path) and os.path.basename(path) == PROCESSOR_CONFIG_FILE:
        path = os.path.dirname(path)
    if not os.path.isfile(os.path.join(path, PROCESSOR_CONFIG_FILE)):
        raise FileNotFoundError(f"processor_path={processor_path!r}: no {PROCESSOR_CONFIG_FILE} "
                                f"in {path!r}; point it at a checkpoint folder holding one "
                                "(pkg://vl_corpus for the demo corpus) or leave it unset")
    return cls.from_pretrained(path, local_files_only=True)


# ----------------------------------------------------------------------------------------------
# Synthetic samples
# ----------------------------------------------------------------------------------------------


class VisionDummyDataset(Dataset):
    """Random image-text samples of exactly ``max_seq_len`` tokens (the legacy ``vl_dummy``).

    Sample ``i``: ``<|vision_start|>`` + ``t*h*w / merge_size**2`` x ``<|image_pad|>`` +
    ``<|vision_end|>`` + random text ids (below ``vocab_size``, never one of ``tokens``' ids or
    ``exclude_ids``) up to ``max_seq_len``; labels -100 on the image span, the ids elsewhere;
    ``pixel_values`` ``(t*h*w, patch_dim)`` standard normal. Everything comes from a generator
    seeded ``seed + i``, so a sample depends only on its index, not on the data-parallel layout.
    """

    #: Its samples carry images (the loader collates them with :func:`collate_vision`).
    holds_images = True

    def __init__(self, num_samples: int, max_seq_len: int, vocab_size: int, *,
                 tokens: VisionTokens, grid_thw: Sequence[int] = (1, 4, 4),
                 patch_dim: int = 3 * 2 * 16 * 16, merge_size: int = 2, seed: int = 42,
                 exclude_ids: Sequence[int] = ()) -> None:
        for name, value in (("num_samples", num_samples), ("max_seq_len", max_seq_len),
                            ("vocab_size", vocab_size), ("patch_dim", patch_dim),
                            ("merge_size", merge_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"VisionDummyDataset: {name} must be a positive int, "
                                 f"got {value!r}")
        grid = tuple(grid_thw)
        if len(grid) != 3 or not all(isinstance(g, int) and g >= 1 for g in grid):
            raise ValueError(f"VisionDummyDataset: grid_thw must be three positive ints "
                             f"(t, h, w), got {grid_thw!r}")
        t, h, w = grid
        if h % merge_size or w % merge_size:
            raise ValueError(f"VisionDummyDataset: grid_thw={grid}: h and w must be multiples of "
                             f"merge_size={merge_size} (the model merges merge_size x "
                             "merge_size patches into one token)")
        self.num_image_tokens = t * h * w // (merge_size * merge_size)
        span = self.num_image_tokens + 2
        if span > max_seq_len:
            raise ValueError(
                f"VisionDummyDataset: the image span of grid_thw={grid} is {span} tokens "
                f"(start + {self.num_image_tokens} placeholders + end), more than "
                f"max_seq_len={max_seq_len}; raise max_seq_len or use a smaller grid")
        too_big = [i for i in tokens.ids if i >= vocab_size]
        if too_big:
            raise ValueError(f"VisionDummyDataset: special token ids {too_big} are not below "
                             f"vocab_size={vocab_size}; the model's vocabulary must hold them")
        special = torch.tensor([*tokens.ids, *exclude_ids], dtype=torch.long)
        allowed = torch.ones(vocab_size, dtype=torch.bool)
        allowed[special[(special >= 0) & (special < vocab_size)]] = False
        self._text_ids = allowed.nonzero().flatten()
        if self._text_ids.numel() == 0:
            raise ValueError(f"VisionDummyDataset: vocab_size={vocab_size} leaves no id for text")
        self.num_samples, self.max_seq_len, self.vocab_size = num_samples, max_seq_len, vocab_size
        self.tokens, self.grid_thw, self.patch_dim = tokens, grid, patch_dim
        self.merge_size, self.seed = merge_size, seed
        self._span = torch.tensor(image_span(self.num_image_tokens, tokens), dtype=torch.long)

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not 0 <= index < self.num_samples:
            raise IndexError(f"VisionDummyDataset index {index} out of range "
                             f"[0, {self.num_samples})")
        gen = torch.Generator().manual_seed(self.seed + index)
        t, h, w = self.grid_thw
        pixel_values = torch.randn(t * h * w, self.patch_dim, generator=gen)
        picks = torch.randint(0, self._text_ids.numel(),
                              (self.max_seq_len - self._span.numel(),), generator=gen)
        text = self._text_ids[picks]
        input_ids = torch.cat([self._span, text])
        labels = torch.cat([torch.full_like(self._span, IGNORE_INDEX), text])
        return {"input_ids": input_ids, "labels": labels, "pixel_values": pixel_values,
                "image_grid_thw": torch.tensor([self.grid_thw], dtype=torch.long)}


# ----------------------------------------------------------------------------------------------
# Chat records with images
# ----------------------------------------------------------------------------------------------


class ImageTextDataset(Dataset):
    """Chat records with images, rendered as Qwen's ChatML, one sample per record.

    Files: ``path`` is a ``.jsonl`` file, a folder (its ``*.jsonl`` files) or a glob; ``pkg://``
    addresses the shipped assets (``pkg://vl_corpus/train.jsonl``). Each line is a record::

        {"messages": [{"role": "user", "content": "How many circles?"},
                      {"role": "assistant", "content": "three"}],
         "image": "images/0001.png"}

    ``messages_key`` / ``image_key`` name the two keys. Roles are ``system``, ``user`` and
    ``assistant``; a ``content`` is a string or a list of parts (strings, ``{"type": "text",
    "text": ...}``, ``{"type": "image"}``). The image key holds a path or a list of paths,
    relative to the jsonl file's folder (absolute paths too), or is absent for a text-only
    record. Images go where a user message has an ``<image>`` marker or an image part, in order
    (an image part may name its own path under ``"image"``); a record with no marker at all gets
    all its images at the start of its first user message.

    Rendering: ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message, each image as
    ``<|vision_start|>`` + N x ``<|image_pad|>`` + ``<|vision_end|>``. Only assistant contents
    and their ``<|im_end|>`` are trained (labels = ids); everything else is -100. Text between
    special tokens is tokenized piece by piece (role header, content); since every boundary
    follows a newline or a special token, where byte-level BPE pre-tokenizers split anyway,
    the ids equal tokenizing the rendered string unless a content starts with whitespace.

    Length: a record's images are resized within what its row can hold -- the processor's
    ``max_pixels``, lowered for a record whose text and images would end past ``max_seq_len``
    (:mod:`~hyper_parallel.data.image_budget`) -- and text after the last image is cut at
    ``max_seq_len``, as a text sample is. A sample is never cut inside an image.

    ``__init__`` reads and checks the structure of every record -- the first ``limit`` of them
    (``max_samples``) when it is set -- (errors name ``file:line``: bad JSON, missing keys,
    unknown roles, marker/image count mismatches) and then checks, before step 1, everything
    that could stop a sample later
    (:func:`~hyper_parallel.data.image_scan.check_records`): each rank of the process group
    tokenizes its share of the records and reads its share's image headers (sizes, not pixels);
    the ranks gather what they found and every rank raises one error naming every record that
    cannot train -- a missing or unreadable image, a text that encodes to a special id, images
    that cannot fit ``max_seq_len`` even at the processor's ``min_pixels``. ``__getitem__``
    decodes and preprocesses the record's images (so DataLoader workers do it) and builds the
    sample. With a process group up, building it is a collective (every rank builds it, as
    every rank builds its data loader); without one the one process is the whole world.

    ``count_lengths`` (``data.packing``): the check also counts every record's sample length
    (from the image headers, the ranks gathering their shares'), which :meth:`lengths` serves to
    the packer without decoding an image.
    """

    #: Its samples carry images (the loader collates them with :func:`collate_vision`).
    holds_images = True

    def __init__(self, path: str, *, tokenizer: Any, max_seq_len: int,
                 processor: Any = None, tokens: VisionTokens | None = None,
                 messages_key: str = "messages", image_key: str = "image",
                 path_field: str = "data.train_path",
                 length_field: str = "data.max_seq_len", limit: int | None = None,
                 count_lengths: bool = False) -> None:
        from hyper_parallel.data.chat_records import ChatRecords
        from hyper_parallel.data.image_scan import check_records

        if not isinstance(max_seq_len, int) or isinstance(max_seq_len, bool) or max_seq_len < 1:
            raise ValueError(f"{length_field} must be a positive int, got {max_seq_len!r}")
        self.length_field = length_field
        self.tokenizer, self.max_seq_len = tokenizer, max_seq_len
        self.tokens = tokens if tokens is not None else vision_tokens(tokenizer, chat=True)
        self.processor = processor if processor is not None else image_processor(None)
        self.chat = ChatRecords(tokenizer=tokenizer, tokens=self.tokens,
                                processor=self.processor, max_seq_len=max_seq_len,
                                messages_key=messages_key, image_key=image_key,
                                length_field=length_field)
        self.merge_size = self.chat.merge_size
        self.messages_key, self.image_key = messages_key, image_key
        self.source = path
        self.records = list(itertools.islice(self._read(path, path_field), limit))
        if not self.records:
            raise ValueError(f"{path_field}={path!r}: no records")
        counted = check_records(self.records, self.chat, source=path, path_field=path_field,
                                lengths=count_lengths)
        self._lengths = None if counted is None else torch.tensor(counted, dtype=torch.int64)

    def _read(self, path: str, path_field: str) -> Iterator[Any]:
        """The drafted records of the files ``path`` names, in order, read as they are taken."""
        for file in resolve_data_files(path, suffix=".jsonl", path_field=path_field):
            folder = os.path.dirname(os.path.abspath(file))
            for where, obj in json_lines(file, "expected one record per line"):
                yield self.chat.read(obj, where, folder)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return self.chat.sample(self.records[index])

    def lengths(self) -> torch.Tensor:
        """Tokens of each record's sample, as planned before step 1 (``count_lengths``)."""
        if self._lengths is None:
            raise RuntimeError("ImageTextDataset: sample lengths were not counted; build it "
                               "with count_lengths=True (data.packing)")
        return self._lengths

    def describe(self) -> str:
        """One line for the training log."""
        with_images = sum(bool(r.images) for r in self.records)
        return (f"{self.source}: {len(self)} chat records ({with_images} with images), one "
                f"sample each, at most {self.max_seq_len} tokens")


# ----------------------------------------------------------------------------------------------
# Collate
# ----------------------------------------------------------------------------------------------


def collate_vision(batch: Sequence[Mapping[str, torch.Tensor]], pad_id: int,
                   pad_to_multiple_of: int = 1, positions: Any = None) -> dict[str, torch.Tensor]:
    """Pad ``input_ids`` / ``labels`` (and the other 1-D keys) like :func:`~.loader.collate` and
    concatenate the images of the batch along dim 0, row by row: ``pixel_values``
    ``(patches, patch_dim)`` and ``image_grid_thw`` ``(images, 3)``, in the order the
    placeholders appear in the flattened ``input_ids``, and ``images_per_row`` ``(B,)``. A
    batch without any image has none of these keys. Use ``functools.partial(collate_vision, pad_id=tokenizer.pad_id)`` as a collate_fn.

    ``positions(input_ids, image_grid_thw, packed_positions)``: the model's positions of a batch
    with images (its tower's ``decoder_positions``), added as ``position_ids`` ``(3, B, S)``:
    computed here, on the host (in the loader's workers), rather than by the model from ids on
    the device. Packed rows (``data.packing``) carry 1-D ``position_ids`` restarting at each
    sample: they are passed as ``packed_positions``, so each sample's three rows restart there
    too. A batch without images keeps its 1-D ``position_ids`` (text positions are the same on
    all three rows).
    """
    if not batch:
        raise ValueError("collate_vision: empty batch")
    text = [{k: v for k, v in s.items() if k not in IMAGE_KEYS} for s in batch]
    out = collate(text, pad_id, pad_to_multiple_of)
    pixels, grids = [], []
    for row, sample in enumerate(batch):
        has = [k in sample for k in IMAGE_KEYS]
        if any(has) and not all(has):
            raise ValueError(f"collate_vision: sample {row} has only one of {IMAGE_KEYS}")
        if not all(has):
            continue
        pv, grid = sample["pixel_values"], sample["image_grid_thw"]
        if grid.dim() != 2 or grid.shape[-1] != 3 or pv.dim() != 2:
            raise ValueError(f"collate_vision: sample {row}: pixel_values must be 2-D and "
                             f"image_grid_thw (images, 3), got {tuple(pv.shape)} and "
                             f"{tuple(grid.shape)}")
        if int(grid.prod(dim=-1).sum()) != pv.shape[0]:
            raise ValueError(f"collate_vision: sample {row}: {pv.shape[0]} pixel rows but "
                             f"image_grid_thw {grid.tolist()} describes "
                             f"{int(grid.prod(dim=-1).sum())} patches")
        if grid.shape[0]:
            pixels.append(pv)
            grids.append(grid)
    if pixels:
        out["pixel_values"] = torch.cat(pixels)
        out["image_grid_thw"] = torch.cat(grids)
        # How many images each row holds: what a split of the rows needs to take its images.
        out[IMAGES_PER_ROW] = torch.tensor(
            [int(s["image_grid_thw"].shape[0]) if "image_grid_thw" in s else 0 for s in batch])
        if positions is not None:
            out["position_ids"] = positions(out["input_ids"], out["image_grid_thw"],
                                            out.get("position_ids"))
    return out


__all__ = ["IMAGE_MARKER", "ImageTextDataset", "VisionDummyDataset",
           "VisionTokens", "collate_vision", "image_processor", "image_span",
           "placeholder_counts", "vision_tokens"]
