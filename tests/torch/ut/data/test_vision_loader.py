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
    torch.save([{k: v for k, v in b.items() if k != "position_ids"} for b in batches], path)
    replay = _loader(BaseDataLoader.Config(dataset="preset_pt", dataset_path=str(path),
                                           shuffle=False, pin_memory=False))
    for original, replayed in zip(batches, replay):
        assert set(replayed) == set(original)
        assert all(torch.equal(original[k], replayed[k]) for k in original)
    with pytest.raises(ValueError, match="carries images.*no vision tower"):
        _loader(BaseDataLoader.Config(dataset="preset_pt", dataset_path=str(path),
                                      shuffle=False, pin_memory=False), vision=None)
