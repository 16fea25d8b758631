"""A record's size never ends a run mid-epoch (issue 44, item 4).

Qwen's published image processor allows 4096 x 4096 pixels, 16,384 tokens of one image, and a
sample is never cut inside an image. A corpus with one such image deep in its file used to
train until a loader worker drew it and then stop. Now:

* a record's images are resized within what its row can hold (``data.image_budget``: the
  processor's own ``smart_resize`` arithmetic with a lowered ``max_pixels``), so the large
  image trains, smaller;
* a record that cannot fit even at the processor's ``min_pixels`` -- or that misses an image,
  or holds one the processor refuses -- is found when the loader is built, before step 1, from
  the images' headers alone, and every such record is named (``file:line``) in one error,
  which the trainer reports as bad input (``ConfigError``, exit 2).

Every image is made here with PIL.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageFile

from hyper_parallel.components.dataloader import BaseDataLoader
from hyper_parallel.data.vision import image_processor
from hyper_parallel.models.qwen3_5.configuration import FLAVORS

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")

VISION = FLAVORS["debugmodel_vl"].vision_config
VOCAB = FLAVORS["debugmodel_vl"].vocab_size
SEQ = 512
RECORDS = 40
BIG = 36  # the record (0-based) holding the 4096 x 4096 image: in the last batch of 4


def qa(question: str, answer: str) -> list[dict]:
    return [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]


def write_jsonl(path: Path, records: list) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def png(folder: Path, name: str, width: int, height: int) -> str:
    Image.new("RGB", (width, height), (200, 40, 40)).save(folder / name)
    return name


@pytest.fixture(scope="module")
def tokenizer():
    from hyper_parallel.components.tokenizer import HuggingFaceTokenizer

    return HuggingFaceTokenizer.Config(path="pkg://tokenizer_vl").build()


def build(path: str, tokenizer, *, seq_len: int = SEQ, batch: int = 4):
    """The data loader of an image-text run: Qwen's published processor settings (4096 x 4096
    pixels at most) at the debug tower's patch sizes, records in file order."""
    config = BaseDataLoader.Config(dataset="json_file", dataset_path=path, shuffle=False,
                                   pin_memory=False)
    return config.build(dp_world_size=1, dp_rank=0, local_batch_size=batch, seq_len=seq_len,
                        tokenizer=tokenizer, vocab_size=VOCAB, vision=VISION)


# ------------------------------------------------------------------------------ one large image


def test_one_large_image_deep_in_the_corpus_trains_resized_into_its_row(tmp_path, tokenizer,
                                                                         caplog):
    small = png(tmp_path, "small.png", 64, 64)
    big = png(tmp_path, "big.png", 4096, 4096)
    path = write_jsonl(tmp_path / "train.jsonl", [
        {"messages": qa(f"What colour is shape {i}?", "red"), "image": big if i == BIG else small}
        for i in range(RECORDS)])
    with caplog.at_level(logging.WARNING, logger="hyper_parallel.data.image_scan"):
        loader = build(path, tokenizer)
    batches = list(loader)  # the whole epoch: no record stops it
    assert len(batches) == RECORDS // 4
    assert f"1 of {RECORDS} records have their images resized" in caplog.text  # said at start
    grids = torch.cat([b["image_grid_thw"] for b in batches])
    assert grids.shape == (RECORDS, 3)
    # Every other image keeps the processor's size: 64 x 64 scaled up to min_pixels 256 x 256.
    others = torch.cat([grids[:BIG], grids[BIG + 1:]])
    assert (others == torch.tensor([1, 16, 16])).all()
    # The large one is resized to the largest square whose span ends inside the row.
    t, h, w = grids[BIG].tolist()
    assert (t, h) == (1, w) and h < 4096 // 16
    row = batches[BIG // 4]["input_ids"][BIG % 4]
    start = int((row == VISION.vision_start_token_id).nonzero()[0])
    room = SEQ - start - 2  # tokens left for the placeholders after the text before the image
    side = h // 2  # merged tokens per side
    assert side * side <= room < (side + 1) ** 2
    assert int((row == VISION.image_token_id).sum()) == side * side


# ------------------------------------------------------------------------------ refused records


def test_records_that_cannot_train_are_refused_before_step_1_all_named(tmp_path, tokenizer,
                                                                        monkeypatch):
    small = png(tmp_path, "small.png", 64, 64)
    wide = png(tmp_path, "wide.png", 6400, 20)  # an aspect ratio the processor refuses
    (tmp_path / "broken.png").write_bytes(b"not an image")
    good = {"messages": qa("Colour?", "red"), "image": small}
    bad = {
        5: {"messages": qa("<image>" * 12 + "Which is red?", "all"), "image": [small] * 12},
        9: {"messages": qa("Colour?", "red"), "image": "nowhere.png"},
        14: {"messages": qa("Colour?", "red"), "image": "broken.png"},
        20: {"messages": qa("Colour?", "red"), "image": wide},
        23: {"messages": qa("Describe " * 600 + "<image>", "red"), "image": small},
    }
    path = write_jsonl(tmp_path / "train.jsonl", [bad.get(i, good) for i in range(30)])
    decoded = []
    load = ImageFile.ImageFile.load
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda self: decoded.append(self) or
                        load(self))
    with pytest.raises(ValueError) as info:
        build(path, tokenizer)
    message = str(info.value)
    assert message.startswith(f"BaseDataLoader.Config.dataset_path={path!r}: 5 of 30 records "
                              "cannot be trained (found before step 1"), message
    lines = message.splitlines()
    named = [line.strip().split(": ", 1)[0] for line in lines[1:6]]
    assert named == [f"{path}:{n + 1}" for n in sorted(bad)]  # every one, in file order
    assert "cannot be cut without splitting an image" in lines[1]  # 12 images at min_pixels
    assert "image 'nowhere.png' not found" in lines[2]
    assert "cannot read image 'broken.png'" in lines[3]
    assert "aspect ratio over 200" in lines[4]
    assert "cannot be cut without splitting an image" in lines[5]  # the text before the image
    assert "raise training.seq_len or lower the image processor's min_pixels" in lines[-1]
    assert decoded == []  # headers only


def test_max_samples_reads_and_checks_only_the_records_it_keeps(tmp_path, tokenizer):
    small = png(tmp_path, "small.png", 64, 64)
    rows = [{"messages": qa("Colour?", "red"), "image": small}] * 8
    rows[6] = {"messages": qa("Colour?", "red"), "image": "nowhere.png"}
    path = write_jsonl(tmp_path / "train.jsonl", rows)

    def loader(max_samples):
        config = BaseDataLoader.Config(dataset="json_file", dataset_path=path, shuffle=False,
                                       pin_memory=False, max_samples=max_samples)
        return config.build(dp_world_size=1, dp_rank=0, local_batch_size=2, seq_len=SEQ,
                            tokenizer=tokenizer, vocab_size=VOCAB, vision=VISION)

    assert len(loader(4).dataset) == 4  # record 7 is not among them
    with pytest.raises(FileNotFoundError, match=rf"{path}:7: image 'nowhere.png' not found"):
        loader(8)


def test_the_trainer_reports_them_as_bad_input_before_building_the_model(tmp_path):
    """Through the engine: a ``ConfigError`` (exit 2 at the entries) before the model is
    built, naming the record."""
    from hyper_parallel.models.qwen3_5_v2.config_registry import qwen3_5_v2_debugmodel_vl
    from hyper_parallel.utils.errors import ConfigError

    small = png(tmp_path, "small.png", 64, 64)
    rows = [{"messages": qa("Colour?", "red"), "image": small}] * 7
    # 60 images: at least 3 tokens each with their start and end, past a row of 128.
    rows.append({"messages": qa("<image>" * 60 + "Which?", "all"), "image": [small] * 60})
    path = write_jsonl(tmp_path / "train.jsonl", rows)
    config = qwen3_5_v2_debugmodel_vl()
    config = dataclasses.replace(
        config, dump_folder=str(tmp_path / "out"),
        dataloader=dataclasses.replace(config.dataloader, dataset_path=path),
        training=dataclasses.replace(config.training, steps=2))
    with pytest.raises(ConfigError, match=rf"{path}:8: its 60 image\(s\) end at token \d+ even "
                                          r"at the image processor's smallest size"):
        config.build().close()


# ------------------------------------------------------------------------------ the arithmetic


@pytest.fixture(scope="module")
def qwen():
    """Qwen's published settings (256 x 256 .. 4096 x 4096 pixels) at patch 16, merge 2."""
    return image_processor(None)


SIDES = st.integers(1, 6000)


@settings(max_examples=300, deadline=None, database=None)
@given(sizes=st.lists(st.tuples(SIDES, SIDES).filter(lambda s: max(s) <= 200 * min(s)),
                      min_size=1, max_size=4),
       text_before=st.integers(0, 3000), max_seq_len=st.integers(1, 20000))
@example(sizes=[(4096, 4096)], text_before=10, max_seq_len=512)  # the image
def test_a_planned_record_ends_inside_its_row(qwen, sizes, text_before, max_seq_len):
    from hyper_parallel.data.image_budget import fit_images, image_tokens, pixel_range

    low, high = pixel_range(qwen)
    fit = fit_images(qwen, sizes, text_before=text_before, max_seq_len=max_seq_len)
    assert low <= fit.max_pixels <= high
    assert fit.tokens == tuple(image_tokens(qwen, h, w, fit.max_pixels) for h, w in sizes)
    assert fit.images_end == text_before + sum(fit.tokens) + 2 * len(sizes)
    assert fit.fits == (fit.images_end <= max_seq_len)
    at_full = fit_images(qwen, sizes, text_before=text_before, max_seq_len=10**9)
    if at_full.images_end <= max_seq_len:  # fits as the processor makes it: left alone
        assert fit == at_full and not fit.scaled
    elif fit.fits:  # scaled, to the largest budget that fits
        assert fit.scaled and fit.max_pixels < high
        above = [image_tokens(qwen, h, w, fit.max_pixels + 1) for h, w in sizes]
        assert text_before + sum(above) + 2 * len(sizes) > max_seq_len
    else:  # nothing fits: reported at min_pixels, where the images are smallest
        assert fit.max_pixels == low


@settings(max_examples=25, deadline=None, database=None)
@given(sizes=st.lists(st.tuples(st.integers(8, 700), st.integers(8, 700)), min_size=1,
                      max_size=3),
       max_seq_len=st.integers(40, 300))
def test_the_processor_makes_the_planned_grids(qwen, sizes, max_seq_len):
    """The plan is the processor's own arithmetic: given the plan's budget, it makes exactly
    the planned grids (decoded images, not only headers)."""
    from hyper_parallel.data.image_budget import fit_images, pixel_range

    fit = fit_images(qwen, sizes, text_before=5, max_seq_len=max_seq_len)
    images = [Image.new("RGB", (w, h)) for h, w in sizes]
    out = qwen(images=images, size={"shortest_edge": pixel_range(qwen)[0],
                                    "longest_edge": fit.max_pixels}, return_tensors="pt")
    tokens = (out["image_grid_thw"].prod(-1) // 4).tolist()
    assert tuple(tokens) == fit.tokens
