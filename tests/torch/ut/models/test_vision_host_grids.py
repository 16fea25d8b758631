"""The images' grids reach the model as host data: what the step hands the model
(``runtime/step.image_inputs``) passes FSDP2's input handling and a pipeline schedule's cut
without becoming a device tensor, and the model reads it as it reads a bare host tensor.

The whole step on a simulated GPU job is ``tests/torch/st/qwen3_5/test_gpu_host_reads.py``;
these are its parts, on one CPU process.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.distributed.pipelining.microbatch import split_args_kwargs_into_chunks
from torch.distributed.utils import _to_kwargs

from hyper_parallel.models.qwen3_5.configuration import FLAVORS
from hyper_parallel.models.qwen3_5.model import Qwen3_5ForCausalLM
from hyper_parallel.models.qwen3_5.vision_positions import (
    decoder_positions,
    image_grids,
    interpolation_taps,
    patch_coordinates,
    row_images,
)
from hyper_parallel.runtime.step import image_inputs
from hyper_parallel.utils.host_data import HostTensor

CONFIG = FLAVORS["debugmodel_vl"].replace(num_hidden_layers=2, full_attention_interval=2)
VISION = CONFIG.vision_config
MERGE = VISION.spatial_merge_size


def _batch(grids: list[tuple[int, int, int]], per_row: list[int], seq: int = 40) -> dict:
    """Rows holding ``per_row`` of the images ``grids`` each (placeholders from column 1)."""
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 100, (len(per_row), seq), generator=gen)
    first = 0
    for row, count in enumerate(per_row):
        at = 1
        for t, h, w in grids[first:first + count]:
            tokens = t * h * w // MERGE**2
            ids[row, at:at + tokens] = VISION.image_token_id
            at += tokens + 1
        first += count
    grid = torch.tensor(grids)
    pixels = torch.randn(int(grid.prod(-1).sum()), VISION.patch_dim, generator=gen)
    return {"input_ids": ids, "pixel_values": pixels, "image_grid_thw": grid,
            "position_ids": decoder_positions(ids, grid, image_token_id=VISION.image_token_id,
                                              merge=MERGE),
            "images_per_row": torch.tensor(per_row)}


def test_fsdp_input_handling_moves_the_pixels_but_not_the_grids():
    """``_to_kwargs`` is what FSDP2's root pre-forward runs on the forward's arguments
    (``_fsdp_state._root_pre_forward``): every bare tensor goes to the device -- here ``meta``,
    which this CPU machine has -- and the grids' :class:`HostTensor` stays as it is."""
    batch = _batch([(1, 4, 4), (1, 2, 2)], [1, 1])
    kwargs = image_inputs(batch)
    _, (moved,) = _to_kwargs((), kwargs, torch.device("meta"), False)
    assert moved["pixel_values"].device.type == "meta"
    assert isinstance(moved["image_grid_thw"], HostTensor)
    assert moved["image_grid_thw"].tensor is batch["image_grid_thw"]
    # A bare grid tensor would have gone too: what the tower read back on a GPU.
    _, (bare,) = _to_kwargs((), {"image_grid_thw": batch["image_grid_thw"]},
                            torch.device("meta"), False)
    assert bare["image_grid_thw"].device.type == "meta"


def test_a_device_tensor_is_refused_as_host_data():
    with pytest.raises(ValueError, match="host tensors only"):
        HostTensor.of(torch.zeros(2, 3, dtype=torch.long, device="meta"))


@settings(max_examples=25, deadline=None)
@given(per_row=st.lists(st.integers(0, 2), min_size=2, max_size=5),
       chunks=st.integers(1, 5), data=st.data())
def test_a_pipeline_schedule_cuts_the_grids_by_rows(per_row, chunks, data):
    """torch's schedule cuts its inputs along the rows with pytree: each micro-batch gets a
    :class:`HostTensor` of its own rows' grids, still on the host."""
    chunks = min(chunks, len(per_row))
    sides = st.sampled_from([2, 4, 6])
    grids = [(data.draw(st.integers(1, 2)), data.draw(sides), data.draw(sides))
             for _ in range(sum(per_row))]
    rows, first = [], 0
    for count in per_row:
        own = torch.tensor(grids[first:first + count]).view(-1, 3)
        rows.append((torch.ones(int(own.prod(-1).sum()), 3) if count else None,
                     own if count else None, torch.zeros(3, 4, dtype=torch.long)))
        first += count
    if not any(per_row):
        rows[0] = (torch.ones(4, 3), torch.tensor([[1, 2, 2]]), rows[0][2])
    _, aligned, _ = row_images(rows)
    _, kwargs = split_args_kwargs_into_chunks(
        (), {"image_grid_thw": HostTensor.of(aligned)}, chunks)
    parts = [part["image_grid_thw"] for part in kwargs]
    assert all(isinstance(p, HostTensor) and p.tensor.device.type == "cpu" for p in parts)
    assert torch.equal(torch.cat([p.tensor for p in parts]), aligned)
    assert [len(p.tensor) for p in parts] == [len(c) for c in aligned.tensor_split(chunks)]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.sampled_from([2, 4, 8]),
                          st.sampled_from([2, 4, 6])), min_size=1, max_size=4))
def test_the_tower_tables_built_on_a_device_match_the_host_ones(grids):
    """The tower builds its tables where its patches are, from the grids' ints: on any device
    the same shapes and dtypes as on the host (``meta``: no values, no copy from the host)."""
    side = VISION.position_grid_side
    for host, device in zip((*interpolation_taps(grids, side, MERGE),
                             patch_coordinates(grids, MERGE)),
                            (*interpolation_taps(grids, side, MERGE, "meta"),
                             patch_coordinates(grids, MERGE, "meta"))):
        assert device.device.type == "meta"
        assert (device.shape, device.dtype) == (host.shape, host.dtype)
    assert image_grids(HostTensor.of(torch.tensor(grids))) == grids


def test_the_model_reads_host_grids_as_a_host_tensor():
    """Flat and row-aligned (a pipeline micro-batch's), the grids in a :class:`HostTensor`
    give the forward of the bare tensor, bit for bit."""
    torch.manual_seed(0)
    model = Qwen3_5ForCausalLM(CONFIG).eval()
    batch = _batch([(1, 4, 4), (2, 2, 2), (1, 2, 4)], [2, 1])
    from hyper_parallel.runtime.pipeline_step import with_row_images

    aligned = with_row_images([batch])
    with torch.no_grad():
        for rows in (batch, aligned):
            bare = model(rows["input_ids"], position_ids=rows["position_ids"],
                         pixel_values=rows["pixel_values"],
                         image_grid_thw=rows["image_grid_thw"])
            host = model(rows["input_ids"], position_ids=rows["position_ids"],
                         **image_inputs(rows))
            assert torch.equal(bare, host)
