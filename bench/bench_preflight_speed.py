"""What preflight's simulation costs, with its short paths and without, side by side.

    .venv/bin/python bench/bench_preflight_speed.py [--smoke] [--repeats N]
        [--out bench/results/preflight_speed.json]

For each role below, the CPU time of one measurement (``run.measure_role``: the short builds of
one and two layer periods, or the whole depth), in one process, the two ways interleaved round
after round (a stretch of other load falls on both alike), the fastest of the rounds kept:

* **torch's paths**: every ``tensor.device`` of a fake tensor dispatched through the memory
  tracker and the fake mode, torch's own cache keys and cache hits, every micro-batch stepped
  after the warm-up step (its checkpointed layers recomputed in its backward, as in the step),
  and the optimizer step and the clipping on the host's kernels (one parameter at a time: the
  fake tensors sit on the CPU and are not on torch's multi-tensor list), and DTensor's sharding
  rules expanded over the mesh once per tensor of a multi-tensor operator's list, and each
  operator's leaves walked by torch's pytree;
* **preflight's**: the device read answered above the fake mode (``fake_world.device_query``),
  the cache keys' and the cache hits' short paths (``preflight/cache_keys.py``,
  ``preflight/cached_outputs.py``), the warm-up standing for the first micro-batch where it
  can (``simulate.warm_up_is_first_micro_batch``) and stepped without recomputation
  (``simulate.without_recomputation``), the GPU's optimizer kernels
  (``fake_world.patch_optimizer_kernels``: fused AdamW, multi-tensor norms and scaling, as the
  GPU run steps them), each distinct tensor of such a list expanded once
  (``fake_world.patch_mesh_expansion``), and the leaves walked by ``preflight/lean_pytree.py``
  for the memory trackers and the work recorder.

Each row also says whether the two measurements are the same to the byte (the figures a
report prints), and by how many bytes they differ where not. ``--smoke``: the tiny flavor's
FSDP 2 role, one round, no warm-up round.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
os.environ.setdefault("HYPER_PARALLEL_PLATFORM", "torch")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from _smoke import SMOKE_HELP, exit_status, result_path, write_results

#: name -> (command line, world): the GPU recipes' roles and the small ones the suite preflights.
ROLES = {
    "9B, FSDP 8 (4 + 8 layers)": (["--module", "qwen3_5_v2", "--config",
                                   "qwen3_5_v2_9b_fsdp8"], 8),
    "0.8B, 1 rank (4 + 8 layers)": (["--module", "qwen3_5_v2", "--config",
                                     "qwen3_5_v2_0_8b"], 1),
    "debug, FSDP 2, 4 micro-batches": (["--module", "qwen3_5_v2", "--config",
                                        "qwen3_5_v2_debugmodel_fsdp2",
                                        "--training.global_batch_size=16"], 2),
    "debug, TP 2": (["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_tp2"], 2),
    "MoE debug, EP 2": (["--module", "qwen3_5_moe", "--config",
                         "qwen3_5_moe_debugmodel_ep2"], 2),
    "MoE debug, EP 2 x TP 2": (["--module", "qwen3_5_moe", "--config",
                                "qwen3_5_moe_debugmodel_ep2_tp2"], 4),
    # The smoke run's: the same paths, the smallest flavor.
    "tiny, FSDP 2, 2 micro-batches": (["--module", "qwen3_5_v2", "--config",
                                       "qwen3_5_v2_debugmodel_fsdp2",
                                       '--model.config_overrides={"flavor": "tiny"}',
                                       "--training.global_batch_size=8"], 2),
}
SMOKE_ROLES = ("tiny, FSDP 2, 2 micro-batches",)


@contextlib.contextmanager
def torchs_paths() -> Iterator[None]:
    """Preflight without its short paths (what it was before them)."""
    from torch.utils._pytree import tree_leaves

    from hyper_parallel.preflight import cache_keys, fake_world, simulate, work

    saved = (fake_world._DEVICE, cache_keys.patch_cache_keys, fake_world.patch_cache_hits,
             simulate.warm_up_is_first_micro_batch, fake_world.patch_optimizer_kernels,
             fake_world.patch_mesh_expansion, simulate.without_recomputation,
             fake_world.patch_tracker_walks, work.leaves)
    fake_world._DEVICE = object()  # no operator is it: every device read goes through
    cache_keys.patch_cache_keys = lambda patches: None
    fake_world.patch_cache_hits = lambda patches: None
    simulate.warm_up_is_first_micro_batch = lambda build, recorded=False: False
    fake_world.patch_optimizer_kernels = lambda patches: None
    fake_world.patch_mesh_expansion = lambda patches: None
    simulate.without_recomputation = lambda build: contextlib.nullcontext()
    fake_world.patch_tracker_walks = lambda patches: None
    work.leaves = tree_leaves
    try:
        yield
    finally:
        (fake_world._DEVICE, cache_keys.patch_cache_keys, fake_world.patch_cache_hits,
         simulate.warm_up_is_first_micro_batch, fake_world.patch_optimizer_kernels,
         fake_world.patch_mesh_expansion, simulate.without_recomputation,
         fake_world.patch_tracker_walks, work.leaves) = saved


def _measure(argv: list[str], world: int) -> tuple[float, object]:
    from hyper_parallel.config.manager import ConfigManager
    from hyper_parallel.preflight import run
    from hyper_parallel.preflight.simulate import simulation_config
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    config = simulation_config(ConfigManager(root_type=HyperTrainer.Config).parse_args(argv))
    start = time.process_time()
    memory, _ = run.measure_role(config, 0, world, run.DEFAULT_IMBALANCE)
    return time.process_time() - start, memory


def bench(names: list[str], repeats: int, warm: bool = True) -> dict:
    from hyper_parallel.preflight import run

    run._POOL_WORKER = True  # one process: both short builds here, timed as one
    rows = {}
    for name in names:
        argv, world = ROLES[name]
        try:
            if warm:  # the fake mode's cache and the imports, warm for both
                _measure(argv, world)
            times: dict[str, list[float]] = {"torch": [], "preflight": []}
            memories = {}
            for _ in range(repeats):
                with torchs_paths():
                    seconds, memories["torch"] = _measure(argv, world)
                times["torch"].append(seconds)
                seconds, memories["preflight"] = _measure(argv, world)
                times["preflight"].append(seconds)
        except Exception as exc:  # noqa: BLE001 - a bench reports a failed row and goes on
            rows[name] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        before, after = min(times["torch"]), min(times["preflight"])
        ours, theirs = memories["preflight"], memories["torch"]
        rows[name] = {"torch_paths_cpu_s": round(before, 3), "preflight_cpu_s": round(after, 3),
                      "speedup": round(before / after, 2), "same_figures": ours == theirs,
                      "bytes_apart": ours.allocated_bytes - theirs.allocated_bytes}
        print(f"{name:34s} torch's paths {before:6.2f} s  preflight's {after:6.2f} s  "
              f"{before / after:4.2f}x  {'same figures' if ours == theirs else 'differ by'}"
              f"{'' if ours == theirs else f' {ours.allocated_bytes - theirs.allocated_bytes} B'}",
              flush=True)
    total_before = sum(r.get("torch_paths_cpu_s", 0) for r in rows.values())
    total_after = sum(r.get("preflight_cpu_s", 0) for r in rows.values())
    if total_after:
        print(f"{'all':34s} torch's paths {total_before:6.2f} s  preflight's {total_after:6.2f} s"
              f"  {total_before / total_after:4.2f}x")
    return {"roles": rows, "repeats": repeats,
            "total": {"torch_paths_cpu_s": round(total_before, 3),
                      "preflight_cpu_s": round(total_after, 3)}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    names = list(SMOKE_ROLES) if args.smoke else [n for n in ROLES if n not in SMOKE_ROLES]
    results = bench(names, 1 if args.smoke else args.repeats, warm=not args.smoke)
    path = result_path(args.out, REPO / "bench" / "results" / "preflight_speed.json", args.smoke)
    print(write_results(path, results))
    return exit_status(results, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
