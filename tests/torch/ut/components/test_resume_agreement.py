"""``resume_latest`` on ranks that list the shared folder differently (a file system that shows a
just-written step to some ranks only, or fails a listing): every rank takes the same step once
a listing again settles it, and every rank refuses -- never a fresh start over checkpoints --
when it does not. 2 gloo ranks, one job for every case; the file is its own worker script.

The faults are injected where a file system shows them, on the rank named: its ``os.listdir``
of the case's folder leaves out steps (or raises ``ESTALE``), its ``os.path.isfile`` misses a
step's files, for its first few listings or for all of them. The folders are real.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.torchrun import spawn_ranks

#: Every listing after the first N is a clean one (N = ALWAYS: none is).
ALWAYS = 10**6
#: The pauses between listings in the job (the real ones add up to a minute).
DELAYS = (0.01, 0.01, 0.01)

#: case -> (the folder's step_<N> directories: step -> complete, the fault, the faulty ranks).
#: A fault is (kind, step, listings): "hide" leaves ``step`` (None: every step) out of the
#: listing, "fail" raises ESTALE, "unsynced" hides ``step``'s files.
STEPS = {2: True, 4: True}
TRANSIENT = {
    "both see step 4": (STEPS, None, ()),
    "rank 1 sees none at first": (STEPS, ("hide", None, 2), (1,)),
    "rank 1 lags at first": (STEPS, ("hide", 4, 2), (1,)),
    "rank 1 cannot list at first": (STEPS, ("fail", None, 2), (1,)),
    "rank 1 sees step_4 before its files": (STEPS, ("unsynced", 4, 2), (1,)),
    "load_path=latest, rank 1 sees none at first": (STEPS, ("hide", None, 1), (1,)),
    "an empty folder": ({}, None, ()),
}
PERSISTENT = {
    "rank 1 always lags": (STEPS, ("hide", 4, ALWAYS), (1,)),
    "rank 1 always sees none": (STEPS, ("hide", None, ALWAYS), (1,)),
    "rank 1 never lists": (STEPS, ("fail", None, ALWAYS), (1,)),
}
INCOMPLETE = {
    "only incomplete step directories": ({2: False, 4: False}, None, ()),
    "the newest incomplete": ({2: True, 4: False}, None, ()),
}
CASES = {**TRANSIENT, **PERSISTENT, **INCOMPLETE}


def _make_folder(folder: Path, steps: dict[int, bool]) -> None:
    """``step_<N>`` directories; a complete one has the two files a save publishes."""
    from hyper_parallel.runtime.checkpoint import DCP_METADATA_FILE, EXTRA_STATE_FILE

    folder.mkdir(parents=True)
    for step, complete in steps.items():
        (folder / f"step_{step}").mkdir()
        (folder / f"step_{step}" / "model.distcp").write_bytes(b"\0")
        if complete:
            (folder / f"step_{step}" / EXTRA_STATE_FILE).write_text("{}")
            (folder / f"step_{step}" / DCP_METADATA_FILE).write_bytes(b"\0")


@pytest.fixture(scope="module")
def chosen(tmp_path_factory) -> dict:
    """What both ranks chose in each case: a step_<N>, None, or ``{"refused": message}``
    (the case's folder under ``"folders"``)."""
    out = tmp_path_factory.mktemp("resume_agreement")
    for case, (steps, _, _) in CASES.items():
        _make_folder(out / case, steps)
    spawn_ranks(os.path.abspath(__file__), [str(out)], nproc=2, timeout=180)
    results = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    assert results[0].keys() == results[1].keys() == CASES.keys()
    return {"folders": {case: str(out / case) for case in CASES},
            **{case: (results[0][case], results[1][case]) for case in CASES}}


def _same_on_both(chosen: dict, case: str):
    assert chosen[case][0] == chosen[case][1], (case, chosen[case])
    return chosen[case][0]


@pytest.mark.slow  # one 2-rank job: a few seconds
def test_every_rank_resumes_from_the_same_step(chosen):
    """A rank whose listing is wrong for a while (sees none, lags, fails, sees a step before its
    files) does not split the ranks nor send them back to a fresh start: they list again and
    resume from step 4 together."""
    assert {case: _same_on_both(chosen, case) for case in TRANSIENT} == {
        **{case: "step_4" for case in TRANSIENT}, "an empty folder": None}


@pytest.mark.slow
def test_ranks_that_keep_disagreeing_refuse_to_start(chosen):
    """Listings that never settle end the start on every rank with one error: the folder, what
    each rank saw, and the fix -- not a resume from the step that some rank sees, nor a fresh
    start over the checkpoints."""
    seen = {"rank 1 always lags": "rank 0 sees step 4; rank 1 sees step 2",
            "rank 1 always sees none": "rank 0 sees step 4; rank 1 sees no complete checkpoint",
            "rank 1 never lists": "rank 0 sees step 4; rank 1 cannot list it"}
    for case, views in seen.items():
        refusal = _same_on_both(chosen, case)
        assert isinstance(refusal, dict), (case, refusal)
        message = refusal["refused"]
        assert chosen["folders"][case] in message and views in message, message
        assert f"after {len(DELAYS) + 1} listings" in message, message
        assert "move the newer step_<N> directories out of the folder" in message, message


@pytest.mark.slow
def test_a_folder_of_incomplete_checkpoints_is_never_a_fresh_start(chosen):
    """Incomplete step directories on every rank: the newest complete checkpoint wins; with none
    complete the start is refused, saying which directory lacks what."""
    assert _same_on_both(chosen, "the newest incomplete") == "step_2"
    refusal = _same_on_both(chosen, "only incomplete step directories")
    assert isinstance(refusal, dict), refusal
    message = refusal["refused"]
    assert chosen["folders"]["only incomplete step directories"] in message, message
    assert "no complete checkpoint (the newest, step_4, lacks extra_state.json or " \
           ".metadata)" in message, message


# --------------------------------------------------------------------------- the rule alone

#: A rank's view (newest complete step, newest step_<N> directory): -1 none, -2 unreadable.
_VIEW = st.one_of(
    st.just((-2, -1)),
    st.integers(-1, 5).flatmap(lambda c: st.tuples(st.just(c), st.integers(max(c, -1), 6))),
)


@settings(max_examples=400, deadline=None)
@given(views=st.lists(_VIEW, min_size=1, max_size=6), final=st.booleans())
def test_the_agreed_step_is_complete_on_every_rank_and_never_a_fresh_start_over_checkpoints(
        views, final):
    from hyper_parallel.runtime.checkpoint.resume import NONE, agreed_step

    try:
        step = agreed_step(views, final=final)
    except ValueError:
        assert final  # only the last listing refuses
        # ...and only when the ranks differ, or none of them sees a complete checkpoint.
        assert len({c for c, _ in views}) > 1 or views[0][0] < 0
        return
    if step is None:
        assert not final
        return
    # Every rank sees the chosen step complete (so each rank loads the same one).
    assert all(c == step for c, _ in views)
    if step == NONE:  # a fresh start (or load_path): only over a folder no rank sees a step in
        assert all(n == NONE for _, n in views)
    if not final:  # settled: no rank sees a newer step_<N> that may still be appearing
        assert all(n <= step for _, n in views)


# --------------------------------------------------------------------------- the worker


class _Flaky:
    """A file system fault on this rank for the listings of one folder (see the module
    docstring): ``os.listdir`` and ``os.path.isfile`` wrapped for that folder only."""

    def __init__(self, folder: str, fault) -> None:
        self.folder, self.fault, self.listings = folder, fault, 0

    def __enter__(self):
        self._listdir, self._isfile = os.listdir, os.path.isfile
        os.listdir, os.path.isfile = self.listdir, self.isfile
        return self

    def __exit__(self, *exc) -> None:
        os.listdir, os.path.isfile = self._listdir, self._isfile

    def _active(self) -> bool:
        return self.fault is not None and self.listings <= self.fault[2]

    def listdir(self, path="."):
        names = self._listdir(path)
        if os.fspath(path) != self.folder:
            return names
        self.listings += 1
        if not self._active():
            return names
        kind, step = self.fault[:2]
        if kind == "fail":
            raise OSError(errno.ESTALE, os.strerror(errno.ESTALE), path)
        if kind == "hide":
            return [n for n in names if not n.startswith("step_")
                    or (step is not None and n != f"step_{step}")]
        return names

    def isfile(self, path) -> bool:
        unsynced = self.fault is not None and self.fault[0] == "unsynced" and self._active()
        step = None if self.fault is None else os.path.join(self.folder, f"step_{self.fault[1]}")
        return not (unsynced and os.path.dirname(os.fspath(path)) == step) and self._isfile(path)


def _worker(out: Path) -> None:
    import torch.distributed as dist

    from hyper_parallel.runtime.checkpoint import CheckpointError, resume

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    resume.LISTING_RETRY_DELAYS = DELAYS
    chosen = {}
    for case, (_, fault, ranks) in CASES.items():
        folder = str(out / case)
        with _Flaky(folder, fault if rank in ranks else None):
            try:
                if case.startswith("load_path=latest"):
                    found = resume.resolve_resume_path("latest", folder)
                else:
                    found = resume.newest_agreed(folder)
                chosen[case] = None if found is None else os.path.basename(found)
            except CheckpointError as refusal:
                chosen[case] = {"refused": str(refusal)}
    (out / f"rank{rank}.json").write_text(json.dumps(chosen))
    dist.destroy_process_group()


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    _worker(Path(sys.argv[1]))
    exit_now(0)
