"""``preset_pt``: replay pre-tokenized batches saved with ``torch.save``.

For reproducing a run batch for batch (e.g. the batches another trainer logged): the file is a
list of batches, each a dict with ``input_ids`` (an integer tensor ``[B, S]``) and optionally
``labels``, ``attention_mask`` and ``position_ids`` of the same shape. The batches are expanded
into samples in file order -- sample ``k`` is row ``k`` of the batches concatenated -- so the
file's own batch size need not match the run's. ``labels`` default to a copy of ``input_ids``.

``position_ids`` reach the model as written: packed rows whose positions restart at 0 where
each document begins (what transformers' ``DataCollatorWithFlattening`` writes, with -100 on
each document's first label) train as packed documents, kept apart by a ``block_causal``
model (``model.attn_mask_type``; :mod:`hyper_parallel.utils.documents`).

A batch of an image-text model may also carry its images by transformers' names:
``pixel_values`` ``(patches, patch_dim)`` and ``image_grid_thw`` ``(images, 3)``, the images of
the batch's rows in order (what ``Qwen2VLImageProcessor`` and ``collate_vision`` produce). They
are dealt to the rows by the rows' image placeholder tokens (the model's ``image_token_id``;
``t*h*w / merge**2`` of them per image), so the samples are replayed with their own images.

The order is the point, so the dataset refuses to be shuffled (its ``data_type`` is one of the
ordered types; the loader and the config check it). Every sample has exactly ``max_seq_len`` tokens: the file is the
data, a length mismatch means the run is configured for other data.

Loaded with ``torch.load(weights_only=True)``: a data file must not be able to run code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch
from torch.utils.data import Dataset

from hyper_parallel import assets
from hyper_parallel.data.loader import IGNORE_INDEX
from hyper_parallel.utils.data_types import IMAGE_KEYS

DEFAULT_FIELDS = {"path": "data.train_path", "max_seq_len": "data.max_seq_len"}
_KEYS = ("input_ids", "labels", "attention_mask", "position_ids")
#: The optional per-token columns: each is in every batch or in none.
_OPTIONAL = ("attention_mask", "position_ids")


def _integer(t: torch.Tensor) -> bool:
    return not t.is_floating_point() and not t.is_complex()


class PresetBatchesDataset(Dataset):
    """The rows of a ``torch.save``'d list of batches, in file order (module docstring).

    Attributes: ``input_ids`` ``[N, S]``, ``labels`` ``[N, S]``, ``attention_mask`` and
    ``position_ids`` ``[N, S]`` or None, ``num_batches`` (batches in the file), ``source``.
    """

    #: Its data type: one replayed in file order, so the loader refuses ``shuffle=True``
    #: (``hyper_parallel.utils.data_types.setting_problems``).
    data_type = "preset_pt"

    def __init__(self, path: str, *, max_seq_len: int, vocab_size: int | None = None,
                 fields: Mapping[str, str] | None = None, vision: Any = None) -> None:
        names = {**DEFAULT_FIELDS, **(fields or {})}
        path_field, len_field = names["path"], names["max_seq_len"]
        resolved = assets.resolve_path(os.path.expanduser(path))
        shown = repr(path) if resolved == path else f"{path!r} (= {resolved!r})"
        if not os.path.isfile(resolved):
            raise FileNotFoundError(f"{path_field}={shown} does not exist (preset_pt needs a "
                                    "file written by torch.save: a list of batch dicts)")
        try:
            batches = torch.load(resolved, map_location="cpu", weights_only=True)
        except Exception as exc:  # unpickling errors have many types
            raise ValueError(f"{path_field}={shown}: cannot load it with torch.load(weights_only="
                             f"True): {type(exc).__name__}: {exc}") from exc

        def fail(message: str) -> ValueError:
            return ValueError(f"{path_field}={shown}: {message}")

        if not isinstance(batches, list):
            raise fail(f"expected a list of batches (dicts of [B, S] tensors), got "
                       f"{type(batches).__name__}")
        if not batches:
            raise fail("the list of batches is empty")
        columns: dict[str, list[torch.Tensor]] = {k: [] for k in _KEYS}
        images: list[tuple[torch.Tensor, torch.Tensor] | None] = []
        seq_len = None
        first = batches[0] if isinstance(batches[0], dict) else {}
        has = {key: key in first for key in _OPTIONAL}
        for i, batch in enumerate(batches):
            if not isinstance(batch, dict):
                raise fail(f"batch {i} is a {type(batch).__name__}, expected a dict with "
                           "input_ids (and optionally labels, attention_mask, position_ids)")
            if "input_ids" not in batch:
                raise fail(f"batch {i} has no input_ids (keys: {sorted(map(str, batch))})")
            unknown = sorted(str(k) for k in batch if k not in (*_KEYS, *IMAGE_KEYS))
            if unknown:
                raise fail(f"batch {i} has unknown keys {unknown}; allowed: "
                           f"{', '.join((*_KEYS, *IMAGE_KEYS))}")
            ids = batch["input_ids"]
            if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or not _integer(ids):
                what = (f"a {ids.dim()}-D {ids.dtype} tensor of shape {tuple(ids.shape)}"
                        if isinstance(ids, torch.Tensor) else f"a {type(ids).__name__}")
                raise fail(f"batch {i} input_ids is {what}; expected a 2-D integer tensor [B, S]")
            if seq_len is None:
                seq_len = ids.shape[1]
            elif ids.shape[1] != seq_len:
                raise fail(f"the batches mix sequence lengths: batch 0 has S={seq_len}, batch {i} "
                           f"has S={ids.shape[1]}; every batch must have the same S")
            for key in ("labels", *_OPTIONAL):
                value = batch.get(key)
                if value is None:
                    continue
                if not isinstance(value, torch.Tensor) or not (_integer(value)
                                                               or value.dtype == torch.bool):
                    raise fail(f"batch {i} {key} must be an integer tensor, got "
                               f"{getattr(value, 'dtype', type(value).__name__)}")
                if value.shape != ids.shape:
                    raise fail(f"batch {i} {key} has shape {tuple(value.shape)} but input_ids "
                               f"has {tuple(ids.shape)}")
            for key in _OPTIONAL:
                if (key in batch) != has[key]:
                    raise fail(f"batch {i} {'has' if not has[key] else 'lacks'} {key} but "
                               f"batch 0 {'does not' if not has[key] else 'has one'}; give it in "
                               "every batch or in none")
            positions = batch.get("position_ids")
            if positions is not None and (positions.dtype == torch.bool or positions.min() < 0):
                raise fail(f"batch {i} position_ids must be integers >= 0 (each document's "
                           "positions counting from 0)")
            if positions is not None and any(k in batch for k in IMAGE_KEYS):
                raise fail(f"batch {i} has images and position_ids: an image-text row's "
                           "positions are the model's three rows, made from its images; "
                           "drop position_ids")
            images += _row_images(batch, i, ids, vision, fail)
            columns["input_ids"].append(ids.to(torch.long))
            labels = batch.get("labels")
            columns["labels"].append(ids.to(torch.long) if labels is None
                                     else labels.to(torch.long))
            for key in _OPTIONAL:
                if has[key]:
                    columns[key].append(batch[key].to(torch.long) if key == "position_ids"
                                        else batch[key])
        if seq_len != max_seq_len:
            raise fail(f"its samples have S={seq_len} tokens but the run's sequence length "
                       f"({len_field}) is {max_seq_len}; set {len_field}={seq_len} to replay "
                       "this file")
        self.input_ids = torch.cat(columns["input_ids"])
        self.labels = torch.cat(columns["labels"])
        self.attention_mask = torch.cat(columns["attention_mask"]) if has["attention_mask"] else None
        self.position_ids = torch.cat(columns["position_ids"]) if has["position_ids"] else None
        if self.input_ids.shape[0] == 0:
            raise fail("the batches hold no samples (every batch has B=0)")
        self._check_ids(fail, vocab_size)
        self.num_batches = len(batches)
        self.max_seq_len = max_seq_len
        self.source = path
        self.images = images
        #: Whether the samples carry images (the loader collates them with ``collate_vision``).
        self.holds_images = any(image is not None for image in images)

    def _check_ids(self, fail: Any, vocab_size: int | None) -> None:
        low = int(self.input_ids.min())
        if low < 0:
            raise fail(f"input_ids hold a negative id ({low})")
        bad_labels = (self.labels < 0) & (self.labels != IGNORE_INDEX)
        if bad_labels.any():
            raise fail(f"labels hold {int(self.labels[bad_labels][0])}; a label is an id >= 0 or "
                       f"{IGNORE_INDEX} (ignored)")
        if vocab_size is None:
            return
        for key, values in (("input_ids", self.input_ids), ("labels", self.labels)):
            high = int(values.max())
            if high >= vocab_size:
                row = int((values >= vocab_size).any(dim=1).nonzero()[0])
                raise fail(f"{key} hold ids up to {high} (sample {row} is the first with an "
                           f"id >= {vocab_size}), but the model vocabulary (vocab_size) is "
                           f"{vocab_size}: ids must be < {vocab_size}")

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        sample = {"input_ids": self.input_ids[index].clone(), "labels": self.labels[index].clone()}
        if self.attention_mask is not None:
            sample["attention_mask"] = self.attention_mask[index].clone()
        if self.position_ids is not None:
            sample["position_ids"] = self.position_ids[index].clone()
        if self.holds_images and self.images[index] is not None:
            sample["pixel_values"], sample["image_grid_thw"] = self.images[index]
        return sample

    def head(self, n: int) -> PresetBatchesDataset:
        """The first ``n`` samples (``max_samples``), sharing this dataset's storage."""
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.input_ids, out.labels = self.input_ids[:n], self.labels[:n]
        out.images = self.images[:n]
        if self.attention_mask is not None:
            out.attention_mask = self.attention_mask[:n]
        if self.position_ids is not None:
            out.position_ids = self.position_ids[:n]
        return out

    def describe(self) -> str:
        """One line for the training log."""
        return (f"{self.source}: {self.num_batches} preset batches -> {len(self)} samples of "
                f"{self.max_seq_len} tokens, replayed in file order")


def _row_images(batch: Mapping[str, Any], i: int, ids: torch.Tensor, vision: Any,
                fail: Any) -> list[tuple[torch.Tensor, torch.Tensor] | None]:
    """Batch ``i``'s images dealt to its rows (None for a row without any), in order: each row
    takes the next images whose placeholder tokens it holds."""
    given = [k for k in IMAGE_KEYS if k in batch]
    if not given:
        return [None] * ids.shape[0]
    if len(given) == 1:
        raise fail(f"batch {i} has {given[0]} without {(set(IMAGE_KEYS) - set(given)).pop()}")
    if vision is None:
        raise fail(f"batch {i} carries images (pixel_values) but the model has no vision tower; "
                   "train an image-text flavor (e.g. debugmodel_vl)")
    pixels, grid = batch["pixel_values"], batch["image_grid_thw"]
    if (not isinstance(pixels, torch.Tensor) or pixels.dim() != 2
            or pixels.shape[1] != vision.patch_dim or not pixels.is_floating_point()):
        raise fail(f"batch {i} pixel_values must be a float tensor (patches, {vision.patch_dim}), "
                   f"got {getattr(pixels, 'shape', type(pixels).__name__)}")
    if not isinstance(grid, torch.Tensor) or grid.dim() != 2 or grid.shape[1] != 3:
        raise fail(f"batch {i} image_grid_thw must be an integer tensor (images, 3)")
    patches = grid.prod(-1)
    if int(patches.sum()) != pixels.shape[0]:
        raise fail(f"batch {i}: image_grid_thw describes {int(patches.sum())} patches but "
                   f"pixel_values has {pixels.shape[0]}")
    tokens = (patches // vision.merge_unit).tolist()
    starts = [0, *torch.cumsum(patches, 0).tolist()]
    out: list[tuple[torch.Tensor, torch.Tensor] | None] = []
    image = 0
    for row, held in enumerate((ids == vision.image_token_id).sum(dim=1).tolist()):
        first = image
        while held > 0 and image < len(tokens):
            held -= tokens[image]
            image += 1
        if held != 0:
            raise fail(f"batch {i} row {row}: its image placeholder tokens do not add up to "
                       f"whole images of image_grid_thw {grid.tolist()}")
        out.append(None if image == first else (
            pixels[starts[first]:starts[image]].clone(), grid[first:image].to(torch.long).clone()))
    if image != len(tokens):
        raise fail(f"batch {i}: {len(tokens) - image} image(s) of image_grid_thw have no "
                   "placeholder tokens in input_ids")
    return out


__all__ = ["PresetBatchesDataset"]
