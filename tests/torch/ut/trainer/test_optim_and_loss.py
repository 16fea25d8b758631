"""Optimizer groups, LR schedule, clipping and loss aggregation helpers."""

from __future__ import annotations

import logging
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hyper_parallel.runtime.loss import LossScaler, count_tokens, shift_labels, token_loss_sum
from hyper_parallel.runtime.optim import (
    LRFactor,
    build_lr_scheduler,
    build_optimizer,
    build_param_groups,
    clip_grad_norm_,
    warmup_steps_from_ratio,
)


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.proj = torch.nn.Linear(4, 4, bias=True)
        self.input_layernorm = torch.nn.LayerNorm(4)
        self.q_norm = torch.nn.Parameter(torch.ones(4))
        self.dt_bias = torch.nn.Parameter(torch.ones(2))
        self.A_log = torch.nn.Parameter(torch.zeros(2))
        self.frozen = torch.nn.Parameter(torch.ones(3), requires_grad=False)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight  # tied


def test_param_groups_follow_the_name_rule():
    model = Tiny()
    decay, no_decay = build_param_groups(model, 0.1)
    names = {id(p): n for n, p in model.named_parameters()}  # tied weight: first name
    assert sorted(names[id(p)] for p in decay["params"]) == ["A_log", "embed.weight", "proj.weight"]
    assert sorted(names[id(p)] for p in no_decay["params"]) == sorted(
        ["proj.bias", "input_layernorm.weight", "input_layernorm.bias", "q_norm", "dt_bias"])
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    # Both groups are kept even with no decay at all.
    assert len(build_param_groups(model, 0.0)) == 2


def test_build_optimizer_types():
    model = Tiny()
    opt = build_optimizer(model, name="adamw", lr=0.1, betas=(0.9, 0.95), eps=1e-6, weight_decay=0.1)
    assert isinstance(opt, torch.optim.AdamW) and opt.defaults["betas"] == (0.9, 0.95)
    assert isinstance(build_optimizer(model, name="adam", lr=0.1, betas=(0.9, 0.9), eps=1e-8,
                                      weight_decay=0.0), torch.optim.Adam)
    with pytest.raises(ValueError, match="choose one of: adamw, adam"):
        build_optimizer(model, name="sgd", lr=0.1, betas=(0.9, 0.9), eps=1e-8, weight_decay=0.0)


def test_warmup_starts_at_zero_and_uses_ceil():
    assert warmup_steps_from_ratio(10, 0.15) == 2
    f = LRFactor(total_steps=10, warmup_steps=2, decay_style="cosine", min_ratio=0.1)
    assert [f(0), f(1)] == [0.0, 0.5]
    assert f(2) == pytest.approx(1.0) and f(10) == pytest.approx(0.1)


def test_the_schedule_and_the_legacy_transform_share_one_warmup_rule():
    from hyper_parallel.config import transforms
    from hyper_parallel.utils import lr_warmup

    assert warmup_steps_from_ratio is lr_warmup.warmup_steps_from_ratio
    assert transforms.warmup_steps_from_ratio is lr_warmup.warmup_steps_from_ratio
    # Float rounding is part of the rule: 0.07 * 100 is 7.000000000000001.
    assert lr_warmup.warmup_steps_from_ratio(100, 0.07) == 8


def test_decay_styles():
    lin = LRFactor(total_steps=10, warmup_steps=0, decay_style="linear", min_ratio=0.0)
    assert [round(lin(s), 6) for s in (0, 5, 10)] == [1.0, 0.5, 0.0]
    const = LRFactor(total_steps=10, warmup_steps=2, decay_style="constant", min_ratio=0.0)
    assert [const(s) for s in (2, 9, 50)] == [1.0, 1.0, 1.0]
    cos = LRFactor(total_steps=10, warmup_steps=0, decay_style="cosine", min_ratio=0.0)
    assert cos(5) == pytest.approx(0.5) and cos(20) == pytest.approx(0.0)  # clamped past the end
    with pytest.raises(ValueError, match="cosine, linear, constant"):
        LRFactor(total_steps=10, warmup_steps=0, decay_style="step", min_ratio=0.0)


@settings(max_examples=200, deadline=None)
@given(
    total=st.integers(1, 500),
    ratio=st.floats(0, 1),
    style=st.sampled_from(["cosine", "linear", "constant"]),
    min_ratio=st.floats(0, 1),
)
def test_lr_factor_is_bounded_and_monotone_after_warmup(total, ratio, style, min_ratio):
    f = LRFactor(total, warmup_steps_from_ratio(total, ratio), style, min_ratio)
    values = [f(s) for s in range(total + 3)]
    assert all(0.0 <= v <= 1.0 + 1e-12 for v in values)
    after = values[f.warmup_steps:]
    assert all(b <= a + 1e-12 for a, b in zip(after, after[1:]))


def test_scheduler_lr_sequence_and_state_dict():
    model = Tiny()
    opt = build_optimizer(model, name="adamw", lr=1.0, betas=(0.9, 0.9), eps=1e-8, weight_decay=0.0)
    sched = build_lr_scheduler(opt, total_steps=4, warmup_steps=2, decay_style="linear", lr=1.0, lr_min=0.5)
    seen = []
    for _ in range(5):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([0.0, 0.5, 1.0, 0.75, 0.5])
    state = sched.state_dict()
    assert state["last_epoch"] == 5


def test_clip_measures_and_clips():
    p = torch.nn.Parameter(torch.zeros(2))
    p.grad = torch.tensor([3.0, 4.0])
    assert clip_grad_norm_([p], 0.0).item() == pytest.approx(5.0)
    assert p.grad.tolist() == [3.0, 4.0]  # <= 0 disables clipping
    assert clip_grad_norm_([p], 1.0).item() == pytest.approx(5.0)
    assert p.grad.norm().item() == pytest.approx(1.0, rel=1e-5)


def _redistribution_advice(run) -> list[str]:
    """What DTensor's redistribution logs while ``run(mesh)`` runs on rank 0 of a fake
    4-rank job with an FSDP 2 x TP 2 mesh (its caches, and what it advised, emptied
    before)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import _redistribute

    from hyper_parallel.preflight.fake_world import fake_process_group

    _redistribute._warned_flatten_issues.clear()  # torch advises once per mesh and axes
    logger = logging.getLogger("torch.distributed.tensor._redistribute")
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.WARNING)  # whatever the process set for torch's loggers
    try:
        with fake_process_group(0, 4):
            run(init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp_shard", "tp")))
    finally:
        logger.setLevel(level)
        logger.removeHandler(handler)
    return [r.getMessage() for r in records]


def test_the_norm_over_an_fsdp_x_tp_mesh_logs_no_advice_to_flatten_it():
    """Every FSDP x TP rank's first gradient norm reduces over both axes one after the
    other, on purpose (one scalar; a flattened mesh would cost a communicator): DTensor's
    advice to flatten the mesh stays out of the log. It still advises elsewhere."""
    from torch.distributed.tensor import DTensor, Partial, Shard, distribute_tensor

    def norm(mesh):
        p = torch.nn.Parameter(distribute_tensor(torch.zeros(8, 8), mesh, [Shard(0), Shard(1)]))
        p.grad = distribute_tensor(torch.ones(8, 8), mesh, [Shard(0), Shard(1)])
        assert torch.isfinite(clip_grad_norm_([p], 1.0))

    def elsewhere(mesh):
        DTensor.from_local(torch.ones(()), mesh, [Partial(), Partial()]).full_tensor()

    assert not [m for m in _redistribution_advice(norm) if "sequential" in m]
    assert [m for m in _redistribution_advice(elsewhere) if "sequential" in m]


def test_shift_and_token_count():
    labels = torch.tensor([[5, 6, 7, -100]])
    assert shift_labels(labels).tolist() == [[6, 7, -100, -100]]
    assert count_tokens(labels) == 2


def test_token_loss_sum_matches_mean_cross_entropy():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 11)
    labels = torch.randint(0, 11, (2, 5))
    total, n = token_loss_sum(logits, labels)
    ref = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 11), labels[:, 1:].reshape(-1))
    assert n.item() == 8 and (total / n).item() == pytest.approx(ref.item(), rel=1e-6)


def test_token_weighted_equals_global_mean():
    # Two ranks x two micro-batches with different token counts: the reported loss is the
    # mean over all tokens, and backward scales undo FSDP's 1/dp averaging.
    sums, toks = [[2.0, 6.0], [3.0, 1.0]], [[2, 3], [4, 1]]
    g = sum(map(sum, toks))
    report = 0.0
    for r in range(2):
        sc = LossScaler("token_weighted", g, 2, 2)
        for s, t in zip(sums[r], toks[r]):
            report += sc.local_report(torch.tensor(s), t).item()
            assert sc.backward_loss(torch.tensor(s), t).item() == pytest.approx(s * 2 / g)
    assert report == pytest.approx(sum(map(sum, sums)) / g)


def test_rank_average_equals_mean_of_rank_means():
    sums, toks = [[2.0, 6.0], [3.0, 1.0]], [[2, 3], [4, 1]]
    report = 0.0
    for r in range(2):
        sc = LossScaler("rank_average", 10, 2, 2)
        for s, t in zip(sums[r], toks[r]):
            report += sc.local_report(torch.tensor(s), t).item()
    expected = ((2 / 2 + 6 / 3) / 2 + (3 / 4 + 1 / 1) / 2) / 2
    assert report == pytest.approx(expected)
    with pytest.raises(ValueError, match="token_weighted, rank_average"):
        LossScaler("mean", 1, 1, 1)
    assert math.isfinite(LossScaler("rank_average", 0, 1, 1).backward_loss(torch.tensor(1.0), 0).item())
