"""Unit tests of the image-text data (hyper_parallel.data.vision) and its shipped demo assets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hyper_parallel import assets
from hyper_parallel.data import IGNORE_INDEX, load_tokenizer
from hyper_parallel.data.vision import (
    ImageTextDataset,
    VisionDummyDataset,
    collate_vision,
    image_processor,
    vision_tokens,
)

REPO = Path(__file__).resolve().parents[4]
CORPUS = assets.asset_root() / "vl_corpus"
SPECIALS = ("<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>",
            "<|video_pad|>")
MERGE = 2


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("pkg://tokenizer_vl")


@pytest.fixture(scope="module")
def vt(tok):
    return vision_tokens(tok)


@pytest.fixture(scope="module")
def proc():
    return image_processor("pkg://vl_corpus")


def write_jsonl(path: Path, records: list) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records),
                    encoding="utf-8")
    return str(path)


def image(n: int) -> str:
    """Absolute path of shipped image ``n`` (usable from a jsonl file anywhere)."""
    return str(CORPUS / "images" / f"{n:04d}.png")


def qa(question: str, answer: str) -> list[dict]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def trained_text(tok, sample) -> str:
    labels = sample["labels"]
    return tok.decode(labels[labels != IGNORE_INDEX].tolist())


# ----------------------------------------------------------------------------------------------
# Tokenizer asset and processor settings
# ----------------------------------------------------------------------------------------------


def test_tokenizer_vl_has_the_special_tokens_after_the_base_vocabulary(tok, vt):
    assert [tok.backend.token_to_id(t) for t in SPECIALS] == list(range(2048, 2054))
    assert tok.vocab_size == 2054 and tok.eos_id == tok.pad_id == 0
    base = load_tokenizer(None)
    text = "How many circles?\nthree <|image_pad|>"
    assert tok.encode(text) == base.encode(text)  # same BPE; a literal special stays text
    assert tok.decode(tok.encode(text)) == text
    assert (vt.im_start_token_id, vt.im_end_token_id, vt.vision_start_token_id,
            vt.vision_end_token_id, vt.image_token_id, vt.video_token_id) == tuple(range(2048, 2054))


def test_vision_tokens_names_the_missing_tokens():
    with pytest.raises(ValueError, match=r"<\|image_pad\|>.*<\|vision_start\|>"):
        vision_tokens(load_tokenizer(None))


def test_processor_settings(proc):
    assert (proc.patch_size, proc.temporal_patch_size, proc.merge_size) == (16, 2, 2)
    from PIL import Image

    out = proc(images=[Image.new("RGB", (64, 64)), Image.new("RGB", (96, 64))],
               return_tensors="pt")  # PIL sizes are (width, height)
    assert out["image_grid_thw"].tolist() == [[1, 4, 4], [1, 4, 6]]  # not upscaled
    assert tuple(out["pixel_values"].shape) == (16 + 24, 3 * 2 * 16 * 16)
    default = image_processor(None)
    assert default.patch_size == 16 and list(default.image_mean) == [0.5, 0.5, 0.5]


def test_demo_assets_are_reproducible():
    result = subprocess.run([sys.executable, str(REPO / "scripts" / "make_vl_demo_corpus.py"),
                             "--check"], check=False, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr


# ----------------------------------------------------------------------------------------------
# VisionDummyDataset
# ----------------------------------------------------------------------------------------------


def test_dummy_sample_layout(vt):
    ds = VisionDummyDataset(3, 40, 2054, tokens=vt, grid_thw=(1, 4, 6), exclude_ids=[0])
    sample = ds[1]
    ids, labels = sample["input_ids"], sample["labels"]
    assert ids.dtype == labels.dtype == torch.long and ids.shape == labels.shape == (40,)
    span = 4 * 6 // MERGE**2
    assert ids[0] == vt.vision_start_token_id and ids[span + 1] == vt.vision_end_token_id
    assert (ids[1:span + 1] == vt.image_token_id).all()
    assert (labels[:span + 2] == IGNORE_INDEX).all()
    assert torch.equal(labels[span + 2:], ids[span + 2:])
    assert not set(ids[span + 2:].tolist()) & {*vt.ids, 0}
    assert sample["pixel_values"].dtype == torch.float32
    assert tuple(sample["pixel_values"].shape) == (24, 1536)
    assert sample["image_grid_thw"].tolist() == [[1, 4, 6]]
    assert sample["image_grid_thw"].dtype == torch.long


def test_dummy_is_deterministic_by_seed_and_index(vt):
    def make(seed):
        return VisionDummyDataset(4, 24, 2054, tokens=vt, seed=seed)

    a, b, c = make(7), make(7), make(8)
    for key in ("input_ids", "pixel_values"):
        assert torch.equal(a[2][key], b[2][key])
        assert not torch.equal(a[2][key], a[3][key])
        assert not torch.equal(a[2][key], c[2][key])


def test_dummy_rejects_an_image_that_does_not_fit(vt):
    with pytest.raises(ValueError, match=r"18 tokens.*max_seq_len=16"):
        VisionDummyDataset(1, 16, 2054, tokens=vt, grid_thw=(1, 8, 8))
    with pytest.raises(ValueError, match="multiples of merge_size"):
        VisionDummyDataset(1, 64, 2054, tokens=vt, grid_thw=(1, 3, 4))
    with pytest.raises(ValueError, match="not below vocab_size"):
        VisionDummyDataset(1, 64, 2048, tokens=vt)


# ----------------------------------------------------------------------------------------------
# ImageTextDataset
# ----------------------------------------------------------------------------------------------


def test_shipped_corpus_samples(tok, vt, proc):
    file = CORPUS / "valid.jsonl"
    records = [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines()]
    ds = ImageTextDataset("pkg://vl_corpus/valid.jsonl", tokenizer=tok, max_seq_len=128,
                          processor=proc)
    assert len(ds) == len(records)
    checked = 0
    for record, sample in zip(records, (ds[i] for i in range(len(ds)))):
        ids = sample["input_ids"]
        answers = [m["content"] for m in record["messages"] if m["role"] == "assistant"]
        assert trained_text(tok, sample) == "".join(a + "<|im_end|>" for a in answers)
        trained = sample["labels"] != IGNORE_INDEX
        assert torch.equal(sample["labels"][trained], ids[trained])
        images = record.get("image", [])
        images = [images] if isinstance(images, str) else images
        if not images:
            assert "pixel_values" not in sample
            continue
        grid = sample["image_grid_thw"]
        assert grid.shape == (len(images), 3)
        assert sample["pixel_values"].shape[0] == grid.prod(dim=-1).sum()
        # One span per image, in order, right after "<|im_start|>user\n", never trained.
        pos = len(tok.encode("user\n")) + 1
        for t, h, w in grid.tolist():
            n = t * h * w // MERGE**2
            assert ids[pos] == vt.vision_start_token_id
            assert (ids[pos + 1:pos + 1 + n] == vt.image_token_id).all()
            assert ids[pos + 1 + n] == vt.vision_end_token_id
            pos += n + 2
        assert int((ids == vt.image_token_id).sum()) == int(grid.prod(dim=-1).sum()) // MERGE**2
        assert not trained[ids == vt.image_token_id].any()
        checked += 1
    assert checked > 50


def test_markers_parts_and_text_only(tmp_path, tok, vt, proc):
    file = write_jsonl(tmp_path / "a.jsonl", [
        {"messages": [{"role": "system", "content": "Be brief."},
                      {"role": "user", "content": "Look: <image> and <image>. Which?"},
                      {"role": "assistant", "content": "the first"}],
         "image": [image(0), image(1)]},
        {"messages": [{"role": "user", "content": ["Count", {"type": "image", "image": image(2)}]},
                      {"role": "assistant", "content": [{"type": "text", "text": "two"}]}]},
        {"messages": qa("What comes after one?", "two")},
    ])
    ds = ImageTextDataset(file, tokenizer=tok, max_seq_len=256, processor=proc)
    text = tok.decode(ds[0]["input_ids"].tolist())
    assert text.startswith("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nLook: "
                           "<|vision_start|>")
    assert "<|vision_end|> and <|vision_start|>" in text and text.count("<|vision_start|>") == 2
    assert trained_text(tok, ds[0]) == "the first<|im_end|>"
    assert tok.decode(ds[1]["input_ids"].tolist()).startswith(
        "<|im_start|>user\nCount<|vision_start|><|image_pad|>")
    assert ds[1]["image_grid_thw"].shape == (1, 3)
    assert set(ds[2]) == {"input_ids", "labels"}


def test_truncation_keeps_images_whole(tmp_path, tok, proc):
    long_answer = " ".join(["three red circles"] * 20)
    records = [{"messages": qa("Describe.", long_answer), "image": image(0)},
               {"messages": qa("Describe " * 30 + "<image>", "red"), "image": image(0)}]
    file = write_jsonl(tmp_path / "t.jsonl", records)
    # The record whose image cannot fit is refused when the dataset is built, before step 1,
    # not when a loader worker first draws it.
    with pytest.raises(ValueError, match=rf"{file}:2: .*cannot be cut without splitting an image"):
        ImageTextDataset(file, tokenizer=tok, max_seq_len=32, processor=proc)
    ds = ImageTextDataset(write_jsonl(tmp_path / "first.jsonl", records[:1]), tokenizer=tok,
                          max_seq_len=32, processor=proc)
    sample = ds[0]
    assert sample["input_ids"].shape == (32,)
    assert trained_text(tok, sample).startswith("three red")  # cut inside the answer


@pytest.mark.parametrize(("record", "error", "match"), [
    ({"messages": qa("Colour?", "red"), "image": "missing.png"}, FileNotFoundError,
     "image 'missing.png' not found"),
    ({"conversation": qa("Colour?", "red"), "image": image(0)}, ValueError,
     "no key 'messages'"),
    ({"messages": [{"role": "user", "content": "Colour? <image>"}]}, ValueError,
     "no assistant message"),
    ({"messages": qa("<image> vs <image>", "red"), "image": image(0)}, ValueError,
     "more image placeholders"),
    ({"messages": qa("<image> colour?", "red"), "image": [image(0), image(1)]}, ValueError,
     "2 image"),
    ({"messages": [{"role": "human", "content": "hi"}]}, ValueError, "role 'human'"),
    ("{not json", ValueError, "invalid JSON"),
])
def test_bad_records_name_file_and_line(tmp_path, tok, proc, record, error, match):
    file = write_jsonl(tmp_path / "bad.jsonl", [{"messages": qa("Colour?", "red")}, "", record])
    with pytest.raises(error, match=rf"{file}:3: .*{match}"):
        ImageTextDataset(file, tokenizer=tok, max_seq_len=64, processor=proc)


# ----------------------------------------------------------------------------------------------
# collate_vision
# ----------------------------------------------------------------------------------------------


def fake(ids: list[int], grids: list[list[int]], fill: float) -> dict[str, torch.Tensor]:
    ids_t = torch.tensor(ids)
    sample = {"input_ids": ids_t, "labels": ids_t.clone()}
    if grids:
        grid = torch.tensor(grids)
        rows = int(grid.prod(dim=-1).sum())
        sample["pixel_values"] = fill + torch.arange(rows, dtype=torch.float32)[:, None].expand(
            rows, 4)
        sample["image_grid_thw"] = grid
    return sample


def test_collate_vision_concatenates_in_row_order():
    a = fake([5, 6, 7], [[1, 2, 2]], 100.0)
    b = fake([8], [], 0.0)
    c = fake([9, 9], [[1, 2, 4], [1, 2, 2]], 200.0)
    out = collate_vision([a, b, c], pad_id=3, pad_to_multiple_of=4)
    assert out["input_ids"].tolist() == [[5, 6, 7, 3], [8, 3, 3, 3], [9, 9, 3, 3]]
    assert out["labels"][1].tolist() == [8, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX]
    assert out["image_grid_thw"].tolist() == [[1, 2, 2], [1, 2, 4], [1, 2, 2]]
    assert torch.equal(out["pixel_values"], torch.cat([a["pixel_values"], c["pixel_values"]]))
    assert out["pixel_values"].shape == (4 + 12, 4)

    text_only = collate_vision([b, fake([1, 2], [], 0.0)], pad_id=0)
    assert set(text_only) == {"input_ids", "labels"}

    broken = fake([1], [[1, 2, 2]], 0.0)
    broken["pixel_values"] = broken["pixel_values"][:3]
    with pytest.raises(ValueError, match="3 pixel rows"):
        collate_vision([broken], pad_id=0)


def test_collate_vision_on_dataset_samples(tok, vt, proc):
    ds = ImageTextDataset("pkg://vl_corpus/valid.jsonl", tokenizer=tok, max_seq_len=128,
                          processor=proc)
    samples = [ds[i] for i in range(6)]
    batch = collate_vision(samples, pad_id=tok.pad_id)
    grid = batch["image_grid_thw"]
    assert int((batch["input_ids"] == vt.image_token_id).sum()) == int(grid.prod(-1).sum()) // 4
    assert batch["pixel_values"].shape[0] == int(grid.prod(-1).sum())
