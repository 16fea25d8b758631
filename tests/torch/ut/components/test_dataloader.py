"""``BaseDataLoader`` against the legacy dataset / collate / dataloader build steps."""

from __future__ import annotations

import itertools

import pytest

from hyper_parallel import assets
from hyper_parallel.components import BaseDataLoader, HuggingFaceTokenizer
from hyper_parallel.data import read_jsonl_documents
from tests.torch.ut.components._common import assert_same_tree, legacy_config, legacy_dataloader

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")

SEQ_LEN = 16


def legacy_and_new(data: dict, *, dp_size: int = 1, dp_rank: int = 0, vocab_size=None, **train):
    """The legacy loader (LLMTrainer build steps) and the component with the same settings."""
    train = {"max_steps": 5, "global_batch_size": 4 * dp_size, "micro_batch_size": 2, "seed": 7, **train}
    args = legacy_config(data={"max_seq_len": SEQ_LEN, **data}, **train)
    legacy = legacy_dataloader(args, dp_rank=dp_rank, dp_size=dp_size, vocab_size=vocab_size)

    d = args.data
    config = BaseDataLoader.Config(
        dataset=d.type,
        dataset_path=d.train_path,
        text_key=d.text_key,
        num_workers=d.num_workers,
        shuffle=d.shuffle,
        pin_memory=d.pin_memory,
        prefetch_factor=d.prefetch_factor,
    )
    tokenizer = None if d.type == "dummy" else HuggingFaceTokenizer.Config().build()
    new = config.build(
        dp_world_size=dp_size,
        dp_rank=dp_rank,
        tokenizer=tokenizer,
        seq_len=d.max_seq_len,
        local_batch_size=args.train.micro_batch_size,
        seed=args.train.seed,
        vocab_size=vocab_size,
        num_samples=args.train.max_steps * args.train.global_batch_size,
    )
    return legacy.train_dataloader, new


def epochs(loader, n: int = 2) -> list:
    out = []
    for epoch in range(n):
        loader.sampler.set_epoch(epoch)
        out.append(list(loader))
    return out


@pytest.mark.parametrize("dp_rank", [0, 1])
@pytest.mark.parametrize("shuffle", [True, False])
def test_dummy_batches_equal_the_legacy(dp_rank, shuffle):
    old, new = legacy_and_new({"shuffle": shuffle}, dp_size=2, dp_rank=dp_rank, vocab_size=100)
    old_batches, new_batches = epochs(old), epochs(new)
    assert len(new) == len(old) == 10 and len(new_batches[0]) == 10  # 5 steps x 8 samples / 2 ranks / 2
    assert_same_tree(new_batches, old_batches)
    assert int(new_batches[0][0]["input_ids"].max()) < 100  # the model vocabulary is honoured
    if shuffle:  # the epoch reshuffles (so the comparison above covers set_epoch)
        assert not all(
            (a["input_ids"] == b["input_ids"]).all() for a, b in zip(*new_batches)
        )


def test_jsonl_batches_equal_the_legacy():
    old, new = legacy_and_new({"type": "jsonl", "train_path": "pkg://corpus/valid.jsonl"}, vocab_size=2048)
    assert len(new.dataset) == len(old.dataset) > 100
    assert_same_tree(epochs(new), epochs(old))


def test_text_batches_equal_the_legacy(tmp_path):
    docs = read_jsonl_documents([assets.corpus_path("valid.jsonl")])[:40]
    path = tmp_path / "docs.txt"
    path.write_text("\n\n".join(docs), encoding="utf-8")
    old, new = legacy_and_new({"type": "text", "train_path": str(path), "shuffle": False})
    assert_same_tree(epochs(new, 1), epochs(old, 1))


def test_resume_mid_epoch_continues_like_the_uninterrupted_legacy_run():
    old, new = legacy_and_new({}, dp_size=2, dp_rank=1, max_steps=8)
    old.sampler.set_epoch(1)
    uninterrupted = list(old)

    new.set_epoch(1)
    it = iter(new)
    head = list(itertools.islice(it, 3))
    state = new.state_dict()
    assert state == _consume_legacy_state(3)  # the same state as the legacy loader's

    _, resumed = legacy_and_new({}, dp_size=2, dp_rank=1, max_steps=8)
    resumed.load_state_dict(state)  # a fresh loader; the epoch comes from the state
    assert_same_tree(head + list(resumed), uninterrupted)

    # And the legacy loader resumes from the component's state the same way (same format).
    fresh_old, _ = legacy_and_new({}, dp_size=2, dp_rank=1, max_steps=8)
    fresh_old.load_state_dict(state)
    assert_same_tree(head + list(fresh_old), uninterrupted)


def _consume_legacy_state(n: int) -> dict:
    old, _ = legacy_and_new({}, dp_size=2, dp_rank=1, max_steps=8)
    old.sampler.set_epoch(1)
    it = iter(old)
    list(itertools.islice(it, n))
    return old.state_dict()


def test_loader_exposes_dataset_sampler_and_length():
    _, new = legacy_and_new({}, dp_size=2, dp_rank=0)
    assert new.sampler is new.dataloader.sampler and new.sampler.num_replicas == 2
    assert len(new.dataset) == 5 * 8 and len(new) == 10


def test_text_dataset_needs_a_tokenizer():
    config = BaseDataLoader.Config(dataset="jsonl", dataset_path="pkg://corpus/valid.jsonl")
    with pytest.raises(ValueError, match=r"dataset='jsonl' tokenizes text: build the data loader with tokenizer="):
        config.build(dp_world_size=1, dp_rank=0, local_batch_size=1, seq_len=SEQ_LEN)


def test_dataset_errors_name_the_component_field(tmp_path):
    config = BaseDataLoader.Config(dataset="jsonl", dataset_path=str(tmp_path / "none.jsonl"))
    with pytest.raises(Exception, match=r"BaseDataLoader.Config.dataset_path"):
        config.build(
            dp_world_size=1,
            dp_rank=0,
            local_batch_size=1,
            seq_len=SEQ_LEN,
            tokenizer=HuggingFaceTokenizer.Config().build(),
        )
