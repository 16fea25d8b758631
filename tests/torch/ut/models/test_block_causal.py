"""``attn_mask_type: block_causal``: a packed row's documents are kept apart by every token mixer.

* the boundaries, from ``position_ids`` that restart at 0, made on the host
  (:class:`~hyper_parallel.utils.documents.Documents`);
* a packed row equals its documents run alone -- logits and every parameter gradient, dense and
  mixture-of-experts, against transformers' Qwen3.5 run on each document alone -- within the
  bound the parity tests hold (``TOL``: the Gated DeltaNet's chunked sums round differently
  from transformers', and a packed document's chunks start elsewhere than its own); documents
  longer than a chunk (64) and shorter than the convolution window (4), boundaries inside
  chunks, two rows with different layouts;
* the packed step's loss is the token-weighted mean of the documents' losses alone, and the
  step hands the model documents it made from the host's positions;
* ``causal`` is the model it was, bit for bit; the delta rule's masks are exact;
* what cannot keep documents apart refuses, naming why.
"""

from __future__ import annotations

import types
from itertools import pairwise

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from hyper_parallel.models.qwen3_5 import Qwen3_5Config, Qwen3_5ForCausalLM, kernels
from hyper_parallel.models.qwen3_5 import documents as model_documents
from hyper_parallel.models.qwen3_5.configuration import FLAVORS
from hyper_parallel.models.qwen3_5.delta_rule import chunk_gated_delta_rule
from hyper_parallel.models.qwen3_5.kernels import causal_depthwise_conv_silu
from hyper_parallel.models.qwen3_5.state_dict_adapter import Qwen3_5StateDictAdapter
from hyper_parallel.runtime.loss import token_loss_sum
from hyper_parallel.utils.documents import Documents
from hyper_parallel.utils.errors import ConfigError

transformers = pytest.importorskip("transformers")

TOL = 1e-4  # the HF parity tests' bound (tests/torch/ut/models/test_qwen3_5_parity.py)
IGNORE = -100
# Two rows of 200 tokens: documents longer than a chunk (70, 130), shorter than the
# convolution window (2, 3), boundaries inside chunks (at 70, 72, 75, 136, 133, ...).
ROWS = ((70, 2, 3, 61, 45, 19), (130, 3, 67))


def _positions(rows=ROWS) -> torch.Tensor:
    return torch.stack([torch.cat([torch.arange(n) for n in row]) for row in rows])


def _documents_of(rows=ROWS) -> list[tuple[int, int, int]]:
    out = []
    for r, row in enumerate(rows):
        start = 0
        for n in row:
            out.append((r, start, start + n))
            start += n
    return out


def _packed_labels(ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """transformers' DataCollatorWithFlattening: each document's first label ignored, so no
    token is trained to predict the next document's first."""
    return ids.masked_fill(positions == 0, IGNORE)


def _ce_sum(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy summed over one document alone (a row of it)."""
    return F.cross_entropy(logits[0, :-1].float(), ids[0, 1:], reduction="sum")


# --------------------------------------------------------------------- the boundaries (host)
def test_boundaries_from_positions():
    pos = torch.tensor([[0, 1, 2, 0, 1, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5, 0, 1, 0, 0]])
    docs = Documents.from_positions(pos)
    assert docs.starts.tolist() == [
        [True, False, False, True, False, True, False, False, False, False],
        # a trailing run of zeros (padding) stays in the document before it
        [True, False, False, False, False, False, True, False, False, False],
    ]
    assert docs.cu_seqlens.dtype == torch.int32 and docs.cu_seqlens.device.type == "cpu"
    assert docs.cu_seqlens.tolist() == [0, 3, 5, 10, 16, 20]  # flattened over the rows
    assert (docs.max_length, docs.max_per_row, docs.count) == (6, 3, 5)
    assert docs.segments() == [(0, 0, 3), (0, 3, 5), (0, 5, 10), (1, 0, 6), (1, 6, 10)]
    # A one-token document followed by another is read as part of the one before (its 0 is
    # not followed by 1); it holds no trained label (its only label is a document's first).
    assert Documents.from_positions(torch.tensor([[0, 1, 0, 0, 1]])).segments() == [
        (0, 0, 3), (0, 3, 5)]


def test_boundaries_of_three_row_positions():
    # An image at a document's start: its first frame keeps the temporal row at 0, so only
    # the token where all three rows are 0 (and the next is 1) starts the document.
    t = torch.tensor([0, 0, 0, 0, 2, 3, 0, 1, 2])
    h = torch.tensor([0, 0, 1, 1, 2, 3, 0, 1, 2])
    w = torch.tensor([0, 1, 0, 1, 2, 3, 0, 1, 2])
    docs = Documents.from_positions(torch.stack([t, h, w]).unsqueeze(1))
    assert docs.segments() == [(0, 0, 6), (0, 6, 9)]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.integers(2, 40), min_size=1, max_size=6), min_size=1, max_size=3))
def test_boundaries_are_the_documents(rows):
    seq = max(sum(row) for row in rows) + 2
    rows = [(*row, seq - sum(row)) for row in rows]  # each row filled by a last document
    docs = Documents.from_positions(_positions(rows))
    expected = [(r * seq + a, r * seq + b) for r, a, b in _documents_of(rows)]
    assert docs.cu_seqlens.tolist() == [a for a, _ in expected] + [len(rows) * seq]
    assert docs.segments() == _documents_of(rows)
    assert docs.max_length == max(b - a for a, b in expected)
    assert docs.max_per_row == max(len(row) for row in rows)


def test_a_32k_row():
    lengths = torch.randint(2, 900, (200,), generator=torch.Generator().manual_seed(0))
    lengths = lengths[: int((lengths.cumsum(0) <= 32768).sum())]
    tail = torch.arange(int(lengths[-1]), int(lengths[-1]) + 32768 - int(lengths.sum()))
    pos = torch.cat([torch.arange(int(n)) for n in lengths] + [tail])  # the last runs on
    docs = Documents.from_positions(pos.unsqueeze(0))
    assert docs.cu_seqlens.tolist() == [0, *lengths.cumsum(0).tolist()[:-1], 32768]
    assert docs.count == len(lengths)


# --------------------------------------------------------------- the parts, exactly per document
@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(2, 150), min_size=1, max_size=5), st.integers(0, 2**16))
def test_delta_rule_restarts_at_every_start(lengths, seed):
    g = torch.Generator().manual_seed(seed)
    seq, hk, hv, dk, dv = sum(lengths), 1, 2, 8, 4
    q, k = (torch.randn(1, seq, hk, dk, generator=g) for _ in range(2))
    v = torch.randn(1, seq, hv, dv, generator=g)
    decay = -torch.rand(1, seq, hv, generator=g)
    beta = torch.rand(1, seq, hv, generator=g)
    starts = _positions([lengths]) == 0
    packed, _ = chunk_gated_delta_rule(q, k, v, decay, beta, document_starts=starts)
    alone, start = [], 0
    for n in lengths:
        part = slice(start, start + n)
        alone.append(chunk_gated_delta_rule(q[:, part], k[:, part], v[:, part], decay[:, part],
                                            beta[:, part])[0])
        start += n
    torch.testing.assert_close(packed, torch.cat(alone, dim=1), rtol=0, atol=1e-5)


def test_conv_and_attention_see_their_document_only():
    docs = Documents.from_positions(_positions())
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 200, 6, dtype=torch.float64, generator=g)
    weight = torch.randn(6, 1, 4, dtype=torch.float64, generator=g)
    q = torch.randn(2, 200, 4, 8, dtype=torch.float64, generator=g)
    k, v = (torch.randn(2, 200, 2, 8, dtype=torch.float64, generator=g) for _ in range(2))
    conv = model_documents.conv_within_documents(causal_depthwise_conv_silu, x, weight, docs)
    attn = model_documents.block_causal_attention(q, k, v, 0.3, docs)
    for r, a, b in _documents_of():
        part = slice(a, b)
        # float64: what another document would add is far above these bounds
        torch.testing.assert_close(conv[r, part], causal_depthwise_conv_silu(
            x[r:r + 1, part], weight)[0], rtol=0, atol=1e-12)
        alone = F.scaled_dot_product_attention(
            *(t[r:r + 1, part].transpose(1, 2) for t in (q, k, v)), is_causal=True, scale=0.3,
            enable_gqa=True)
        torch.testing.assert_close(attn[r, part], alone.transpose(1, 2).reshape(b - a, -1),
                                   rtol=0, atol=1e-12)


def test_variable_length_attention_gets_the_flattened_documents(monkeypatch):
    """The CUDA path's call (torch's varlen flash attention), checked on the CPU with a
    stand-in that attends within each ``cu_seqlens`` segment."""
    calls = []

    def varlen(q, k, v, cu_q, cu_k, max_q, max_k, *, scale, window_size, enable_gqa):
        calls.append((tuple(q.shape), cu_q.tolist(), max_q, window_size, enable_gqa))
        offsets = cu_q.tolist()
        return torch.cat([F.scaled_dot_product_attention(
            *(t[a:b].transpose(0, 1).unsqueeze(0) for t in (q, k, v)), is_causal=True,
            scale=scale, enable_gqa=enable_gqa)[0].transpose(0, 1)
            for a, b in pairwise(offsets)])

    monkeypatch.setattr(model_documents, "_varlen_runs", lambda q: True)
    monkeypatch.setattr(model_documents, "_varlen_attn", lambda: varlen)
    docs = Documents.from_positions(_positions())
    g = torch.Generator().manual_seed(4)
    q = torch.randn(2, 200, 4, 8, generator=g)
    k, v = (torch.randn(2, 200, 2, 8, generator=g) for _ in range(2))
    got = model_documents.block_causal_attention(q, k, v, 0.3, docs)
    monkeypatch.undo()
    assert calls == [((400, 4, 8), docs.cu_seqlens.tolist(), 130, (-1, 0), True)]
    torch.testing.assert_close(got, model_documents.block_causal_attention(q, k, v, 0.3, docs))


def test_fla_gets_the_rows_flattened_with_the_offsets():
    """fla's varlen contract (batch 1, ``cu_seqlens`` int64 and its host copy), checked on the
    CPU with a stand-in that runs the torch rule per segment."""
    seen = {}

    def fla_chunk(q, k, v, g, beta, *, scale, initial_state, output_final_state,
                  use_qk_l2norm_in_kernel, cu_seqlens=None, cu_seqlens_cpu=None):
        seen.update(shape=tuple(q.shape), cu=cu_seqlens.tolist(), dtype=cu_seqlens.dtype,
                    host=cu_seqlens_cpu.device.type)
        offsets = cu_seqlens.tolist()
        out = torch.cat([chunk_gated_delta_rule(*(t[:, a:b] for t in (q, k, v, g, beta)))[0]
                         for a, b in pairwise(offsets)], dim=1)
        return out, None

    docs = Documents.from_positions(_positions())
    gen = torch.Generator().manual_seed(5)
    q, k = (torch.randn(2, 200, 1, 8, generator=gen) for _ in range(2))
    v = torch.randn(2, 200, 2, 4, generator=gen)
    decay, beta = -torch.rand(2, 200, 2, generator=gen), torch.rand(2, 200, 2, generator=gen)
    got = kernels._fla_delta_rule(fla_chunk)(q, k, v, decay, beta, documents=docs)
    assert seen == {"shape": (1, 400, 2, 8), "cu": docs.cu_seqlens.tolist(),
                    "dtype": torch.int64, "host": "cpu"}
    want = kernels.TORCH_KERNELS.delta_rule(q, k, v, decay, beta, documents=docs)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)


# ------------------------------------------------------ a packed row equals its documents alone
def _hf_dense():
    config = transformers.Qwen3_5TextConfig(
        vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=6,
        full_attention_interval=3, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16,
        linear_value_head_dim=24, linear_conv_kernel_dim=4, tie_word_embeddings=False,
        initializer_range=0.07,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.25, "mrope_section": [2, 1, 1]},
        attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.Qwen3_5ForCausalLM(config).eval()
    _perturb_norms(model)
    ours_config = Qwen3_5Config.from_hf_dict(config.to_dict()).replace(
        attn_mask_type="block_causal")
    ours = Qwen3_5ForCausalLM(ours_config).eval()
    ours.load_state_dict(Qwen3_5StateDictAdapter.from_hf(model.state_dict(), ours_config))
    return model, ours, Qwen3_5StateDictAdapter, ours_config


def _hf_moe():
    from hyper_parallel.models.qwen3_5_moe import Qwen3_5MoeConfig
    from hyper_parallel.models.qwen3_5_moe.model import Qwen3_5MoeForCausalLM
    from hyper_parallel.models.qwen3_5_moe.state_dict_adapter import Qwen3_5MoeStateDictAdapter

    config = transformers.Qwen3_5MoeTextConfig(
        vocab_size=256, hidden_size=32, num_hidden_layers=4, full_attention_interval=4,
        num_attention_heads=2, num_key_value_heads=2, head_dim=16, linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
        num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
        shared_expert_intermediate_size=32, initializer_range=0.07,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                         "partial_rotary_factor": 0.5, "mrope_section": [2, 1, 1]},
        attn_implementation="sdpa", experts_implementation="eager")
    torch.manual_seed(0)
    model = transformers.Qwen3_5MoeForCausalLM(config).eval()
    _perturb_norms(model)
    ours_config = Qwen3_5MoeConfig.from_hf_dict(config.to_dict()).replace(
        experts_implementation="loop", attn_mask_type="block_causal")
    ours = Qwen3_5MoeForCausalLM(ours_config).eval()
    ours.load_state_dict(Qwen3_5MoeStateDictAdapter.from_hf(model.state_dict(), ours_config))
    return model, ours, Qwen3_5MoeStateDictAdapter, ours_config


def _perturb_norms(model: torch.nn.Module) -> None:
    with torch.no_grad():  # HF inits the norms to identities: move them so they matter
        for name, p in model.named_parameters():
            if name.endswith(("norm.weight", "dt_bias")):
                p.add_(torch.randn_like(p) * 0.1)


@pytest.mark.parametrize("family", [_hf_dense, _hf_moe], ids=["dense", "moe"])
def test_packed_rows_equal_their_documents_run_alone_by_transformers(family):
    hf, ours, adapter, config = family()
    positions = _positions()
    ids = torch.randint(0, config.vocab_size, positions.shape,
                        generator=torch.Generator().manual_seed(1))
    logits = ours(ids, position_ids=positions)
    # The trainer's loss: the mean over every label token (as the parity tests' mean CE).
    loss, tokens = token_loss_sum(logits, _packed_labels(ids, positions))
    (loss / tokens).backward()
    worst_logits = 0.0
    for r, a, b in _documents_of():
        doc = ids[r:r + 1, a:b]
        alone = hf(doc, use_cache=False).logits
        worst_logits = max(worst_logits, (alone - logits[r:r + 1, a:b]).abs().max().item())
        (_ce_sum(alone, doc) / tokens).backward()  # the documents' gradients add up in HF's
    # HF's gradients in our layout (the adapter splits and stacks them as it does weights)
    reference = adapter.from_hf({n: p.grad for n, p in hf.named_parameters()}, config)
    worst_grad = 0.0
    for name, p in ours.named_parameters():
        assert p.grad is not None and reference[name].abs().max() > 0, name
        worst_grad = max(worst_grad, (p.grad - reference[name]).abs().max().item())
    print(f"\npacked vs documents alone (HF): max|logits diff| {worst_logits:.2e}, "
          f"max|grad diff| {worst_grad:.2e}")
    assert worst_logits <= TOL and worst_grad <= TOL
    # ... and the same weights, causal over the packed row, are another model entirely
    causal = type(ours)(config.replace(attn_mask_type="causal")).eval()
    causal.load_state_dict(ours.state_dict())
    with torch.no_grad():
        assert (causal(ids, position_ids=positions) - logits).abs().max() > 100 * TOL


def _tiny(mask: str, seed: int = 0) -> Qwen3_5ForCausalLM:
    torch.manual_seed(seed)
    model = Qwen3_5ForCausalLM(FLAVORS["tiny"].replace(attn_mask_type=mask,
                                                       initializer_range=0.1))
    model.init_weights()
    return model


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(2, 90), min_size=2, max_size=5))
def test_any_packing_equals_its_documents_alone(lengths):
    model = _tiny("block_causal")
    ids = torch.randint(0, 2048, (1, sum(lengths)), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        packed = model(ids, position_ids=_positions([lengths]))
        for _, a, b in _documents_of([lengths]):
            assert (model(ids[:, a:b]) - packed[:, a:b]).abs().max() <= TOL


# ------------------------------------------------------------------------------ the step
def test_the_step_loss_is_the_token_weighted_mean_of_the_documents(monkeypatch):
    from hyper_parallel.runtime import step as step_module

    model = _tiny("block_causal", seed=1)
    positions = _positions()
    ids = torch.randint(0, 2048, positions.shape, generator=torch.Generator().manual_seed(6))
    labels = _packed_labels(ids, positions)
    made, received = [], []
    real = Documents.from_positions

    def spy(position_ids):
        made.append(position_ids.device.type)
        return real(position_ids)

    monkeypatch.setattr(step_module.Documents, "from_positions", staticmethod(spy))
    model.register_forward_pre_hook(
        lambda m, args, kwargs: received.append(kwargs.get("documents")), with_kwargs=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    micro_batches = [{"input_ids": ids[r:r + 1], "labels": labels[r:r + 1],
                      "position_ids": positions[r:r + 1]} for r in range(2)]
    result = step_module.train_step(
        model, optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0),
        micro_batches, device=torch.device("cpu"), loss_aggregation="token_weighted",
        dp_group=None, dp_size=1, max_grad_norm=0.0)
    assert made == ["cpu", "cpu"]  # once per micro-batch, from the host's positions
    assert [type(d) for d in received] == [Documents, Documents]
    with torch.no_grad():
        sums = [_ce_sum(model(ids[r:r + 1, a:b]), ids[r:r + 1, a:b]).item()
                for r, a, b in _documents_of()]
    tokens = sum(b - a - 1 for _, a, b in _documents_of())
    assert result.global_tokens == tokens
    assert result.loss == pytest.approx(sum(sums) / tokens, rel=1e-5)


def test_a_causal_model_is_handed_no_documents():
    from hyper_parallel.runtime.step import with_documents

    batch = {"input_ids": torch.zeros(1, 4, dtype=torch.long), "position_ids": _positions([(2, 2)])}
    assert with_documents(_tiny("causal"), batch) is batch
    assert "documents" in with_documents(_tiny("block_causal"), batch)


# ------------------------------------------------------------------- causal is unchanged
def test_causal_is_bit_for_bit_the_model_it_was():
    causal, packed = _tiny("causal"), _tiny("block_causal")
    positions = _positions()
    ids = torch.randint(0, 2048, positions.shape, generator=torch.Generator().manual_seed(7))
    docs = Documents.from_positions(positions)
    # causal reads no documents: handed them or not, the same bits
    plain = causal(ids, position_ids=positions)
    assert torch.equal(plain, causal(ids, position_ids=positions, documents=docs))
    # block_causal on rows of one document each is the causal model, logits and gradients
    one_each = torch.arange(200).expand(2, -1)
    a, b = causal(ids, position_ids=one_each), packed(ids, position_ids=one_each)
    assert torch.equal(a, b)
    a.square().mean().backward()
    b.square().mean().backward()
    for (name, p), q in zip(causal.named_parameters(), packed.parameters()):
        assert torch.equal(p.grad, q.grad), name


def test_the_delta_rule_masks_are_exact():
    """Only the row starts set: the masks select what the causal algebra computes, so the
    results are its bits (forward and backward)."""
    g = torch.Generator().manual_seed(8)
    inputs = [torch.randn(2, 150, 1, 8, generator=g), torch.randn(2, 150, 1, 8, generator=g),
              torch.randn(2, 150, 2, 4, generator=g), -torch.rand(2, 150, 2, generator=g),
              torch.rand(2, 150, 2, generator=g)]
    starts = torch.zeros(2, 150, dtype=torch.bool)
    starts[:, 0] = True
    results = []
    for document_starts in (None, starts):
        leaves = [t.clone().requires_grad_() for t in inputs]
        out, _ = chunk_gated_delta_rule(*leaves, document_starts=document_starts)
        out.square().sum().backward()
        results.append((out, [t.grad for t in leaves]))
    assert torch.equal(results[0][0], results[1][0])
    assert all(torch.equal(x, y) for x, y in zip(results[0][1], results[1][1]))


# --------------------------------------------------------------------------- the refusals
def _trainer_config(**sections):
    return types.SimpleNamespace(**{name: types.SimpleNamespace(**values)
                                    for name, values in sections.items()})


@pytest.mark.parametrize(("sections", "words"), [
    ({"compile": {"enable": True, "components": ["model", "loss"]}}, "compiled decoder layers"),
], ids=["compile"])
def test_what_cannot_keep_documents_apart_refuses(sections, words):
    from hyper_parallel.models.qwen3_5.protocol import flavor_config

    config = flavor_config("tiny").replace(attn_mask_type="block_causal")
    with pytest.raises(ConfigError, match=words) as caught:
        config.update_from_config(trainer_config=_trainer_config(**sections))
    assert caught.value.path == "model.attn_mask_type"
    flavor_config("tiny").update_from_config(trainer_config=_trainer_config(**sections))


def test_the_recipe_field_and_the_legacy_key_reach_the_model(tmp_path):
    from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
    from hyper_parallel.config.recipes import revalidate
    from hyper_parallel.models.qwen3_5.protocol import flavor_config
    from hyper_parallel.trainer.config import HyperTrainerConfig, parse_args
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    recipe = HyperTrainer.Config()
    recipe.model.attn_mask_type = "block_causal"
    recipe = revalidate(recipe)
    yaml = tmp_path / "packed.yaml"
    yaml.write_text("model:\n  name: qwen3_5\n  config_overrides: {attn_mask_type: block_causal}\n")
    legacy = legacy_to_trainer_config(parse_args(HyperTrainerConfig, [str(yaml)]))
    assert (legacy.model.attn_mask_type, legacy.model.config_overrides) == ("block_causal", None)
    for trainer_config in (recipe, legacy):
        config = flavor_config("tiny")
        config.update_from_config(trainer_config=trainer_config)
        assert config.attn_mask_type == "block_causal"


def test_a_mixer_under_context_parallelism_refuses_documents():
    model = _tiny("block_causal")
    docs = Documents.from_positions(_positions([(3, 5)]))
    for layer in model.model.layers:
        mixer = getattr(layer, "self_attn", None) or layer.linear_attn
        mixer.context_parallel = object()  # any plan: the refusal comes first
    with pytest.raises(ConfigError, match="context parallelism") as caught:
        model(torch.zeros(1, 8, dtype=torch.long), documents=docs)
    assert caught.value.path == "model.attn_mask_type"


def test_a_bad_mask_type_is_named():
    with pytest.raises(ValueError, match=r"attn_mask_type='block' is invalid.*block_causal"):
        FLAVORS["tiny"].replace(attn_mask_type="block")


# ------------------------------------------------------------------- preset_pt carries them
def test_preset_batches_carry_their_positions(tmp_path):
    from hyper_parallel.data.preset import PresetBatchesDataset

    positions = _positions([(3, 5), (4, 4)])
    ids = torch.arange(16).reshape(2, 8)
    path = tmp_path / "packed.pt"
    torch.save([{"input_ids": ids, "position_ids": positions}], path)
    data = PresetBatchesDataset(str(path), max_seq_len=8)
    assert torch.equal(data[1]["position_ids"], positions[1])
    assert torch.equal(data.head(1).position_ids, positions[:1])
    for bad, words in (([{"input_ids": ids, "position_ids": positions - 1}], ">= 0"),
                       ([{"input_ids": ids, "position_ids": positions}, {"input_ids": ids}],
                        "batch 1 lacks position_ids")):
        torch.save(bad, path)
        with pytest.raises(ValueError, match=words):
            PresetBatchesDataset(str(path), max_seq_len=8)
