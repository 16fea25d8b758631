"""Preflight expands DTensor's sharding rules over the mesh once per distinct tensor of a
multi-tensor operator's list, not once per tensor, and gets what torch's own expansion gives
(``fake_world.patch_mesh_expansion``).

On a 2-D mesh torch prices every combination of the per-dimension rules, for each tensor of the
clipping's and the fused optimizer's parameter lists, most of whose entries are alike.
"""

from __future__ import annotations

import pytest
import torch
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor._ops import utils

from hyper_parallel.preflight.fake_world import fake_process_group, fake_world


def _priced(strategy) -> list[tuple]:
    """What an expansion decides: every candidate's specs and redistribution costs."""
    return [(s.output_specs, s.input_specs, s.redistribute_cost) for s in strategy.strategies]


@pytest.fixture
def expansions(monkeypatch) -> list[tuple]:
    """``(args, kwargs, result)`` of every call that reaches torch's own expansion."""
    from torch.distributed.tensor.debug import _clear_sharding_prop_cache

    calls: list[tuple] = []
    expand = utils.expand_to_full_mesh_op_strategy

    def counted(*args, **kwargs):
        result = expand(*args, **kwargs)
        calls.append((args, kwargs, result))
        return result

    monkeypatch.setattr(utils, "expand_to_full_mesh_op_strategy", counted)
    _clear_sharding_prop_cache()  # an earlier test's lookups would answer without expanding
    return calls


def _alike_and_other_parameters(mesh) -> list[torch.Tensor]:
    """Six alike weights sharded on both axes and two of another shape and placement."""
    alike = [distribute_tensor(torch.ones(8, 8), mesh, [Shard(0), Shard(1)]) for _ in range(6)]
    other = [distribute_tensor(torch.ones(4), mesh, [Shard(0), Replicate()]) for _ in range(2)]
    return alike + other


def test_alike_tensors_of_a_list_are_expanded_once_as_torch_expands_them(expansions):
    from torch.distributed.device_mesh import init_device_mesh

    with fake_process_group(0, 4):
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp_shard", "tp"))
        with fake_world():
            params = _alike_and_other_parameters(mesh)
            expansions.clear()  # what placing them expanded
            torch._foreach_mul_(params, 0.5)
            torch._foreach_add_(params, 1.0)
            assert [tuple(p.placements) for p in params] == (
                [(Shard(0), Shard(1))] * 6 + [(Shard(0), Replicate())] * 2)
            # two distinct tensors in each of the two operators' lists of eight
            assert len(expansions) == 4
            for args, kwargs, result in list(expansions):
                fresh = utils.expand_to_full_mesh_op_strategy.__wrapped__(*args, **kwargs)
                assert _priced(result) == _priced(fresh)
    # and torch's own expansion, once per tensor, outside the simulation
    with fake_process_group(0, 4):
        mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp_shard", "tp"))
        params = _alike_and_other_parameters(mesh)
        expansions.clear()
        torch._foreach_mul_(params, 0.5)
        assert len(expansions) == 8
