"""``data.packing`` of image-text chat records: a packed row carries its samples' images in
order, each sample's three-row (mrope) positions restart at its first token, each sample keeps
its prompt masking, and the plan is made from lengths counted before step 1 from the image
headers (docs/packing.md, docs/image_text.md)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hyper_parallel.data.packing import PackedSequenceDataset, sample_positions
from hyper_parallel.models.qwen3_5.configuration import FLAVORS
from hyper_parallel.models.qwen3_5.vision_positions import decoder_positions
from hyper_parallel.utils.choices import IGNORE_INDEX
from hyper_parallel.utils.documents import Documents

VISION = FLAVORS["debugmodel_vl"].vision_config
VOCAB = FLAVORS["debugmodel_vl"].vocab_size
IMAGE, MERGE = 9, 2


# ------------------------------------------------------------- positions of a packed row
# A sample: text runs and images, each image a (t, h, w) patch grid (h, w multiples of the
# merge); it may begin with an image.
_GRID = st.tuples(st.integers(1, 2), st.sampled_from([2, 4, 6]), st.sampled_from([2, 4]))
_PART = st.one_of(st.integers(1, 7), _GRID)
_SAMPLE = st.lists(_PART, min_size=1, max_size=5)


def _sample(parts):
    ids, grids = [], []
    for part in parts:
        if isinstance(part, int):
            ids += [IMAGE + 1 + (len(ids) % 5)] * part  # text: any id but the placeholder
        else:
            t, h, w = part
            ids += [IMAGE] * (t * h * w // MERGE**2)
            grids.append(list(part))
    return torch.tensor(ids), grids


def _alone(ids, grids):
    return decoder_positions(ids.unsqueeze(0), torch.tensor(grids, dtype=torch.long).view(-1, 3),
                             image_token_id=IMAGE, merge=MERGE)[:, 0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_SAMPLE, min_size=1, max_size=4), min_size=1, max_size=3),
       st.integers(0, 3))
def test_each_packed_samples_three_row_positions_are_its_own(rows, pad):
    samples = [[_sample(parts) for parts in row] for row in rows]
    seq = max(sum(len(ids) for ids, _ in row) for row in samples) + pad
    ids = torch.zeros(len(rows), seq, dtype=torch.long)
    packed = torch.zeros(len(rows), seq, dtype=torch.long)  # padding at 0, as the collate pads
    grids = []
    for r, row in enumerate(samples):
        lengths = torch.tensor([len(i) for i, _ in row])
        ids[r, :int(lengths.sum())] = torch.cat([i for i, _ in row])
        packed[r, :int(lengths.sum())] = sample_positions(lengths)
        grids += [g for _, gs in row for g in gs]
    grid_thw = torch.tensor(grids, dtype=torch.long).view(-1, 3)
    got = decoder_positions(ids, grid_thw, image_token_id=IMAGE, merge=MERGE,
                            packed_positions=packed)
    for r, row in enumerate(samples):
        at = 0
        for sample_ids, sample_grids in row:
            n = len(sample_ids)
            assert torch.equal(got[:, r, at:at + n], _alone(sample_ids, sample_grids))
            at += n
        assert not got[:, r, at:].any()  # padding at 0: it stays with the row's last sample
    # The model's documents read from the three rows are those of the 1-D positions.
    assert Documents.from_positions(got).segments() == Documents.from_positions(
        packed).segments()


def test_an_image_across_a_samples_start_is_refused():
    ids = torch.tensor([[1, IMAGE, IMAGE, IMAGE, IMAGE, 2]])
    packed = torch.tensor([[0, 1, 2, 0, 1, 2]])
    with pytest.raises(ValueError, match="crosses the start of a packed sample"):
        decoder_positions(ids, torch.tensor([[1, 4, 4]]), image_token_id=IMAGE, merge=MERGE,
                          packed_positions=packed)


# ------------------------------------------------------------- the demo corpus, packed
def _vl_tokenizer():
    from hyper_parallel.components.tokenizer import HuggingFaceTokenizer

    return HuggingFaceTokenizer.Config(path="pkg://tokenizer_vl").build()


@pytest.fixture(scope="module")
def corpus():
    """The demo corpus's validation records, packed into rows of 256 and one sample each (the
    same records, checked once each way)."""
    from hyper_parallel.data import build_dataset

    tokenizer = _vl_tokenizer()
    common = {"train_path": "pkg://vl_corpus/valid.jsonl", "max_seq_len": 256,
              "tokenizer": tokenizer, "vocab_size": VOCAB, "vision": VISION,
              "images": {"processor_path": "pkg://vl_corpus"}}
    return (build_dataset("json_file", packing=True, **common),
            build_dataset("json_file", **common), tokenizer)


def test_chat_records_are_packed_with_their_images_in_order(corpus):
    from hyper_parallel.data.vision import collate_vision

    packed, alone, tokenizer = corpus
    assert isinstance(packed, PackedSequenceDataset) and packed.holds_images
    assert len(packed) < len(alone) // 3  # rows of several records each
    assert sorted(i for row in packed.rows for i in row) == list(range(len(alone)))
    # The lengths planned from the image headers are the samples' own.
    assert packed.lengths.tolist() == [alone[i]["input_ids"].shape[0] for i in range(len(alone))]
    rows = [packed[r] for r in range(len(packed))]
    for row, plan in zip(rows, packed.rows):
        parts = [alone[i] for i in plan]
        assert torch.equal(row["input_ids"], torch.cat([p["input_ids"] for p in parts]))
        # Each sample's labels (the answers only), -100 on its first token.
        assert torch.equal(row["labels"], torch.cat([p["labels"] for p in parts]))
        assert (row["labels"][row["position_ids"] == 0] == IGNORE_INDEX).all()
        # The row's images are its samples', in order (a record may have none).
        shown = [p for p in parts if "pixel_values" in p]
        assert ("pixel_values" in row) == bool(shown)
        if shown:
            assert torch.equal(row["pixel_values"], torch.cat([p["pixel_values"] for p in shown]))
            assert torch.equal(row["image_grid_thw"],
                               torch.cat([p["image_grid_thw"] for p in shown]))
    # Through the loader's collate: each sample's three rows are those it has alone.
    batch = collate_vision(rows[:2], pad_id=tokenizer.pad_id,
                           positions=VISION.decoder_positions)
    assert batch["position_ids"].shape == (3, 2, batch["input_ids"].shape[1])
    assert batch["images_per_row"].tolist() == [
        sum(int(alone[i].get("image_grid_thw", torch.zeros(0, 3)).shape[0]) for i in plan)
        for plan in packed.rows[:2]]
    for r, plan in enumerate(packed.rows[:2]):
        at = 0
        for i in plan:
            sample = alone[i]
            n = sample["input_ids"].shape[0]
            own = VISION.decoder_positions(sample["input_ids"].unsqueeze(0),
                                           sample.get("image_grid_thw", torch.zeros(0, 3)))[:, 0]
            assert torch.equal(batch["position_ids"][:, r, at:at + n], own)
            at += n
        documents = Documents.from_positions(batch["position_ids"][:, r:r + 1])
        assert len(documents.segments()) == len(plan)


def test_packed_chat_records_resume_mid_epoch_to_the_same_rows():
    from hyper_parallel.components.dataloader import BaseDataLoader

    def loader():
        config = BaseDataLoader.Config(dataset="json_file", pin_memory=False, packing=True,
                                       dataset_path="pkg://vl_corpus/valid.jsonl",
                                       processor_path="pkg://vl_corpus")
        return config.build(dp_world_size=1, dp_rank=0, local_batch_size=2, seq_len=256,
                            tokenizer=_vl_tokenizer(), vocab_size=VOCAB, num_samples=8,
                            vision=VISION)

    whole = list(loader())
    first = loader()
    it = iter(first)
    head = [next(it) for _ in range(2)]
    state = first.state_dict()
    resumed = loader()
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert len(head) + len(rest) == len(whole) == 5
    for got, want in zip(head + rest, whole):
        assert got.keys() == want.keys()
        assert want["position_ids"].dim() == 3  # the image-text collate made three rows
        assert all(torch.equal(got[k], want[k]) for k in want)


def test_every_rank_plans_from_every_records_length():
    """The lengths travel with the start-up check's gather: ranks that each read a share of
    the image headers all get every record's length, in record order."""
    from hyper_parallel.data import image_scan
    from hyper_parallel.data.chat_records import Checked

    records = [type("Record", (), {"images": ()})() for _ in range(7)]
    lengths = {id(r): 10 + i for i, r in enumerate(records)}

    def check(record):
        return Checked(length=lengths[id(record)])

    chat = type("Chat", (), {"check": staticmethod(check), "length_field": "f",
                             "max_seq_len": 99})()
    shares = [image_scan.scan_share(records, check, rank, 3, lengths=True) for rank in range(3)]
    for rank in range(3):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(image_scan, "world_share", lambda rank=rank: (rank, 3))
            patch.setattr(image_scan, "gather", lambda report, world: shares)
            got = image_scan.check_records(records, chat, source="s", path_field="p",
                                           lengths=True)
        assert got == list(range(10, 17))
    assert image_scan.check_records(records, chat, source="s", path_field="p") is None


def test_a_sample_longer_than_planned_is_an_error():
    class Samples(torch.utils.data.Dataset):
        def lengths(self):
            return torch.tensor([3, 3])

        def __len__(self):
            return 2

        def __getitem__(self, i):
            ids = torch.arange(3 + i)  # the second is one token longer than its plan
            return {"input_ids": ids, "labels": ids.clone()}

    packed = PackedSequenceDataset(Samples(), max_seq_len=6)
    with pytest.raises(RuntimeError, match="sample 1 has 4 tokens but was planned with 3"):
        packed[0]
