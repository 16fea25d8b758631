"""``data.packing``: fine-tuning samples packed into rows, pretraining rows carrying their
documents (:mod:`hyper_parallel.data.packing`, docs/packing.md)."""

from __future__ import annotations

import functools
import json
import types

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hyper_parallel.data import build_dataloader, build_dataset, collate
from hyper_parallel.data.datasets import PackedTextDataset
from hyper_parallel.data.packing import PackedSequenceDataset, pack_rows
from hyper_parallel.data.sequences import SequenceDataset
from hyper_parallel.runtime.loss import count_tokens
from hyper_parallel.utils.choices import IGNORE_INDEX
from hyper_parallel.utils.documents import Documents
from hyper_parallel.utils.errors import ConfigError, ConfigFieldError

FAST = settings(max_examples=40, deadline=None)


# ------------------------------------------------------------------------------ the plan
@FAST
@given(st.integers(1, 40).flatmap(lambda cap: st.tuples(
    st.just(cap), st.lists(st.integers(1, cap), max_size=60), st.integers(1, 6))))
def test_every_sample_is_in_one_row_in_file_order_and_no_row_overflows(case):
    max_seq_len, lengths, window = case
    rows = pack_rows(lengths, max_seq_len, window)
    assert rows == pack_rows(lengths, max_seq_len, window)  # deterministic
    assert sorted(i for row in rows for i in row) == list(range(len(lengths)))  # each once
    assert all(row == sorted(row) for row in rows)  # a row's samples in file order
    assert [row[0] for row in rows] == sorted(row[0] for row in rows)  # rows in opening order
    assert all(sum(lengths[i] for i in row) <= max_seq_len for row in rows)
    # First fit: no sample could have gone into an earlier row still open when it came
    # (sequential fill, window 1, is the plain greedy next-fit).
    if window == 1:
        expected, used = [], max_seq_len + 1
        for i, n in enumerate(lengths):
            if used + n > max_seq_len:
                expected.append([])
                used = 0
            expected[-1].append(i)
            used += n
        assert rows == expected


def test_a_window_fills_a_rows_tail_with_a_later_short_sample():
    assert pack_rows([6, 6, 2], 8, window=1) == [[0], [1, 2]]
    assert pack_rows([6, 6, 2], 8, window=2) == [[0, 2], [1]]
    with pytest.raises(ValueError, match="max_seq_len=8"):
        pack_rows([9], 8)


# ------------------------------------------------------------------------------ the rows
def _samples(draw_lengths, prompts):
    sequences = [[(7 * i + j) % 97 + 1 for j in range(n)] for i, n in enumerate(draw_lengths)]
    return SequenceDataset(sequences, prompt_lens=prompts, max_seq_len=max(draw_lengths))


@FAST
@given(st.lists(st.tuples(st.integers(1, 24), st.integers(0, 30)), min_size=1, max_size=30),
       st.integers(24, 64))
def test_packed_rows_keep_each_samples_tokens_labels_and_restart_its_positions(spec, cap):
    lengths = [n for n, _ in spec]
    samples = _samples(lengths, [min(p, n) for n, p in spec])
    packed = PackedSequenceDataset(samples, max_seq_len=cap)
    seen = []
    for r in range(len(packed)):
        row = packed[r]
        ids, labels, positions = row["input_ids"], row["labels"], row["position_ids"]
        assert ids.shape[0] <= cap
        at = 0
        for i in packed.rows[r]:
            sample, n = samples[i], lengths[i]
            assert torch.equal(ids[at:at + n], sample["input_ids"])
            want = sample["labels"].clone()
            want[0] = IGNORE_INDEX
            assert torch.equal(labels[at:at + n], want)  # prompt masking kept, first -100
            assert torch.equal(positions[at:at + n], torch.arange(n))  # restart at its start
            seen.append(i)
            at += n
        assert at == ids.shape[0]
        # The model's boundaries are the samples' starts (a one-token sample, which trains
        # nothing, joins the one before, as docs/packing.md says).
        starts = Documents.from_positions(positions.unsqueeze(0)).starts[0]
        offsets = [sum(lengths[j] for j in packed.rows[r][:k]) for k in range(len(packed.rows[r]))]
        expected = [o for o, i in zip(offsets, packed.rows[r]) if o == 0 or lengths[i] > 1]
        assert starts.nonzero().squeeze(1).tolist() == expected
    assert sorted(seen) == list(range(len(samples)))
    # Packing changes no token's weight: the same label tokens are targets, packed or not.
    unpacked = sum(count_tokens(samples[i]["labels"].unsqueeze(0)) for i in range(len(samples)))
    padded = collate([packed[r] for r in range(len(packed))], pad_id=0)
    assert count_tokens(padded["labels"]) == unpacked


class _CharTokenizer:
    """A tokenizer of one id per character (eos 1): documents of known lengths."""

    eos_id, vocab_size, path = 1, 128, "<chars>"

    def encode_batch(self, texts):
        return [[2 + ord(c) % 100 for c in t] for t in texts]


@FAST
@given(st.lists(st.integers(1, 30), min_size=1, max_size=20), st.integers(4, 32))
def test_pretraining_rows_restart_positions_exactly_at_document_starts(doc_lengths, seq):
    docs = ["x" * n for n in doc_lengths]
    assume(sum(n + 1 for n in doc_lengths) >= seq)  # fewer tokens than a row is refused
    plain = PackedTextDataset(docs, tokenizer=_CharTokenizer(), max_seq_len=seq)
    packed = PackedTextDataset(docs, tokenizer=_CharTokenizer(), max_seq_len=seq, boundaries=True)
    doc_starts, at = set(), 0
    for n in doc_lengths:
        doc_starts.add(at)
        at += n + 1  # the document and its eos
    assert len(packed) == len(plain)
    for r in range(len(packed)):
        row, before = packed[r], plain[r]
        assert torch.equal(row["input_ids"], before["input_ids"])
        begins = [t for t in range(seq) if r * seq + t in doc_starts or t == 0]
        assert (row["position_ids"] == 0).nonzero().squeeze(1).tolist() == begins
        masked = [t for t in range(seq) if r * seq + t in doc_starts]
        assert (row["labels"] == IGNORE_INDEX).nonzero().squeeze(1).tolist() == masked
        assert (row["labels"] != IGNORE_INDEX).sum() == seq - len(masked)


# ------------------------------------------------------------------------------ the loader
@pytest.fixture
def alpaca(tmp_path):
    records = [{"instruction": f"say {i} " * (1 + i % 5), "input": "",
                "output": f"answer {i} " * (1 + (3 * i) % 7)} for i in range(40)]
    path = tmp_path / "alpaca.json"
    path.write_text(json.dumps(records))
    return str(path)


def _loader(dataset):
    return build_dataloader(dataset, dp_rank=0, dp_size=1, micro_batch_size=2, shuffle=True,
                            seed=3, pin_memory=False,
                            collate_fn=functools.partial(collate, pad_id=0))


def test_packed_fine_tuning_data_resumes_mid_epoch_to_the_same_rows(alpaca):
    dataset = build_dataset("json_file", train_path=alpaca, max_seq_len=48, packing=True)
    assert isinstance(dataset, PackedSequenceDataset)
    assert len(dataset) < 40  # packed: fewer rows than records
    whole = list(_loader(dataset))
    first = _loader(dataset)
    it = iter(first)
    head = [next(it) for _ in range(3)]
    state = first.state_dict()
    resumed = _loader(build_dataset("json_file", train_path=alpaca, max_seq_len=48,
                                    packing=True))
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert len(head) + len(rest) == len(whole)
    for got, want in zip(head + rest, whole):
        assert got.keys() == want.keys() == {"input_ids", "labels", "position_ids"}
        assert all(torch.equal(got[k], want[k]) for k in want)


def test_max_samples_counts_samples_before_packing(alpaca):
    dataset = build_dataset("json_file", train_path=alpaca, max_seq_len=48, packing=True,
                            max_samples=10)
    assert sorted(i for row in dataset.rows for i in row) == list(range(10))


# ------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize(("settings_", "words"), [
    ({"dataset": "dummy"}, "no documents to pack"),
    ({"dataset": "preset_pt", "dataset_path": "x.pt", "shuffle": False}, "own position_ids"),
    ({"dataset": "json_file", "dataset_path": "x.json", "streaming": True}, "never holds"),
], ids=["dummy", "preset_pt", "streaming"])
def test_data_packing_has_nothing_to_pack_refuses(settings_, words):
    from hyper_parallel.components.dataloader import BaseDataLoader

    with pytest.raises(ConfigFieldError, match=words) as caught:
        BaseDataLoader.Config(packing=True, **settings_)
    assert caught.value.field == "packing"


def test_image_text_records_are_packed_too(tmp_path):
    """Chat records (an image-text model's ``json_file``) pack like the other records; their
    images and three-row positions: tests/torch/ut/data/test_image_text_packing.py."""
    from hyper_parallel.components.tokenizer import HuggingFaceTokenizer
    from hyper_parallel.models.qwen3_5.configuration import FLAVORS

    path = tmp_path / "chats.jsonl"
    path.write_text("".join(json.dumps({"messages": [
        {"role": "user", "content": f"hi {i}"}, {"role": "assistant", "content": "ok"}]}) + "\n"
        for i in range(6)))
    packed = build_dataset("json_file", train_path=str(path), max_seq_len=64, packing=True,
                           vision=FLAVORS["debugmodel_vl"].vision_config,
                           tokenizer=HuggingFaceTokenizer.Config(path="pkg://tokenizer_vl").build())
    assert isinstance(packed, PackedSequenceDataset) and packed.holds_images
    assert sorted(i for row in packed.rows for i in row) == list(range(6)) and len(packed) < 6


def test_packing_under_causal_attention_refuses():
    from hyper_parallel.models.qwen3_5.protocol import flavor_config

    packed = types.SimpleNamespace(dataloader=types.SimpleNamespace(packing=True))
    with pytest.raises(ConfigError, match="block_causal") as caught:
        flavor_config("tiny").update_from_config(trainer_config=packed)
    assert caught.value.path == "dataloader.packing"
    flavor_config("tiny").replace(attn_mask_type="block_causal").update_from_config(
        trainer_config=packed)


def test_hf_datasets_samples_are_packed_too(tmp_path):
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(json.dumps({"text": f"record {i} " * (1 + i % 6)}) + "\n"
                            for i in range(24)))
    plain = build_dataset("hf_datasets", train_path=str(path), max_seq_len=40)
    packed = build_dataset("hf_datasets", train_path=str(path), max_seq_len=40, packing=True)
    assert isinstance(packed, PackedSequenceDataset) and len(packed) < len(plain)
    rows = [packed[r] for r in range(len(packed))]
    assert torch.equal(torch.cat([r["input_ids"] for r in rows]),
                       torch.cat([plain[i]["input_ids"] for row in packed.rows for i in row]))
    assert sorted(i for row in packed.rows for i in row) == list(range(len(plain)))
