"""The seam's contract: one YAML, two ways in, one engine.

The same legacy YAML is built through the legacy front door,
``LLMTrainer(parse_args(HyperTrainerConfig, [yaml]))``, and through the engine directly,
``HyperTrainer(_legacy_to_trainer_config(parse_args(HyperTrainerConfig, [yaml])))``. Both must be
the same class of engine built from equal configurations, with structurally equivalent
``model``, ``optimizer`` and ``lr_scheduler``: the same parameter names and shapes, the same
optimizer groups (hyperparameters and the parameters in each), the same scheduler kind and
learning rates. Then one step of each gives the same loss bit for bit, the structure being
only half of "the same run".

One rank, in this process (the engine forms a private 1-rank gloo group), so the contract is
checked in every fast run; the multi-rank equivalence of the two entries is the slow suite's
(golden losses, recipe-vs-YAML, cross-entry resume).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hyper_parallel.config.legacy_adapter import _legacy_to_trainer_config
from hyper_parallel.trainer.config import HyperTrainerConfig, parse_args
from hyper_parallel.trainer.hyper_trainer import HyperTrainer
from hyper_parallel.trainer.llm_trainer import LLMTrainer

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

EXAMPLES = Path(__file__).resolve().parents[4] / "examples" / "yaml"
#: (YAML, overrides): synthetic tokens; the shipped corpus with evaluation and AC, on one rank.
CASES = {
    "debug": ("train_qwen3_5_debug.yaml", ()),
    "fsdp2 on one rank": ("train_qwen3_5_fsdp2.yaml", ("--train.accelerator.dp_shard=1",)),
}


def _parse(yaml_name: str, overrides: tuple, out: Path) -> HyperTrainerConfig:
    return parse_args(HyperTrainerConfig, [str(EXAMPLES / yaml_name), *overrides,
                                           f"--train.checkpoint.output_dir={out}",
                                           "--train.max_steps=1"])


def _parameters(trainer) -> list[tuple[str, tuple[int, ...]]]:
    return [(name, tuple(p.shape)) for name, p in trainer.model.named_parameters()]


def _groups(trainer) -> list:
    names = {id(p): name for name, p in trainer.model.named_parameters()}
    return [
        (type(opt).__name__,
         [({k: v for k, v in group.items() if k != "params"},
           [names[id(p)] for p in group["params"]]) for group in opt.param_groups])
        for opt in trainer.optimizer
    ]


def _schedulers(trainer) -> list:
    return [(type(s).__name__, s.get_last_lr()) for s in trainer.lr_scheduler.schedulers]


def _structure_and_one_step(trainer) -> tuple:
    """What the trainer built (its config, parameters, optimizer groups, schedulers) and the
    loss of its one step; the trainer is closed afterwards."""
    try:
        view = (trainer.config, _parameters(trainer), _groups(trainer), _schedulers(trainer))
        return (*view, trainer.train().loss_history)
    finally:
        trainer.close()


@pytest.fixture
def in_tmp(tmp_path):
    cwd = os.getcwd()
    os.chdir(tmp_path)
    yield tmp_path
    os.chdir(cwd)


@pytest.mark.parametrize("case", sorted(CASES))
def test_both_paths_build_one_engine_with_the_same_structure(case, in_tmp):
    yaml_name, overrides = CASES[case]
    legacy = LLMTrainer(_parse(yaml_name, overrides, in_tmp / "legacy"))
    assert isinstance(legacy, HyperTrainer)
    assert type(legacy).__mro__[1] is HyperTrainer  # the front door adds no engine of its own
    legacy_config, *legacy_view, legacy_loss = _structure_and_one_step(legacy)
    new = HyperTrainer(_legacy_to_trainer_config(_parse(yaml_name, overrides, in_tmp / "new")))
    assert type(new) is HyperTrainer
    new_config, *new_view, new_loss = _structure_and_one_step(new)

    # Equal configurations, the output folder apart (each run writes to a folder of its own).
    assert legacy_config.checkpoint.folder != new_config.checkpoint.folder
    legacy_config.checkpoint.folder = new_config.checkpoint.folder
    legacy_config.metrics.save_tb_folder = new_config.metrics.save_tb_folder
    assert legacy_config == new_config
    params, groups, schedulers = legacy_view
    assert params and params == new_view[0]  # parameter names and shapes
    assert groups == new_view[1]  # optimizer kind, group hyperparameters, members
    assert schedulers == new_view[2]  # scheduler kind and learning rates
    assert len(legacy_loss) == 1 and legacy_loss == new_loss  # bit for bit
