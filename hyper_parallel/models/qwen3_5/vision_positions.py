"""Where image tokens sit: the decoder's three-row (time, height, width) positions, and the
tower's per-patch grid coordinates.

Text tokens count up by one on all three rows, as in a text-only model. An image of
``t x h x w`` patches, merged ``m x m``, occupies ``t*h*w/m^2`` consecutive placeholder tokens;
they all start at the position ``p`` the next text token would have had: the time row runs
``p .. p + t - 1`` over the frames, the height row ``p .. p + h/m - 1`` and the width row
``p .. p + w/m - 1`` over the merged grid in raster order, and the text after the image resumes
at ``p + max(h, w) / m`` (the frames do not count). This is Hugging Face's ``get_rope_index`` for Qwen3.5, written for
training: no attention mask (rows are packed or right-padded), no cache, and the image spans are
found from ``input_ids`` (the placeholder token), so no ``mm_token_type_ids`` is needed.

A packed row (``data.packing``) holds several samples; their 1-D ``position_ids``, which
restart at each sample's first token, make each sample's three rows restart there too
(``packed_positions``): a sample's positions are those it has alone.

Everything here depends only on ids and grid sizes, never on weights: the data pipeline can
compute it on the CPU, and every pipeline stage gets the same positions.

The grids are host data end to end: the step hands ``image_grid_thw`` to the model as a
:class:`~hyper_parallel.utils.host_data.HostTensor` (FSDP2's root pre-forward would move a bare
tensor to the device, and reading it back would wait for the device's queue), the model reads
it as Python ints (:func:`image_grids`), and the tower's tables (:func:`patch_coordinates`,
:func:`interpolation_taps`) are built from those ints where the patches are: no value crosses
between host and device either way.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from hyper_parallel.utils.host_data import HostTensor, host_value

#: Images' patch grids as host data: ``(t, h, w)`` per image.
Grids = list[tuple[int, int, int]]

#: What the model takes as ``image_grid_thw``: the step's :class:`HostTensor`, a host tensor,
#: or ``(t, h, w)`` triples.
GridInput = HostTensor | torch.Tensor | Sequence[Sequence[int]]


def image_grids(grid_thw: GridInput) -> Grids:
    """``(t, h, w)`` of every image of ``image_grid_thw`` ``(images, 3)``, as Python ints.

    A host tensor (bare or in a :class:`HostTensor`) is read without waiting for anything; a
    tensor on the device is read back too, but the host then waits for the device's queue."""
    grid_thw = host_value(grid_thw)
    rows = grid_thw.tolist() if isinstance(grid_thw, torch.Tensor) else grid_thw
    return [(int(t), int(h), int(w)) for t, h, w in rows]


def decoder_positions(
    input_ids: torch.Tensor, image_grid_thw: GridInput, *, image_token_id: int, merge: int,
    packed_positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """``(3, B, S)`` positions of ``input_ids`` ``(B, S)`` whose image placeholder runs hold the
    images of ``image_grid_thw`` ``(num_images, 3)`` in row order.

    A run of placeholder tokens longer than one image's tokens holds several images back to
    back; a count that does not match ``image_grid_thw`` is a ``ValueError``. Made from the
    ids' values: the data loader calls it on the host; called with ids on the device, the host
    waits for them.

    ``packed_positions`` ``(B, S)``: the 1-D positions of packed rows (``data.packing``), 0, 1,
    ... from each sample's first token (padding 0). Each sample's three rows then restart at
    0 at its first token, as the sample alone would have them (:func:`restart_per_sample`);
    an image may not cross a sample's start (``ValueError``).
    """
    batch, seq = input_ids.shape
    # Tensor work over each row's tokens (a row may hold 128k): only the placeholder runs'
    # bounds reach Python, and the loop below walks images, never tokens.
    ids = input_ids.detach().cpu()
    grids = image_grids(image_grid_thw)
    sample_starts = (None if packed_positions is None
                     else _sample_starts(packed_positions, batch, seq))
    out = torch.empty((3, batch, seq), dtype=torch.long)
    next_image = 0
    for row in range(batch):
        is_image = ids[row] == image_token_id
        none = torch.zeros(1, dtype=torch.int8)
        # Each placeholder run's first column and the column after it, alternately.
        bounds = torch.diff(is_image.to(torch.int8), prepend=none, append=none).nonzero()
        starts, ends = bounds[0::2, 0].tolist(), bounds[1::2, 0].tolist()
        advances: list[int] = []  # what each run's images add to the text after it
        firsts: list[tuple[int, int, int]] = []  # each image's (first position, gh*gw, gw)
        counts: list[int] = []
        placeholders = 0  # the row's placeholder tokens before the run
        advanced = 0  # what the row's images so far add to the positions after them
        for start, end in zip(starts, ends):
            text = start - placeholders  # the text tokens before the run
            placeholders += end - start
            before = advanced
            i = start
            while i < end:
                if next_image >= len(grids):
                    raise ValueError(
                        f"row {row} has image placeholder tokens at {i} beyond the "
                        f"{len(grids)} image(s) of image_grid_thw"
                    )
                t, h, w = grids[next_image]
                if min(t, h, w) < 0:
                    raise ValueError(f"image {next_image} of image_grid_thw has a negative "
                                     f"size: {t}x{h}x{w} patches")
                next_image += 1
                gh, gw = h // merge, w // merge
                count = t * gh * gw
                if i + count > end:
                    raise ValueError(
                        f"row {row}: image {next_image - 1} ({t}x{h}x{w} patches, {count} "
                        f"tokens) does not fit the placeholder run at {i}"
                    )
                if sample_starts is not None and count > 1 and bool(
                        (sample_starts[row, i + 1:i + count] != sample_starts[row, i]).any()):
                    raise ValueError(
                        f"row {row}: image {next_image - 1} at {i} crosses the start of a "
                        "packed sample (packed_positions restart inside its placeholders)"
                    )
                # Every frame starts where the next text token would; the text after the
                # image resumes max(gh, gw) later (an image of no tokens still moves it).
                firsts.append((text + advanced, gh * gw, gw))
                counts.append(count)
                advanced += max(gh, gw)
                i += count
            advances.append(advanced - before)
        # A text token's position: one more than the last text token's, plus the advance of
        # the images between them (added at their run's first column).
        step = (~is_image).long()
        if advances:
            step.index_add_(0, torch.tensor(starts), torch.tensor(advances, dtype=torch.long))
        out[:, row] = torch.cumsum(step, 0) - 1
        tokens = sum(counts)
        if tokens:
            # Image tokens, in raster order (frame, merged row, merged column) of each image.
            per_image = torch.tensor(firsts, dtype=torch.long)
            sizes = torch.tensor(counts, dtype=torch.long)
            first, area, width = per_image.repeat_interleave(sizes, dim=0, output_size=tokens).T
            offset = torch.arange(tokens) - (torch.cumsum(sizes, 0) - sizes).repeat_interleave(
                sizes, output_size=tokens)
            out[:, row, is_image] = torch.stack(
                [offset // area, offset % area // width, offset % width]) + first
    if next_image != len(grids):
        raise ValueError(
            f"image_grid_thw has {len(grids)} image(s) but input_ids hold placeholders for "
            f"{next_image}"
        )
    if sample_starts is not None:
        out = restart_per_sample(out, sample_starts)
    return out.to(input_ids.device)


def _sample_starts(packed_positions: torch.Tensor, batch: int, seq: int) -> torch.Tensor:
    """``(B, S)``: the column of each token's sample's first token, from packed rows' 1-D
    positions (a sample's count from 0; a padding token, at 0, is its own start)."""
    positions = packed_positions.detach().cpu()
    if positions.shape != (batch, seq) or positions.is_floating_point():
        raise ValueError(f"packed_positions must be integer (B, S) = ({batch}, {seq}) like "
                         f"input_ids, got {positions.dtype} {tuple(positions.shape)}")
    starts = torch.arange(seq) - positions
    if bool((positions < 0).any()) or bool((starts < 0).any()):
        raise ValueError("packed_positions must count 0, 1, ... from each sample's first token "
                         "(none below 0, none above its column)")
    return starts


def restart_per_sample(positions: torch.Tensor, sample_starts: torch.Tensor) -> torch.Tensor:
    """Three-row ``positions`` ``(3, B, S)`` of packed rows, computed over each row as one
    sequence, made each sample's own: every token's three rows less its sample's first token's
    (``sample_starts`` ``(B, S)``, that token's column).

    Why that is the sample alone: every position of a row is the count of text tokens before
    it plus what the images before it add (:func:`decoder_positions`), and a sample's first
    token -- text, or an image's first token, whose three rows are equal -- stands at exactly
    what the samples before it add, on all three rows. Padding (its own start) is 0, which the
    documents read as part of the row's last sample
    (:meth:`~hyper_parallel.utils.documents.Documents.from_positions`)."""
    first = positions[0].gather(1, sample_starts)
    return positions - first.unsqueeze(0)


def patch_coordinates(grids: Grids, merge: int,
                      device: torch.device | str | None = None) -> torch.Tensor:
    """``(patches, 2)`` (row, column) of every patch of the images ``grids``, in the order
    the image processor emits them: merge blocks in raster order, the ``merge x merge`` patches
    of a block in raster order inside it, frames one after another. Built on ``device`` (the
    host by default) from the Python ints of ``grids``: no copy."""
    coords = []
    for t, h, w in grids:
        rows = torch.arange(h, device=device).view(h // merge, merge, 1, 1).expand(
            -1, -1, w // merge, merge)
        cols = torch.arange(w, device=device).view(1, 1, w // merge, merge).expand(
            h // merge, merge, -1, -1)
        block_rows = rows.permute(0, 2, 1, 3).reshape(-1)
        block_cols = cols.permute(0, 2, 1, 3).reshape(-1)
        coords.append(torch.stack([block_rows, block_cols], dim=-1).repeat(t, 1))
    return torch.cat(coords)


def interpolation_taps(grids: Grids, side: int, merge: int,
                       device: torch.device | str | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Bilinear resampling (corners aligned) of a ``side x side`` table of learned positions to
    each image's ``h x w`` grid: ``(patches, 4)`` indices into the flattened table and their
    weights, in the patch order of :func:`patch_coordinates`. Built on ``device`` (the host by
    default), like it."""
    coords = patch_coordinates(grids, merge, device).to(torch.float32)
    # Each patch's image size (h, w): filled on the device, not copied from a host list.
    sizes = torch.cat([
        torch.stack([torch.full((t * h * w,), h, dtype=torch.float32, device=device),
                     torch.full((t * h * w,), w, dtype=torch.float32, device=device)], dim=-1)
        for t, h, w in grids])
    # Corners aligned: patch 0 samples entry 0, the last patch entry side - 1.
    src = coords * (side - 1) / torch.clamp(sizes - 1, min=1)
    floor = torch.floor(src)
    offsets = torch.arange(2, device=src.device)
    taps = (floor.long()[..., None] + offsets).clamp(0, side - 1)  # (P, 2 axes, 2)
    weights = (1 - (src[..., None] - floor[..., None] - offsets).abs()).clamp(min=0)
    indices = (taps[:, 0, :, None] * side + taps[:, 1, None, :]).reshape(-1, 4)
    products = (weights[:, 0, :, None] * weights[:, 1, None, :]).reshape(-1, 4)
    return indices, products


def attention_segments(grids: Grids) -> list[int]:
    """Patches per attention segment: each frame of each image attends within itself."""
    return [h * w for t, h, w in grids for _ in range(t)]


def row_images(
    rows: Sequence[tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor]],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Row-aligned images of a batch, for a pipeline schedule, which cuts every input into
    micro-batches along its first dimension: ``rows`` holds each row's ``(pixel_values (p,
    D) or None, image_grid_thw (i, 3) or None, position_ids (3, S))``; returns ``pixel_values``
    ``(B, P, D)`` and ``image_grid_thw`` ``(B, I, 3)`` zero-padded (a padding grid row is all
    zero, ``t = 0``) and ``position_ids`` ``(B, 3, S)``. :func:`unpack_row_images` undoes it."""
    dim = next(p.shape[1] for p, _, _ in rows if p is not None)
    most_patches = max((p.shape[0] for p, _, _ in rows if p is not None), default=0)
    most_images = max((g.shape[0] for _, g, _ in rows if g is not None), default=0)
    pixels = torch.zeros(len(rows), most_patches, dim,
                         dtype=next(p.dtype for p, _, _ in rows if p is not None))
    grids = torch.zeros(len(rows), most_images, 3, dtype=torch.long)
    for r, (p, g, _) in enumerate(rows):
        if p is not None:
            pixels[r, : p.shape[0]] = p
            grids[r, : g.shape[0]] = g
    return pixels, grids, torch.stack([pos for _, _, pos in rows])


def unpack_row_images(
    pixels: torch.Tensor, grids: HostTensor | torch.Tensor, positions: torch.Tensor | None
) -> tuple[torch.Tensor | None, Grids | None, torch.Tensor | None]:
    """:func:`row_images` of a micro-batch back to ``(pixel_values (P, D), its grids,
    position_ids (3, B, S))``; ``(None, None, positions)`` when its rows hold no image. The grids
    are host data (the schedule's cut of the step's :class:`HostTensor`): read as Python ints."""
    pieces, kept = [], []
    for r, row in enumerate(host_value(grids).tolist()):
        real = [(t, h, w) for t, h, w in row if t > 0]
        patches = sum(t * h * w for t, h, w in real)
        if real:
            pieces.append(pixels[r, :patches])
            kept += real
    positions = None if positions is None else positions.permute(1, 0, 2)
    if not kept:
        return None, None, positions
    return torch.cat(pieces), kept, positions
