"""``resume_latest`` on ranks that list the shared folder differently (a file system that shows a
just-written step to some ranks only): every rank takes the same step, the newest they all see,
or none when one of them sees none. 2 gloo ranks; the file is its own worker script."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.helpers.torchrun import spawn_ranks

#: What each rank "sees" as the folder's newest complete checkpoint, per case.
VIEWS = {"both see step 4": (4, 4), "rank 1 lags": (4, 2), "rank 1 sees none": (4, None)}


@pytest.mark.slow  # one 2-rank job: a few seconds
def test_every_rank_resumes_from_the_same_step(tmp_path):
    spawn_ranks(os.path.abspath(__file__), [str(tmp_path)], nproc=2, timeout=120)
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert results[0] == results[1]
    assert results[0] == {"both see step 4": "step_4", "rank 1 lags": "step_2",
                          "rank 1 sees none": None}


def _worker(out: Path) -> None:
    import torch.distributed as dist

    from hyper_parallel.runtime.checkpoint import resume

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    chosen = {}
    for case, views in VIEWS.items():
        seen = views[rank]
        resume.latest_checkpoint = lambda folder, seen=seen: (
            None if seen is None else os.path.join(folder, f"step_{seen}"))
        found = resume.newest_agreed(str(out / "ckpt"))
        chosen[case] = None if found is None else os.path.basename(found)
    (out / f"rank{rank}.json").write_text(json.dumps(chosen))
    dist.destroy_process_group()


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))
