"""Image-text Qwen3.5 against transformers' ``Qwen3_5ForConditionalGeneration`` and
``Qwen3_5MoeForConditionalGeneration``: small random models saved with ``save_pretrained``,
loaded the way ``model.weights_path`` loads them, with images in the batch.

What is held, and to what standard:

* the vision tower's features and the three-row positions: bit for bit (the same operators in
  the same order as transformers' ``get_image_features`` and ``get_rope_index``);
* the first-step loss (relative ``TOL``) and every gradient (tower, merger, decoder, head;
  within ``GRAD_ULPS_OF_MODEL_MAX`` fp32 ulps of the model's largest gradient): the text and
  MoE models' own standard (``test_qwen3_5_parity.py``, ``test_qwen3_5_moe_model.py``). The
  decoder's Gated DeltaNet runs a chunked recurrence whose sums are grouped differently from
  transformers' reference: a last-bits difference that starts there and only there (the
  tower's features agree exactly) and flows back into the tower's gradients;
* the export: our Hugging Face export loads in transformers as the same class, with the same
  logits on the same images, and keeps the tower.
"""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")

from hyper_parallel.models.qwen3_5 import Qwen3_5Config, Qwen3_5ForCausalLM, hf_io
from hyper_parallel.models.qwen3_5.state_dict_adapter import Qwen3_5StateDictAdapter
from hyper_parallel.models.qwen3_5.vision_positions import decoder_positions
from hyper_parallel.models.qwen3_5_moe.configuration import Qwen3_5MoeConfig
from hyper_parallel.models.qwen3_5_moe.model import Qwen3_5MoeForCausalLM
from hyper_parallel.models.qwen3_5_moe.state_dict_adapter import Qwen3_5MoeStateDictAdapter
from hyper_parallel.runtime.loss import token_loss_sum
from hyper_parallel.runtime.model_setup import load_pretrained_weights

TOL = 1e-4
GRAD_ULPS_OF_MODEL_MAX = 32
IMAGE, VIDEO, START, END = 300, 301, 302, 303
PATCH, MERGE = 4, 2
GRIDS = [[1, 4, 4], [1, 4, 8], [2, 2, 2]]  # 4, 8 and 2 (two frames) placeholder tokens

_TEXT = dict(
    vocab_size=320,
    hidden_size=64,
    num_hidden_layers=4,
    full_attention_interval=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=16,
    linear_value_head_dim=24,
    initializer_range=0.07,
    rope_parameters={
        "rope_type": "default",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.25,
        "mrope_section": [2, 1, 1],
    },
)
_VISION = dict(
    depth=2,
    hidden_size=48,
    intermediate_size=80,
    num_heads=4,
    patch_size=PATCH,
    temporal_patch_size=2,
    spatial_merge_size=MERGE,
    num_position_embeddings=16,
    out_hidden_size=64,
    initializer_range=0.05,
)
_TOKENS = dict(
    image_token_id=IMAGE, video_token_id=VIDEO, vision_start_token_id=START,
    vision_end_token_id=END,
)
FAMILIES = {
    "dense": (
        lambda: transformers.Qwen3_5Config(
            text_config=transformers.Qwen3_5TextConfig(intermediate_size=96, **_TEXT).to_dict(),
            vision_config=_VISION,
            **_TOKENS,
        ),
        transformers.Qwen3_5ForConditionalGeneration,
        Qwen3_5Config,
        Qwen3_5ForCausalLM,
        Qwen3_5StateDictAdapter,
    ),
    "moe": (
        lambda: transformers.Qwen3_5MoeConfig(
            text_config=transformers.Qwen3_5MoeTextConfig(
                num_experts=4,
                num_experts_per_tok=2,
                moe_intermediate_size=32,
                shared_expert_intermediate_size=48,
                **_TEXT,
            ).to_dict(),
            vision_config=_VISION,
            **_TOKENS,
        ),
        transformers.Qwen3_5MoeForConditionalGeneration,
        Qwen3_5MoeConfig,
        Qwen3_5MoeForCausalLM,
        Qwen3_5MoeStateDictAdapter,
    ),
}


def _batch(seed: int = 1) -> dict[str, torch.Tensor]:
    """Two rows of 48 tokens: row 0 holds images 0 and 1, row 1 image 2; image spans are
    ``START, IMAGE * n, END``; labels are -100 on them, the ids elsewhere."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 290, (2, 48), generator=g)
    spans = [(0, 3, 4), (0, 20, 8), (1, 30, 2)]
    for row, at, n in spans:
        ids[row, at] = START
        ids[row, at + 1 : at + 1 + n] = IMAGE
        ids[row, at + 1 + n] = END
    labels = ids.clone()
    labels[(ids == IMAGE) | (ids == START) | (ids == END)] = -100
    grid = torch.tensor(GRIDS)
    patches = int(grid.prod(-1).sum())
    pixels = torch.randn(patches, 3 * 2 * PATCH * PATCH, generator=g)
    return {"input_ids": ids, "labels": labels, "pixel_values": pixels, "image_grid_thw": grid}


def _models(family: str, tmp_path):
    make_config, hf_class, our_config_class, our_class, adapter = FAMILIES[family]
    torch.manual_seed(0)
    hf = hf_class(make_config()).eval()
    with torch.no_grad():  # identity norms would hide a layout mistake: perturb them
        for name, p in hf.named_parameters():
            if name.endswith(("norm.weight", "norm1.weight", "norm2.weight", "dt_bias")):
                p.add_(torch.randn_like(p) * 0.1)
    hf.save_pretrained(tmp_path)
    config = our_config_class.from_hf_dict(json.loads((tmp_path / "config.json").read_text()))
    ours = our_class(config).eval()
    load_pretrained_weights(ours, str(tmp_path), adapter=adapter, model_config=config)
    return hf, ours, config, adapter


def _hf_logits(hf, batch):
    return hf(
        input_ids=batch["input_ids"],
        pixel_values=batch["pixel_values"],
        image_grid_thw=batch["image_grid_thw"],
        mm_token_type_ids=(batch["input_ids"] == IMAGE).int(),
        use_cache=False,
    ).logits


def _ours_logits(ours, batch):
    return ours(
        batch["input_ids"],
        pixel_values=batch["pixel_values"],
        image_grid_thw=batch["image_grid_thw"],
    )


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_tower_and_positions_bit_identical(family, tmp_path):
    hf, ours, config, _ = _models(family, tmp_path)
    assert config.vision_config is not None and config.vision_config.depth == 2
    batch = _batch()
    with torch.no_grad():
        ref = torch.cat(hf.model.get_image_features(batch["pixel_values"],
                                                    batch["image_grid_thw"]).pooler_output)
        got = ours.model.visual(batch["pixel_values"], batch["image_grid_thw"])
    assert got.shape == (14, 64)
    assert torch.equal(got, ref)
    ref_pos, _ = hf.model.get_rope_index(
        batch["input_ids"], (batch["input_ids"] == IMAGE).int(),
        image_grid_thw=batch["image_grid_thw"],
    )
    got_pos = decoder_positions(batch["input_ids"], batch["image_grid_thw"],
                                image_token_id=IMAGE, merge=MERGE)
    assert torch.equal(got_pos, ref_pos)
    # Image tokens really are three-dimensional: the rows differ inside an image span.
    assert not torch.equal(got_pos[1], got_pos[2])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_first_step_loss_and_every_gradient_match(family, tmp_path):
    hf, ours, config, adapter = _models(family, tmp_path)
    batch = _batch(seed=2)
    losses = {}
    for name, model, logits_fn in (("hf", hf, _hf_logits), ("ours", ours, _ours_logits)):
        loss_sum, count = token_loss_sum(logits_fn(model, batch), batch["labels"])
        loss = loss_sum / count
        loss.backward()
        losses[name] = loss.item()
    assert abs(losses["hf"] - losses["ours"]) <= TOL * abs(losses["hf"])
    # Compared in our names: the adapter converts transformers' (in-memory) gradient layout.
    grads = {n: p.grad for n, p in ours.named_parameters()}
    hf_grads = adapter.from_hf(
        {n: p.grad for n, p in hf.named_parameters()}, config, strict=False
    )
    assert set(grads) - {n for n in grads if n.endswith("expert_bias")} <= set(hf_grads)
    # The Gated DeltaNet's rounding reaches parameters whose gradients are tiny (dt_bias,
    # A_log), so each difference is measured against the model's largest gradient, as the
    # text and MoE tests do (there: at most 32 fp32 ulps of it).
    model_max = max(g.abs().max().item() for g in hf_grads.values())
    worst = {
        name: (got - hf_grads[name]).abs().max().item() / model_max
        for name, got in grads.items()
        if got is not None  # the expert bias: balanced without gradients
    }
    tower = [n for n in grads if n.startswith("model.visual.")]
    assert tower and all(grads[n].abs().max() > 0 for n in tower)  # the images reach the loss
    ulps = max(worst.values()) / torch.finfo(torch.float32).eps
    print(f"\n{family} VL parity: loss {losses['ours']:.6f} vs {losses['hf']:.6f}; worst grad "
          f"diff {ulps:.1f} fp32 ulps of the model's largest gradient "
          f"({max(worst, key=worst.get)})")
    assert ulps <= GRAD_ULPS_OF_MODEL_MAX


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_export_loads_in_transformers_with_same_logits(family, tmp_path):
    hf, ours, config, adapter = _models(family, tmp_path / "source")
    export = tmp_path / "export"
    hf_io.save_hf_checkpoint(adapter.to_hf(ours.state_dict(), config), export, config)
    saved = json.loads((export / "config.json").read_text())
    assert saved["model_type"] == config.HF_IMAGE_TEXT_MODEL_TYPE
    assert saved["architectures"] == [config.HF_IMAGE_TEXT_ARCHITECTURE]
    reloaded = transformers.AutoModelForImageTextToText.from_pretrained(export).eval()
    assert type(reloaded).__name__ == config.HF_IMAGE_TEXT_ARCHITECTURE
    batch = _batch(seed=3)
    with torch.no_grad():
        assert torch.equal(_hf_logits(reloaded, batch), _hf_logits(hf, batch))
        diff = (_ours_logits(ours, batch) - _hf_logits(reloaded, batch)).abs().max().item()
    assert diff <= TOL


def test_text_only_batches_on_an_image_text_model_use_text_positions(tmp_path):
    hf, ours, _, _ = _models("dense", tmp_path)
    ids = _batch()["input_ids"].clamp(max=290)  # no placeholders
    with torch.no_grad():
        diff = (ours(ids) - hf(input_ids=ids, use_cache=False).logits).abs().max().item()
    assert diff <= TOL


def test_placeholder_count_must_match_the_images(tmp_path):
    _, ours, _, _ = _models("dense", tmp_path)
    batch = _batch()
    batch["input_ids"][0, 5] = 7  # one placeholder fewer
    with pytest.raises(ValueError, match="placeholder"):
        _ours_logits(ours, batch)
    text_only = Qwen3_5ForCausalLM(Qwen3_5Config(**{
        k: v for k, v in ours.config.__dict__.items() if k in Qwen3_5Config.__dataclass_fields__
        and k != "vision_config"}))
    with pytest.raises(ValueError, match="no vision tower"):
        _ours_logits(text_only, _batch())


def test_row_aligned_images_are_the_same_forward(tmp_path):
    """A pipeline micro-batch carries its images row-aligned (the schedule cuts inputs along
    rows): the model unpacks them into the same forward, bit for bit."""
    from hyper_parallel.models.qwen3_5.vision_positions import row_images
    from hyper_parallel.runtime.pipeline_step import with_row_images

    _, ours, _, _ = _models("dense", tmp_path)
    batch = _batch()
    batch["position_ids"] = decoder_positions(batch["input_ids"], batch["image_grid_thw"],
                                              image_token_id=IMAGE, merge=MERGE)
    batch["images_per_row"] = torch.tensor([2, 1])
    rows = with_row_images([batch])
    assert rows["pixel_values"].shape[:2] == (2, 48) and rows["image_grid_thw"].shape == (2, 2, 3)
    assert rows["image_grid_thw"][1, 1].tolist() == [0, 0, 0]  # row 1: one image, padded
    with torch.no_grad():
        flat = ours(batch["input_ids"], position_ids=batch["position_ids"],
                    pixel_values=batch["pixel_values"], image_grid_thw=batch["image_grid_thw"])
        aligned = ours(rows["input_ids"], position_ids=rows["position_ids"],
                       pixel_values=rows["pixel_values"], image_grid_thw=rows["image_grid_thw"])
        # A micro-batch of the second row alone: its image only (the last 2 x 2 x 2 patches).
        alone = ours(rows["input_ids"][1:], position_ids=rows["position_ids"][1:],
                     pixel_values=rows["pixel_values"][1:],
                     image_grid_thw=rows["image_grid_thw"][1:])
        row_1 = ours(batch["input_ids"][1:], position_ids=batch["position_ids"][:, 1:],
                     pixel_values=batch["pixel_values"][-8:],
                     image_grid_thw=batch["image_grid_thw"][2:])
    assert torch.equal(flat, aligned)
    assert torch.equal(alone, row_1)
    assert row_images  # the packer the pipeline step uses
