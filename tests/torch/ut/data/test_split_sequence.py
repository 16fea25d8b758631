"""``split_sequence``: a context-parallel rank's part of a batch, and the loss over the parts.

The property: for any batch (labels with ignored positions anywhere) and any split, the
shards' positions tile the sequence, and the loss sums and token counts of the shards (each
shard's logits the full logits' rows for its positions) add up to the whole sequence's -- the
labels are shifted before the split, so no target is lost at a shard boundary and none is
counted twice.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hyper_parallel.data import split_sequence
from hyper_parallel.runtime.loss import count_tokens, token_loss_sum
from hyper_parallel.utils.choices import IGNORE_INDEX

VOCAB = 7


@st.composite
def batches(draw):
    parts = draw(st.sampled_from([1, 2, 4]))
    length = parts * draw(st.integers(1, 6))
    rows = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**16))
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, VOCAB, (rows, length), generator=generator)
    ignored = torch.rand(rows, length, generator=generator) < draw(st.floats(0, 1))
    labels[ignored] = IGNORE_INDEX
    batch = {"input_ids": torch.randint(0, VOCAB, (rows, length), generator=generator),
             "labels": labels}
    if draw(st.booleans()):
        batch["attention_mask"] = torch.ones(rows, length, dtype=torch.long)
    logits = torch.randn(rows, length, VOCAB, generator=generator)
    return parts, batch, logits


@settings(max_examples=60, deadline=None)
@given(batches())
def test_the_shards_tile_the_sequence_and_add_up_to_its_loss(case):
    parts, batch, logits = case
    length = batch["input_ids"].shape[1]
    size = length // parts
    total, tokens = token_loss_sum(logits, batch["labels"])
    shard_total, shard_tokens, counted = torch.zeros(()), torch.zeros((), dtype=torch.long), 0
    for rank in range(parts):
        shard = split_sequence(batch, rank, parts)
        start = rank * size
        assert torch.equal(shard["input_ids"], batch["input_ids"][:, start:start + size])
        assert torch.equal(shard["position_ids"][0], torch.arange(start, start + size))
        if "attention_mask" in batch:
            assert shard["attention_mask"].shape[1] == size
        # one label past the inputs (the next shard's first), none past the end
        expected_labels = size + (1 if rank < parts - 1 else 0)
        assert shard["labels"].shape[1] == expected_labels
        loss, n = token_loss_sum(logits[:, start:start + size], shard["labels"])
        shard_total, shard_tokens = shard_total + loss, shard_tokens + n
        counted += count_tokens(shard["labels"])
    assert int(shard_tokens) == int(tokens) == counted == count_tokens(batch["labels"])
    torch.testing.assert_close(shard_total, total, rtol=1e-6, atol=1e-6)


def test_explicit_positions_are_cut_with_the_sequence():
    batch = {"input_ids": torch.arange(8).view(1, 8), "labels": torch.arange(8).view(1, 8),
             "position_ids": torch.arange(8).view(1, 8) + 100}
    shard = split_sequence(batch, 1, 2)
    assert shard["position_ids"].tolist() == [[104, 105, 106, 107]]
    assert shard["labels"].tolist() == [[4, 5, 6, 7]]
    assert split_sequence(batch, 0, 2)["labels"].tolist() == [[0, 1, 2, 3, 4]]


def test_a_length_the_ranks_do_not_divide_is_an_error():
    batch = {"input_ids": torch.zeros(1, 6, dtype=torch.long),
             "labels": torch.zeros(1, 6, dtype=torch.long)}
    with pytest.raises(ValueError, match="6 positions cannot be split over 4 ranks"):
        split_sequence(batch, 0, 4)
