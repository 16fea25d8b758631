"""Chat records with images: read, rendered as Qwen's ChatML, checked, made into samples.

One home for what a ``json_file`` chat record is, for the loaded dataset
(:class:`~.vision.ImageTextDataset`) and the stream (:class:`ChatStreamEncoder`) alike. A
record's life has four steps, so that each can run where it costs least:

1. :meth:`ChatRecords.read` -- the JSON object checked and drafted (roles, contents, image
   placeholders, image paths made absolute); no file is touched. Every rank reads every record
   this far: a map-style dataset must be able to serve any index.
2. :meth:`ChatRecords.encode` -- the text pieces tokenized (one ``encode_batch``).
3. :meth:`ChatRecords.check` -- the image files' headers read (sizes, never decoded) and the
   record's pixel budget planned (:func:`~.image_budget.fit_images`): a problem, or None. The
   start-up scan (:mod:`.image_scan`) runs it on each rank's share of the records only.
4. :meth:`ChatRecords.sample` -- the images decoded and preprocessed at the planned budget and
   the sample built (in the loader's workers).

A record's images are resized within what its row can hold (:mod:`.image_budget`); a record
they cannot fit even at the processor's ``min_pixels`` is :class:`RecordTooLong`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from hyper_parallel.data.files import decode_utf8, json_line
from hyper_parallel.data.image_budget import ImageFit, fit_images, pixel_range, processor_size
from hyper_parallel.data.vision_tokens import (
    IMAGE_MARKER,
    ROLES,
    VisionTokens,
    image_span,
    placeholder_counts,
)
from hyper_parallel.utils.choices import IGNORE_INDEX

logger = logging.getLogger(__name__)

# A drafted record is a list of pieces: ``(text, trained)`` runs (a ``str`` until encoded, then
# a list of ids), or the int ``k`` for the record's k-th image, whose span is only known once
# the image's size is.
_Piece = tuple[str, bool] | tuple[list[int], bool] | int

#: How many records a stream names in the log when it leaves them out (then only a count).
_NAMED_DROPS = 10


class RecordTooLong(ValueError):
    """A record whose images cannot fit ``max_seq_len`` even at the processor's ``min_pixels``
    (a sample is never cut inside an image)."""


@dataclass(frozen=True)
class _Slot:
    """Where an image goes in a message: its own path (an image part naming one) or None (the
    record's next image)."""

    path: str | None = None


@dataclass(frozen=True)
class ChatRecord:
    """A drafted record: where it is, its images and its pieces (text not yet tokenized)."""

    where: str  # file:line
    images: tuple[str, ...]  # absolute paths, in placeholder order
    shown: tuple[str, ...]  # the same paths as the record writes them (for messages)
    pieces: tuple[_Piece, ...]


@dataclass(frozen=True)
class Checked:
    """What :meth:`ChatRecords.check` found: a problem (None: the record trains) and, for a
    record with images, their plan."""

    problem: str | None = None
    missing: bool = False  # the problem is an image file that is not there
    fit: ImageFit | None = None
    #: The sample's tokens (what :meth:`ChatRecords.sample` makes; None with a problem): what
    #: packing plans rows by, known without decoding an image.
    length: int | None = None


class ChatRecords:
    """Reads chat records and makes their samples (module docstring).

    ``tokens``: the vision and ChatML token ids (``im_start_token_id`` / ``im_end_token_id``
    set); ``processor``: transformers' ``Qwen2VLImageProcessor``; ``length_field`` names
    ``max_seq_len`` in messages.
    """

    def __init__(self, *, tokenizer: Any, tokens: VisionTokens, processor: Any,
                 max_seq_len: int, messages_key: str = "messages", image_key: str = "image",
                 length_field: str = "data.max_seq_len") -> None:
        if tokens.im_start_token_id is None or tokens.im_end_token_id is None:
            raise ValueError("chat records render ChatML: tokens needs im_start_token_id and "
                             "im_end_token_id (vision_tokens(tokenizer, chat=True))")
        self.tokenizer, self.tokens, self.processor = tokenizer, tokens, processor
        self.max_seq_len, self.length_field = max_seq_len, length_field
        self.messages_key, self.image_key = messages_key, image_key
        self.merge_size = int(processor.merge_size)
        pixel_range(processor)  # a processor without a pixel range is refused here, not later

    # -- 1. reading ---------------------------------------------------------------------------

    def read(self, obj: Any, where: str, folder: str) -> ChatRecord:
        """``obj`` (the record at ``where``, in a file of ``folder``) checked and drafted."""
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected a JSON object, got "  # noqa: TRY004
                             f"{type(obj).__name__}")
        messages = obj.get(self.messages_key)
        if messages is None:
            raise ValueError(f"{where}: no key {self.messages_key!r} (messages_key); the "
                             f"object has keys {sorted(obj)}")
        if not isinstance(messages, list) or not messages:
            raise ValueError(f"{where}: {self.messages_key!r} must be a non-empty list "
                             "of messages")
        return self._draft(where, folder, messages, self._image_paths(obj.get(self.image_key),
                                                                      where))

    def read_line(self, raw: bytes, file: str, line: int) -> ChatRecord:
        """The record on line ``line`` of ``file`` (its bytes ``raw``)."""
        where = f"{file}:{line}"
        obj = json_line(decode_utf8(raw, where), where, "expected one record per line")
        return self.read(obj, where, os.path.dirname(os.path.abspath(file)))

    def _image_paths(self, value: Any, where: str) -> list[str]:
        if value is None:
            return []
        paths = [value] if isinstance(value, str) else value
        if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
            raise ValueError(f"{where}: {self.image_key!r} (image_key) must be a path or a list "
                             f"of paths, got {value!r:.80}")
        return paths

    def _draft(self, where: str, folder: str, messages: list, images: list[str]) -> ChatRecord:
        """Pieces with text still as strings; image pieces index the final image list."""
        parts_by_message = []
        for i, message in enumerate(messages):
            if not isinstance(message, dict):
                raise ValueError(  # noqa: TRY004 - bad file content, like the other data errors
                    f"{where}: message {i} is {type(message).__name__}, expected an object with "
                    "'role' and 'content'")
            role = message.get("role")
            if role not in ROLES:
                raise ValueError(f"{where}: message {i} has role {role!r}; expected one of "
                                 f"{', '.join(ROLES)}")
            parts = _parts(message.get("content"), where, i)
            if role != "user" and any(isinstance(p, _Slot) for p in parts):
                raise ValueError(f"{where}: message {i} ({role}) holds an image; images go in "
                                 "user messages")
            parts_by_message.append((role, parts))
        if not any(role == "assistant" for role, _ in parts_by_message):
            raise ValueError(f"{where}: no assistant message, so nothing to train on")

        slots = sum(isinstance(p, _Slot) for _, parts in parts_by_message for p in parts)
        queue = list(images)
        if slots == 0 and queue:  # no marker: all images open the first user message
            first_user = next((k for k, (r, _) in enumerate(parts_by_message) if r == "user"),
                              None)
            if first_user is None:
                raise ValueError(f"{where}: the record has images but no user message")
            role, parts = parts_by_message[first_user]
            parts_by_message[first_user] = (role, [_Slot()] * len(queue) + parts)
        ordered: list[str] = []
        pieces: list = []
        tok = self.tokens
        for role, parts in parts_by_message:
            trained = role == "assistant"
            pieces += [([tok.im_start_token_id], False), (f"{role}\n", False)]
            for part in parts:
                if isinstance(part, str):
                    if part:
                        pieces.append((part, trained))
                    continue
                if part.path is not None:
                    ordered.append(part.path)
                elif queue:
                    ordered.append(queue.pop(0))
                else:
                    raise ValueError(f"{where}: more image placeholders ({IMAGE_MARKER!r} "
                                     f"markers or image parts) than the {len(images)} image(s) "
                                     f"under {self.image_key!r} (image_key)")
                pieces.append(len(ordered) - 1)
            pieces += [([tok.im_end_token_id], trained), ("\n", False)]
        if queue:
            raise ValueError(f"{where}: {len(images)} image(s) under {self.image_key!r} but only "
                             f"{len(images) - len(queue)} placeholder(s) for them "
                             f"({IMAGE_MARKER!r} markers or image parts) in the messages")
        full = tuple(os.path.join(folder, os.path.expanduser(p)) for p in ordered)
        return ChatRecord(where, full, tuple(ordered), tuple(pieces))

    # -- 2. tokens ----------------------------------------------------------------------------

    def encode(self, record: ChatRecord) -> list[_Piece]:
        """The record's pieces with every text run tokenized; a text that encodes to a vision or
        chat special token is a ``ValueError`` (text must not mean structure)."""
        texts = [p[0] for p in record.pieces if isinstance(p, tuple) and isinstance(p[0], str)]
        encoded = iter(self.tokenizer.encode_batch(texts)) if texts else iter(())
        special = set(self.tokens.ids)
        out: list[_Piece] = []
        for piece in record.pieces:
            if isinstance(piece, tuple) and isinstance(piece[0], str):
                ids = list(next(encoded))
                if special.intersection(ids):
                    raise ValueError(f"{record.where}: the text {piece[0]!r:.60} encodes to a "
                                     "vision/chat special token id; text must not")
                piece = (ids, piece[1])
            out.append(piece)
        return out

    # -- 3. check -----------------------------------------------------------------------------

    def image_sizes(self, record: ChatRecord) -> list[tuple[int, int]]:
        """``(height, width)`` of each of the record's images, from the files' headers (PIL
        opens an image lazily: the pixels are not decoded)."""
        from PIL import Image

        sizes = []
        for full, shown in zip(record.images, record.shown):
            try:
                with Image.open(full) as image:
                    width, height = image.size
            except FileNotFoundError as exc:
                raise FileNotFoundError(
                    f"{record.where}: image {shown!r} not found (looked at {full!r}; relative "
                    "paths start at the jsonl file's folder)") from exc
            except (OSError, ValueError, Image.DecompressionBombError) as exc:
                raise ValueError(f"{record.where}: cannot read image {shown!r}: {exc}") from exc
            sizes.append((height, width))
        return sizes

    def plan(self, record: ChatRecord, pieces: Sequence[_Piece],
             sizes: Sequence[tuple[int, int]]) -> ImageFit:
        """The pixel budget of the record's images (:func:`~.image_budget.fit_images`), given
        its encoded ``pieces`` and its images' ``sizes``."""
        text, before = 0, 0
        for piece in pieces:
            if isinstance(piece, int):
                before = text  # the text up to the last image
            else:
                text += len(piece[0])
        for (height, width), shown in zip(sizes, record.shown):
            if max(height, width) > 200 * min(height, width):
                raise ValueError(f"{record.where}: image {shown!r} is {width} x {height} pixels; "
                                 "the image processor refuses an aspect ratio over 200")
        return fit_images(self.processor, sizes, text_before=before,
                          max_seq_len=self.max_seq_len)

    def check(self, record: ChatRecord) -> Checked:
        """Everything that could stop the record's sample, found without decoding an image:
        its text's tokens, its image files and their sizes, whether they fit the row."""
        try:
            pieces = self.encode(record)
            if not record.images:
                return Checked(length=self.sample_length(pieces, None))
            fit = self.plan(record, pieces, self.image_sizes(record))
        except FileNotFoundError as exc:
            return Checked(str(exc), missing=True)
        except (ValueError, OSError) as exc:
            return Checked(str(exc))
        if not fit.fits:
            return Checked(self.too_long(record, fit), fit=fit)
        return Checked(fit=fit, length=self.sample_length(pieces, fit))

    def sample_length(self, pieces: Sequence[_Piece], fit: ImageFit | None) -> int:
        """Tokens of the sample of a record whose encoded ``pieces`` are these and whose
        images are planned ``fit`` (None: none): its text and image spans, cut at
        ``max_seq_len`` as :meth:`sample` cuts them."""
        text = sum(len(piece[0]) for piece in pieces if not isinstance(piece, int))
        spans = 0 if fit is None else sum(fit.tokens) + 2 * len(fit.tokens)
        return min(self.max_seq_len, text + spans)

    def too_long(self, record: ChatRecord, fit: ImageFit) -> str:
        """Why the record cannot be a sample (its images do not fit even at ``min_pixels``)."""
        text = fit.images_end - sum(fit.tokens) - 2 * len(fit.tokens)
        return (f"{record.where}: its {len(fit.tokens)} image(s) end at token {fit.images_end} "
                f"even at the image processor's smallest size (min_pixels={fit.max_pixels}: "
                f"{sum(fit.tokens)} image tokens after {text} tokens of text), past "
                f"{self.length_field}={self.max_seq_len}, so it cannot be cut without splitting "
                "an image")

    # -- 4. sample ----------------------------------------------------------------------------

    def sample(self, record: ChatRecord) -> dict[str, torch.Tensor]:
        """The record's sample: ``input_ids``, ``labels`` and, with images, ``pixel_values``
        and ``image_grid_thw`` (preprocessed within the record's budget). Text past
        ``max_seq_len`` after the last image is cut; :class:`RecordTooLong` when the images
        cannot fit."""
        pieces = self.encode(record)
        sample: dict[str, torch.Tensor] = {}
        counts: list[int] = []
        if record.images:
            images = self._decoded(record)
            fit = self.plan(record, pieces, [(im.height, im.width) for im in images])
            if not fit.fits:
                raise RecordTooLong(self.too_long(record, fit))
            out = self.processor(images=images, size=processor_size(self.processor,
                                                                    fit.max_pixels),
                                 return_tensors="pt")
            sample = {"pixel_values": out["pixel_values"].to(torch.float32),
                      "image_grid_thw": out["image_grid_thw"].to(torch.long)}
            counts = placeholder_counts(sample["image_grid_thw"], self.merge_size)
        ids: list[int] = []
        labels: list[int] = []
        images_end = 0
        for piece in pieces:
            if isinstance(piece, int):
                span = image_span(counts[piece], self.tokens)
                ids += span
                labels += [IGNORE_INDEX] * len(span)
                images_end = len(ids)
            else:
                run, trained = piece
                ids += run
                labels += run if trained else [IGNORE_INDEX] * len(run)
        if images_end > self.max_seq_len:  # the processor made other grids than planned
            raise RuntimeError(f"{record.where}: the images end at token {images_end}, past "
                               f"{self.length_field}={self.max_seq_len}, though planned to "
                               "fit: the image processor resized them otherwise than its "
                               "get_number_of_image_patches says")
        return {"input_ids": torch.tensor(ids[: self.max_seq_len], dtype=torch.long),
                "labels": torch.tensor(labels[: self.max_seq_len], dtype=torch.long), **sample}

    def _decoded(self, record: ChatRecord) -> list[Any]:
        from PIL import Image

        images = []
        for full, shown in zip(record.images, record.shown):
            try:
                with Image.open(full) as image:
                    images.append(image.convert("RGB"))
            except FileNotFoundError as exc:
                raise FileNotFoundError(f"{record.where}: image {shown!r} not found (looked at "
                                        f"{full!r})") from exc
            except (OSError, ValueError, Image.DecompressionBombError) as exc:
                raise ValueError(f"{record.where}: cannot read image {shown!r}: {exc}") from exc
        return images


def _parts(content: Any, where: str, i: int) -> list[str | _Slot]:
    """A message's content as text strings and image slots, in order."""
    if isinstance(content, str):
        chunks = content.split(IMAGE_MARKER)
        out: list = [chunks[0]]
        for chunk in chunks[1:]:
            out += [_Slot(), chunk]
        return out
    if not isinstance(content, list):
        raise ValueError(  # noqa: TRY004
            f"{where}: message {i} content must be a string or a list of parts, got "
            f"{type(content).__name__}")
    out = []
    for part in content:
        if isinstance(part, str):
            out += _parts(part, where, i)
        elif isinstance(part, dict) and part.get("type", "text") == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise ValueError(  # noqa: TRY004
                    f"{where}: message {i}: a text part needs a string 'text'")
            out += _parts(text, where, i)
        elif isinstance(part, dict) and part.get("type") == "image":
            path = part.get("image", part.get("path"))
            out.append(_Slot(path if isinstance(path, str) and path else None))
        else:
            raise ValueError(f"{where}: message {i}: unsupported content part {part!r:.80} "
                             "(strings, {'type': 'text', 'text': ...} or {'type': 'image'})")
    return out


class ChatStreamEncoder:
    """A stream's transform of one chat record (a row ``{"file", "line", "raw"}`` of
    :func:`~.streaming.json_lines_source`) into its sample.

    A record whose images cannot fit the row is left out and logged (the first
    ``_NAMED_DROPS`` by ``file:line``, then a count): a stream is not read ahead, so it cannot
    be refused before step 1, and an error would end the run hours in. Any other fault of a
    record (a missing image, bad JSON) is a ``ValueError`` naming it and ``path_field``, which
    the stream reports as bad input (``ConfigError``)."""

    kind = "image-text chat"
    #: Its samples carry images (the loader collates them with ``collate_vision``).
    holds_images = True

    def __init__(self, records: ChatRecords, *, path_field: str) -> None:
        self.records, self.path_field = records, path_field
        self.dropped = 0

    def __call__(self, row: dict, where: str) -> dict[str, torch.Tensor] | None:
        del where  # the row names its own file and line
        try:
            record = self.records.read_line(row["raw"], row["file"], row["line"])
            return self.records.sample(record)
        except RecordTooLong as exc:
            self.dropped += 1
            if self.dropped <= _NAMED_DROPS or self.dropped % 1000 == 0:
                logger.warning("%s; left out of the stream (%d record(s) so far; raise %s or "
                               "lower the image processor's min_pixels to keep such records)",
                               exc, self.dropped, self.records.length_field)
            return None
        except (ValueError, OSError) as exc:
            raise ValueError(f"{self.path_field}: {exc}") from None


__all__ = ["ChatRecord", "ChatRecords", "ChatStreamEncoder", "Checked", "RecordTooLong"]
