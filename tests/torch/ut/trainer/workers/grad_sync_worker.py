"""torchrun worker (2 ranks, gloo): how often FSDP reduces gradients under accumulation.

``grad_sync_worker.py OUT`` trains a tiny Qwen3.5 with FSDP over both ranks, 2 micro-batches
a step, for 3 steps through the engine, once with the default and once with
``parallelism.fsdp_defer_gradient_sync``; for each, rank 0 writes the reduce-scatters
torch.distributed ran in each step (counted by wrapping it, as FSDP calls
``dist.reduce_scatter_single``), the FSDP units that hold trainable parameters, the
micro-batches of a step, and the losses and gradient norms::

    {"default": RUN, "deferred": RUN}
    RUN = {"reduce_scatters": [per step], "units": n, "micro_batches": n,
           "losses": [...], "grad_norms": [...]}
"""

import json
import sys
import tempfile
from pathlib import Path


def tiny_config(folder: Path, defer: bool):
    from hyper_parallel.components.checkpoint import CheckpointManager
    from hyper_parallel.components.dataloader import BaseDataLoader
    from hyper_parallel.components.lr_scheduler import LRSchedulersContainer
    from hyper_parallel.components.metrics import MetricsProcessor
    from hyper_parallel.components.optimizer import OptimizersContainer
    from hyper_parallel.config.configs import ModelConfig, ParallelismConfig, TrainingConfig
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    return HyperTrainer.Config(
        model=ModelConfig(name="qwen3_5", num_hidden_layers=4, hidden_size=64,
                          intermediate_size=128, config_overrides={"flavor": "debugmodel"}),
        # 2 ranks x 1 row x 2 micro-batches = 4 rows a step.
        training=TrainingConfig(steps=3, seq_len=16, global_batch_size=4, local_batch_size=1),
        parallelism=ParallelismConfig(data_parallel_shard_degree=2,
                                      fsdp_defer_gradient_sync=defer),
        dataloader=BaseDataLoader.Config(dataset="dummy", pin_memory=False),
        optimizer=OptimizersContainer.Config(lr=1e-3),
        lr_scheduler=LRSchedulersContainer.Config(warmup_steps=1),
        checkpoint=CheckpointManager.Config(folder=str(folder), interval=0, export_hf=False),
        metrics=MetricsProcessor.Config(log_freq=1),
    )


def train(config) -> dict:
    import torch.distributed as dist
    from torch.distributed.fsdp import FSDPModule

    trainer = config.build()
    counted = [0]
    real = dist.reduce_scatter_single

    def reduce_scatter_single(*args, **kwargs):
        counted[0] += 1
        return real(*args, **kwargs)

    per_step: list[int] = []
    grad_norms: list[float] = []
    step = trainer.train_step

    def counting_step(micro_batches):
        before = counted[0]
        result = step(micro_batches)
        per_step.append(counted[0] - before)
        grad_norms.append(result.grad_norm)
        return result

    trainer.train_step = counting_step
    dist.reduce_scatter_single = reduce_scatter_single
    try:
        trainer.train()
    finally:
        dist.reduce_scatter_single = real
    units = sum(
        1 for module in trainer.model.modules() if isinstance(module, FSDPModule)
        for group in module._get_fsdp_state()._fsdp_param_groups
        if any(p.sharded_param.requires_grad for p in group.fsdp_params)
    )
    return {"reduce_scatters": per_step, "units": units, "micro_batches": trainer.grad_accum,
            "losses": [loss for _, loss in trainer.state.loss_history],
            "grad_norms": grad_norms}


def main() -> None:
    import os

    import torch
    import torch.distributed as dist

    from hyper_parallel.runtime.distributed import init_process_group

    out = sys.argv[1]
    # One process group for both runs (the engine keeps an existing one).
    init_process_group(None, torch.device("cpu"))
    root = Path(tempfile.mkdtemp(prefix="hp_grad_sync_"))
    rank = os.environ.get("RANK", "0")
    results = {name: train(tiny_config(root / f"{name}-rank{rank}", defer))
               for name, defer in (("default", False), ("deferred", True))}
    dist.barrier()
    if rank == "0":
        Path(out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    main()
    exit_now(0)
