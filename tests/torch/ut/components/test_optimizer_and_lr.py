"""``OptimizersContainer`` and ``LRSchedulersContainer`` against the legacy build steps."""

from __future__ import annotations

import math

import pytest
import torch
import torch.distributed.checkpoint as dcp

from hyper_parallel.components import LRSchedulersContainer, OptimizersContainer
from hyper_parallel.runtime.optim import warmup_steps_from_ratio
from tests.torch.ut.components._common import (
    TinyLM,
    backward_through,
    batch_of,
    legacy_config,
    legacy_lr_scheduler,
    legacy_optimizer,
    tiny_model,
    two_parts,
)

SETTINGS = [
    {},  # the defaults on both sides
    {"type": "adam", "lr": 3e-3, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.0},
    {"type": "adamw", "lr": 1e-2, "weight_decay": 0.1, "foreach": True},
    {"type": "adamw", "foreach": False},
]


def to_component(legacy: dict) -> OptimizersContainer.Config:
    """The component Config with the same settings as a legacy ``train.optimizer`` dict."""
    names = {"adamw": "AdamW", "adam": "Adam"}
    kw = {k: v for k, v in legacy.items() if k != "type"}
    if "type" in legacy:
        kw["name"] = names[legacy["type"]]
    return OptimizersContainer.Config(**kw)


def named_groups(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> list[dict]:
    """Param groups with parameter *names* (in order) instead of tensors."""
    names = {}
    for name, p in model.named_parameters():
        names.setdefault(id(p), name)
    return [
        {**{k: v for k, v in g.items() if k != "params"}, "params": [names[id(p)] for p in g["params"]]}
        for g in optimizer.param_groups
    ]


def train(model, optimizer, scheduler, steps: int) -> list[float]:
    lrs = []
    for step in range(steps):
        lrs.append(optimizer.param_groups[0]["lr"])
        batch = batch_of(seed=step)
        model(batch["input_ids"]).float().pow(2).mean().backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    return lrs


# ---------------------------------------------------------------------------------- optimizer


@pytest.mark.parametrize("legacy", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "defaults")
def test_param_groups_and_hyperparameters_equal_the_legacy(legacy):
    args = legacy_config(optimizer=legacy)
    old_model, new_model = tiny_model(), tiny_model()
    old = legacy_optimizer(args, old_model)
    container = to_component(legacy).build(model_parts=[new_model])

    assert len(container) == 1 and type(container.optimizers[0]) is type(old)
    assert named_groups(container.optimizers[0], new_model) == named_groups(old, old_model)
    assert container.optimizers[0].defaults == old.defaults
    # The rule itself: biases and norms are not decayed; frozen parameters are left out.
    decay, no_decay = named_groups(old, old_model)
    # (named_parameters order: a module's own parameters before its children's)
    assert decay["params"] == ["A_log", "embed_tokens.weight", "proj.weight", "lm_head.weight"]
    assert no_decay["params"] == ["q_norm", "proj.bias", "input_layernorm.weight", "input_layernorm.bias"]
    assert no_decay["weight_decay"] == 0.0


def test_updates_are_bit_identical_to_the_legacy_optimizer():
    legacy = {"type": "adamw", "lr": 1e-2, "weight_decay": 0.1}
    args = legacy_config(optimizer=legacy, max_steps=20)
    old_model, new_model = tiny_model(), tiny_model()
    old_opt = legacy_optimizer(args, old_model)
    old_sched = legacy_lr_scheduler(args, old_opt)
    container = to_component(legacy).build(model_parts=[new_model])
    schedulers = LRSchedulersContainer.Config(warmup_steps=2).build(
        optimizers=container, training_steps=20
    )
    train(old_model, old_opt, old_sched, 4)
    train(new_model, container, schedulers, 4)
    for (name, a), b in zip(old_model.named_parameters(), new_model.parameters()):
        assert torch.equal(a, b), name


def test_no_decay_keywords_select_the_no_decay_group():
    model = tiny_model()
    container = OptimizersContainer.Config(no_decay_keywords=["lm_head"]).build(model_parts=[model])
    decay, no_decay = named_groups(container.optimizers[0], model)
    assert no_decay["params"] == ["lm_head.weight"]
    assert "proj.bias" in decay["params"]


def test_one_optimizer_per_model_part():
    parts = two_parts()
    container = OptimizersContainer.Config().build(model_parts=parts)
    assert len(container) == 2 and list(container) == container.optimizers
    assert len(container.param_groups) == 4  # two groups per part, part order
    assert container.param_groups[2] is container.optimizers[1].param_groups[0]
    assert container.state == {}
    backward_through(parts)
    container.step()
    assert len(container.state) == sum(
        sum(p.requires_grad for p in part.parameters()) for part in parts
    )
    container.zero_grad()
    assert all(p.grad is None for part in parts for p in part.parameters())


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_state_dict_is_flattened_dcp_and_round_trips(tmp_path):
    parts = two_parts(0)
    container = OptimizersContainer.Config(lr=1e-2).build(model_parts=parts)
    backward_through(parts, seed=0)
    container.step()
    state = container.state_dict()
    # Flattened per parameter FQN; both parts' parameters are present.
    assert "state.proj.weight.exp_avg" in state and "param_groups.proj.weight.lr" in state
    assert "state.tail_proj.weight.exp_avg_sq" in state
    dcp.save({"optimizer": state}, checkpoint_id=str(tmp_path), no_dist=True)

    fresh_parts = two_parts(1)
    fresh = OptimizersContainer.Config(lr=1e-2).build(model_parts=fresh_parts)
    backward_through(fresh_parts, seed=5)  # a different state of the same structure
    fresh.step()
    template = {"optimizer": fresh.state_dict()}
    dcp.load(template, checkpoint_id=str(tmp_path), no_dist=True)
    fresh.load_state_dict(template["optimizer"])
    for old, new in zip(container.optimizers, fresh.optimizers):
        for p_old, p_new in zip(
            [p for g in old.param_groups for p in g["params"]],
            [p for g in new.param_groups for p in g["params"]],
        ):
            for key in ("exp_avg", "exp_avg_sq", "step"):
                assert torch.equal(old.state[p_old][key], new.state[p_new][key])


def test_parts_with_the_same_parameter_names_are_rejected_at_save():
    parts = [tiny_model(0), tiny_model(1)]  # both hold "proj.weight"
    container = OptimizersContainer.Config().build(model_parts=parts)
    for part in parts:
        part(batch_of()["input_ids"]).sum().backward()
    container.step()
    with pytest.raises(ValueError, match="two model parts both hold 'state\\."):
        container.state_dict()


def test_model_parts_must_be_modules():
    with pytest.raises(TypeError, match="model_parts=\\[nn.Module"):
        OptimizersContainer.Config().build(model_parts=[])
    # A bare module is accepted as one part.
    assert len(OptimizersContainer.Config().build(model_parts=TinyLM())) == 1


# ---------------------------------------------------------------------------------- LR schedule


@pytest.mark.parametrize("style", ["cosine", "linear", "constant"])
@pytest.mark.parametrize("ratio", [0.1, 0.25, 0.0, 1.0])
def test_lr_of_every_step_equals_the_legacy(style, ratio):
    steps = 20
    args = legacy_config(
        optimizer={"lr": 2e-3, "lr_min": 1e-4, "lr_decay_style": style, "lr_warmup_ratio": ratio},
        max_steps=steps,
    )
    old_model, new_model = tiny_model(), tiny_model()
    old_opt = legacy_optimizer(args, old_model)
    old_sched = legacy_lr_scheduler(args, old_opt)
    container = OptimizersContainer.Config(lr=2e-3).build(model_parts=[new_model])
    schedulers = LRSchedulersContainer.Config(
        warmup_steps=warmup_steps_from_ratio(steps, ratio), decay_style=style, lr_min=1e-4
    ).build(optimizers=container, training_steps=steps)

    # Beyond the horizon too: the factor stays at its final value.
    old_lrs = train(old_model, old_opt, old_sched, steps + 3)
    new_lrs = train(new_model, container, schedulers, steps + 3)
    assert new_lrs == old_lrs  # exact, every step
    assert schedulers.get_last_lr() == old_sched.get_last_lr()
    assert schedulers.state_dict() == old_sched.state_dict()
    if style != "constant" and ratio < 1.0:
        assert math.isclose(new_lrs[steps], 1e-4)


def test_default_warmup_is_the_legacy_default_ratio_of_the_default_steps():
    from hyper_parallel.trainer.config import OptimizerConfig, TrainConfig

    legacy = warmup_steps_from_ratio(TrainConfig().max_steps, OptimizerConfig().lr_warmup_ratio)
    assert LRSchedulersContainer.Config().warmup_steps == legacy == 10


def test_every_optimizer_gets_a_scheduler_with_its_own_peak_lr():
    parts = two_parts()
    container = OptimizersContainer.Config(lr=1.0).build(model_parts=parts)
    container.optimizers[1].defaults["lr"] = 0.5  # as if built with another peak LR
    for g in container.optimizers[1].param_groups:
        g["lr"] = 0.5
    schedulers = LRSchedulersContainer.Config(
        warmup_steps=0, decay_style="linear", lr_min=0.25
    ).build(optimizers=container, training_steps=2)
    assert len(schedulers) == 2
    for _ in range(2):
        container.step()
        schedulers.step()
    assert [s.get_last_lr()[0] for s in schedulers] == [0.25, 0.25]  # absolute floor for both


def test_warmup_longer_than_the_run_is_clamped(caplog):
    container = OptimizersContainer.Config(lr=1.0).build(model_parts=[tiny_model()])
    with caplog.at_level("WARNING"):
        schedulers = LRSchedulersContainer.Config(warmup_steps=50).build(
            optimizers=container, training_steps=4
        )
    assert schedulers.warmup_steps == 4 and "exceeds the 4 training steps" in caplog.text
    assert schedulers.config.warmup_steps == 50  # the config keeps what the user wrote


def test_scheduler_state_round_trips_into_every_scheduler():
    container = OptimizersContainer.Config(lr=1.0).build(model_parts=two_parts())
    schedulers = LRSchedulersContainer.Config(warmup_steps=2).build(
        optimizers=container, training_steps=10
    )
    for _ in range(3):
        container.step()
        schedulers.step()
    fresh_opt = OptimizersContainer.Config(lr=1.0).build(model_parts=two_parts())
    fresh = LRSchedulersContainer.Config(warmup_steps=2).build(
        optimizers=fresh_opt, training_steps=10
    )
    fresh.load_state_dict(schedulers.state_dict())
    fresh.step()
    schedulers.step()
    assert [s.get_last_lr() for s in fresh] == [s.get_last_lr() for s in schedulers]
    assert all(s.last_epoch == 4 for s in fresh)


def test_scheduler_build_arguments_are_checked():
    container = OptimizersContainer.Config().build(model_parts=[tiny_model()])
    with pytest.raises(ValueError, match="training_steps >= 1"):
        LRSchedulersContainer.Config().build(optimizers=container, training_steps=0)
    with pytest.raises(TypeError, match="optimizers= an OptimizersContainer"):
        LRSchedulersContainer.Config().build(optimizers=[], training_steps=5)
    # A single torch optimizer is accepted too.
    single = LRSchedulersContainer.Config().build(
        optimizers=container.optimizers[0], training_steps=5
    )
    assert len(single) == 1
