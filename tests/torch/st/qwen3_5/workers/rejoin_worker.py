"""torchrun worker for tests/torch/st/qwen3_5/test_worker_restart.py (gloo, CPU).

Usage: ``torchrun --nproc-per-node 2 --max-restarts 1 ... rejoin_worker.py <timeout_s>``.

Each attempt joins the job the way the trainer does (:func:`setup_distributed`, its join bound
``<timeout_s>``: the trainer's ``comm.init_timeout_seconds``), all-reduces a one, prints
``rank R attempt A: joined, sum S``, then passes the fault hook's step 1
(``HYPER_PARALLEL_FAULT_INJECT``: ``sigkill_at_step:1:1:0`` kills rank 1 there in attempt 0,
``late_join:...`` delays a rank's join) and all-reduces again. Exit 0 when both went through.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist


def main() -> None:
    from hyper_parallel.config.configs import ParallelismConfig
    from hyper_parallel.runtime.distributed import setup_distributed
    from hyper_parallel.runtime.fault_injection import job_attempt, maybe_fail_at_step
    from hyper_parallel.utils.logging import init_logger

    init_logger()
    ctx = setup_distributed(parallelism=ParallelismConfig(data_parallel_shard_degree=-1),
                            comm_backend="gloo", local_rank=int(os.environ["LOCAL_RANK"]),
                            seed=0, timeout_seconds=float(sys.argv[1]))
    total = torch.ones(1)
    dist.all_reduce(total)
    print(f"rank {ctx.rank} attempt {job_attempt()}: joined, sum {total.item():g}", flush=True)
    maybe_fail_at_step(1, ctx.rank)
    dist.all_reduce(total)
    dist.destroy_process_group()


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    main()
    exit_now(0)
