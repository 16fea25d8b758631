"""Unit tests of the data pipeline (hyper_parallel.data, hyper_parallel.assets)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import Dataset

from hyper_parallel import assets
from hyper_parallel.data import (
    DummyDataset,
    PackedTextDataset,
    build_dataloader,
    build_dataset,
    collate,
    grad_accum_steps,
    load_tokenizer,
    micro_batch_groups,
    read_jsonl_documents,
    read_text_documents,
    resolve_data_files,
    resolve_tokenizer_path,
)

REPO = Path(__file__).resolve().parents[4]

# torchdata 0.11 calls a torch API that torch 2.13 deprecates; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(None)


class IndexDataset(Dataset):
    """Sample i is the single token i: lets the tests see which indices a loader read."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = torch.tensor([i])
        return {"input_ids": ids, "labels": ids.clone()}


def loader_indices(loader) -> list[int]:
    return [int(x) for batch in loader for x in batch["input_ids"][:, 0]]


# ---------------------------------------------------------------------------------- dummy data


def test_dummy_dataset_is_seeded_per_index():
    ds = DummyDataset(num_samples=10, seq_len=16, vocab_size=100)
    expected = torch.randint(0, 100, (16,), generator=torch.Generator().manual_seed(42 + 3))
    sample = ds[3]
    assert torch.equal(sample["input_ids"], expected)
    assert torch.equal(sample["labels"], expected)
    assert sample["labels"].data_ptr() != sample["input_ids"].data_ptr()  # a clone
    # Independent of dataset size / instance (hence of the DP layout), and different per index.
    assert torch.equal(DummyDataset(500, 16, 100)[3]["input_ids"], expected)
    assert not torch.equal(ds[4]["input_ids"], expected)
    assert len(ds) == 10
    with pytest.raises(IndexError):
        ds[10]


def test_dummy_dataset_same_global_batches_for_any_dp_layout():
    ds = DummyDataset(16, 4, 50)

    def global_batch_samples(dp_size: int) -> set[tuple[int, ...]]:
        seen = set()
        for rank in range(dp_size):
            loader = build_dataloader(ds, dp_rank=rank, dp_size=dp_size,
                                      micro_batch_size=8 // dp_size, shuffle=True, seed=1)
            batch = next(iter(loader))
            seen |= {tuple(row.tolist()) for row in batch["input_ids"]}
        return seen

    # Per-index seeding: whichever rank reads a sample, its content is the same.
    all_samples = {tuple(ds[i]["input_ids"].tolist()) for i in range(16)}
    for dp in (1, 2, 4):
        assert global_batch_samples(dp) <= all_samples
        assert len(global_batch_samples(dp)) == 8


# ---------------------------------------------------------------------------------- tokenizer


def test_shipped_tokenizer_stats(tok):
    assert tok.vocab_size == 2048
    assert tok.eos_token == "<|endoftext|>" == tok.pad_token
    assert tok.eos_id == tok.pad_id == 0
    assert Path(tok.path) == Path(assets.tokenizer_path())


def test_tokenizer_round_trip_on_corpus(tok):
    docs = read_jsonl_documents([assets.corpus_path("valid.jsonl")])
    assert len(docs) > 50
    for doc in docs:
        ids = tok.encode(doc)
        assert ids and max(ids) < 2048 and tok.eos_id not in ids
        assert tok.decode(ids) == doc
    # Byte-level: anything encodes and round-trips, and batch encoding equals a loop.
    text = "Caf\u00e9 \u4e2d\u6587 3.14 tabs\tand\nnewlines  "
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode_batch(docs[:5]) == [tok.encode(d) for d in docs[:5]]
    # Digits are split one per token (learnable arithmetic).
    assert len(tok.encode("1234567")) == 7


def test_literal_special_token_in_text_is_not_eos(tok):
    ids = tok.encode("before <|endoftext|> after")
    assert tok.eos_id not in ids
    assert tok.decode(ids) == "before <|endoftext|> after"


def test_load_tokenizer_paths_and_errors(tmp_path, tok):
    tok_dir = Path(assets.tokenizer_path()).parent
    assert load_tokenizer(str(tok_dir)).vocab_size == 2048  # a directory holding tokenizer.json
    assert load_tokenizer("pkg://tokenizer/tokenizer.json").eos_id == tok.eos_id
    with pytest.raises(FileNotFoundError, match=r"model\.tokenizer_path.*nope.*tokenizer\.json"):
        load_tokenizer(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError, match=r"model\.tokenizer_path: directory .* no "
                                                r"tokenizer\.json"):
        load_tokenizer(str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"model\.weights_path"):
        load_tokenizer(str(tmp_path), field_name="model.weights_path")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"model\.tokenizer_path: cannot read"):
        load_tokenizer(str(bad))


def test_tokenizer_config_names_eos_and_pad(tmp_path):
    tok_dir = Path(assets.tokenizer_path()).parent
    (tmp_path / "tokenizer.json").write_bytes((tok_dir / "tokenizer.json").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"eos_token": {"content": "<|endoftext|>"}, "pad_token": "<|pad|>"}))
    with pytest.raises(ValueError, match=r"pad_token='<\|pad\|>'.*not in the vocabulary"):
        load_tokenizer(str(tmp_path))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|nothere|>"}))
    with pytest.raises(ValueError, match="end-of-text token"):
        load_tokenizer(str(tmp_path))
    (tmp_path / "tokenizer_config.json").unlink()  # falls back to the known eos names
    assert load_tokenizer(str(tmp_path)).eos_id == 0


def test_resolve_tokenizer_path_fallback_order(tmp_path):
    weights = tmp_path / "ckpt"
    weights.mkdir()
    assert resolve_tokenizer_path("explicit", str(weights)) == "explicit"
    assert resolve_tokenizer_path(None, str(weights)) is None  # no tokenizer.json there
    (weights / "tokenizer.json").write_text("{}")
    assert resolve_tokenizer_path(None, str(weights)) == str(weights)
    assert resolve_tokenizer_path(None, None) is None


# ---------------------------------------------------------------------------------- packing


def test_packing_concatenates_in_order_with_eos(tok):
    docs = ["Once upon a time.", "", "The fox ran.", "7 + 5 = 12"]
    encoded = [tok.encode(d) for d in docs if d]
    stream = [t for ids in encoded for t in ids + [tok.eos_id]]
    seq = 5
    ds = PackedTextDataset(docs, tokenizer=tok, max_seq_len=seq)
    n = len(stream) // seq
    assert len(ds) == n and n >= 2
    for i in range(n):
        sample = ds[i]
        assert sample["input_ids"].dtype == torch.long
        assert sample["input_ids"].tolist() == stream[i * seq:(i + 1) * seq]
        assert torch.equal(sample["labels"], sample["input_ids"])
    assert ds.num_documents == 3 and ds.num_empty == 1
    assert ds.num_tokens == len(stream)
    assert ds.num_dropped_tokens == len(stream) - n * seq
    assert sum(len(e) for e in encoded) + 3 == len(stream)  # one eos per non-empty document
    # Reading a sample twice gives fresh tensors (mutating one does not corrupt the dataset).
    ds[0]["input_ids"].zero_()
    assert ds[0]["input_ids"].tolist() == stream[:seq]


def test_packing_too_little_data_is_an_error(tok):
    with pytest.raises(ValueError, match=r"data\.max_seq_len=4096"):
        PackedTextDataset(["tiny"], tokenizer=tok, max_seq_len=4096)


def test_shipped_corpus_jsonl_and_text_pack_identically(tok):
    a = build_dataset("jsonl", train_path="pkg://corpus/train.jsonl", max_seq_len=2048,
                      tokenizer=tok, vocab_size=2048)
    b = build_dataset("text", train_path="pkg://corpus/train.txt", max_seq_len=2048,
                      tokenizer=tok, vocab_size=2048)
    assert torch.equal(a.samples, b.samples)
    assert a.num_documents == b.num_documents > 2000
    assert len(a) > 100  # enough for smoke runs at seq 2048
    assert int(a.samples.max()) < 2048


# ---------------------------------------------------------------------------------- file reading


def test_jsonl_reader_and_line_numbered_errors(tmp_path):
    good = tmp_path / "a.jsonl"
    good.write_text('{"text": "first", "id": 1}\n\n{"text": "second\\nline"}\n')
    assert read_jsonl_documents([str(good)]) == ["first", "second\nline"]
    assert read_jsonl_documents([str(good)], text_key="text") == ["first", "second\nline"]

    cases = {
        '{"text": "ok"}\n{"text": "ok"}\n{"text": broken}\n': r"invalid JSON",
        '{"text": "ok"}\n{"text": "ok"}\n{"body": "x"}\n': r"no key 'text' \(data\.text_key\).*\['body'\]",
        '{"text": "ok"}\n{"text": "ok"}\n{"text": 5}\n': r"key 'text' \(data\.text_key\) holds int",
        '{"text": "ok"}\n{"text": "ok"}\n["text"]\n': r"expected a JSON object",
    }
    for content, message in cases.items():
        bad = tmp_path / "bad.jsonl"
        bad.write_text(content)
        with pytest.raises(ValueError, match=rf"{bad}:3: {message}"):
            read_jsonl_documents([str(bad)])
    bad.write_bytes(b'{"text": "ok"}\n{"text": "\xff"}\n')
    with pytest.raises(ValueError, match=rf"{bad}:2: not valid UTF-8"):
        read_jsonl_documents([str(bad)])


def test_text_reader_splits_on_blank_lines(tmp_path):
    (tmp_path / "b.txt").write_bytes(b"third doc\r\nstill third\r\n")
    (tmp_path / "a.txt").write_text("\n\nfirst doc\nline two\n\n  \n\t\nsecond doc\n")
    (tmp_path / "ignored.md").write_text("not a txt file")
    files = resolve_data_files(str(tmp_path), suffix=".txt")
    assert [Path(f).name for f in files] == ["a.txt", "b.txt"]  # name order, suffix filter
    assert read_text_documents(files) == ["first doc\nline two", "second doc",
                                          "third doc\nstill third"]
    assert resolve_data_files(str(tmp_path / "*.md"), suffix=".txt") == [
        str(tmp_path / "ignored.md")]


def test_resolve_data_files_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"data\.train_path: .*missing\.jsonl.* does not "
                                                r"exist.*pkg://corpus/train\.jsonl"):
        resolve_data_files(str(tmp_path / "missing.jsonl"), suffix=".jsonl")
    with pytest.raises(FileNotFoundError, match=r"train\.eval\.eval_dataset: directory .* no "
                                                r"\*\.jsonl"):
        resolve_data_files(str(tmp_path), suffix=".jsonl", path_field="train.eval.eval_dataset")
    with pytest.raises(FileNotFoundError, match="matches no files"):
        resolve_data_files(str(tmp_path / "*.jsonl"), suffix=".jsonl")
    with pytest.raises(FileNotFoundError, match=r"pkg://corpus/nope\.jsonl"):
        resolve_data_files("pkg://corpus/nope.jsonl", suffix=".jsonl")


# ---------------------------------------------------------------------------------- build_dataset


def test_build_dataset_types_and_errors(tmp_path, tok):
    ds = build_dataset("dummy", train_path=None, max_seq_len=8, tokenizer=None, vocab_size=None,
                       num_samples=6)
    assert isinstance(ds, DummyDataset) and len(ds) == 6 and ds.vocab_size == 32000
    assert ds[0]["input_ids"].shape == (8,)
    with pytest.raises(ValueError, match="num_samples"):
        build_dataset("dummy", train_path=None, max_seq_len=8)
    with pytest.raises(ValueError, match=r"data\.type='megatron' is not supported: Megatron"):
        build_dataset("megatron", train_path="x", max_seq_len=8)
    with pytest.raises(ValueError, match=r"needs data\.train_path"):
        build_dataset("jsonl", train_path=None, max_seq_len=8, tokenizer=tok)
    with pytest.raises(FileNotFoundError, match=r"data\.train_path: .*absent\.txt"):
        build_dataset("text", train_path=str(tmp_path / "absent.txt"), max_seq_len=8,
                      tokenizer=tok)
    with pytest.raises(ValueError, match=r"model\.vocab_size\) is 1000"):
        build_dataset("jsonl", train_path="pkg://corpus/valid.jsonl", max_seq_len=8,
                      tokenizer=tok, vocab_size=1000)
    (tmp_path / "d.jsonl").write_text('{"body": "hello world, hello again"}\n')
    packed = build_dataset("jsonl", train_path=str(tmp_path / "d.jsonl"), max_seq_len=2,
                           text_key="body", tokenizer=None)  # None = shipped tokenizer
    assert packed.samples.flatten().tolist() == (tok.encode("hello world, hello again")
                                                 + [tok.eos_id])[: 2 * len(packed)]


# ---------------------------------------------------------------------------------- collate


def test_collate_pads_inputs_and_labels():
    batch = [
        {"input_ids": torch.tensor([5, 6, 7]), "labels": torch.tensor([5, 6, 7])},
        {"input_ids": torch.tensor([8]), "labels": torch.tensor([8])},
    ]
    out = collate(batch, pad_id=3)
    assert out["input_ids"].tolist() == [[5, 6, 7], [8, 3, 3]]
    assert out["labels"].tolist() == [[5, 6, 7], [8, -100, -100]]
    with_mask = [dict(s, attention_mask=torch.ones_like(s["input_ids"])) for s in batch]
    assert collate(with_mask, pad_id=0)["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    with pytest.raises(ValueError, match="got keys"):
        collate([{"input_ids": torch.tensor([1]), "pixel_values": torch.tensor([1])}], pad_id=0)


# ---------------------------------------------------------------------------------- loader


def test_distributed_split_is_disjoint_and_complete():
    ds = IndexDataset(21)
    for shuffle in (False, True):
        per_rank = []
        for rank in range(2):
            loader = build_dataloader(ds, dp_rank=rank, dp_size=2, micro_batch_size=2,
                                      shuffle=shuffle, seed=7)
            per_rank.append(loader_indices(loader))
        a, b = per_rank
        assert not set(a) & set(b)
        # 21 samples, drop_last sampler -> 10 per rank -> 5 full batches of 2 per rank.
        assert len(a) == len(b) == 10 and len(set(a) | set(b)) == 20
    # The shuffled order depends on the epoch and is reproducible.
    loader = build_dataloader(ds, dp_rank=0, dp_size=2, micro_batch_size=2, seed=7)
    epoch0 = loader_indices(loader)
    loader.sampler.set_epoch(1)
    epoch1 = loader_indices(loader)
    assert epoch0 != epoch1 and sorted(epoch0) != epoch0
    loader.sampler.set_epoch(0)
    assert loader_indices(loader) == epoch0


@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader_resumes_exactly_mid_epoch(num_workers):
    ds = DummyDataset(64, 6, 1000)

    def make():
        return build_dataloader(ds, dp_rank=1, dp_size=2, micro_batch_size=3, shuffle=True,
                                seed=11, num_workers=num_workers, prefetch_factor=2,
                                collate_fn=functools.partial(collate, pad_id=0))

    reference = make()
    reference.sampler.set_epoch(1)
    expected = [b["input_ids"] for b in reference]

    interrupted = make()
    interrupted.sampler.set_epoch(1)
    it = iter(interrupted)
    for i in range(3):
        assert torch.equal(next(it)["input_ids"], expected[i])
    state = interrupted.state_dict()

    resumed = make()  # epoch 0 sampler: the saved state must restore epoch 1 itself
    resumed.load_state_dict(state)
    rest = [b["input_ids"] for b in resumed]
    assert resumed.sampler.epoch == 1
    assert len(rest) == len(expected) - 3
    assert all(torch.equal(x, y) for x, y in zip(rest, expected[3:]))


def test_loader_refuses_state_from_another_layout():
    ds = IndexDataset(20)
    saved = build_dataloader(ds, dp_rank=0, dp_size=2, micro_batch_size=2)
    it = iter(saved)
    next(it)
    state = saved.state_dict()
    other = build_dataloader(ds, dp_rank=0, dp_size=4, micro_batch_size=2)
    other.load_state_dict(state)
    with pytest.raises(ValueError, match=r"num_replicas=2 but this run has 4"):
        next(iter(other))


def test_build_dataloader_checks():
    with pytest.raises(ValueError, match=r"4 per data-parallel rank.*micro_batch_size=5"):
        build_dataloader(IndexDataset(9), dp_rank=0, dp_size=2, micro_batch_size=5)
    with pytest.raises(ValueError, match="dp_rank=2"):
        build_dataloader(IndexDataset(9), dp_rank=2, dp_size=2, micro_batch_size=1)
    # prefetch_factor is only meaningful with workers; without them it is not passed on.
    loader = build_dataloader(IndexDataset(8), dp_rank=0, dp_size=1, micro_batch_size=4,
                              num_workers=0, prefetch_factor=4, shuffle=False)
    assert loader_indices(loader) == list(range(8))


# ---------------------------------------------------------------------------------- grad accum


def test_grad_accum_steps_requires_exact_division():
    assert grad_accum_steps(8, 1, 2) == 4
    assert grad_accum_steps(8, 2, 2) == 2
    assert grad_accum_steps(4, 4, 1) == 1
    with pytest.raises(ValueError, match=r"global batch size 10 is not divisible by .* = 4$"):
        grad_accum_steps(10, 2, 2)
    with pytest.raises(ValueError, match=r"global batch size 2 is not divisible .* = 4$"):
        grad_accum_steps(2, 2, 2)  # the legacy rule would have run with 4
    with pytest.raises(ValueError, match=r"micro-batch size must be a positive int"):
        grad_accum_steps(8, 0, 2)


def test_micro_batch_groups():
    assert list(micro_batch_groups(iter(range(7)), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(micro_batch_groups(range(4), 2)) == [[0, 1], [2, 3]]
    assert list(micro_batch_groups([], 2)) == []
    with pytest.raises(ValueError, match="grad_accum"):
        list(micro_batch_groups(range(3), 0))


# ---------------------------------------------------------------------------------- assets


def test_assets_paths():
    sizes = {name: os.path.getsize(assets.corpus_path(name))
             for name in ("train.jsonl", "valid.jsonl", "train.txt")}
    assert 1_000_000 <= sum(sizes.values()) <= 3_000_000
    assert assets.resolve_path("pkg://corpus/train.txt") == assets.corpus_path("train.txt")
    assert assets.resolve_path("/abs/file.jsonl") == "/abs/file.jsonl"
    with pytest.raises(ValueError, match=r"pkg://<path inside"):
        assets.resolve_path("pkg://../secrets")
    with pytest.raises(FileNotFoundError, match="available"):
        assets.corpus_path("nope.jsonl")


@pytest.mark.parametrize("script", ["make_corpus.py", "train_tokenizer.py"])
def test_shipped_assets_are_reproducible(script):
    """The committed corpus/tokenizer are exactly what the generator scripts produce."""
    result = subprocess.run([sys.executable, str(REPO / "scripts" / script), "--check"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
