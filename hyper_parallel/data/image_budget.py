"""The pixel budget of a chat record's images: what makes the record fit a row.

Qwen's image processor (``Qwen2VLImageProcessor``) resizes every image with ``smart_resize``:
both sides to multiples of ``patch_size * merge_size`` and the area into ``[min_pixels,
max_pixels]``; an image then takes ``h * w / (patch_size * merge_size)**2`` placeholder tokens.
Its published ``max_pixels`` (4096 x 4096) is 16,384 tokens of one image, more than most rows
hold, and a sample is never cut inside an image (the placeholders and the tower's features must
agree exactly).

So a record is resized *within the row*, as Qwen's processors resize within their budget: when
its text and images at the processor's ``max_pixels`` end past ``max_seq_len``, its images are
resized with the largest ``max_pixels`` (at least the processor's ``min_pixels``, one budget
for all of the record's images) at which they end inside the row; text after them is cut as a
text sample's is. A record whose images end past the row even at ``min_pixels`` does not fit
(:attr:`ImageFit.fits`): the map-style dataset refuses it before step 1
(:mod:`.image_scan`), a stream leaves it out as it comes (:mod:`.chat_records`).

Everything here is arithmetic on image sizes -- read from the files' headers, never decoded --
through the processor's own ``get_number_of_image_patches`` (its ``smart_resize``), so the plan
is the grid the processor makes when it is given the plan's budget (``size``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ImageFit:
    """A record's images at one pixel budget."""

    #: The budget the images are resized within (``size={"longest_edge": max_pixels}``).
    max_pixels: int
    #: Placeholder tokens of each image at that budget.
    tokens: tuple[int, ...]
    #: The position just past the last image span (text before it + the spans).
    images_end: int
    #: Whether ``images_end <= max_seq_len``.
    fits: bool
    #: Whether the budget is below the processor's own ``max_pixels`` (the record was resized
    #: to fit the row).
    scaled: bool


def pixel_range(processor: Any) -> tuple[int, int]:
    """The processor's ``(min_pixels, max_pixels)``: its ``size``'s ``shortest_edge`` /
    ``longest_edge`` (transformers' names for the two; a config's ``min_pixels`` /
    ``max_pixels`` keys land there)."""
    size = processor.size
    get = size.get if isinstance(size, dict) else (lambda key: getattr(size, key, None))
    low, high = get("shortest_edge"), get("longest_edge")
    if not low or not high:
        raise ValueError(f"the image processor's size {size!r} has no shortest_edge / "
                         "longest_edge (min_pixels / max_pixels); use a Qwen2VLImageProcessor "
                         "preprocessor_config.json")
    return int(low), int(high)


def processor_size(processor: Any, max_pixels: int) -> dict[str, int]:
    """The ``size`` argument that makes ``processor`` resize within ``max_pixels``."""
    return {"shortest_edge": pixel_range(processor)[0], "longest_edge": int(max_pixels)}


def image_tokens(processor: Any, height: int, width: int, max_pixels: int) -> int:
    """Placeholder tokens of a ``height`` x ``width`` image resized within ``max_pixels``
    (the processor's arithmetic; a ``ValueError`` for an aspect ratio it refuses, over 200)."""
    patches = processor.get_number_of_image_patches(
        height, width, {"size": processor_size(processor, max_pixels)})
    return int(patches) // int(processor.merge_size) ** 2


def _at(processor: Any, sizes: Sequence[tuple[int, int]], text_before: int, max_seq_len: int,
        max_pixels: int, scaled: bool) -> ImageFit:
    tokens = tuple(image_tokens(processor, h, w, max_pixels) for h, w in sizes)
    end = text_before + sum(tokens) + 2 * len(tokens)  # + start and end token of each span
    return ImageFit(max_pixels, tokens, end, end <= max_seq_len, scaled)


def fit_images(processor: Any, sizes: Sequence[tuple[int, int]], *, text_before: int,
               max_seq_len: int) -> ImageFit:
    """The budget of a record whose images are ``sizes`` (``(height, width)`` each, in order)
    and whose text before the end of its last image is ``text_before`` tokens: the processor's
    ``max_pixels`` when the images end inside ``max_seq_len`` there, else the largest budget in
    ``[min_pixels, max_pixels)`` at which they do; at ``min_pixels`` when none does (then
    ``fits`` is False).

    A budget is found by bisection over the pixel count: the tokens of an image only grow with
    its budget, and the result is checked, so the plan always fits when ``fits`` says so.
    """
    low, high = pixel_range(processor)
    best = _at(processor, sizes, text_before, max_seq_len, high, scaled=False)
    if best.fits or not sizes:
        return best
    floor = _at(processor, sizes, text_before, max_seq_len, low, scaled=True)
    if not floor.fits:
        return floor
    good, bad = low, high  # fits at good, not at bad
    while bad - good > 1:
        middle = (good + bad) // 2
        if _at(processor, sizes, text_before, max_seq_len, middle, scaled=True).fits:
            good = middle
        else:
            bad = middle
    return _at(processor, sizes, text_before, max_seq_len, good, scaled=True)


__all__ = ["ImageFit", "fit_images", "image_tokens", "pixel_range", "processor_size"]
