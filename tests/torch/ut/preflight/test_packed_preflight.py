"""Preflight of a packed run (``attn_mask_type: block_causal``) measures its documents: the
simulated micro-batch carries packed rows (``simulate._packed_positions``) and their documents,
made on the host as the step makes them, so every token mixer runs its per-document path -- the
attention per document, the convolution over the spaced rows, the delta rule's state restarted
-- and the documents' tensors are in the step's measured peak, with images too."""

from __future__ import annotations

import pytest

from hyper_parallel.preflight import simulate

#: One period of the debug model's layers (3 Gated DeltaNet, 1 attention): each mixer once.
DEBUG = ("--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel",
         "--model.num_hidden_layers=4",
         "--training.local_batch_size=1", "--training.global_batch_size=1",
         "--training.seq_len=128")
#: The image-text MoE debug model over 2 expert-parallel ranks: each trains one of the
#: micro-batch's 2 rows and that row's image.
VL_EP = ("--module", "qwen3_5_moe", "--config", "qwen3_5_moe_debugmodel_ep2",
         '--model.config_overrides={"flavor": "debugmodel_vl"}', "--model.num_hidden_layers=4",
         "--dataloader.dataset=vl_dummy",
         "--training.seq_len=128")
BLOCK_CAUSAL = "--model.attn_mask_type=block_causal"


def _measure(argv, patch, world=1):
    """One rank's step, measured (its whole depth, in this process), and the documents each
    token mixer was handed: ``(memory, {mixer: [(rows, segments) or None, ...]})``."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from hyper_parallel.config.manager import ConfigManager
    from hyper_parallel.models.qwen3_5 import attention, delta_rule, gated_deltanet
    from hyper_parallel.preflight.run import measure_role
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    seen = {"attention": [], "conv": [], "delta rule": []}

    def spy(module, name, mixer, documents_of):
        real = getattr(module, name)

        def wrapper(*args, **kwargs):
            documents = documents_of(args, kwargs)
            with unset_fake_temporarily():  # the host's offsets, read as they are
                seen[mixer].append(None if documents is None else documents.segments()
                                   if hasattr(documents, "segments") else "starts")
            return real(*args, **kwargs)

        patch.setattr(module, name, wrapper)

    spy(attention, "block_causal_attention", "attention", lambda a, k: a[4])
    spy(gated_deltanet, "conv_within_documents", "conv", lambda a, k: a[3])
    spy(delta_rule, "chunk_gated_delta_rule", "delta rule",
        lambda a, k: k.get("document_starts"))
    config = ConfigManager(root_type=HyperTrainer.Config).parse_args(list(argv))
    memory, _ = measure_role(simulate.simulation_config(config), 0, world, 1.0,
                             extrapolate_depth=False)
    return memory, seen


@pytest.mark.slow
def test_a_packed_runs_preflight_steps_and_measures_its_documents():
    with pytest.MonkeyPatch.context() as patch:
        packed, seen = _measure((*DEBUG, BLOCK_CAUSAL), patch)
    with pytest.MonkeyPatch.context() as patch:
        causal, unseen = _measure(DEBUG, patch)
    # Rows of 128 tokens packed with documents of 64: every mixer got both, in the measured
    # step (the warm-up's short row is one document).
    documents = [(0, 0, 64), (0, 64, 128)]
    assert documents in seen["attention"] and documents in seen["conv"]
    assert "starts" in seen["delta rule"]
    # The causal model runs no document path (its delta rule is handed no starts).
    assert not unseen["attention"] and not unseen["conv"]
    assert set(unseen["delta rule"]) == {None}
    print(f"\npacked preflight: activations {packed.activations_bytes} B against "
          f"{causal.activations_bytes} B causal")
    # The spaced convolution rows, the delta rule's per-chunk masks and the documents'
    # tensors are in the peak.
    assert packed.activations_bytes > causal.activations_bytes


@pytest.mark.slow
def test_a_packed_image_text_runs_documents_hold_the_image_on_its_expert_parallel_rank():
    with pytest.MonkeyPatch.context() as patch:
        memory, seen = _measure((*VL_EP, BLOCK_CAUSAL), patch, world=2)
    # vl_dummy's image (2 x 2 x 2 patches: 2 tokens and its start and end) opens the row's
    # first document, the second the row's rest. The rank's one
    # row of the two, with its image (the split deals the images by their rows).
    assert [(0, 0, 64), (0, 64, 128)] in seen["attention"]
    assert "starts" in seen["delta rule"] and memory.activations_bytes > 0


def test_packed_positions_fit_the_row_and_the_image():
    import torch

    from hyper_parallel.utils.documents import Documents

    for rows, seq, first in ((2, 256, 0), (1, 300, 131), (1, 50, 0), (3, 64, 70)):
        positions = simulate._packed_positions(rows, seq, first)
        assert positions.shape == (rows, seq)
        segments = Documents.from_positions(positions).segments()
        starts = [a for r, a, _ in segments if r == 0]
        lengths = [b - a for r, a, b in segments if r == 0]
        assert starts[0] == 0 and sum(lengths) == seq
        assert lengths[0] >= min(seq, max(first, simulate.PACKED_DOCUMENT_TOKENS))
        assert all(n == simulate.PACKED_DOCUMENT_TOKENS for n in lengths[1:-1])
        assert torch.equal(positions[0], positions[-1])
