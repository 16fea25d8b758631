"""The MoE load balancing of a run (``runtime/moe_balance.py``, the ``moe`` section), one rank.

* The expert-bias rule: each expert's bias moves by ``coeff * sign(mean - count)``, centred, from
  the counts of the whole step; the counts start again from zero; the imbalance is max / mean.
* The auxiliary loss is ``coef x`` the load-balancing loss of the forward that just ran.
* A dense model refuses a balancing setting that is not off, naming the field.
* Through the engine: the aux loss is logged per step and moves the training; the bias moves
  the selection, and it is saved in checkpoints (a buffer of the router).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from hyper_parallel.models.qwen3_5_moe.moe import SparseMoeBlock, load_balancing_loss
from hyper_parallel.runtime.moe_balance import build_moe_balancer
from hyper_parallel.utils.errors import ConfigError


def _model(num_layers: int = 2) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.ModuleList(
        SparseMoeBlock(hidden_size=8, num_experts=4, top_k=2, moe_intermediate_size=8,
                       shared_expert_intermediate_size=8, implementation="loop")
        for _ in range(num_layers)
    )


def _section(aux: float = 0.0, coeff: float | None = None) -> SimpleNamespace:
    return SimpleNamespace(router_aux_loss_coef=aux, load_balance_coeff=coeff)


def test_expert_bias_rule_and_counts():
    model = _model()
    balancer = build_moe_balancer(model, _section(coeff=0.01), group=None)
    assert all(block.gate.use_expert_bias for block in model)
    counts = torch.tensor([[5.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0]])
    for block, c in zip(model, counts):
        block.tokens_per_expert.copy_(c)
    balancer.before_optimizer_step()
    # Layer 0: mean 2; expert 0 is over-used (down), the others under-used (up); centred.
    raw = 0.01 * torch.tensor([-1.0, 1.0, 1.0, 1.0])
    torch.testing.assert_close(model[0].gate.expert_bias, raw - raw.mean(), rtol=0, atol=1e-9)
    assert torch.equal(model[1].gate.expert_bias, torch.zeros(4))  # balanced: no move
    assert all(torch.equal(b.tokens_per_expert, torch.zeros(4)) for b in model)
    assert balancer.step_metrics(None) == {"moe_load_imbalance": pytest.approx((2.5 + 1.0) / 2)}
    assert balancer.expert_bias[1] == [0.0] * 4


def test_the_bias_moves_selection_in_a_forward():
    model = _model(1)
    block = model[0]
    x = torch.randn(1, 16, 8)
    build_moe_balancer(model, _section(coeff=0.01), group=None)
    block(x)
    before = block.last_router_stats.selected.clone()
    block.gate.expert_bias.copy_(torch.tensor([10.0, 0.0, 0.0, 0.0]))  # expert 0 always chosen
    block(x)
    assert block.last_router_stats.selected[0] == 16 != before[0]


def test_auxiliary_loss_is_the_weighted_load_balancing_loss():
    model = _model()
    balancer = build_moe_balancer(model, _section(aux=0.5), group=None)
    for block in model:
        block(torch.randn(2, 3, 8))
    expected = 0.5 * load_balancing_loss([b.last_router_stats for b in model], 4)
    assert torch.equal(balancer.auxiliary_loss(), expected)
    assert not any(block.gate.use_expert_bias for block in model)
    assert build_moe_balancer(model, _section(), group=None).auxiliary_loss() is None


@pytest.mark.parametrize("field,value", [("router_aux_loss_coef", 0.01),
                                         ("load_balance_coeff", 0.001)])
def test_a_dense_model_refuses_balancing(field, value):
    dense = torch.nn.Linear(2, 2)
    assert build_moe_balancer(dense, _section(), group=None) is None
    settings = {"aux": value} if field == "router_aux_loss_coef" else {"coeff": value}
    with pytest.raises(ConfigError, match="no mixture-of-experts layers") as info:
        build_moe_balancer(dense, _section(**settings), group=None)
    assert info.value.path == f"moe.{field}"


def test_engine_logs_and_applies_both(tmp_path, monkeypatch):
    """Three steps of the debug MoE model: the aux loss is logged every step and changes the
    losses from the second step on; the expert bias moves, and is in the checkpoint."""
    import torch.distributed.checkpoint as dcp

    from hyper_parallel.models.qwen3_5_moe import config_registry as registry

    monkeypatch.chdir(tmp_path)

    def run(**moe):
        config = registry.qwen3_5_moe_debugmodel()
        config.dataloader.dataset = "dummy"
        config.training.steps, config.training.seq_len = 3, 32
        config.model.num_hidden_layers = 4  # one layer of each kind suffices here
        config.checkpoint.interval = 3
        config.dump_folder = "."
        config.checkpoint.folder = "out_" + "_".join(sorted(moe))
        config.moe.load_balance_coeff = None
        for key, value in moe.items():
            setattr(config.moe, key, value)
        trainer = config.build()
        try:
            state = trainer.train()
            records = [json.loads(line) for line in
                       (tmp_path / config.checkpoint.folder / "metrics.jsonl").read_text().splitlines()]
            bias = trainer.moe_balancer.expert_bias
        finally:
            trainer.close()
        return [loss for _, loss in state.loss_history], records, bias, config.checkpoint.folder

    plain, plain_records, plain_bias, _ = run()
    aux, aux_records, _, _ = run(router_aux_loss_coef=0.1)
    _, _, bias, folder = run(load_balance_coeff=0.01)
    assert all("moe_aux_loss" in r and r["moe_aux_loss"] > 0 for r in aux_records)
    assert not any("moe_aux_loss" in r for r in plain_records)
    assert all(r["moe_load_imbalance"] >= 1.0 for r in plain_records)
    assert aux[0] == plain[0] and aux[1:] != plain[1:]  # the first step's loss is before it acts
    assert plain_bias == [[0.0] * 8] * 4 and bias != plain_bias
    saved = {"model": {"model.layers.0.mlp.gate.expert_bias": torch.zeros(8)}}
    dcp.load(saved, checkpoint_id=str(tmp_path / folder / "step_3"))
    assert saved["model"]["model.layers.0.mlp.gate.expert_bias"].tolist() == bias[0]
