"""No FSDP2 unit of the Qwen3.5 MoE model returns a view.

FSDP2 registers its pre-backward hook (the all-gather of a unit's weights before its backward)
on the tensors a unit returns; an in-place op on a returned *view* rebases the view's autograd
history and drops that hook, so torch warns "FSDP2-wrapped module (...) returned a view tensor"
on every forward. Two identity autograd functions used to return ``view_as``: the routed
experts' gradient-contiguity identity (``FSDPGroupedExperts``) and ``DTensor.to_local()`` on the
tensor-parallel ``lm_head``'s logits (the root unit). These run the real units, in this
process, on a one-rank gloo group (FSDP x TP on a 1 x 1 mesh), with that warning an error.
"""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from hyper_parallel.models.qwen3_5.parallelize import apply_tp
from hyper_parallel.models.qwen3_5_moe import FLAVORS
from hyper_parallel.models.qwen3_5_moe.model import Qwen3_5MoeForCausalLM
from hyper_parallel.models.qwen3_5_moe.moe import GroupedExperts
from hyper_parallel.models.qwen3_5_moe.parallelize import MOE_MLP_PLAN, apply_moe_fsdp

VIEW_WARNING = r"FSDP2-wrapped module \(.*\) returned a view tensor"


@pytest.fixture
def one_rank_group():
    """A one-rank gloo process group for this test (none may exist already)."""
    assert not dist.is_initialized(), "another test left a process group behind"
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


@contextlib.contextmanager
def view_warning_raises():
    """FSDP2's view warning raises in this block (any other warning is left alone)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", VIEW_WARNING, UserWarning)
        yield


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_grouped_experts_unit_returns_no_view_and_the_same_bits(one_rank_group, dtype):
    torch.manual_seed(0)
    experts = GroupedExperts(4, 32, 16, "grouped_mm").to(dtype)
    x = torch.randn(6, 32, dtype=dtype, requires_grad=True)
    counts = torch.tensor([2, 0, 4, 0])
    assert experts._grouped_mm_runs(x)  # the path whose identity returned a view

    def step(module):
        x.grad = None
        out = module(x, counts)
        out.sum().backward()  # a stride-0 gradient: the identity's other job
        grads = [p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
                 for p in (module.gate_up_proj, module.down_proj)]
        return out, [out.detach(), x.grad.clone(), *grads]

    plain_out, plain = step(experts)
    experts.zero_grad(set_to_none=True)
    fully_shard(experts, mesh=init_device_mesh("cpu", (1,)))
    with view_warning_raises():
        out, sharded = step(experts)
    assert plain_out._base is None and out._base is None
    for a, b in zip(sharded, plain, strict=True):
        assert torch.equal(a, b)


def test_moe_model_units_return_no_views_under_fsdp_and_tp(one_rank_group):
    """Every unit of the model under TP -> FSDP as ``parallelize_qwen3_5_moe`` applies them:
    the experts' units, the decoder layers and the root (the TP ``lm_head``'s logits)."""
    config = FLAVORS["debugmodel"].replace(num_hidden_layers=2, full_attention_interval=2,
                                           vocab_size=64)
    torch.manual_seed(0)
    model = Qwen3_5MoeForCausalLM(config)
    mesh = init_device_mesh("cpu", (1, 1), mesh_dim_names=("dp_shard", "tp"))
    apply_tp(model, mesh["tp"], MOE_MLP_PLAN)
    apply_moe_fsdp(model, mesh["dp_shard"], mesh["dp_shard"], mp_policy=None,
                   reshard_after_forward=True, cpu_offload=False)
    ids = torch.randint(0, 64, (2, 16))
    with view_warning_raises():
        logits = model(ids)
        logits.sum().backward()
    assert logits._base is None
    assert all(p.grad is not None for p in model.parameters())
