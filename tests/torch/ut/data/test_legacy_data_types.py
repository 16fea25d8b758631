"""The legacy data types ``hf_datasets``, ``json_file``, ``preset_pt`` and ``max_samples``.

Fixtures come from ``scripts/make_data_fixtures.py`` written into a temporary folder; nothing is
downloaded, and the ``datasets`` cache is redirected to a temporary folder too.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import time
from pathlib import Path

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hyper_parallel.components import BaseDataLoader, HuggingFaceTokenizer
from hyper_parallel.data import (
    PresetBatchesDataset,
    SequenceDataset,
    build_dataloader,
    build_dataset,
    collate,
    infer_seqlen,
    load_tokenizer,
)
from hyper_parallel.utils import data_types

REPO = Path(__file__).resolve().parents[4]
pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")


def _fixture_module():
    spec = importlib.util.spec_from_file_location(
        "make_data_fixtures", REPO / "scripts" / "make_data_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FX = _fixture_module()


@pytest.fixture(scope="module", autouse=True)
def _private_hf_cache(tmp_path_factory):
    """load_dataset writes an Arrow copy of local files into the datasets cache: keep it here."""
    import datasets.config

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path_factory.mktemp("hf_cache")))
        yield


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return FX.write_fixtures(tmp_path_factory.mktemp("fixtures"))


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(None)


def ids_of(dataset) -> list[list[int]]:
    return [dataset[i]["input_ids"].tolist() for i in range(len(dataset))]


def write_jsonl(path: Path, rows: list) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------------------------- data_types


def test_data_types_home_is_framework_free_and_shared():
    import hyper_parallel.data.datasets as ds_module

    assert data_types.DATA_TYPES == ("dummy", "jsonl", "text", "hf_datasets", "json_file",
                                     "preset_pt", "vl_dummy")
    assert ds_module.DATA_TYPES is data_types.DATA_TYPES
    assert set(data_types.REFUSED_DATA_TYPES) == {"megatron"}
    assert data_types.TEMPLATES == ("empty", "human_assistant")
    source = Path(data_types.__file__).read_text()
    assert "import torch" not in source and "hyper_parallel.data" not in source.split('"""')[-1]
    with pytest.raises(ValueError, match=r"data\.type='megatron' is not supported: Megatron "
                                         r"indexed .*convert the corpus to jsonl"):
        build_dataset("megatron", train_path="x", max_seq_len=8)
    with pytest.raises(ValueError, match=r"data\.type='vl_dummy' gives image-text batches, but "
                                         r"the model has no vision tower"):
        build_dataset("vl_dummy", train_path=None, max_seq_len=8, num_samples=4)
    with pytest.raises(ValueError, match=r"'parquet' is not supported; choose one of dummy, "
                                         r"jsonl, text, hf_datasets, json_file, preset_pt, "
                                         r"vl_dummy"):
        build_dataset("parquet", train_path="x", max_seq_len=8)


# ---------------------------------------------------------------------------------- hf_datasets


def test_hf_jsonl_file_is_one_truncated_sample_per_record(files, tok):
    ds = build_dataset("hf_datasets", train_path=str(files["hf_jsonl"]), max_seq_len=8,
                       tokenizer=tok)
    assert isinstance(ds, SequenceDataset)
    expected = [tok.encode(t)[:8] for t in FX.HF_TEXTS if t]  # the empty record is dropped
    assert ids_of(ds) == expected
    assert max(len(tok.encode(t)) for t in FX.HF_TEXTS) > 8  # truncation did happen
    assert all(torch.equal(ds[i]["labels"], ds[i]["input_ids"]) for i in range(len(ds)))
    assert ds[0]["input_ids"].dtype == torch.long
    assert ds.num_empty == 1 and ds.num_records == len(FX.HF_TEXTS) and "1 empty" in ds.describe()
    # Not packed: a short record stays short (no eos, no neighbour glued on).
    assert ids_of(ds)[2] == tok.encode("short")


@pytest.mark.parametrize("name", ["hf_parquet", "hf_folder"])
def test_hf_parquet_and_folder_read_like_the_jsonl_file(files, tok, name):
    ds = build_dataset("hf_datasets", train_path=str(files[name]), max_seq_len=8, tokenizer=tok)
    assert ids_of(ds) == [tok.encode(t)[:8] for t in FX.HF_TEXTS if t]


def test_hf_txt_file_is_one_record_per_line(tok, tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("first line\nsecond line\n\nthird\n")
    ds = build_dataset("hf_datasets", train_path=str(path), max_seq_len=64, tokenizer=tok)
    # The datasets text builder: every line is a record (the blank one is dropped as empty),
    # unlike the hyper_parallel ``text`` type's blank-line separated documents.
    assert ids_of(ds) == [tok.encode(t) for t in ("first line", "second line", "third")]


def test_hf_save_to_disk_folders(files, tok):
    ds = build_dataset("hf_datasets", train_path=str(files["hf_saved"]), max_seq_len=64,
                       tokenizer=tok)
    assert ids_of(ds) == [tok.encode(t) for t in ("saved one", "saved two", "saved three")]
    dd = build_dataset("hf_datasets", train_path=str(files["hf_saved_dict"]), max_seq_len=64,
                       tokenizer=tok)
    assert ids_of(dd) == [tok.encode("dict train")]  # the train split of the DatasetDict
    with pytest.raises(ValueError, match=r"data\.subset='x': .*save_to_disk"):
        build_dataset("hf_datasets", train_path=str(files["hf_saved"]), subset="x",
                      max_seq_len=8, tokenizer=tok)


def test_hf_subset_selects_a_folder_configuration(files, tok):
    path = str(files["hf_configs"])
    alpha = build_dataset("hf_datasets", train_path=path, subset="alpha", max_seq_len=64,
                          tokenizer=tok)
    beta = build_dataset("hf_datasets", train_path=path, subset="beta", max_seq_len=64,
                         tokenizer=tok)
    assert ids_of(alpha) == [tok.encode("alpha one"), tok.encode("alpha two")]
    assert ids_of(beta) == [tok.encode("beta only")]
    with pytest.raises(ValueError, match=r"(?s)hf_configs.*alpha.*beta.*chosen with data\.subset"):
        build_dataset("hf_datasets", train_path=path, max_seq_len=8, tokenizer=tok)
    with pytest.raises(ValueError, match=r"data\.subset='gamma'.*gamma"):
        build_dataset("hf_datasets", train_path=path, subset="gamma", max_seq_len=8,
                      tokenizer=tok)
    with pytest.raises(ValueError, match=r"data\.subset='alpha': a subset .*only applies to a "
                                         r"dataset folder or a cached Hub dataset.*single file"):
        build_dataset("hf_datasets", train_path=str(files["hf_jsonl"]), subset="alpha",
                      max_seq_len=8, tokenizer=tok)


def test_hf_uncached_hub_name_fails_fast_offline_and_restores_the_flags(files, tok):
    import datasets.config
    import huggingface_hub.constants

    before = ({k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")},
              datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE)
    start = time.monotonic()
    with pytest.raises(ValueError) as info:
        build_dataset("hf_datasets", train_path="someuser/nonexistent-dataset", max_seq_len=8,
                      tokenizer=tok)
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert message.startswith("data.train_path='someuser/nonexistent-dataset'")
    assert "offline" in message and "not in the local cache" in message
    assert "point" in message or "set data.train_path to it" in message
    after = ({k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")},
             datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE)
    assert after == before
    # Not a Hub name either (a path that does not exist): a plain FileNotFoundError.
    with pytest.raises(FileNotFoundError, match=r"data\.train_path='/no/such/dir/x\.jsonl' "
                                                r"does not exist"):
        build_dataset("hf_datasets", train_path="/no/such/dir/x.jsonl", max_seq_len=8,
                      tokenizer=tok)


def test_hf_content_errors(files, tok, tmp_path):
    def build(path, **kw):
        return build_dataset("hf_datasets", train_path=str(path), max_seq_len=8, tokenizer=tok,
                             **kw)

    with pytest.raises(ValueError, match=r"no column 'body' \(data\.text_key\); the dataset has "
                                         r"columns \['text', 'meta'\]"):
        build(files["hf_jsonl"], text_key="body")
    with pytest.raises(ValueError, match=r"column 'meta' \(data\.text_key\) holds .*int64.*"
                                         r"expected strings"):
        build(files["hf_jsonl"], text_key="meta")
    nulls = write_jsonl(tmp_path / "nulls.jsonl", [{"text": "a"}, {"text": None}])
    with pytest.raises(ValueError, match=r"record 1 holds NoneType .*expected a string"):
        build(nulls)
    empty = write_jsonl(tmp_path / "empty.jsonl", [{"text": ""}, {"text": ""}])
    with pytest.raises(ValueError, match="are all empty"):
        build(empty)
    with pytest.raises(ValueError, match=r"no 'train' split \(its splits: test\)"):
        build(files["hf_no_train"])
    (tmp_path / "data.xml").write_text("<a/>")
    with pytest.raises(ValueError, match=r"hf_datasets reads local files ending in \.jsonl"):
        build(tmp_path / "data.xml")


# ---------------------------------------------------------------------------------- json_file


def _prompt(record: dict) -> str:
    extra = record.get("input") or ""
    return record["instruction"] + ("\n" + extra if extra else "")


@pytest.mark.parametrize("name", ["alpaca_json", "alpaca_jsonl"])
def test_json_file_masks_the_prompt_and_appends_eos(files, tok, name):
    ds = build_dataset("json_file", train_path=str(files[name]), max_seq_len=256, tokenizer=tok)
    assert len(ds) == len(FX.ALPACA_RECORDS)
    for i, record in enumerate(FX.ALPACA_RECORDS):
        prompt, response = tok.encode(_prompt(record)), tok.encode(record["output"]) + [tok.eos_id]
        sample = ds[i]
        assert sample["input_ids"].tolist() == prompt + response
        assert sample["labels"].tolist() == [-100] * len(prompt) + response
        trained = sample["input_ids"][sample["labels"] != -100].tolist()
        assert tok.decode(trained) == record["output"] + tok.eos_token
        assert tok.decode(sample["input_ids"][: len(prompt)].tolist()) == _prompt(record)
    assert _prompt(FX.ALPACA_RECORDS[1]) == "Add the numbers.\ntwo and three"


def test_json_file_truncation_split_by_hand(tok, tmp_path):
    short, long_text = "Yes.", " ".join(["word"] * 60)
    records = [
        {"instruction": long_text, "output": short},  # long prompt
        {"instruction": short, "output": long_text},  # long response
        {"instruction": long_text, "output": long_text + " more"},  # both long
    ]
    path = tmp_path / "split.json"
    path.write_text(json.dumps(records))
    cutoff = 20
    ds = build_dataset("json_file", train_path=str(path), max_seq_len=cutoff, tokenizer=tok)
    s = [len(tok.encode(r["instruction"])) for r in records]
    t = [len(tok.encode(r["output"])) + 1 for r in records]  # + eos
    assert t[0] * 2 < cutoff and s[0] > cutoff  # case 1: the response is kept whole
    assert t[1] * 2 >= cutoff and s[1] * 2 < cutoff  # case 2: the prompt is kept whole
    assert t[2] * 2 >= cutoff and s[2] * 2 >= cutoff  # case 3: proportional
    expected = [(cutoff - t[0], t[0]), (s[1], cutoff - s[1])]
    target = int(cutoff * t[2] / (s[2] + t[2]))
    expected.append((cutoff - target, target))
    for i, (src, tgt) in enumerate(expected):
        sample = ds[i]
        masked = int((sample["labels"] == -100).sum())
        assert (masked, len(sample["input_ids"]) - masked) == (src, tgt)
        prompt = tok.encode(records[i]["instruction"])
        response = tok.encode(records[i]["output"]) + [tok.eos_id]
        assert sample["input_ids"].tolist() == prompt[:src] + response[:tgt]  # beginnings kept
    assert ds.num_truncated == 3


def test_json_file_human_assistant_template(files, tok):
    ds = build_dataset("json_file", train_path=str(files["alpaca_jsonl"]), max_seq_len=32,
                       template="human_assistant", tokenizer=tok)
    for i, record in enumerate(FX.ALPACA_RECORDS):
        text = f"Human: {_prompt(record)}\n\nAssistant: {record['output']}"
        assert ds[i]["input_ids"].tolist() == tok.encode(text)[:32]  # no eos, truncated
        assert torch.equal(ds[i]["labels"], ds[i]["input_ids"])


@pytest.mark.parametrize(("content", "pattern"), [
    ('{"instruction": "a", "output": "b"}\n{"output": "b"}\n',
     r"x\.jsonl:2: no key 'instruction'"),
    ('[{"instruction": "a", "output": "b"}, {"instruction": "a"}]',
     r"x\.jsonl record 1: no key 'output'"),
    ('{"instruction": "a", "input": 3, "output": "b"}\n', r"x\.jsonl:1: key 'input' holds int"),
    ('{"instruction": ["a"], "output": "b"}\n', r"x\.jsonl:1: key 'instruction' holds list"),
    ('["just a string"]', r"x\.jsonl record 0: expected a JSON object, got str"),
    ('{"instruction": "a", "output": "b"}\n{not json\n', r"x\.jsonl:2: invalid JSON"),
    ("", r"no records"),
])
def test_json_file_content_errors(tok, tmp_path, content, pattern):
    path = tmp_path / "x.jsonl"
    path.write_text(content)
    with pytest.raises(ValueError, match=pattern):
        build_dataset("json_file", train_path=str(path), max_seq_len=16, tokenizer=tok)


def test_template_only_applies_to_json_file(files, tok):
    with pytest.raises(ValueError, match=r"data\.template='human_assistant': only applies to "
                                         r"data\.type='json_file' \(this is 'jsonl'\)"):
        build_dataset("jsonl", train_path="pkg://corpus/valid.jsonl", max_seq_len=16,
                      template="human_assistant", tokenizer=tok)
    with pytest.raises(ValueError, match=r"data\.template='chatml' is not supported"):
        build_dataset("json_file", train_path=str(files["alpaca_json"]), max_seq_len=16,
                      template="chatml", tokenizer=tok)
    with pytest.raises(ValueError, match=r"data\.subset='a': only applies to "
                                         r"data\.type='hf_datasets' \(this is 'json_file'\)"):
        build_dataset("json_file", train_path=str(files["alpaca_json"]), max_seq_len=16,
                      subset="a", tokenizer=tok)


# ---------------------------------------------------------------------------------- truncation rule


def test_infer_seqlen_examples():
    assert infer_seqlen(100, 4, 10) == (6, 4)  # short target kept whole
    assert infer_seqlen(3, 100, 10) == (3, 7)  # short source kept whole
    assert infer_seqlen(30, 10, 10) == (8, 2)  # proportional: int(10 * 10 / 40) = 2
    assert infer_seqlen(100, 5, 10) == (10, 0)  # the legacy rule can leave no target at all
    assert infer_seqlen(3, 4, 10) == (3, 4)  # fits: unchanged
    with pytest.raises(ValueError):
        infer_seqlen(1, 1, 0)


@settings(max_examples=400, deadline=None, database=None)
@given(s=st.integers(0, 3000), t=st.integers(0, 3000), cutoff=st.integers(1, 3000))
@example(s=10, t=5, cutoff=10)  # the boundaries of the rule's cases: t * 2 == cutoff,
@example(s=5, t=10, cutoff=10)  # s * 2 == cutoff,
@example(s=5, t=5, cutoff=10)  # both,
@example(s=0, t=0, cutoff=1)  # nothing at all
def test_infer_seqlen_properties(s, t, cutoff):
    src, tgt = infer_seqlen(s, t, cutoff)
    assert 0 <= src <= s and 0 <= tgt <= t
    assert src + tgt == min(s + t, cutoff)  # fits: whole; else fills the cutoff exactly
    assert tgt >= min(t, max(cutoff - s, 0))  # the response gets whatever the prompt leaves
    if t * 2 < cutoff:
        assert tgt == t
    elif s * 2 < cutoff:
        assert src == s
    else:  # proportional share, rounded down
        share = cutoff * t / (s + t)
        assert tgt <= share < tgt + 1
    if s + t <= cutoff:
        assert (src, tgt) == (s, t)


# ---------------------------------------------------------------------------------- preset_pt


def test_preset_expands_batches_in_file_order(files):
    ds = build_dataset("preset_pt", train_path=str(files["preset_pt"]), max_seq_len=16)
    assert isinstance(ds, PresetBatchesDataset) and ds.data_type == "preset_pt"
    batches = FX.preset_batches()
    rows = torch.cat([b["input_ids"] for b in batches])
    labels = torch.cat([b["labels"] for b in batches])
    assert len(ds) == FX.PRESET_BATCHES * FX.PRESET_BATCH == rows.shape[0]
    for k in range(len(ds)):
        assert torch.equal(ds[k]["input_ids"], rows[k]) and torch.equal(ds[k]["labels"], labels[k])
        assert "attention_mask" not in ds[k]
    assert (ds[0]["labels"][: FX.PRESET_MASKED] == -100).all()
    # The run's batch size differs from the file's (3 vs 2): rows are still read in order.
    loader = build_dataloader(ds, dp_rank=0, dp_size=1, micro_batch_size=3, shuffle=False)
    assert torch.equal(torch.cat([b["input_ids"] for b in loader]), rows)
    with pytest.raises(ValueError, match=r"PresetBatchesDataset: data\.shuffle / "
                                         r"dataloader\.shuffle=True: preset_pt replays the "
                                         r"file's batches in file order"):
        build_dataloader(ds, dp_rank=0, dp_size=1, micro_batch_size=3, shuffle=True)


def test_preset_labels_default_and_attention_mask(tmp_path):
    ids = torch.arange(12).view(3, 4)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]])
    path = tmp_path / "p.pt"
    torch.save([{"input_ids": ids[:2], "attention_mask": mask[:2]},
                {"input_ids": ids[2:], "attention_mask": mask[2:]}], path)
    ds = build_dataset("preset_pt", train_path=str(path), max_seq_len=4)
    assert torch.equal(ds[2]["labels"], ids[2]) and torch.equal(ds[1]["attention_mask"], mask[1])
    sample = ds[0]
    sample["labels"][0] = -100  # a copy: the dataset is untouched
    assert torch.equal(ds[0]["labels"], ids[0])


class _NotAllowed:
    pass


def _preset_cases():
    ok = torch.zeros(2, 4, dtype=torch.long)
    return [
        ({"input_ids": ok}, r"expected a list of batches .*got dict"),
        ([], r"the list of batches is empty"),
        ([{"input_ids": ok}, ok], r"batch 1 is a Tensor, expected a dict"),
        ([{"labels": ok}], r"batch 0 has no input_ids"),
        ([{"input_ids": ok, "position": ok}], r"batch 0 has unknown keys \['position'\]"),
        ([{"input_ids": ok[0]}], r"batch 0 input_ids is a 1-D .*expected a 2-D integer tensor"),
        ([{"input_ids": ok.float()}], r"batch 0 input_ids is a 2-D torch\.float32"),
        ([{"input_ids": [[1, 2]]}], r"batch 0 input_ids is a list"),
        ([{"input_ids": ok}, {"input_ids": ok, "labels": ok[:, :3]}],
         r"batch 1 labels has shape \(2, 3\) but input_ids has \(2, 4\)"),
        ([{"input_ids": ok, "attention_mask": ok[:1]}],
         r"batch 0 attention_mask has shape \(1, 4\)"),
        ([{"input_ids": ok, "labels": ok.float()}], r"batch 0 labels must be an integer tensor"),
        ([{"input_ids": ok}, {"input_ids": torch.zeros(2, 8, dtype=torch.long)}],
         r"the batches mix sequence lengths: batch 0 has S=4, batch 1 has S=8"),
        ([{"input_ids": torch.zeros(2, 8, dtype=torch.long)}],
         (r"its samples have S=8 tokens but the run's sequence length \(data\.max_seq_len\) "
          r"is 4; set data\.max_seq_len=8")),
        ([{"input_ids": ok, "attention_mask": ok}, {"input_ids": ok}],
         r"batch 1 lacks attention_mask but batch 0 has one"),
        ([{"input_ids": ok - 1}], r"input_ids hold a negative id \(-1\)"),
        ([{"input_ids": ok, "labels": ok - 5}], r"labels hold -5; a label is an id >= 0 or -100"),
        ([{"input_ids": ok[:0]}], r"the batches hold no samples"),
        (_NotAllowed(), r"cannot load it with torch\.load\(weights_only=True\)"),
    ]


@pytest.mark.parametrize(("payload", "pattern"), _preset_cases())
def test_preset_validation_errors(tmp_path, payload, pattern):
    path = tmp_path / "bad.pt"
    torch.save(payload, path)
    with pytest.raises(ValueError, match=r"data\.train_path='[^']*bad\.pt': " + pattern):
        build_dataset("preset_pt", train_path=str(path), max_seq_len=4)


def test_preset_vocab_check_and_missing_file(files, tmp_path):
    batches = FX.preset_batches()
    top = int(torch.cat([b["input_ids"] for b in batches]).max())
    assert top >= 100
    with pytest.raises(ValueError, match=rf"input_ids hold ids up to {top} .*vocabulary "
                                         r"\(vocab_size\) is 100: ids must be < 100"):
        build_dataset("preset_pt", train_path=str(files["preset_pt"]), max_seq_len=16,
                      vocab_size=100)
    assert len(build_dataset("preset_pt", train_path=str(files["preset_pt"]), max_seq_len=16,
                             vocab_size=FX.PRESET_VOCAB)) == 12
    with pytest.raises(FileNotFoundError, match=r"data\.train_path='.*absent\.pt' does not exist"):
        build_dataset("preset_pt", train_path=str(tmp_path / "absent.pt"), max_seq_len=16)


# ---------------------------------------------------------------------------------- max_samples


def test_max_samples_for_every_type(files, tok, tmp_path):
    text = tmp_path / "docs.txt"
    text.write_text("\n\n".join(["one two three four five six seven eight"] * 6))
    cases = {
        "jsonl": ("pkg://corpus/valid.jsonl", 16, {}),
        "text": (str(text), 4, {}),
        "hf_datasets": (str(files["hf_jsonl"]), 8, {}),
        "json_file": (str(files["alpaca_json"]), 64, {}),
        "preset_pt": (str(files["preset_pt"]), 16, {}),
    }
    for kind, (path, seq, kw) in cases.items():
        full = build_dataset(kind, train_path=path, max_seq_len=seq, tokenizer=tok, **kw)
        head = build_dataset(kind, train_path=path, max_seq_len=seq, tokenizer=tok,
                             max_samples=3, **kw)
        assert len(head) == 3, kind
        assert ids_of(head) == ids_of(full)[:3], kind
        assert torch.equal(head[2]["labels"], full[2]["labels"]), kind
        too_many = len(full) + 1
        with pytest.raises(ValueError, match=rf"data\.train_size={too_many} is more than the "
                                             rf"dataset's {len(full)} samples"):
            build_dataset(kind, train_path=path, max_seq_len=seq, tokenizer=tok,
                          max_samples=too_many, **kw)
    dummy = build_dataset("dummy", train_path=None, max_seq_len=8, max_samples=5)
    assert len(dummy) == 5  # no num_samples needed: max_samples is the length
    assert len(build_dataset("dummy", train_path=None, max_seq_len=8, num_samples=40,
                             max_samples=5)) == 5
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match=r"data\.train_size=.*must be an integer >= 1"):
            build_dataset("dummy", train_path=None, max_seq_len=8, max_samples=bad)


# ---------------------------------------------------------------------------------- collate


def test_collate_pads_to_a_multiple():
    batch = [{"input_ids": torch.tensor([5, 6, 7]), "labels": torch.tensor([-100, 6, 7])},
             {"input_ids": torch.tensor([8]), "labels": torch.tensor([8])}]
    out = collate(batch, pad_id=3, pad_to_multiple_of=4)
    assert out["input_ids"].tolist() == [[5, 6, 7, 3], [8, 3, 3, 3]]
    assert out["labels"].tolist() == [[-100, 6, 7, -100], [8, -100, -100, -100]]
    assert collate(batch, pad_id=3, pad_to_multiple_of=3)["input_ids"].shape == (2, 3)
    assert collate(batch, pad_id=3)["input_ids"].shape == (2, 3)
    masked = [dict(s, attention_mask=torch.ones(len(s["input_ids"]), dtype=torch.long))
              for s in batch]
    assert collate(masked, pad_id=0, pad_to_multiple_of=5)["attention_mask"].tolist() == [
        [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]]
    for bad in (0, -2, True):
        with pytest.raises(ValueError, match="pad_to_multiple_of must be a positive int"):
            collate(batch, pad_id=0, pad_to_multiple_of=bad)


# ---------------------------------------------------------------------------------- BaseDataLoader


def test_config_fields_and_defaults():
    fields = [(f.name, f.default) for f in dataclasses.fields(BaseDataLoader.Config)]
    assert fields == [
        ("dataset", "dummy"), ("dataset_path", None), ("dataset_subset", None),
        ("text_key", "text"), ("template", "empty"), ("max_samples", None),
        ("num_workers", 0), ("shuffle", True), ("pin_memory", True), ("prefetch_factor", None),
        ("streaming", False), ("messages_key", "messages"), ("image_key", "image"),
        ("processor_path", None), ("packing", False), ("vl_grid_t", 2), ("vl_grid_h", 2),
        ("vl_grid_w", 2),
    ]


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"dataset": "megatron"}, r"dataset='megatron': is not supported: Megatron indexed"),
    ({"dataset": "vl_dummy", "vl_grid_h": 0}, r"vl_grid_h=0: must be"),
    ({"dataset": "hf_datasets"}, r"dataset_path=None: is required for dataset='hf_datasets'"),
    ({"dataset": "json_file", "dataset_path": ""}, r"dataset_path='': is required"),
    ({"dataset": "preset_pt", "shuffle": False}, r"dataset_path=None: is required"),
    ({"dataset": "jsonl", "dataset_path": "x", "dataset_subset": "a"},
     r"dataset_subset='a': only applies to dataset='hf_datasets'"),
    ({"dataset": "hf_datasets", "dataset_path": "x", "dataset_subset": ""},
     r"dataset_subset='': must be a non-empty configuration name"),
    ({"dataset": "jsonl", "dataset_path": "x", "template": "human_assistant"},
     r"template='human_assistant': only applies to dataset='json_file'"),
    ({"dataset": "json_file", "dataset_path": "x", "template": "chatml"},
     r"template='chatml': not allowed"),
    ({"dataset": "preset_pt", "dataset_path": "x"},
     r"shuffle=True: preset_pt replays the file's batches in file order; set it to False"),
    ({"max_samples": 0}, r"max_samples=0: must be an integer >= 1"),
    ({"max_samples": True}, r"max_samples=True: must be an integer >= 1"),
])
def test_config_rules(kwargs, pattern):
    with pytest.raises(ValueError, match=r"BaseDataLoader\.Config\." + pattern):
        BaseDataLoader.Config(**kwargs)


def test_config_accepts_the_new_combinations():
    BaseDataLoader.Config(dataset="hf_datasets", dataset_path="d", dataset_subset="alpha")
    BaseDataLoader.Config(dataset="json_file", dataset_path="a.json", template="human_assistant")
    BaseDataLoader.Config(dataset="preset_pt", dataset_path="p.pt", shuffle=False, max_samples=4)
    BaseDataLoader.Config(dataset="dummy", max_samples=1)


def _component(config, *, tokenizer=None, **kw):
    build = {"dp_world_size": 1, "dp_rank": 0, "local_batch_size": 2, "seq_len": 16,
             "tokenizer": tokenizer, **kw}
    return config.build(**build)


def test_component_builds_the_new_types(files):
    tokenizer = HuggingFaceTokenizer.Config().build()
    sft = _component(BaseDataLoader.Config(dataset="json_file",
                                           dataset_path=str(files["alpaca_json"]), shuffle=False),
                     tokenizer=tokenizer, seq_len=64, pad_to_multiple_of=8)
    batches = list(sft)
    assert len(batches) == 2
    lengths = sft.dataset.lengths().tolist()
    for b, batch in enumerate(batches):  # shuffle off: batch b holds samples 2b, 2b + 1
        longest = max(lengths[2 * b: 2 * b + 2])
        assert batch["input_ids"].shape == (2, -(-longest // 8) * 8)
    first = sft.dataset[0]
    n = len(first["input_ids"])
    assert batches[0]["input_ids"][0, :n].tolist() == first["input_ids"].tolist()
    assert (batches[0]["labels"][0, n:] == -100).all()

    hf = _component(BaseDataLoader.Config(dataset="hf_datasets",
                                          dataset_path=str(files["hf_configs"]),
                                          dataset_subset="alpha", max_samples=2),
                    tokenizer=tokenizer)
    assert len(hf.dataset) == 2 and len(hf) == 1

    preset = _component(BaseDataLoader.Config(dataset="preset_pt",
                                              dataset_path=str(files["preset_pt"]),
                                              shuffle=False), vocab_size=FX.PRESET_VOCAB)
    rows = torch.cat([b["input_ids"] for b in FX.preset_batches()])
    assert torch.equal(torch.cat([b["input_ids"] for b in preset]), rows)  # no tokenizer needed


def test_component_errors_name_its_fields(files):
    tokenizer = HuggingFaceTokenizer.Config().build()
    for kind in ("hf_datasets", "json_file"):
        with pytest.raises(ValueError, match=rf"dataset='{kind}' tokenizes text: build the data "
                                             r"loader with tokenizer="):
            _component(BaseDataLoader.Config(dataset=kind, dataset_path="x"))
    with pytest.raises(ValueError, match=r"BaseDataLoader\.Config\.dataset_path='[^']*preset\.pt'"
                                         r": .*sequence length \(training\.seq_len\) is 8"):
        _component(BaseDataLoader.Config(dataset="preset_pt", dataset_path=str(files["preset_pt"]),
                                         shuffle=False), seq_len=8)
    with pytest.raises(ValueError, match=r"BaseDataLoader\.Config\.max_samples=99 is more than "
                                         r"the dataset's 4 samples"):
        _component(BaseDataLoader.Config(dataset="json_file", max_samples=99,
                                         dataset_path=str(files["alpaca_json"])),
                   tokenizer=tokenizer)
    with pytest.raises(ValueError, match=r"BaseDataLoader\.Config\.dataset_path="
                                         r"'someuser/nonexistent-dataset' .*offline"):
        _component(BaseDataLoader.Config(dataset="hf_datasets",
                                         dataset_path="someuser/nonexistent-dataset"),
                   tokenizer=tokenizer)
    with pytest.raises(ValueError, match="pad_to_multiple_of must be a positive int"):
        _component(BaseDataLoader.Config(), num_samples=8, pad_to_multiple_of=0)


def test_data_layer_import_does_not_load_datasets():
    import subprocess
    import sys

    code = ("import sys, hyper_parallel.data, hyper_parallel.components; "
            "print('datasets' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, env=dict(os.environ, OMP_NUM_THREADS="1"), check=True)
    assert out.stdout.strip() == "False"

