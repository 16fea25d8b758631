"""Qwen3.5-MoE sparse MoE block: parity with transformers' ``Qwen3_5MoeSparseMoeBlock`` and
``load_balancing_loss_func``, grouped_mm vs the per-expert loop, the expert permutation, and the
router statistics (expert bias, tokens_per_expert under activation checkpointing)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.checkpoint import checkpoint

transformers = pytest.importorskip("transformers")
hf_moe = pytest.importorskip("transformers.models.qwen3_5_moe.modeling_qwen3_5_moe")

from hyper_parallel.models.qwen3_5_moe.moe import (
    GroupedExperts,
    SparseMoeBlock,
    TopKRouter,
    load_balancing_loss,
    permute_by_expert,
)

HIDDEN, EXPERTS, TOP_K, MOE_INTER, SHARED_INTER = 32, 8, 2, 16, 24
EPS = torch.finfo(torch.float32).eps
# Where ours and HF add the same fp32 terms in a different order (see test_hf_parity), the
# difference stays within a few units of EPS * max|ref|: worst seen over 30 seeds is 4.2
# (experts.down_proj gradient); 8 leaves a 2x margin.
ULPS = 8


def _hf_block(seed: int = 0):
    cfg = transformers.Qwen3_5MoeTextConfig(
        hidden_size=HIDDEN,
        num_experts=EXPERTS,
        num_experts_per_tok=TOP_K,
        moe_intermediate_size=MOE_INTER,
        shared_expert_intermediate_size=SHARED_INTER,
        experts_implementation="eager",  # HF's plain per-expert loop
    )
    torch.manual_seed(seed)
    block = hf_moe.Qwen3_5MoeSparseMoeBlock(cfg)
    with torch.no_grad():  # standalone HF modules are not initialised (router zeros, experts empty)
        for p in block.parameters():
            p.normal_(0.0, 0.2)
    return block


def _ours_like(ref, implementation: str = "loop") -> SparseMoeBlock:
    ours = SparseMoeBlock(HIDDEN, EXPERTS, TOP_K, MOE_INTER, SHARED_INTER, implementation)
    ours.load_state_dict(ref.state_dict() | {"gate.expert_bias": ours.gate.expert_bias})
    return ours


def _fwd_bwd(block, x: torch.Tensor, grad: torch.Tensor):
    x = x.detach().clone().requires_grad_()
    out = block(x)
    out.backward(grad)
    grads = {n: p.grad for n, p in block.named_parameters()}
    return out.detach(), x.grad, grads


def _assert_ulps(actual: torch.Tensor, expected: torch.Tensor, ulps: int = ULPS) -> None:
    bound = ulps * EPS * expected.abs().max()
    diff = (actual - expected).abs().max()
    assert diff <= bound, (
        f"max diff {diff.item():.3g} > {ulps} ulps of max|ref| ({bound.item():.3g})"
    )


# ---------------------------------------------------------------- 1. parity with transformers
def test_state_dict_matches_hf():
    ref = _hf_block()
    ours = _ours_like(ref)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in ref.named_parameters()]
    # The only extra key is the persistent balancing bias HF does not have.
    assert set(ours.state_dict()) == set(ref.state_dict()) | {"gate.expert_bias"}
    for name, t in ref.state_dict().items():
        assert ours.state_dict()[name].shape == t.shape, name


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_hf_parity(seed):
    """Loop path vs HF's eager loop: the forward and every parameter gradient are HF's bits.

    The routing, the row order within an expert (``permute_by_expert`` follows HF's gather
    order), the score multiply and the expert-ascending ``index_add_`` are HF's, so each GEMM
    sees the same rows in the same order. Only the input gradient differs, in the last bits:
    HF gathers ``x`` once per expert, so autograd adds the per-expert input gradients in another
    order than our single gather does.
    """
    ref = _hf_block(seed)
    ours = _ours_like(ref, "loop")
    x = torch.randn(2, 5, HIDDEN)
    grad = torch.randn(2, 5, HIDDEN)
    ref_out, ref_gx, ref_grads = _fwd_bwd(ref, x, grad)
    out, gx, grads = _fwd_bwd(ours, x, grad)
    assert torch.equal(out, ref_out)
    for name, g in grads.items():
        assert torch.equal(g, ref_grads[name]), name
    _assert_ulps(gx, ref_gx)


def test_grouped_mm_block_matches_loop():
    ref = _hf_block()
    loop, grouped = _ours_like(ref, "loop"), _ours_like(ref, "grouped_mm")
    torch.manual_seed(1)
    x = torch.randn(2, 5, HIDDEN)
    grad = torch.randn(2, 5, HIDDEN)
    loop_out, loop_gx, loop_grads = _fwd_bwd(loop, x, grad)
    out, gx, grads = _fwd_bwd(grouped, x, grad)
    # Bitwise on CPU in torch 2.13 (its grouped GEMM is a per-group mm); the tolerance is for
    # kernels that tile / accumulate differently.
    tol = {"rtol": 1e-6, "atol": 1e-7}
    torch.testing.assert_close(out, loop_out, **tol)
    torch.testing.assert_close(gx, loop_gx, **tol)
    for name, g in grads.items():
        torch.testing.assert_close(g, loop_grads[name], **tol, msg=name)


# ---------------------------------------------------------------- 2. load-balancing loss
def test_load_balancing_loss_matches_hf():
    torch.manual_seed(0)
    layers = [SparseMoeBlock(HIDDEN, EXPERTS, TOP_K, MOE_INTER, SHARED_INTER) for _ in range(2)]
    for layer in layers:  # a peaked router, so the loss is far from its uniform value
        layer.gate.weight.data.normal_(0.0, 0.5)
    stats, logits = [], []
    for layer in layers:
        x = torch.randn(2, 5, HIDDEN)
        layer(x)
        stats.append(layer.last_router_stats)
        logits.append(F.linear(x.reshape(-1, HIDDEN), layer.gate.weight))

    ours = load_balancing_loss(stats, EXPERTS)
    ref = hf_moe.load_balancing_loss_func(tuple(logits), EXPERTS, TOP_K)
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=0)

    # Same gradient into the routers (through the probabilities only, in both).
    weights = [layer.gate.weight for layer in layers]
    ours_grads = torch.autograd.grad(ours, weights)
    ref_grads = torch.autograd.grad(ref, weights)
    for g, r in zip(ours_grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- 3. GroupedExperts kernels
def _experts_fwd_bwd(experts: GroupedExperts, x: torch.Tensor, counts: torch.Tensor, grad):
    x = x.detach().clone().requires_grad_()
    experts.zero_grad()
    out = experts(x, counts)
    out.backward(grad)
    return out.detach(), x.grad, experts.gate_up_proj.grad.clone(), experts.down_proj.grad.clone()


@pytest.mark.parametrize(
    "dtype, tol",
    [
        (torch.float32, {"rtol": 1e-6, "atol": 1e-6}),
        # bf16 rounds every product to 8 bits: allow a couple of bf16 ulps (2**-7 relative).
        (torch.bfloat16, {"rtol": 1.6e-2, "atol": 1e-2}),
    ],
)
@pytest.mark.parametrize("counts", [[3, 0, 5, 2, 0, 1], [0, 0, 0, 0, 0, 0], [0, 0, 7, 0, 0, 0]])
def test_grouped_mm_matches_loop(dtype, tol, counts):
    torch.manual_seed(0)
    experts = GroupedExperts(len(counts), HIDDEN, MOE_INTER, "loop").to(dtype)
    with torch.no_grad():
        for p in experts.parameters():
            p.normal_(0.0, 0.3)
    counts_t = torch.tensor(counts, dtype=torch.int64)
    x = torch.randn(sum(counts), HIDDEN, dtype=dtype)
    grad = torch.randn(sum(counts), HIDDEN, dtype=dtype)
    ref = _experts_fwd_bwd(experts, x, counts_t, grad)
    experts.implementation = "grouped_mm"
    got = _experts_fwd_bwd(experts, x, counts_t, grad)
    for name, g, r in zip(("out", "x.grad", "gate_up.grad", "down.grad"), got, ref, strict=True):
        torch.testing.assert_close(g, r, **tol, msg=name)
    for e, c in enumerate(counts):
        if c == 0:  # an expert with no rows gets an exact zero gradient, not garbage
            assert not got[2][e].any() and not got[3][e].any()


def test_grouped_mm_expanded_gradient():
    """``out.sum()`` sends a stride-0 gradient, which ``_grouped_mm``'s backward rejects raw."""
    torch.manual_seed(0)
    experts = GroupedExperts(4, HIDDEN, MOE_INTER, "grouped_mm")
    x = torch.randn(6, HIDDEN, requires_grad=True)
    experts(x, torch.tensor([2, 0, 4, 0])).sum().backward()
    assert x.grad is not None and experts.down_proj.grad is not None


def test_grouped_mm_falls_back_when_misaligned():
    # 30 fp32 = 120 bytes, not a multiple of 16: the grouped GEMM would refuse it.
    torch.manual_seed(0)
    experts = GroupedExperts(3, 30, 10, "grouped_mm")
    x = torch.randn(5, 30)
    counts = torch.tensor([2, 0, 3])
    out = experts(x, counts)
    experts.implementation = "loop"
    assert torch.equal(out, experts(x, counts))


def test_grouped_experts_rejects_wrong_counts():
    experts = GroupedExperts(4, HIDDEN, MOE_INTER)
    with pytest.raises(ValueError, match="one entry per local expert"):
        experts(torch.randn(3, HIDDEN), torch.tensor([1, 2]))


# ---------------------------------------------------------------- 4. permute_by_expert
@st.composite
def _routing(draw):
    num_experts = draw(st.integers(1, 12))
    k = draw(st.integers(1, min(num_experts, 4)))
    tokens = draw(st.integers(0, 24))
    rows = [
        draw(st.permutations(range(num_experts)))[:k] for _ in range(tokens)
    ]  # distinct experts per token, like top-k
    return torch.tensor(rows, dtype=torch.int64).reshape(tokens, k), num_experts


@settings(max_examples=150, deadline=None, database=None)
@given(_routing())
def test_permute_by_expert_properties(routing):
    indices, num_experts = routing
    order, counts = permute_by_expert(indices, num_experts)
    flat = indices.reshape(-1)
    assert order.dtype == torch.int64 and counts.dtype == torch.int64
    assert torch.equal(order.sort().values, torch.arange(flat.numel()))  # a permutation
    assert torch.equal(counts, torch.bincount(flat, minlength=num_experts))
    experts_in_order = flat[order]
    assert torch.equal(experts_in_order, experts_in_order.sort().values)  # grouped, ascending
    k = indices.shape[1]
    for block in order.split(counts.tolist()):  # HF's order: by choice rank, then by token
        key = (block % k) * max(indices.shape[0], 1) + block // k
        assert torch.equal(key, key.sort().values)
        assert len(set((block // k).tolist())) == len(block)  # a token picks an expert once


# ---------------------------------------------------------------- 5. bias and statistics
def test_expert_bias_moves_selection_not_weights():
    torch.manual_seed(0)
    router = TopKRouter(EXPERTS, TOP_K, HIDDEN)
    x = torch.randn(10, HIDDEN)
    probs, _, plain_indices = router(x)
    router.expert_bias[5] = 10.0
    _, _, ignored = router(x)  # use_expert_bias is off: the bias is inert
    assert torch.equal(ignored, plain_indices)

    router.use_expert_bias = True
    biased_probs, scores, indices = router(x)
    assert torch.equal(biased_probs, probs)  # the reported probabilities stay unbiased
    assert (indices == 5).any(dim=-1).all()  # forced into every token's top-k
    assert not (plain_indices == 5).any(dim=-1).all()  # ... which it was not without the bias
    chosen = probs.gather(-1, indices)
    torch.testing.assert_close(scores, chosen / chosen.sum(-1, keepdim=True), rtol=0, atol=0)


def _block(seed: int = 0) -> SparseMoeBlock:
    torch.manual_seed(seed)
    return SparseMoeBlock(HIDDEN, EXPERTS, TOP_K, MOE_INTER, SHARED_INTER)


def test_router_stats_and_tokens_per_expert():
    block = _block()
    x = torch.randn(2, 5, HIDDEN)
    block(x)
    stats = block.last_router_stats
    _, _, indices = block.gate(x.reshape(-1, HIDDEN))
    expected = torch.bincount(indices.reshape(-1), minlength=EXPERTS).float()
    assert stats.num_tokens == 10
    assert torch.equal(stats.selected, expected) and not stats.selected.requires_grad
    assert stats.probs_sum.requires_grad and stats.probs_sum.dtype == torch.float32
    torch.testing.assert_close(stats.probs_sum.sum(), torch.tensor(10.0))
    assert torch.equal(block.tokens_per_expert, expected)
    block(x)
    assert torch.equal(block.tokens_per_expert, 2 * expected)
    assert "tokens_per_expert" not in block.state_dict()
    block.reset_tokens_per_expert()
    assert not block.tokens_per_expert.any()


def test_tokens_per_expert_not_recounted_by_checkpoint():
    block = _block()
    x = torch.randn(2, 5, HIDDEN, requires_grad=True)
    plain = _block()  # same weights, no checkpointing: the reference gradient
    ref_out = plain(x)
    (ref_out.square().sum() + load_balancing_loss([plain.last_router_stats], EXPERTS)).backward()

    out = checkpoint(block, x, use_reentrant=False)
    counted = block.tokens_per_expert.clone()
    assert counted.sum() == 10 * TOP_K
    # The aux loss reaches into the checkpointed region too: probs_sum kept its graph.
    (out.square().sum() + load_balancing_loss([block.last_router_stats], EXPERTS)).backward()
    assert torch.equal(block.tokens_per_expert, counted)  # recomputation did not add again
    assert torch.equal(block.gate.weight.grad, plain.gate.weight.grad)
