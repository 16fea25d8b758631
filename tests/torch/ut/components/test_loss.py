"""``CrossEntropyLoss`` against the legacy loss helpers and the legacy ``train_step``."""

from __future__ import annotations

import pytest
import torch

from hyper_parallel.components import (
    BaseLoss,
    CrossEntropyLoss,
    LRSchedulersContainer,
    OptimizersContainer,
)
from hyper_parallel.runtime.loss import LossScaler, count_tokens, token_loss_sum
from hyper_parallel.runtime.step import evaluate, train_step
from tests.torch.ut.components._common import (
    batch_of,
    legacy_config,
    legacy_lr_scheduler,
    legacy_optimizer,
    tiny_model,
)


@pytest.fixture(scope="module")
def debugmodel():
    from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM

    torch.manual_seed(0)
    return Qwen3_5ForCausalLM(FLAVORS["debugmodel"])


def test_loss_of_a_batch_equals_the_legacy_helpers(debugmodel):
    batch = batch_of(vocab=2048, batch=2, seq=16)
    with torch.no_grad():
        logits = debugmodel(batch["input_ids"])
    loss = CrossEntropyLoss.Config().build()
    total, tokens = loss.loss_sum(logits, batch["labels"])
    legacy_total, legacy_tokens = token_loss_sum(logits, batch["labels"])
    assert torch.equal(total, legacy_total) and torch.equal(tokens, legacy_tokens)
    assert loss.count_tokens(batch["labels"]) == count_tokens(batch["labels"]) == 2 * 15 - 2
    # The mean is the plain next-token cross-entropy over the counted positions.
    reference = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
        batch["labels"][:, 1:].reshape(-1),
        ignore_index=-100,
    )
    assert torch.allclose(loss(logits, batch["labels"]), reference)


@pytest.mark.parametrize("aggregation", ["token_weighted", "rank_average"])
def test_scaler_is_the_legacy_loss_scaler(aggregation):
    loss = CrossEntropyLoss.Config(aggregation=aggregation).build()
    assert loss.aggregation == aggregation
    assert loss.scaler(global_tokens=40, num_micro_batches=3, dp_size=2) == LossScaler(
        aggregation, 40, 3, 2
    )


@pytest.mark.parametrize("aggregation", ["token_weighted", "rank_average"])
def test_train_step_with_the_component_is_bit_identical_to_the_legacy(aggregation):
    """Three micro-batches with different token counts (so the aggregations differ)."""
    args = legacy_config(optimizer={"loss_aggregation": aggregation, "lr": 1e-2}, max_steps=5)
    micro_batches = [batch_of(seed=s) for s in range(3)]
    micro_batches[1]["labels"][:, :4] = -100

    def run(**loss_kwargs):
        model = tiny_model()
        optimizer = legacy_optimizer(args, model)
        scheduler = legacy_lr_scheduler(args, optimizer)
        results = [
            train_step(
                model,
                optimizer,
                scheduler,
                micro_batches,
                device=torch.device("cpu"),
                dp_group=None,
                dp_size=1,
                max_grad_norm=1.0,
                **loss_kwargs,
            )
            for _ in range(2)
        ]
        return results, model

    legacy_results, legacy_model = run(loss_aggregation=aggregation)
    loss = CrossEntropyLoss.Config(aggregation=aggregation).build()
    new_results, new_model = run(loss_fn=loss)
    assert new_results == legacy_results  # loss, grad norm and tokens, exactly
    for a, b in zip(legacy_model.parameters(), new_model.parameters()):
        assert torch.equal(a, b)
    other = "rank_average" if aggregation == "token_weighted" else "token_weighted"
    assert run(loss_aggregation=other)[0][0].loss != legacy_results[0].loss  # the switch matters


def test_train_step_with_all_components_matches_the_legacy_trainer():
    """Optimizer + LR scheduler + loss components against BaseTrainer's build steps."""
    args = legacy_config(optimizer={"lr": 1e-2}, max_steps=4)
    micro_batches = [batch_of(seed=s) for s in range(2)]
    common = {"device": torch.device("cpu"), "dp_group": None, "dp_size": 1, "max_grad_norm": 1.0}

    legacy_model = tiny_model()
    opt = legacy_optimizer(args, legacy_model)
    sched = legacy_lr_scheduler(args, opt)
    legacy = [
        train_step(legacy_model, opt, sched, micro_batches, loss_aggregation="token_weighted", **common)
        for _ in range(4)
    ]

    model = tiny_model()
    optimizers = OptimizersContainer.Config(lr=1e-2).build(model_parts=[model])
    schedulers = LRSchedulersContainer.Config(warmup_steps=1).build(
        optimizers=optimizers, training_steps=4
    )
    loss = CrossEntropyLoss.Config().build()
    new = [
        train_step(model, optimizers, schedulers, micro_batches, loss_fn=loss, **common)
        for _ in range(4)
    ]
    assert new == legacy


def test_evaluate_with_the_component_equals_the_legacy():
    model = tiny_model()
    batches = [batch_of(seed=s) for s in range(3)]
    kw = {"device": torch.device("cpu"), "dp_group": None}
    assert evaluate(model, batches, loss_fn=CrossEntropyLoss.Config().build(), **kw) == evaluate(
        model, batches, **kw
    )


def test_train_step_rejects_contradicting_aggregations():
    model = tiny_model()
    loss = CrossEntropyLoss.Config(aggregation="rank_average").build()
    with pytest.raises(ValueError, match="contradicts the loss's aggregation='rank_average'"):
        train_step(
            model,
            None,
            None,
            [batch_of()],
            device=torch.device("cpu"),
            loss_aggregation="token_weighted",
            dp_group=None,
            dp_size=1,
            max_grad_norm=1.0,
            loss_fn=loss,
        )
    with pytest.raises(TypeError, match="needs loss_aggregation"):
        train_step(
            model, None, None, [batch_of()], device=torch.device("cpu"), dp_group=None,
            dp_size=1, max_grad_norm=1.0,
        )


def test_base_loss_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        BaseLoss.Config().build()


def test_only_the_pipeline_ignore_index_is_accepted():
    assert CrossEntropyLoss.Config(ignore_index=-100).ignore_index == -100
    with pytest.raises(ValueError, match=r"CrossEntropyLoss.Config.ignore_index=-1: only -100"):
        CrossEntropyLoss.Config(ignore_index=-1)


@pytest.mark.parametrize("aggregation", ["token_weighted", "rank_average"])
def test_ranks_that_split_a_batch_train_that_batch(aggregation):
    """Two data-parallel ranks, each batch split over two ranks (expert parallelism): the four
    ranks' backward tensors, averaged as FSDP averages them, and their reports, summed, are
    those of the two unsplit batches on two ranks."""
    losses = [[3.0, 5.0], [2.0, 7.0]]  # [data rank][split rank]: loss sums of its rows
    tokens = [[4, 6], [1, 9]]
    global_tokens = sum(map(sum, tokens))
    whole = LossScaler(aggregation, global_tokens, num_micro_batches=1, dp_size=2)
    split = LossScaler(aggregation, global_tokens, num_micro_batches=1, dp_size=4, split=2)
    expected_grad = sum(whole.backward_loss(torch.tensor(sum(l)), sum(t))
                        for l, t in zip(losses, tokens)) / 2
    expected_report = sum(whole.local_report(torch.tensor(sum(l)), sum(t))
                          for l, t in zip(losses, tokens))
    # Each split rank sees its own loss sum and, for rank_average, its batch's whole token count.
    grad = sum(split.backward_loss(torch.tensor(l), sum(t)) for ls, t in zip(losses, tokens)
               for l in ls) / 4
    report = sum(split.local_report(torch.tensor(l), sum(t)) for ls, t in zip(losses, tokens)
                 for l in ls)
    torch.testing.assert_close(grad, expected_grad)
    torch.testing.assert_close(report, expected_report)
