"""One simulated rank of the fake-CUDA check: ``python worker.py PLAN.json`` with ``RANK``,
``WORLD_SIZE`` set (one process per rank of the job, started by the test).

``PLAN.json`` is ``{"cases": [{"name", "argv", "steps", "resume_steps", "mailbox", "out"}]}``.
For each case the rank builds the trainer of ``argv`` (``hyper_parallel.train.build_trainer``,
what the entries call) as a rank of a CUDA job (:func:`fake_cuda.fake_cuda_rank`), trains it
(the argv sets steps, validation and the checkpoint folder), and with ``resume_steps`` builds it
again from the last checkpoint and trains on. It writes ``out/rank<r>.json``, for each run:
the step it ended at, the steps it trained itself (the micro-batches of each) and the steps
it evaluated at, and the collectives seen per mesh dimension (by the names of
``ParallelDims``). Any error ends the process with its traceback, like a rank of a real job.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/helpers

from fake_cuda import fake_cuda_rank


def _groups_by_name(trainer) -> dict[str, list[str]]:
    """Group name -> the mesh dimensions and aliases that use it."""
    dims = trainer.parallel_dims
    names: dict[str, list[str]] = {}
    mesh = dims.world_mesh
    candidates = list(mesh.mesh_dim_names or ()) + list(dims.alias_dims())
    for name in candidates:
        if dims.has_mesh(name):
            group = dims.get_mesh(name).get_group()
            names.setdefault(group.group_name, []).append(name)
    return names


def _train(argv: list[str], rank: int, world: int, mailbox: Path) -> dict:
    from hyper_parallel.train import build_trainer

    started = time.perf_counter()
    with fake_cuda_rank(rank, world, mailbox) as mode:
        trainer = build_trainer(argv)
        built = time.perf_counter()
        groups = _groups_by_name(trainer)
        # What this run did itself (a resumed run starts past the loaded steps): the
        # micro-batches of each step it trained, and its evaluations.
        trained, evaluated = [], []
        step, evaluate = trainer.train_step, trainer.evaluate

        def train_step(micro_batches):
            trained.append(len(micro_batches))
            return step(micro_batches)

        def evaluation():
            evaluated.append(trainer.state.global_step)
            return evaluate()

        trainer.train_step, trainer.evaluate = train_step, evaluation
        state = trainer.train()
        seen: Counter = Counter()
        for op, group in mode.collectives:
            for name in groups.get(group, [f"group {group}"]):
                seen[name] += 1
        folder = trainer.config.checkpoint.folder
        trainer.close()
    return {"steps": state.global_step, "trained": trained, "evaluated": evaluated,
            "collectives": dict(seen), "folder": folder,
            "build_s": round(built - started, 2), "train_s": round(time.perf_counter() - built, 2)}


def main(plan_file: str) -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    plan = json.loads(Path(plan_file).read_text())
    for case in plan["cases"]:
        out = Path(case["out"])
        first = _train(case["argv"], rank, world, Path(case["mailbox"]) / "train")
        result = {"train": first}
        if case.get("resume_steps"):
            checkpoint = Path(first["folder"]) / f"step_{first['steps']}"
            argv = case["argv"] + [f"--checkpoint.load_path={checkpoint}",
                                   f"--training.steps={case['resume_steps']}"]
            result["resume"] = _train(argv, rank, world, Path(case["mailbox"]) / "resume")
        out.mkdir(parents=True, exist_ok=True)
        (out / f"rank{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    main(sys.argv[1])
    exit_now(0)  # no interpreter teardown: the fake device's threads need none
