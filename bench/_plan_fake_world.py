"""One rank of a many-rank layout on this one device, the other ranks a fake process group: the
step times of its compute alone (``bench_plan_accuracy.py --fake-world N`` runs one per layout).

    python bench/_plan_fake_world.py --world N --steps S --out FILE -- ARGV...

``torch.distributed.init_process_group("fake", rank=0, world_size=N, store=FakeStore())``
before the trainer is built from ``ARGV`` (:func:`hyper_parallel.train.build_trainer`, the
entries' own function; it keeps that group): rank 0 of the layout holds its real shards,
gathers into its real buffers and computes its real micro-batches, and every collective returns
at once without moving data (expert parallelism's row counts are a balanced exchange's:
``_check_fake_pg.fake_world``). So a step is the rank's compute and the engine's host work
around its collectives, without the collectives -- what the planner predicts as a role's
``compute``. The values are not real (an all-gather's output is whatever its buffer held): the
losses are never read.

Writes ``{"step_times": [...], "device": ..., "layout": ...}`` to ``FILE``: every step's wall
seconds, the device synchronized before each clock read.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    trainer_argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv

    import torch

    from _check_fake_pg import fake_world  # this directory
    from hyper_parallel.train import build_trainer

    def sync() -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    folder = tempfile.mkdtemp(prefix="plan-fake-world-")
    try:
        with fake_world(args.world):
            trainer = build_trainer([*trainer_argv, "--checkpoint.interval", "0",
                                     "--checkpoint.folder", folder])
            dims = trainer.dist.parallel_dims
            if dims.world_size != args.world:
                raise SystemExit(f"the layout has {dims.world_size} ranks, not {args.world}")
            batches = trainer._micro_batch_iterator()
            times = []
            for _ in range(args.steps):
                trainer.state.global_step += 1
                sync()
                start = time.perf_counter()
                trainer.train_step(next(batches))
                sync()
                times.append(time.perf_counter() - start)
        Path(args.out).write_text(json.dumps({
            "step_times": times, "layout": dims.summary(),
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    exit_now(main())
