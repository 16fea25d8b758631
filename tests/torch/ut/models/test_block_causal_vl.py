"""A packed image-text row equals its samples run alone by transformers.

``attn_mask_type: block_causal`` with images (``data.packing`` of chat records): two rows of
several samples each -- samples with one and two images, an image of two frames, samples longer
than a delta-rule chunk (64) and shorter than the convolution window (4), padding at a row's
end -- through our image-text model, against transformers' ``Qwen3_5ForConditionalGeneration``
and ``Qwen3_5MoeForConditionalGeneration`` run on each sample alone with its own images. The
logits and every gradient (tower, merger, decoder, head) agree within ``TOL``, the bound the
text model's packed-row test holds (``test_block_causal.py``: the Gated DeltaNet's chunked sums
round differently from transformers', and a packed sample's chunks start elsewhere than its
own). The rows' three-row positions are the loader's (``decoder_positions`` with the packed
rows' 1-D positions); a model handed the 1-D positions makes the same.
"""

from __future__ import annotations

import json

import pytest
import torch

from hyper_parallel.data.packing import sample_positions
from hyper_parallel.models.qwen3_5.vision_positions import decoder_positions
from hyper_parallel.runtime.loss import token_loss_sum
from hyper_parallel.runtime.model_setup import load_pretrained_weights
from hyper_parallel.utils.documents import Documents

transformers = pytest.importorskip("transformers")

from tests.torch.ut.models.test_qwen3_5_vl_parity import (
    END,
    FAMILIES,
    IMAGE,
    MERGE,
    PATCH,
    START,
)

TOL = 1e-4  # test_block_causal.py's bound for a packed row against its documents alone
IGNORE = -100
PATCH_DIM = 3 * 2 * PATCH * PATCH
SEQ = 200
# Each sample: (text before, images (t, h, w) each with its span, text after) -- a text
# token first, as a chat record's <|im_start|>. Row 0: 70 (> a chunk), 3 and 2 (< the conv
# window), 60, 65 tokens; row 1: 130 with two images, 3, 62, then 5 tokens of padding.
ROWS = (
    ((5, [(1, 4, 4)], 59), (3, [], 0), (2, [], 0), (1, [(1, 4, 8)], 49),
     (20, [(2, 2, 2)], 41)),
    ((9, [(1, 4, 8), (1, 4, 4)], 105), (3, [], 0), (62, [], 0)),
)


def _sample(spec, g):
    """One sample: ids, labels (-100 on image spans), pixels and grids of its images."""
    before, grids, after = spec
    ids = [int(i) for i in torch.randint(0, 290, (before,), generator=g)]
    for t, h, w in grids:
        ids += [START] + [IMAGE] * (t * h * w // MERGE**2) + [END]
    ids += [int(i) for i in torch.randint(0, 290, (after,), generator=g)]
    ids = torch.tensor(ids)
    labels = ids.masked_fill((ids == IMAGE) | (ids == START) | (ids == END), IGNORE)
    patches = sum(t * h * w for t, h, w in grids)
    return {"input_ids": ids, "labels": labels,
            "pixel_values": torch.randn(patches, PATCH_DIM, generator=g),
            "image_grid_thw": torch.tensor(grids, dtype=torch.long).view(-1, 3)}


def _packed(samples_by_row):
    """The rows as data.packing and the loader's collate make them."""
    ids = torch.zeros(len(samples_by_row), SEQ, dtype=torch.long)
    labels = torch.full_like(ids, IGNORE)
    packed = torch.zeros_like(ids)  # padding at 0, as the collate pads
    for r, samples in enumerate(samples_by_row):
        lengths = torch.tensor([s["input_ids"].shape[0] for s in samples])
        n = int(lengths.sum())
        ids[r, :n] = torch.cat([s["input_ids"] for s in samples])
        row_labels = []
        for s in samples:
            label = s["labels"].clone()
            label[0] = IGNORE  # each sample's first label, as DataCollatorWithFlattening
            row_labels.append(label)
        labels[r, :n] = torch.cat(row_labels)
        packed[r, :n] = sample_positions(lengths)
    every = [s for samples in samples_by_row for s in samples]
    grids = torch.cat([s["image_grid_thw"] for s in every])
    return {"input_ids": ids, "labels": labels, "packed_positions": packed,
            "pixel_values": torch.cat([s["pixel_values"] for s in every]),
            "image_grid_thw": grids,
            "position_ids": decoder_positions(ids, grids, image_token_id=IMAGE, merge=MERGE,
                                              packed_positions=packed)}


def _models(family, tmp_path):
    make_config, hf_class, our_config_class, our_class, adapter = FAMILIES[family]
    torch.manual_seed(0)
    hf = hf_class(make_config()).eval()
    with torch.no_grad():  # identity norms would hide a layout mistake: perturb them
        for name, p in hf.named_parameters():
            if name.endswith(("norm.weight", "norm1.weight", "norm2.weight", "dt_bias")):
                p.add_(torch.randn_like(p) * 0.1)
    hf.save_pretrained(tmp_path)
    config = our_config_class.from_hf_dict(
        json.loads((tmp_path / "config.json").read_text())).replace(attn_mask_type="block_causal")
    ours = our_class(config).eval()
    load_pretrained_weights(ours, str(tmp_path), adapter=adapter, model_config=config)
    return hf, ours, config, adapter


def _hf_alone(hf, sample):
    ids = sample["input_ids"].unsqueeze(0)
    if not sample["image_grid_thw"].shape[0]:
        return hf(input_ids=ids, use_cache=False).logits
    return hf(input_ids=ids, pixel_values=sample["pixel_values"],
              image_grid_thw=sample["image_grid_thw"], mm_token_type_ids=(ids == IMAGE).int(),
              use_cache=False).logits


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_packed_image_text_row_equals_its_samples_alone_by_transformers(family, tmp_path):
    hf, ours, config, adapter = _models(family, tmp_path)
    g = torch.Generator().manual_seed(11)
    samples_by_row = [[_sample(spec, g) for spec in row] for row in ROWS]
    batch = _packed(samples_by_row)
    logits = ours(batch["input_ids"], position_ids=batch["position_ids"],
                  pixel_values=batch["pixel_values"], image_grid_thw=batch["image_grid_thw"])
    # The trainer's loss: the mean over every label token of the packed rows.
    loss, tokens = token_loss_sum(logits, batch["labels"])
    (loss / tokens).backward()
    worst_logits, counted = 0.0, 0
    for r, samples in enumerate(samples_by_row):
        at = 0
        for sample in samples:
            n = sample["input_ids"].shape[0]
            alone = _hf_alone(hf, sample)
            worst_logits = max(worst_logits,
                               (alone[0] - logits[r, at:at + n]).abs().max().item())
            sample_loss, sample_tokens = token_loss_sum(alone, sample["labels"].unsqueeze(0))
            (sample_loss / tokens).backward()  # the samples' gradients add up in HF's
            counted += int(sample_tokens)
            at += n
    assert counted == int(tokens)  # packing trains exactly the samples' label tokens
    reference = adapter.from_hf({n: p.grad for n, p in hf.named_parameters()}, config,
                                strict=False)
    worst_grad = 0.0
    tower = 0
    for name, p in ours.named_parameters():
        if p.grad is None:  # the MoE's expert bias: balanced without gradients
            continue
        assert reference[name].abs().max() > 0, name
        tower += name.startswith("model.visual.")
        worst_grad = max(worst_grad, (p.grad - reference[name]).abs().max().item())
    assert tower  # the images reach the loss
    print(f"\n{family} packed image-text row vs samples alone (HF): max|logits diff| "
          f"{worst_logits:.2e}, max|grad diff| {worst_grad:.2e}")
    assert worst_logits <= TOL and worst_grad <= TOL
    # A model handed the packed rows' 1-D positions makes the same three rows, bit for bit.
    with torch.no_grad():
        again = ours(batch["input_ids"], position_ids=batch["packed_positions"],
                     pixel_values=batch["pixel_values"], image_grid_thw=batch["image_grid_thw"])
        # ... and the rows' positions counted over each row as one sequence, the documents
        # kept apart all the same, are another model: the restart is what makes them equal.
        unrestarted = decoder_positions(batch["input_ids"], batch["image_grid_thw"],
                                        image_token_id=IMAGE, merge=MERGE)
        other = ours(batch["input_ids"], position_ids=unrestarted,
                     pixel_values=batch["pixel_values"], image_grid_thw=batch["image_grid_thw"],
                     documents=Documents.from_positions(batch["packed_positions"]))
    assert torch.equal(again, logits.detach())
    assert (other - logits.detach()).abs().max() > 100 * TOL
