"""``json_file`` text records, and streamed data (``data.streaming`` / ``dataloader.streaming``).

* ``json_file`` tells a file's kind by its first record: Alpaca records (``instruction``) keep
  their prompt-masked samples, text records (``text_key``) train as ``hf_datasets`` plain text (one
  truncated sample per record, labels = ids, not packed); a mixed or unrecognised file is an
  error naming ``data.train_path`` and the line.
* A stream (``datasets`` ``IterableDataset`` over local files) unshuffled on one rank yields the
  very samples of the loaded dataset; over several ranks (``split_dataset_by_node``) the ranks'
  shares are disjoint and cover the data; ``max_samples`` is the global budget of an epoch, the
  stream read again when a share runs out; the shuffle buffer is seeded and reseeded per epoch.
* The position resumes exactly: a loader rebuilt from a saved state yields the batches the
  uninterrupted one does, mid-epoch, across a pass and an epoch, shuffled or not.

Every file is written here; nothing is downloaded.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch

from hyper_parallel.assets import resolve_path
from hyper_parallel.components import BaseDataLoader, HuggingFaceTokenizer
from hyper_parallel.data import build_dataset, load_tokenizer
from hyper_parallel.data.streaming import build_streaming_dataset
from hyper_parallel.utils.data_types import setting_problems
from hyper_parallel.utils.errors import ConfigError, ConfigFieldError

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")

SEQ = 16
RECORDS = 30  # text records in the file (one per corpus document)


def write_jsonl(path: Path, rows: list) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(None)


@pytest.fixture(scope="module")
def texts() -> list[str]:
    lines = Path(resolve_path("pkg://corpus/valid.jsonl")).read_text().splitlines()
    return [json.loads(line)["text"] for line in lines][:RECORDS]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("streaming")


@pytest.fixture(scope="module")
def text_file(folder, texts) -> str:
    return write_jsonl(folder / "text.jsonl", [{"text": t} for t in texts])


@pytest.fixture(scope="module")
def alpaca_file(folder, texts) -> str:
    rows = [{"instruction": " ".join(t.split()[:5]), "input": "" if i % 2 else "in",
             "output": " ".join(t.split()[5:20])} for i, t in enumerate(texts[:12])]
    return write_jsonl(folder / "alpaca.jsonl", rows)


def samples(dataset) -> list[tuple[list[int], list[int]]]:
    return [(s["input_ids"].tolist(), s["labels"].tolist()) for s in dataset]


def stream(path: str, tok, **kw):
    return build_streaming_dataset(kw.pop("type", "json_file"), train_path=path, max_seq_len=SEQ,
                                   tokenizer=tok, **{"shuffle": False, **kw})


# ---------------------------------------------------------------------------------- json_file


def test_json_file_text_records_train_as_hf_datasets_plain_text(text_file, texts, tok):
    ds = build_dataset("json_file", train_path=text_file, max_seq_len=SEQ, tokenizer=tok)
    assert ds.record_kind == "text" and len(ds) == RECORDS
    assert samples(ds) == samples(build_dataset("hf_datasets", train_path=text_file,
                                                max_seq_len=SEQ, tokenizer=tok))
    for (ids, labels), text in zip(samples(ds), texts):
        assert ids == labels == tok.encode(text)[:SEQ]  # one record a sample: cut, no eos


def test_json_file_text_key_names_the_text(folder, texts, tok):
    path = write_jsonl(folder / "body.jsonl", [{"body": t, "id": i} for i, t in enumerate(texts)])
    ds = build_dataset("json_file", train_path=path, max_seq_len=SEQ, text_key="body",
                       tokenizer=tok, max_samples=3)
    assert [ids for ids, _ in samples(ds)] == [tok.encode(t)[:SEQ] for t in texts[:3]]


@pytest.mark.parametrize(("rows", "pattern"), [
    ([{"text": "a"}, {"text": "b"}, {"instruction": "x", "output": "y"}],
     (r"data\.train_path: .*x\.jsonl:3: no key 'text' \(data\.text_key\) \(an Alpaca record, "
      r"in a file of text records\).*told by the first record, .*x\.jsonl:1\)")),
    ([{"instruction": "x", "output": "y"}, {"text": "b"}],
     (r"data\.train_path: .*x\.jsonl:2: no key 'instruction'.*told by the first record, "
      r".*x\.jsonl:1\)")),
    ([{"body": "a"}],
     (r"data\.train_path='.*x\.jsonl': .*x\.jsonl:1: the first record has keys \['body'\]: "
      r"neither 'instruction' .* nor 'text'")),
    ([{"text": "a"}, {"text": 3}], r"x\.jsonl:2: key 'text' \(data\.text_key\) holds int"),
])
def test_json_file_is_one_kind_of_record_told_by_the_first(folder, tok, rows, pattern):
    path = write_jsonl(folder / "x.jsonl", rows)
    with pytest.raises(ValueError, match=pattern):
        build_dataset("json_file", train_path=path, max_seq_len=SEQ, tokenizer=tok)


def test_a_template_needs_alpaca_records(text_file, tok):
    with pytest.raises(ValueError, match=r"data\.template='human_assistant': templates format "
                                         r"Alpaca records, but data\.train_path=.* holds text"):
        build_dataset("json_file", train_path=text_file, max_seq_len=SEQ, tokenizer=tok,
                      template="human_assistant")


# ---------------------------------------------------------------------------------- the stream


@pytest.fixture(scope="module")
def saved_folder(folder, texts) -> str:
    """A ``save_to_disk`` folder (streamed from its Arrow files: ``to_iterable_dataset``)."""
    import datasets

    path = folder / "saved"
    datasets.Dataset.from_dict({"text": texts, "n": list(range(len(texts)))}).save_to_disk(path)
    return str(path)


@pytest.mark.parametrize("case", ["text", "alpaca", "alpaca_human_assistant", "hf_datasets",
                                  "hf_saved"])
def test_an_unshuffled_stream_on_one_rank_is_the_loaded_dataset(case, text_file, alpaca_file,
                                                                 saved_folder, tok):
    kind = "hf_datasets" if case.startswith("hf") else "json_file"
    path = (saved_folder if case == "hf_saved" else
            alpaca_file if case.startswith("alpaca") else text_file)
    template = "human_assistant" if case.endswith("assistant") else "empty"
    loaded = build_dataset(kind, train_path=path, max_seq_len=SEQ, tokenizer=tok,
                           template=template)
    streamed = stream(path, tok, type=kind, template=template)
    assert samples(streamed) == samples(loaded)
    if case == "alpaca":  # the prompt stays masked
        assert any(-100 in labels for _, labels in samples(streamed))


def test_a_streamed_folder_takes_its_subset(folder, texts, tok):
    configs = folder / "configs"
    configs.mkdir()
    for name, docs in (("first", texts[:6]), ("second", texts[6:12])):
        write_jsonl(configs / f"{name}.jsonl", [{"text": t} for t in docs])
    (configs / "README.md").write_text(
        "---\nconfigs:\n- config_name: first\n  data_files: first.jsonl\n"
        "- config_name: second\n  data_files: second.jsonl\n---\n")
    loaded = build_dataset("hf_datasets", train_path=str(configs), max_seq_len=SEQ,
                           tokenizer=tok, subset="second")
    streamed = stream(str(configs), tok, type="hf_datasets", subset="second")
    assert samples(streamed) == samples(loaded)
    assert samples(streamed)[0][0] == tok.encode(texts[6])[:SEQ]


def test_ranks_split_the_stream_and_the_budget(text_file, tok):
    whole = samples(stream(text_file, tok))
    shares = [samples(stream(text_file, tok, dp_rank=r, dp_size=2, max_samples=RECORDS))
              for r in range(2)]
    assert shares == [whole[0::2], whole[1::2]]  # every other record (one file, two ranks)
    # The global budget: 2 x 20 samples, each rank's 15 records read again from the start.
    more = samples(stream(text_file, tok, dp_rank=1, dp_size=2, max_samples=40))
    assert more == whole[1::2] + whole[1::2][:5]
    assert len(stream(text_file, tok, dp_size=2, max_samples=41)) == 20  # the remainder dropped


def test_the_shuffle_buffer_is_seeded_and_reseeded_each_epoch(text_file, tok):
    whole = samples(stream(text_file, tok))

    def epoch(seed: int, n: int, rank: int = 0, ranks: int = 1):
        ds = stream(text_file, tok, shuffle=True, seed=seed, dp_rank=rank, dp_size=ranks,
                    max_samples=RECORDS)
        ds.set_epoch(n)
        return samples(ds)

    first = epoch(1, 0)
    assert first != whole and sorted(first) == sorted(whole)
    assert epoch(1, 0) == first and epoch(2, 0) != first and epoch(1, 1) != first
    # Shuffled, then split: the two ranks' shares of an epoch are the data, each record once.
    shares = epoch(1, 0, 0, 2) + epoch(1, 0, 1, 2)
    assert sorted(shares) == sorted(whole)


def _loader(path: str, shuffle: bool, rank: int, tokenizer, budget: int = 50, **kw):
    config = BaseDataLoader.Config(dataset="json_file", dataset_path=path, streaming=True,
                                   shuffle=shuffle, max_samples=budget, pin_memory=False, **kw)
    return config.build(dp_world_size=2, dp_rank=rank, local_batch_size=2, seq_len=SEQ, seed=3,
                        tokenizer=tokenizer)


def _ids(batch) -> list:
    return batch["input_ids"].tolist()


def _saved(state: dict) -> dict:
    """``state`` through the checkpoint's ``torch.save`` / ``torch.load(weights_only=True)``."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("shuffle", [False, True], ids=["in order", "shuffled"])
def test_a_resumed_stream_continues_with_the_uninterrupted_batches(text_file, shuffle, rank):
    tokenizer = HuggingFaceTokenizer.Config().build()
    # 25 samples an epoch on each rank from its 15 records: every epoch reads a second pass.
    reference = _loader(text_file, shuffle, rank, tokenizer)
    straight = []
    for epoch in range(2):
        reference.set_epoch(epoch)
        straight.append([_ids(b) for b in reference])
    assert [len(e) for e in straight] == [12, 12] == [len(reference)] * 2
    assert (straight[0] != straight[1]) == shuffle
    # Saved in the first pass, in the second, and in the next epoch.
    for cut_epoch, cut in ((0, 3), (0, 9), (1, 5)):
        loader = _loader(text_file, shuffle, rank, tokenizer)
        seen: list[list] = []
        for epoch in range(cut_epoch + 1):
            loader.set_epoch(epoch)
            seen.append([])
            for i, batch in enumerate(loader):
                seen[-1].append(_ids(batch))
                if epoch == cut_epoch and i + 1 == cut:
                    break
        state = _saved(loader.state_dict())
        # In order: datasets' own position, to seek to; shuffled: the pass is replayed.
        assert (state["dataset_state"]["source"] is None) == shuffle
        resumed = _loader(text_file, shuffle, rank, tokenizer)
        resumed.load_state_dict(state)
        for epoch in range(cut_epoch, 2):
            resumed.set_epoch(epoch)  # the engine's loop, before the resumed iteration
            rest = [_ids(b) for b in resumed]
            if epoch == cut_epoch:
                seen[-1].extend(rest)
            else:
                seen.append(rest)
        assert seen == straight, (cut_epoch, cut)


# ---------------------------------------------------------------------------------- refusals


def test_what_streaming_refuses():
    assert setting_problems("json_file", streaming=True) == []
    assert setting_problems("hf_datasets", streaming=True) == []
    (problem,) = setting_problems("jsonl", streaming=True)
    assert problem.message == (
        "data.streaming=True: only applies to data.type='hf_datasets' or 'json_file', which the "
        "datasets library reads record by record (this is 'jsonl'); set it to False")
    (problem,) = setting_problems("json_file", streaming=True, num_workers=2)
    assert problem.field == "data.num_workers" and "set it to 0" in problem.message
    with pytest.raises(ConfigFieldError, match=r"BaseDataLoader\.Config\.streaming=True: only "
                                               r"applies to dataset='hf_datasets'"):
        BaseDataLoader.Config(dataset="text", dataset_path="x.txt", streaming=True)
    with pytest.raises(ConfigFieldError, match=r"BaseDataLoader\.Config\.num_workers=1: a "
                                               r"streamed dataset"):
        BaseDataLoader.Config(dataset="json_file", dataset_path="x", streaming=True,
                              num_workers=1)


def test_several_ranks_need_the_budget(text_file, tok):
    with pytest.raises(ValueError, match=r"data\.train_size is unset, but data\.streaming=True "
                                         r"on 2 data-parallel ranks needs it"):
        stream(text_file, tok, dp_size=2)
    with pytest.raises(ValueError, match=r"data\.train_size=1 is fewer than the 2 data-parallel"):
        stream(text_file, tok, dp_size=2, max_samples=1)
    with pytest.raises(TypeError, match="has no length without data.train_size"):
        len(stream(text_file, tok))


def test_a_wrong_record_in_the_stream_is_a_config_error(folder, tok):
    path = write_jsonl(folder / "mixed.jsonl",
                       [{"text": "one two"}, {"text": "three"}, {"instruction": "x", "output": "y"}])
    with pytest.raises(ConfigError, match=r"data\.train_path: .*mixed\.jsonl record 2: no key "
                                          r"'text' \(data\.text_key\) \(an Alpaca record"):
        list(stream(path, tok))
    empty = write_jsonl(folder / "empty_text.jsonl", [{"text": ""}, {"text": ""}])
    with pytest.raises(ConfigError, match=r"rank 0 of 1 got no sample from its share"):
        list(stream(empty, tok, max_samples=4))


def test_a_position_of_another_kind_or_layout_is_refused(text_file):
    tokenizer = HuggingFaceTokenizer.Config().build()
    loader = _loader(text_file, True, 0, tokenizer)
    next(iter(loader))
    state = _saved(loader.state_dict())
    with pytest.raises(ValueError, match=r"saved with seed=3 but this run has 4"):
        other = BaseDataLoader.Config(dataset="json_file", dataset_path=text_file,
                                      streaming=True, max_samples=50, pin_memory=False)
        other.build(dp_world_size=2, dp_rank=0, local_batch_size=2, seq_len=SEQ, seed=4,
                    tokenizer=tokenizer).load_state_dict(state)
    loaded = BaseDataLoader.Config(dataset="json_file", dataset_path=text_file, pin_memory=False)
    loaded = loaded.build(dp_world_size=2, dp_rank=0, local_batch_size=2, seq_len=SEQ, seed=3,
                          tokenizer=tokenizer)
    with pytest.raises(ValueError, match=r"position of a streamed dataset, and this run has "
                                         r"BaseDataLoader\.Config\.streaming=False"):
        loaded.load_state_dict(state)
    next(iter(loaded))
    with pytest.raises(ValueError, match=r"position of a loaded \(not streamed\) dataset"):
        _loader(text_file, True, 0, tokenizer).load_state_dict(_saved(loaded.state_dict()))
