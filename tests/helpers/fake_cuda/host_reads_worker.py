"""One simulated rank of the host-read check: ``python host_reads_worker.py OUT MAILBOX ARGV...``
with ``RANK``, ``WORLD_SIZE`` set (one process per rank, started by the test).

The rank builds the trainer of ``ARGV`` as a rank of a CUDA job (:func:`fake_cuda.fake_cuda_rank`)
and trains it; its first optimizer step (the loader's micro-batches, made on the host as a real
loader makes them) runs with every host/device crossing recorded (:class:`fake_cuda.Transfer`).
It then runs one more step on the same rows without their images (``input_ids`` and ``labels``
alone: the tower runs idle). Each crossing carries the scope it happened in: ``forward`` (a
model part's forward, FSDP's root pre-forward included), ``tower`` (the vision tower's forward,
inside it) or ``backward`` (the step's backward context), else None.

It writes ``OUT/rank<r>.json``: ``{"image_step": [...], "text_step": [...], "scopes":
{step: {scope: times entered}}, "error": null}``; an error in a recorded step is written as
``error`` with the crossings seen before it, so that the test shows what the code reads back
before it fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/helpers

from fake_cuda import fake_cuda_rank

TEXT_KEYS = ("input_ids", "labels")


def _scoped(mode, trainer) -> Counter:
    """Set ``mode.scope`` while a model part's forward, the tower's forward and the step's
    backward run (innermost wins); returns the count of each scope's entries."""
    scopes: list[str] = []
    entered: Counter = Counter()

    def enter(name: str):
        def hook(*_):
            scopes.append(name)
            entered[name] += 1
            mode.scope = name
        return hook

    def leave(*_):
        scopes.pop()
        mode.scope = scopes[-1] if scopes else None

    def scope(module, name: str) -> None:
        # First in line: FSDP's root pre-forward (which moves the inputs) runs inside it.
        module.register_forward_pre_hook(enter(name), prepend=True)
        module.register_forward_hook(leave, always_call=True)

    for part in trainer.model_parts:
        scope(part, "forward")
        tower = getattr(getattr(part, "model", None), "visual", None)
        if tower is not None:
            scope(tower, "tower")
    backward = trainer.model_bwd_context

    @contextlib.contextmanager
    def backward_scope():
        enter("backward")()
        try:
            with backward():
                yield
        finally:
            leave()

    trainer.model_bwd_context = backward_scope
    return entered


def main(out: str, mailbox: str, argv: list[str]) -> None:
    from hyper_parallel.train import build_trainer

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    record: dict = {"image_step": [], "text_step": [], "scopes": {}, "error": None}
    with fake_cuda_rank(rank, world, mailbox) as mode:
        trainer = build_trainer(argv)
        entered = _scoped(mode, trainer)
        step = trainer.train_step

        def run(key: str, micro_batches: list) -> object:
            before = Counter(entered)
            with mode.recording_transfers() as seen:
                try:
                    return step(micro_batches)
                except Exception:
                    record["error"] = f"{key}: {traceback.format_exc()}"
                    raise
                finally:
                    record[key] = [dataclasses.asdict(t) for t in seen]
                    record["scopes"][key] = dict(entered - before)

        def recorded(micro_batches: list) -> object:
            trainer.train_step = step  # the first step only
            result = run("image_step", micro_batches)
            run("text_step", [{k: mb[k] for k in TEXT_KEYS} for mb in micro_batches])
            return result

        trainer.train_step = recorded
        try:
            trainer.train()
        except Exception:
            if record["error"] is None:
                raise
        finally:
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / f"rank{rank}.json").write_text(json.dumps(record))
        if record["error"] is None:
            trainer.close()


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    main(sys.argv[1], sys.argv[2], sys.argv[3:])
    exit_now(0)  # no interpreter teardown: the fake device's threads need none
