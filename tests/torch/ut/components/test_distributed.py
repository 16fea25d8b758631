"""The components on 2 ranks with FSDP2 (torchrun, gloo): DCP checkpoints of the optimizer
container hold sharded DTensors, resume bit-exactly, and reshard into one process."""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

import pytest
import torch

from hyper_parallel.components import (
    BaseDataLoader,
    CheckpointManager,
    LRSchedulersContainer,
    OptimizersContainer,
)
from hyper_parallel.runtime.step import train_step
from tests.helpers.torchrun import spawn_ranks
from tests.torch.ut.components._common import TinyLM, backward_through


def build(out_dir: str, seed: int, *, rank: int, world: int, mesh, load_path=None):
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(seed)
    model = TinyLM(vocab=32, hidden=8)
    fully_shard(model, mesh=mesh)
    optimizers = OptimizersContainer.Config(lr=1e-2).build(model_parts=[model])
    schedulers = LRSchedulersContainer.Config(warmup_steps=1).build(
        optimizers=optimizers, training_steps=10
    )
    loader = BaseDataLoader.Config().build(
        dp_world_size=world, dp_rank=rank, local_batch_size=2, seq_len=8, seed=3,
        vocab_size=32, num_samples=40,
    )
    manager = CheckpointManager.Config(
        folder=out_dir, export_hf=False, load_path=load_path, keep_latest_k=1
    ).build(model_parts=[model], optimizers=optimizers, lr_schedulers=schedulers, dataloader=loader)
    return SimpleNamespace(
        model=model, optimizers=optimizers, schedulers=schedulers, loader=loader, manager=manager
    )


def run(parts, it, n: int, world: int) -> list[float]:
    import torch.distributed as dist

    return [
        train_step(
            parts.model, parts.optimizers, parts.schedulers, [next(it)],
            device=torch.device("cpu"), loss_aggregation="token_weighted",
            dp_group=dist.group.WORLD, dp_size=world, max_grad_norm=1.0,
        ).loss
        for _ in range(n)
    ]


def _worker(out_dir: str) -> None:
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,))

    a = build(out_dir, 0, rank=rank, world=world, mesh=mesh)
    it = iter(a.loader)
    run(a, it, 2, world)
    a.manager.save(2, {"epoch": 0})
    run(a, it, 3, world)
    # What the step-5 checkpoint must hold, gathered (collective on every rank).
    full_model = {k: v.full_tensor() for k, v in a.model.state_dict().items()}
    full_optim = get_optimizer_state_dict(
        a.model, a.optimizers.optimizers[0],
        options=StateDictOptions(full_state_dict=True, flatten_optimizer_state_dict=True),
    )
    # Copies: the scalar "step" tensors are the live ones, which the next steps increment.
    full_optim = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in full_optim.items()}
    a.manager.save(5, {"epoch": 0}, async_save=True)  # training goes on meanwhile
    expected = run(a, it, 2, world)
    a.manager.wait()  # step_5 complete -> keep_latest_k=1 deletes step_2

    b = build(out_dir, 7, rank=rank, world=world, mesh=mesh, load_path="latest")
    extra = b.manager.load()
    resumed = run(b, iter(b.loader), 2, world)
    local_rows = b.model.proj.weight.to_local().shape[0]
    if rank == 0:
        torch.save({"model": full_model, "optim": full_optim}, os.path.join(out_dir, "full_step5.pt"))
    with open(os.path.join(out_dir, f"result_rank{rank}.json"), "w") as f:
        json.dump({"expected": expected, "resumed": resumed, "extra": extra, "rows": local_rows}, f)
    dist.destroy_process_group()


@pytest.mark.slow  # a torchrun job: ~10-20 s on the 2-core machine
@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")
def test_fsdp2_resume_and_reshard(tmp_path):
    spawn_ranks(os.path.abspath(__file__), [str(tmp_path)], nproc=2, timeout=300)

    results = [json.loads((tmp_path / f"result_rank{r}.json").read_text()) for r in range(2)]
    for r, res in enumerate(results):
        assert res["resumed"] == res["expected"], f"rank {r}"
        assert res["extra"]["global_step"] == 5 and res["extra"]["world_size"] == 2
        assert res["rows"] == 4  # really sharded: 8 rows over 2 ranks
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("step_")) == ["step_5"]

    # Reshard: the 2-rank checkpoint loads into one unsharded process.
    full = torch.load(tmp_path / "full_step5.pt", weights_only=True)
    torch.manual_seed(123)
    plain = TinyLM(vocab=32, hidden=8)
    optimizers = OptimizersContainer.Config(lr=1e-2).build(model_parts=[plain])
    backward_through([plain])
    optimizers.step()  # DCP loads into an existing state
    CheckpointManager.Config(
        folder=str(tmp_path), export_hf=False, load_path=str(tmp_path / "step_5")
    ).build(model_parts=[plain], optimizers=optimizers).load()
    for k, v in plain.state_dict().items():
        assert torch.equal(v, full["model"][k]), k
    loaded = optimizers.state_dict()
    for k, v in full["optim"].items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(loaded[k], v), k


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    _worker(sys.argv[1])
    exit_now(0)
