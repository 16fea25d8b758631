"""Checkpoints that stay whole: an image-text run (and a text-only run) started from a published
layout -- ``model.visual.*``, ``model.language_model.*``, ``lm_head``, ``mtp.*`` -- exports a
checkpoint holding all of it: what it trained, the tower, and the MTP head carried unchanged.
The export loads in transformers as the same image-text class, with our logits on images.

The source is a debug image-text checkpoint in the published layout, written by our own export
path plus MTP tensors (transformers has no MTP module to write them); the runs go through the
engine (``model.weights_path``), one rank, CPU.
"""

from __future__ import annotations

import json

import pytest
import torch

from hyper_parallel.models.qwen3_5 import hf_io
from hyper_parallel.models.qwen3_5.configuration import FLAVORS
from hyper_parallel.models.qwen3_5.model import Qwen3_5ForCausalLM
from hyper_parallel.models.qwen3_5.state_dict_adapter import Qwen3_5StateDictAdapter

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SOURCE_CONFIG = FLAVORS["debugmodel_vl"].replace(num_hidden_layers=2, full_attention_interval=2)
MTP = {
    "mtp.fc.weight": torch.arange(12.0).reshape(3, 4),
    "mtp.norm.weight": torch.full((4,), 0.5),
}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A published-layout image-text checkpoint (2 shards, with MTP tensors)."""
    torch.manual_seed(11)
    model = Qwen3_5ForCausalLM(SOURCE_CONFIG)
    model.init_weights()
    state = Qwen3_5StateDictAdapter.to_hf(model.state_dict(), SOURCE_CONFIG)
    assert any(k.startswith("model.visual.") for k in state)
    folder = tmp_path_factory.mktemp("published")
    hf_io.save_hf_checkpoint({**state, **MTP}, folder, SOURCE_CONFIG, max_shard_bytes=2_000_000)
    return folder


@pytest.fixture(autouse=True)
def _no_group_left():
    yield
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def _run(tmp_path, source, overrides, dataset):
    import os

    from hyper_parallel.components.checkpoint import CheckpointManager
    from hyper_parallel.components.dataloader import BaseDataLoader
    from hyper_parallel.config.configs import ModelConfig, TrainingConfig
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    config = HyperTrainer.Config(
        model=ModelConfig(name="qwen3_5", weights_path=str(source), config_overrides=overrides),
        training=TrainingConfig(steps=2, seq_len=32, global_batch_size=2, local_batch_size=1),
        dataloader=BaseDataLoader.Config(dataset=dataset, pin_memory=False, vl_grid_h=4),
        checkpoint=CheckpointManager.Config(folder=str(tmp_path / "out"), interval=2,
                                            export_hf=True),
    )
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        trainer = config.build()
        trainer.train()
    finally:
        os.chdir(cwd)
    return tmp_path / "out" / "step_2" / "hf_ckpt", trainer


def _tensors(folder):
    return hf_io.load_hf_checkpoint(folder)


def test_image_text_run_exports_the_whole_checkpoint(tmp_path, source):
    export, trainer = _run(
        tmp_path, source,
        {"flavor": "debugmodel_vl", "num_hidden_layers": 2, "full_attention_interval": 2},
        "vl_dummy",
    )
    before, after = _tensors(source), _tensors(export)
    assert set(after) == set(before)  # tower, decoder, head, and the MTP head
    for name, value in MTP.items():
        assert torch.equal(after[name], value), name  # carried unchanged
    trained = [n for n in before if n.startswith("model.visual.")
               and not torch.equal(before[n], after[n])]
    assert trained, "the tower trained (images in every batch)"
    config = json.loads((export / "config.json").read_text())
    assert config["architectures"] == ["Qwen3_5ForConditionalGeneration"]

    reloaded = transformers.AutoModelForImageTextToText.from_pretrained(export).eval()
    assert type(reloaded).__name__ == "Qwen3_5ForConditionalGeneration"
    batch = next(iter(trainer.train_dataloader))
    model = trainer.model_parts[0].eval()
    with torch.no_grad():
        ours = model(batch["input_ids"], pixel_values=batch["pixel_values"],
                     image_grid_thw=batch["image_grid_thw"])
        theirs = reloaded(
            input_ids=batch["input_ids"], pixel_values=batch["pixel_values"],
            image_grid_thw=batch["image_grid_thw"], use_cache=False,
            mm_token_type_ids=(batch["input_ids"] == SOURCE_CONFIG.vision_config.image_token_id
                               ).int(),
        ).logits
    assert (ours - theirs).abs().max().item() <= 1e-4


def test_text_only_run_carries_the_tower_and_mtp(tmp_path, source):
    """The text decoder alone, from the image-text checkpoint: the tower is not built (nor
    trained), and the export is still the image-text checkpoint, the tower as it was."""
    export, trainer = _run(
        tmp_path, source,
        {"flavor": "debugmodel", "vocab_size": SOURCE_CONFIG.vocab_size, "num_hidden_layers": 2,
         "full_attention_interval": 2},
        "dummy",
    )
    assert not any("visual" in n for n, _ in trainer.model_parts[0].named_parameters())
    before, after = _tensors(source), _tensors(export)
    assert set(after) == set(before)
    for name in before:
        if name.startswith(("model.visual.", "mtp.")):
            assert torch.equal(after[name], before[name]), name
    assert not torch.equal(after["lm_head.weight"], before["lm_head.weight"])  # it trained
    config = json.loads((export / "config.json").read_text())
    assert config["model_type"] == "qwen3_5" and "vision_config" in config
    reloaded = transformers.AutoModelForImageTextToText.from_pretrained(export)
    assert type(reloaded).__name__ == "Qwen3_5ForConditionalGeneration"


def test_a_source_gone_since_the_start_is_said(tmp_path, caplog):
    from hyper_parallel.runtime.checkpoint.carried import carried_weights

    with caplog.at_level("WARNING"):
        assert carried_weights(tmp_path / "moved", Qwen3_5StateDictAdapter, SOURCE_CONFIG) is None
    assert "is gone" in caplog.text and "not whole" in caplog.text


def test_carried_weights_read_from_the_headers(source):
    from hyper_parallel.runtime.checkpoint.carried import carried_weights

    carry = carried_weights(source, Qwen3_5StateDictAdapter, SOURCE_CONFIG)
    assert {s.name for s in carry.specs} == set(MTP)
    assert all(torch.equal(t, MTP[n]) for n, t in carry.tensors())
    text_only = SOURCE_CONFIG.replace(vision_config=None)
    names = {s.name for s in carried_weights(source, Qwen3_5StateDictAdapter, text_only).specs}
    assert set(MTP) < names and all(n.startswith(("mtp.", "model.visual.")) for n in names)
