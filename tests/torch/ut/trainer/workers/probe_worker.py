"""torchrun worker (2 ranks, gloo): the layout probes of the field table.

``probe_worker.py OUT KEY...`` runs, for each probe key of ``test_field_probes.ROWS``, the base
run, the probed run and (mapped rows) the probed run through the legacy YAML, each training the
engine for its steps (the probe's ``steps``, default 1) and reading the probe's observable as the one-rank probes read it
(``test_field_probes.observed``: a run that failed where the probe observes no failure is
recorded as that failure, never as an observation). A run several probes observe -- the same
configuration, trained the same way -- runs once and serves them all (:func:`plan`); rank 0
writes
``{key: {"base": RUN, "probe": RUN, "legacy": RUN}}`` to OUT, each RUN
``{"observed": ..., "failure": None | why}`` (``test_field_probes.layout_problems`` judges them).

``timeout`` (the collective timeouts) is observed here only, since it needs a peer: before the
run both ranks make a process group of the job, so the run's timeouts reach it as they reach
every group; after the run rank 0 starts an all-reduce on it that rank 1 never joins, and the
observation is how many whole seconds that collective took to time out (waiting at most
:data:`CAP`).
"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.torch.ut.trainer import test_field_probes as probes

#: How long a lone collective is given to fail: longer than every probed timeout, far shorter
#: than the defaults (a base run's collective is still waiting then). The waits overlap the
#: runs that follow (see :class:`Firing`), so this costs seconds only at the very end.
CAP = 6.0


class Firing:
    """An all-reduce on ``group`` that only rank 0 enters: it can only fail, after the timeout
    torch holds for the group. Started asynchronously (its wait overlaps the next runs); the
    moment it fails is taken by a callback of its future."""

    def __init__(self, group) -> None:
        import torch
        import torch.distributed as dist

        self.started = time.monotonic()
        self.failed_at: float | None = None
        self.error: str | None = None
        self.joined = dist.get_rank() == 0
        if self.joined:
            work = dist.all_reduce(torch.zeros(1), group=group, async_op=True)
            work.get_future().add_done_callback(self._done)

    def _done(self, future) -> None:
        self.failed_at = time.monotonic()
        try:
            future.value()
            self.error = "completed without its peer"
        except Exception as exc:  # noqa: BLE001 - the failure is the observable
            self.error = str(exc)

    def run_entry(self) -> dict:
        """The run's ``{"observed": ..., "failure": ...}``: ``["failed after", whole seconds]``
        or ``["still waiting after", CAP]``; a collective that ended otherwise than by its
        timeout (a closed connection, a completion) is a failure, not an observation (None
        on the rank that never joins)."""
        if not self.joined:
            return {"observed": None, "failure": None}
        while self.failed_at is None and time.monotonic() < self.started + CAP:
            time.sleep(0.05)
        if self.failed_at is None or self.failed_at > self.started + CAP:
            return {"observed": ["still waiting after", CAP], "failure": None}
        if "timed out" not in self.error.lower():
            return {"observed": None,
                    "failure": f"the lone collective ended, but not by its timeout: {self.error}"}
        # Whole seconds, rounded down: gloo fails at the timeout, never before, and the
        # callback may run a little later on a busy machine.
        return {"observed": ["failed after", int(self.failed_at - self.started)], "failure": None}


def observation(result: dict, probe: dict, run: str) -> dict:
    """``{"observed": ..., "failure": None}``, or ``{"observed": None, "failure": why}`` for a
    run that went wrong in a way the probe does not observe (``probes.observed``'s rule)."""
    try:
        # ``timeout`` is observed after the run (the caller's Firing); the run itself must
        # have built and trained like any other's.
        check = {"observe": "steps"} if probe["observe"] == "timeout" else probe
        return {"observed": probes.observed(result, check, run), "failure": None}
    except probes.ProbeRunFailed as exc:
        return {"observed": None, "failure": str(exc)}


def observe_run(runner, config, probe: dict, steps: int, work: Path, run: str, **kw) -> dict:
    """One run of a probe (``runner``: ``probes.engine_run`` / ``probes.legacy_run``), observed."""
    import torch.distributed as dist

    group = dist.new_group([0, 1]) if probe["observe"] == "timeout" else None
    entry = observation(runner(config, steps, work, keep_group=True, **kw), probe, run)
    if group is not None and entry["failure"] is None:
        # Nothing else runs on the group, and the next run sets its own timeouts (on every
        # group) before its first collective, so rank 1 can go on at once.
        entry["observed"] = Firing(group)
    return entry


def plan(keys: list[str], fixtures, root: Path) -> list[tuple]:
    """Every run the probes of ``keys`` observe, each once, in the order of ``keys`` (the same
    on every rank): ``(runner, config, steps, work, users)``, ``users`` the ``(key, "base" |
    "probe" | "legacy", probe, words)`` it serves. Probes whose base, probed or legacy run is
    the same -- the same runner, steps and configuration (compared by ``repr``, as
    ``probes.base_run`` shares the one-rank bases): the ``dp_shard=2`` base of most layout
    probes, a probed layout that is another probe's base, a legacy YAML that converts to its
    probed configuration -- share it; it records every
    observable, each probe reads its own. A ``timeout`` probe's runs are its own: its group is
    made just before the run, its lone collective started just after."""
    runs: dict = {}
    for i, key in enumerate(keys):
        row = probes.ROWS[key]
        probe = row.probe
        steps = probe.get("steps", 1)
        # Its steps: a layout moves its observables in one (``probes.run`` trains the
        # configuration's steps, the base run's 3 unless set; 0 builds only).
        trained = {"training.steps": steps} if steps else {}
        base = probes.apply(probes.base_config(), {**trained, **probe.get("base", {})}, fixtures)
        probed = probes.apply(base, probe["set"], fixtures)
        work = root / f"{i}-rank{os.environ.get('RANK', '0')}"
        wanted = [("base", probes.engine_run, base, "the base run"),
                  ("probe", probes.engine_run, probed, "the probed run")]
        if row.kind in probes.MAPPED:
            # A legacy YAML that converts to the probed configuration trains the probed run
            # itself (probes.legacy_is_the_engine_run), which it then shares.
            same = (probe["observe"] != "timeout"
                    and probes.legacy_is_the_engine_run(probed, probe, work / "legacy"))
            wanted.append(("legacy", probes.engine_run if same else probes.legacy_run, probed,
                           "the probed run through the legacy YAML"))
        for name, runner, config, words in wanted:
            same = ((key, name) if probe["observe"] == "timeout"
                    else (runner.__name__, steps, repr(config)))
            runs.setdefault(same, (runner, config, steps, work / name, []))[-1].append(
                (key, name, probe, words))
    return list(runs.values())


def main() -> None:
    import torch
    import torch.distributed as dist

    from hyper_parallel.runtime.distributed import init_process_group, set_collective_timeout

    out, *keys = sys.argv[1:]
    # The job's process group before any run, so that a ``timeout`` probe can make its group
    # first (the runs join it: the engine keeps an existing group).
    init_process_group(None, torch.device("cpu"))
    root = Path(tempfile.mkdtemp(prefix="hp_probe_"))
    fixtures = probes.Fixtures(root / "fixtures")
    results: dict = {key: {} for key in keys}
    runs = plan(keys, fixtures, root)
    # Every rank must make the same runs in the same order, or their collectives would pair
    # with another run's: a plan that differs between the ranks is the failure, said plainly.
    shape = [(runner.__name__, [user[:2] for user in users]) for runner, *_, users in runs]
    shapes = [None] * dist.get_world_size()
    dist.all_gather_object(shapes, shape)
    if any(other != shape for other in shapes):
        raise RuntimeError(f"the ranks planned different runs: {shapes}")
    for runner, config, steps, work, users in runs:
        if users[0][2]["observe"] == "timeout":  # its own run (plan)
            (key, name, probe, words), = users
            results[key][name] = observe_run(runner, config, probe, steps, work, words)
            continue
        result = runner(config, steps, work, keep_group=True)
        for key, name, probe, words in users:
            results[key][name] = observation(result, probe, words)
        del result  # and its trainer, before the next run builds one
    for entry in results.values():
        for name, run in entry.items():
            if isinstance(run["observed"], Firing):
                entry[name] = run["observed"].run_entry()
    # Rank 1 stays until rank 0 has seen every firing fail (a rank that exits closes its
    # connections, which fails a pending collective sooner, with another error); the last
    # run's timeouts may be short, so the wait gets its own.
    set_collective_timeout(CAP * 10)
    dist.barrier()
    if os.environ.get("RANK", "0") == "0":
        Path(out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    main()
    exit_now(0)
