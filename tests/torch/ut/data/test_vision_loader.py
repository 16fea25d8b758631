"""Image-text batches through the data loader component: ``vl_dummy``, ``json_file`` chat
records with images, ``preset_pt`` batches carrying ``pixel_values`` / ``image_grid_thw`` --
each made for the model's vision tower, and refused with the fix where the model has none."""

from __future__ import annotations

import pytest
import torch

from hyper_parallel.components.dataloader import BaseDataLoader
from hyper_parallel.models.qwen3_5.configuration import FLAVORS

VISION = FLAVORS["debugmodel_vl"].vision_config
VOCAB = FLAVORS["debugmodel_vl"].vocab_size


def _loader(config, *, vision=VISION, tokenizer=None, seq_len=64, batch=2):
    return config.build(dp_world_size=1, dp_rank=0, local_batch_size=batch, seq_len=seq_len,
                        tokenizer=tokenizer, vocab_size=VOCAB, num_samples=8, vision=vision)


def _vl_tokenizer():
    from hyper_parallel.components.tokenizer import HuggingFaceTokenizer

    return HuggingFaceTokenizer.Config(path="pkg://tokenizer_vl").build()


def test_image_batches_carry_the_towers_positions():
    from hyper_parallel.models.qwen3_5.vision_positions import decoder_positions

    batch = next(iter(_loader(BaseDataLoader.Config(dataset="vl_dummy", pin_memory=False,
                                                    vl_grid_h=4, vl_grid_w=4))))
    expected = decoder_positions(batch["input_ids"], batch["image_grid_thw"],
                                 image_token_id=VISION.image_token_id,
                                 merge=VISION.spatial_merge_size)
    assert torch.equal(batch["position_ids"], expected)
    assert not torch.equal(expected[1], expected[2])  # three rows: image tokens have 2-D places


def test_vl_dummy_batches_follow_the_grid_and_the_tower():
    loader = _loader(BaseDataLoader.Config(dataset="vl_dummy", pin_memory=False, shuffle=False,
                                           vl_grid_t=2, vl_grid_h=4, vl_grid_w=2))
    batch = next(iter(loader))
    assert batch["input_ids"].shape == (2, 64)
    assert batch["image_grid_thw"].tolist() == [[2, 4, 2], [2, 4, 2]]
    assert batch["pixel_values"].shape == (2 * 16, VISION.patch_dim)
    placeholders = (batch["input_ids"] == VISION.image_token_id).sum(dim=1)
    assert placeholders.tolist() == [4, 4]  # 2 * 4 * 2 patches / (2 x 2 merge)
    assert (batch["labels"][batch["input_ids"] == VISION.image_token_id] == -100).all()
    again = next(iter(_loader(BaseDataLoader.Config(
        dataset="vl_dummy", pin_memory=False, shuffle=False, vl_grid_t=2, vl_grid_h=4,
        vl_grid_w=2))))
    assert all(torch.equal(batch[k], again[k]) for k in batch)


def test_image_data_without_a_tower_names_the_fix():
    with pytest.raises(ValueError, match="no vision tower.*debugmodel_vl"):
        _loader(BaseDataLoader.Config(dataset="vl_dummy", pin_memory=False), vision=None)


def test_a_grid_the_merge_cannot_join_names_the_fields():
    with pytest.raises(ValueError, match=r"vl_grid_t/h/w=\(2, 3, 2\).*multiples of merge_size"):
        _loader(BaseDataLoader.Config(dataset="vl_dummy", pin_memory=False, vl_grid_h=3))


def test_chat_records_with_images_from_the_demo_corpus():
    loader = _loader(BaseDataLoader.Config(dataset="json_file", shuffle=False, pin_memory=False,
                                           dataset_path="pkg://vl_corpus/valid.jsonl",
                                           processor_path="pkg://vl_corpus"),
                     tokenizer=_vl_tokenizer(), seq_len=128, batch=4)
    batch = next(iter(loader))
    grid = batch["image_grid_thw"]
    assert batch["pixel_values"].shape == (int(grid.prod(-1).sum()), VISION.patch_dim)
    assert int((batch["input_ids"] == VISION.image_token_id).sum()) == int(
        grid.prod(-1).sum()) // VISION.merge_unit
    trained = batch["labels"] != -100
    assert trained.any() and not (trained & (batch["input_ids"] == VISION.image_token_id)).any()


def test_a_tokenizer_without_the_vision_tokens_is_refused():
    from hyper_parallel.components.tokenizer import HuggingFaceTokenizer

    with pytest.raises(ValueError, match=r"no <\|image_pad\|>.*pkg://tokenizer_vl"):
        _loader(BaseDataLoader.Config(dataset="json_file", pin_memory=False,
                                      dataset_path="pkg://vl_corpus/valid.jsonl"),
                tokenizer=HuggingFaceTokenizer.Config().build(), seq_len=128)


def test_preset_batches_replay_their_images(tmp_path):
    source = _loader(BaseDataLoader.Config(dataset="vl_dummy", pin_memory=False, shuffle=False,
                                           vl_grid_h=4, vl_grid_w=4))
    batches = [b for _, b in zip(range(3), source)]
    assert all(b["position_ids"].shape == (3, *b["input_ids"].shape) for b in batches)
    path = tmp_path / "batches.pt"
    # The processor's outputs by transformers' names; the positions are the loader's to make.
    made_by_the_loader = ("position_ids", "images_per_row")
    torch.save([{k: v for k, v in b.items() if k not in made_by_the_loader} for b in batches],
               path)
    replay = _loader(BaseDataLoader.Config(dataset="preset_pt", dataset_path=str(path),
                                           shuffle=False, pin_memory=False))
    for original, replayed in zip(batches, replay):
        assert set(replayed) == set(original)
        assert all(torch.equal(original[k], replayed[k]) for k in original)
    with pytest.raises(ValueError, match="carries images.*no vision tower"):
        _loader(BaseDataLoader.Config(dataset="preset_pt", dataset_path=str(path),
                                      shuffle=False, pin_memory=False), vision=None)


def test_a_row_split_takes_its_rows_images():
    """Expert parallelism's split of a batch's rows: each share gets its rows' images, and a
    share without any gets no image keys."""
    from hyper_parallel.data import split_rows
    from hyper_parallel.data.vision import collate_vision

    tokens = VISION.tokens_per_image(1, 4, 4)
    samples = []
    for row, images in enumerate([1, 0, 2, 1]):
        ids = torch.full((48,), 7)
        for i in range(images):
            ids[1 + i * (tokens + 2):1 + i * (tokens + 2) + tokens] = VISION.image_token_id
        sample = {"input_ids": ids, "labels": ids.clone()}
        if images:
            sample["pixel_values"] = torch.full((16 * images, VISION.patch_dim), float(row))
            sample["image_grid_thw"] = torch.tensor([[1, 4, 4]] * images)
        samples.append(sample)
    batch = collate_vision(samples, pad_id=0, positions=VISION.decoder_positions)
    assert batch["images_per_row"].tolist() == [1, 0, 2, 1]
    halves = [split_rows(batch, rank, 2) for rank in range(2)]
    assert halves[0]["pixel_values"][:, 0].unique().tolist() == [0.0]
    assert halves[0]["image_grid_thw"].shape == (1, 3)
    assert halves[1]["pixel_values"][:, 0].unique().tolist() == [2.0, 3.0]
    assert halves[1]["image_grid_thw"].shape == (3, 3)
    assert torch.equal(halves[1]["position_ids"], batch["position_ids"][:, 2:])
    quarters = [split_rows(batch, rank, 4) for rank in range(4)]
    assert "pixel_values" not in quarters[1] and quarters[1]["input_ids"].shape == (1, 48)
    for share, (first, last) in zip(halves, ((0, 2), (2, 4))):
        expected = VISION.decoder_positions(batch["input_ids"][first:last],
                                            share["image_grid_thw"])
        assert torch.equal(share["position_ids"], expected)
