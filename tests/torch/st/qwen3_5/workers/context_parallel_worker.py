"""Rank worker for tests/torch/st/qwen3_5/test_context_parallel.py (gloo, CPU, cp = world size).

Usage: ``context_parallel_worker.py <result.json>``. For every case of :data:`CASES` each rank
builds the same token mixer (a full-attention or a Gated DeltaNet layer, same seed on every
rank) twice: the reference runs the whole sequence, the context-parallel copy (its plan from
:func:`apply_cp`'s :class:`ContextParallel`) runs this rank's shard ``[r S/cp, (r+1) S/cp)``
with the global positions. Both get ``loss = sum(y * c)`` backward. Each rank reports the max
abs difference of its output shard, of its input-gradient shard, and of every parameter
gradient (the CP copy's all-reduced over the ranks, as FSDP does) against the reference, with
the magnitudes to state relative bounds, and the collectives the CP forward issued.

The causality cases change the input at one position ``p`` (and every later one) and report
how much the outputs *before* ``p`` moved (must be exactly 0) and after it (must move).

Rank 0 writes ``{case: [rank 0's report, ...]}`` to ``<result.json>``.
"""

from __future__ import annotations

import copy
import json
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from hyper_parallel.models.qwen3_5.attention import Qwen3_5Attention
from hyper_parallel.models.qwen3_5.configuration import Qwen3_5Config
from hyper_parallel.models.qwen3_5.context_parallel import ContextParallel
from hyper_parallel.models.qwen3_5.gated_deltanet import Qwen3_5GatedDeltaNet
from hyper_parallel.models.qwen3_5.rope import Qwen3_5RotaryEmbedding

SEED = 1234
BATCH, SEQ = 2, 256


def config(q_heads: int, kv_heads: int, k_heads: int, v_heads: int) -> Qwen3_5Config:
    return Qwen3_5Config(
        vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=4,
        num_attention_heads=q_heads, num_key_value_heads=kv_heads, head_dim=16,
        partial_rotary_factor=0.5, mrope_section=[1, 1, 2], linear_num_key_heads=k_heads,
        linear_num_value_heads=v_heads, linear_key_head_dim=16, linear_value_head_dim=16,
        kernels="torch",
    )


#: name -> (mixer, attention mode, linear mode, async, head counts (q, kv, k, v))
CASES = {
    "attention_ulysses": ("attention", "ulysses", "ulysses", False, (4, 4, 2, 4)),
    "attention_ulysses_async": ("attention", "ulysses", "ulysses", True, (4, 4, 2, 4)),
    "attention_ulysses_kv_repeat": ("attention", "ulysses", "ulysses", False, (4, 1, 2, 4)),
    "attention_allgather": ("attention", "allgather", "ulysses", False, (4, 2, 2, 4)),
    "gdn_ulysses": ("gdn", "ulysses", "ulysses", False, (4, 2, 4, 4)),
    "gdn_ulysses_async": ("gdn", "ulysses", "ulysses", True, (4, 2, 4, 8)),
    "gdn_p2p": ("gdn", "ulysses", "p2p", False, (4, 2, 1, 2)),
}
CAUSALITY = ("attention_ulysses", "attention_allgather", "gdn_ulysses", "gdn_p2p")


def build(case: str):
    mixer, attention, linear, async_comm, heads = CASES[case]
    cfg = config(*heads)
    torch.manual_seed(SEED)
    module = Qwen3_5Attention(cfg) if mixer == "attention" else Qwen3_5GatedDeltaNet(cfg)
    if mixer == "gdn":  # the Linears keep torch's init; make the mixer's own weights matter
        module.reset_parameters(std=0.2)
    return cfg, module, (attention, linear, async_comm)


def run(module, cfg, x, positions, grad):
    x = x.detach().clone().requires_grad_(True)
    if isinstance(module, Qwen3_5Attention):
        rope = Qwen3_5RotaryEmbedding(cfg)
        y = module(x, rope(positions.unsqueeze(0).expand(x.shape[0], -1)))
    else:
        y = module(x)
    if grad is not None:
        (y * grad).sum().backward()
    return y.detach(), None if grad is None else x.grad


def compare(case: str, mesh, rank: int, world: int) -> dict:
    cfg, reference, (attention, linear, async_comm) = build(case)
    cp_module = copy.deepcopy(reference)
    plan = ContextParallel(mesh, attention=attention, linear=linear, async_comm=async_comm)
    cp_module.context_parallel = plan
    generator = torch.Generator().manual_seed(SEED + 1)
    x = torch.randn(BATCH, SEQ, cfg.hidden_size, generator=generator)
    grad = torch.randn(BATCH, SEQ, cfg.hidden_size, generator=generator)
    shard = slice(rank * SEQ // world, (rank + 1) * SEQ // world)
    positions = torch.arange(SEQ)
    y_ref, gx_ref = run(reference, cfg, x, positions, grad)
    y_cp, gx_cp = run(cp_module, cfg, x[:, shard], positions[shard], grad[:, shard])
    report = {
        "out": (y_cp - y_ref[:, shard]).abs().max().item(),
        "out_max": y_ref.abs().max().item(),
        "x_grad": (gx_cp - gx_ref[:, shard]).abs().max().item(),
        "x_grad_max": gx_ref.abs().max().item(),
        "collectives": plan.collectives,
        "params": {},
    }
    for (name, p_ref), (_, p_cp) in zip(reference.named_parameters(),
                                        cp_module.named_parameters()):
        g = p_cp.grad.clone()
        dist.all_reduce(g)
        report["params"][name] = [(g - p_ref.grad).abs().max().item(),
                                  p_ref.grad.abs().max().item()]
    return report


def causality(case: str, mesh, rank: int, world: int) -> dict:
    cfg, module, (attention, linear, async_comm) = build(case)
    module.context_parallel = ContextParallel(mesh, attention=attention, linear=linear,
                                              async_comm=async_comm)
    generator = torch.Generator().manual_seed(SEED + 2)
    x = torch.randn(BATCH, SEQ, cfg.hidden_size, generator=generator)
    changed = x.clone()
    at = SEQ // 2 + SEQ // (2 * world)  # inside the shard of rank world / 2
    changed[:, at:] += torch.randn(BATCH, SEQ - at, cfg.hidden_size, generator=generator)
    shard = slice(rank * SEQ // world, (rank + 1) * SEQ // world)
    positions = torch.arange(SEQ)
    with torch.no_grad():
        y, _ = run(module, cfg, x[:, shard], positions[shard], None)
        y2, _ = run(module, cfg, changed[:, shard], positions[shard], None)
    earlier = torch.arange(SEQ)[shard] < at
    return {
        "before": (y2 - y)[:, earlier].abs().max().item() if earlier.any() else 0.0,
        "after": (y2 - y)[:, ~earlier].abs().max().item() if (~earlier).any() else None,
    }


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("cp",))
    results = {}
    for case in CASES:
        reports = [None] * world
        dist.all_gather_object(reports, compare(case, mesh, rank, world))
        results[case] = reports
    for case in CAUSALITY:
        reports = [None] * world
        dist.all_gather_object(reports, causality(case, mesh, rank, world))
        results[f"causal_{case}"] = reports
    if rank == 0:
        with open(sys.argv[1], "w") as out:
            json.dump(results, out, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    main()
    exit_now(0)
