"""``decoder_positions`` works on whole rows: the same positions, bit for bit, and the same
``ValueError`` messages as the token-by-token walk it replaced (kept below as the oracle), and a
row's ids never reach Python one token at a time (a row may hold 128k tokens).
"""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.overrides import TorchFunctionMode

from hyper_parallel.models.qwen3_5.vision_positions import decoder_positions, image_grids

IMAGE = 9  # the placeholder token of these rows
TEXT = st.integers(0, 30).map(lambda v: v if v < IMAGE else v + 1)  # any id but IMAGE


def reference_decoder_positions(input_ids, image_grid_thw, *, image_token_id, merge):
    """The implementation before vectorization (commit 118a9e9), verbatim but for its name: it
    walks each row's ids in Python."""
    batch, seq = input_ids.shape
    ids = input_ids.tolist()
    grids = image_grids(image_grid_thw)
    out = torch.empty((3, batch, seq), dtype=torch.long)
    next_image = 0
    for row in range(batch):
        row_ids = ids[row]
        columns: list[torch.Tensor] = []
        pos = 0
        i = 0
        while i < seq:
            if row_ids[i] != image_token_id:
                j = i
                while j < seq and row_ids[j] != image_token_id:
                    j += 1
                columns.append(torch.arange(pos, pos + j - i).expand(3, -1))
                pos += j - i
                i = j
                continue
            if next_image >= len(grids):
                raise ValueError(
                    f"row {row} has image placeholder tokens at {i} beyond the "
                    f"{len(grids)} image(s) of image_grid_thw"
                )
            t, h, w = grids[next_image]
            next_image += 1
            gh, gw = h // merge, w // merge
            count = t * gh * gw
            if row_ids[i : i + count] != [image_token_id] * count:
                raise ValueError(
                    f"row {row}: image {next_image - 1} ({t}x{h}x{w} patches, {count} tokens) "
                    f"does not fit the placeholder run at {i}"
                )
            time = (torch.arange(t) + pos).view(t, 1, 1).expand(t, gh, gw)
            height = (torch.arange(gh) + pos).view(1, gh, 1).expand(t, gh, gw)
            width = (torch.arange(gw) + pos).view(1, 1, gw).expand(t, gh, gw)
            columns.append(torch.stack([time, height, width]).reshape(3, -1))
            pos += max(gh, gw)
            i += count
        out[:, row] = torch.cat(columns, dim=1)
    if next_image != len(grids):
        raise ValueError(
            f"image_grid_thw has {len(grids)} image(s) but input_ids hold placeholders for "
            f"{next_image}"
        )
    return out.to(input_ids.device)


def _outcome(function, ids, grids, merge):
    """What ``function`` gives: the positions, or the ValueError's type and message."""
    try:
        return function(ids, grids, image_token_id=IMAGE, merge=merge)
    except ValueError as error:
        return ("ValueError", str(error))


def _same(got, expected) -> None:
    if isinstance(expected, tuple):
        assert got == expected
    else:
        assert isinstance(got, torch.Tensor), got
        assert got.dtype == expected.dtype and torch.equal(got, expected)


@st.composite
def batches(draw, odd_grids: bool = False):
    """``(ids (B, S), grids (images, 3), merge)``: rows of text and image runs (1 to 3 images
    back to back, frames t >= 1), text-only rows among them, right-padded with text. With
    ``odd_grids``, sides need not be multiples of ``merge`` and frames may be 0 (images of no
    tokens)."""
    merge = draw(st.sampled_from([1, 2]))
    if odd_grids:
        grid = st.tuples(st.integers(0, 2), st.integers(0, 5), st.integers(0, 5))
    else:
        side = st.integers(1, 3).map(lambda n: n * merge)
        grid = st.tuples(st.integers(1, 3), side, side)
    grids, rows = [], []
    for _ in range(draw(st.integers(1, 4))):
        row: list[int] = []
        for _ in range(draw(st.integers(0, 3))):
            row += draw(st.lists(TEXT, max_size=6))
            for t, h, w in draw(st.lists(grid, min_size=1, max_size=3)):
                grids.append((t, h, w))
                row += [IMAGE] * (t * (h // merge) * (w // merge))
        row += draw(st.lists(TEXT, max_size=4))
        rows.append(row)
    seq = max(1, *map(len, rows))
    ids = [row + draw(st.lists(TEXT, min_size=seq - len(row), max_size=seq - len(row)))
           for row in rows]
    return torch.tensor(ids), torch.tensor(grids, dtype=torch.long).view(-1, 3), merge


@settings(max_examples=300, deadline=None)
@given(batches())
def test_the_positions_are_the_token_walks(batch):
    ids, grids, merge = batch
    expected = reference_decoder_positions(ids, grids, image_token_id=IMAGE, merge=merge)
    _same(_outcome(decoder_positions, ids, grids, merge), expected)
    # Host grids in any of the forms the model takes: the same positions.
    as_triples = [tuple(g) for g in grids.tolist()]
    _same(_outcome(decoder_positions, ids, as_triples, merge), expected)


@settings(max_examples=200, deadline=None)
@given(batches(odd_grids=True))
def test_degenerate_grids_give_what_the_token_walk_gave(batch):
    """Sides that ``merge`` does not divide (floored) and images of no tokens (t = 0 or a side
    under ``merge``), which consume a grid and move the text after them."""
    ids, grids, merge = batch
    _same(_outcome(decoder_positions, ids, grids, merge),
          _outcome(reference_decoder_positions, ids, grids, merge))


@settings(max_examples=300, deadline=None)
@given(batches(), st.data())
def test_mismatched_counts_raise_what_the_token_walk_raised(batch, data):
    """A batch spoiled one way: a grid dropped, added or resized, a text token made a
    placeholder or a placeholder made text."""
    ids, grids, merge = batch
    ids, grids = ids.clone(), grids.clone()
    spoil = data.draw(st.sampled_from(["drop", "add", "resize", "to_image", "to_text"]))
    if spoil == "drop" and len(grids):
        index = data.draw(st.integers(0, len(grids) - 1))
        grids = torch.cat([grids[:index], grids[index + 1:]])
    elif spoil == "add":
        extra = torch.tensor([data.draw(st.tuples(st.integers(1, 2), st.integers(1, 4),
                                                  st.integers(1, 4)))])
        index = data.draw(st.integers(0, len(grids)))
        grids = torch.cat([grids[:index], extra, grids[index:]])
    elif spoil == "resize" and len(grids):
        index = data.draw(st.integers(0, len(grids) - 1))
        grids[index, data.draw(st.integers(0, 2))] += data.draw(st.sampled_from([-1, 1, 2]))
    elif spoil in ("to_image", "to_text"):
        row = data.draw(st.integers(0, ids.shape[0] - 1))
        column = data.draw(st.integers(0, ids.shape[1] - 1))
        ids[row, column] = IMAGE if spoil == "to_image" else 0
    _same(_outcome(decoder_positions, ids, grids, merge),
          _outcome(reference_decoder_positions, ids, grids, merge))


def _row(*parts) -> torch.Tensor:
    """One row: an int is that many text tokens, a ``"i"`` string that many placeholders."""
    ids: list[int] = []
    for part in parts:
        ids += [IMAGE] * len(part) if isinstance(part, str) else [1] * part
    return torch.tensor([ids])


def test_the_three_mismatches_name_the_row_the_image_and_the_column():
    two_by_two = [(1, 4, 4)]  # 4 tokens when merged 2 x 2
    cases = [
        (_row(2, "iiii", 1, "ii"), two_by_two,
         "row 0 has image placeholder tokens at 7 beyond the 1 image(s) of image_grid_thw"),
        (_row(2, "iii", 3), two_by_two,
         "row 0: image 0 (1x4x4 patches, 4 tokens) does not fit the placeholder run at 2"),
        (_row(3, "ii"), [(1, 4, 4)],  # runs off the end of the row
         "row 0: image 0 (1x4x4 patches, 4 tokens) does not fit the placeholder run at 3"),
        (_row(2, "iiii", 1), [(1, 4, 4), (1, 2, 2)],
         "image_grid_thw has 2 image(s) but input_ids hold placeholders for 1"),
    ]
    for ids, grids, message in cases:
        for function in (decoder_positions, reference_decoder_positions):
            assert _outcome(function, ids, torch.tensor(grids), 2) == ("ValueError", message)


def test_a_negative_grid_is_refused_as_bad_input():
    """The walk raised torch's arange error here; the grid is named instead."""
    try:
        decoder_positions(_row(1, "i", 1), [(1, -2, -2)], image_token_id=IMAGE, merge=2)
    except ValueError as error:
        assert str(error) == "image 0 of image_grid_thw has a negative size: 1x-2x-2 patches"
    else:
        raise AssertionError("a negative grid was accepted")


class _HostReads(TorchFunctionMode):
    """Counts the tensor values that reach Python (``tolist``, ``item``, ``int(t)`` ...)."""

    ONE_VALUE = (torch.Tensor.item, torch.Tensor.__int__, torch.Tensor.__index__,
                 torch.Tensor.__bool__, torch.Tensor.__float__)

    def __init__(self) -> None:
        super().__init__()
        self.values = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.tolist:
            self.values += args[0].numel()
        elif func in self.ONE_VALUE:
            self.values += 1
        return func(*args, **(kwargs or {}))


def test_a_128k_token_row_reaches_python_only_as_its_image_runs():
    """Four images in three placeholder runs of a 131072-token row: the positions are the
    token walk's, and what the host reads is a few values per run and per image (the grids,
    the runs' bounds), not one per token."""
    seq = 131_072
    grids = torch.tensor([[1, 32, 32], [2, 16, 16], [1, 8, 8], [1, 64, 64]])
    ids = torch.randint(0, IMAGE, (1, seq), generator=torch.Generator().manual_seed(0))
    ids[0, 100:356] = IMAGE  # 32 x 32 / 2 x 2 = 256 tokens
    ids[0, 5000:5128 + 16] = IMAGE  # 2 frames of 8 x 8, then 4 x 4: two images, one run
    ids[0, seq - 1024:] = IMAGE  # 32 x 32 at the very end of the row
    with _HostReads() as reads:
        got = decoder_positions(ids, grids, image_token_id=IMAGE, merge=2)
    assert reads.values <= 64, f"{reads.values} tensor values reached Python"
    _same(got, reference_decoder_positions(ids, grids, image_token_id=IMAGE, merge=2))
