"""The warm-up step stands for a step's first micro-batch wherever what that micro-batch leaves
is gradients of the parameters' own layouts (``simulate.warm_up_is_first_micro_batch``): every
figure is the one stepping the first micro-batch gives, to the byte.

Roles whose gradients autograd accumulates -- one rank, a dense and a mixture-of-experts model,
and tensor parallelism's DTensor shards -- on the tiny flavor (the MoE debug model's first 2
layers), two micro-batches a step (FSDP's roots, the shortcut's first case, are held by
``test_accumulation.py``). When the step's work is recorded such a role steps its first
micro-batch, whose work lacks the gradients' addition: that measurement is the reference.
"""

from __future__ import annotations

import pytest

from hyper_parallel.preflight import run, simulate

TINY = '--model.config_overrides={"flavor": "tiny"}'
#: name -> (command line, world): 4 rows a step, 2 a micro-batch.
ROLES = {
    "1 rank": (["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel", TINY], 1),
    "TP 2": (["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_tp2", TINY], 2),
    "MoE, 1 rank": (["--module", "qwen3_5_moe", "--config", "qwen3_5_moe_debugmodel",
                     '--model.config_overrides={"num_hidden_layers": 2}'], 1),
}


#: The engine's own decision, spied on by each measurement.
DECIDE = simulate.warm_up_is_first_micro_batch


def _simulation(argv: list[str]):
    from hyper_parallel.config.manager import ConfigManager
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    config = ConfigManager(root_type=HyperTrainer.Config).parse_args(
        [*argv, "--training.global_batch_size=4", "--training.local_batch_size=2"])
    return simulate.simulation_config(config)


def _measured(argv: list[str], world: int, monkeypatch, work: list | None = None) -> tuple:
    """``(the role's RoleMemory, what warm_up_is_first_micro_batch answered)``; ``work``:
    the step's work recorded into it."""
    answers: list[bool] = []

    def spied(build, recorded=False):
        answers.append(DECIDE(build, recorded))
        return answers[-1]

    monkeypatch.setattr(simulate, "warm_up_is_first_micro_batch", spied)
    memory, _ = run.measure_role(_simulation(argv), 0, world, 1.0, extrapolate_depth=False,
                                 work=work)
    return memory, answers


@pytest.mark.parametrize("name", sorted(ROLES))
def test_the_warm_up_stands_for_the_first_micro_batch_with_every_figure_the_same(
        name, monkeypatch):
    """The same role measured twice: for its memory alone, the warm-up standing for the first
    micro-batch; with its work recorded, which steps the first micro-batch."""
    argv, world = ROLES[name]
    memory, answers = _measured(argv, world, monkeypatch)
    assert answers == [True]
    stepped, answers = _measured(argv, world, monkeypatch, work=[])
    assert answers == [False]
    assert (memory.micro_batches, memory.micro_batches_stepped) == (2, 2)
    assert memory == stepped  # every kind of byte, to the byte
