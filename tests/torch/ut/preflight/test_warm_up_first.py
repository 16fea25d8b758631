"""The warm-up step stands for a step's first micro-batch wherever what that micro-batch leaves
is gradients of the parameters' own layouts (``simulate.warm_up_is_first_micro_batch``): every
figure is the one stepping the first micro-batch gives, to the byte.

Roles whose gradients autograd accumulates -- one rank, a dense and a mixture-of-experts model,
and tensor parallelism's DTensor shards -- on the tiny flavor (the MoE debug model's first 2
layers), two micro-batches a step (FSDP's roots, the shortcut's first case, are held by
``test_accumulation.py``). When the step's work is recorded such a role steps its first
micro-batch, whose work lacks the gradients' addition: that measurement is the reference.

The warm-up steps without activation checkpointing's recomputation
(``simulate.without_recomputation``): checkpointed roles -- FSDP's, tensor and expert
parallelism's, full and selective -- measured against a warm-up that recomputes, the step's
work recorded: every figure the same.
"""

from __future__ import annotations

import contextlib

import pytest
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

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


def _simulation(argv: list[str], global_batch: int = 4):
    from hyper_parallel.config.manager import ConfigManager
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    config = ConfigManager(root_type=HyperTrainer.Config).parse_args(
        [*argv, f"--training.global_batch_size={global_batch}", "--training.local_batch_size=2"])
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


#: name -> (command line, world, rows a step): checkpointed roles, two micro-batches of 2 rows
#: a rank (FSDP's warm-up stands for the first; the others step both after it).
CHECKPOINTED = {
    "FSDP 2, full": (["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_fsdp2", TINY,
                      "--activation_checkpoint.mode=full"], 2, 8),
    "TP 2, selective": (["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_tp2", TINY,
                         "--activation_checkpoint.mode=selective"], 2, 4),
    "MoE, EP 2, full": (["--module", "qwen3_5_moe", "--config", "qwen3_5_moe_debugmodel_ep2",
                         '--model.config_overrides={"num_hidden_layers": 2}',
                         "--activation_checkpoint.mode=full"], 2, 4),
}


CHECKPOINTED_FORWARD = CheckpointWrapper.forward


def _checkpointed_forwards(argv: list[str], world: int, rows: int, monkeypatch) -> tuple:
    """``(RoleMemory, RoleWork, the checkpointed forwards the role ran)``."""
    forwards: list[int] = []

    def counted(self, *args, **kwargs):
        forwards.append(1)
        return CHECKPOINTED_FORWARD(self, *args, **kwargs)

    monkeypatch.setattr(CheckpointWrapper, "forward", counted)
    work: list = []
    memory, _ = run.measure_role(_simulation(argv, rows), 0, world, 1.0,
                                 extrapolate_depth=False, work=work)
    assert memory.micro_batches == 2
    return memory, work, len(forwards)


@pytest.mark.parametrize("name", sorted(CHECKPOINTED))
def test_the_warm_up_steps_without_recomputation_with_every_figure_the_same(name, monkeypatch):
    argv, world, rows = CHECKPOINTED[name]
    memory, work, forwards = _checkpointed_forwards(argv, world, rows, monkeypatch)
    monkeypatch.setattr(simulate, "without_recomputation", lambda build: contextlib.nullcontext())
    recomputing, recomputing_work, every_forward = _checkpointed_forwards(argv, world, rows,
                                                                          monkeypatch)
    assert 0 < forwards < every_forward  # the warm-up's layers ran unwrapped
    assert memory == recomputing  # every kind of byte, to the byte
    assert work == recomputing_work  # FLOPs, bytes, collectives, operators
