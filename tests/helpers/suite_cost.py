"""What the suite cost, printed at its end: wall seconds, core-seconds, the ten costliest tests.

The budget of ``make test`` (7 minutes on the 2-core CI machine) is core-seconds more than wall
seconds: both cores are busy the whole run, so a test that burns 60 core-seconds adds about
30 s to the suite wherever it runs. Each test's core-seconds are every CPU second spent for it
from its setup to its teardown, in

* the pytest worker itself and every process it waited for (``subprocess.run``, torchrun and
  its ranks: ``RUSAGE_CHILDREN``), and
* the worker's fork server (:mod:`tests.helpers.torchrun`) and the ranks it forked and reaped
  (its own and its reaped children's times, read from ``/proc/<pid>/stat``), and
* the preflight processes the worker keeps from one test to the next (``preflight_many``'s
  pool, preflight's helper), read the same way: a test is charged what they spent for it.

Under pytest-xdist the figures travel to the controller on each test's teardown report
(``user_properties``), so the summary covers every worker.
"""

from __future__ import annotations

import json
import os
import resource
import time

import pytest

#: The name under which a test's core-seconds ride on its teardown report.
CPU_KEY = "core_seconds"
#: How many tests the summary names.
COSTLIEST = 10
#: ``make test``'s budget on the 2-core CI machine, in wall seconds (README): with both cores
#: busy, twice as many core-seconds.
BUDGET_SECONDS = 420
#: Where the summary also goes, every test's figures as JSON, when this variable names a file.
JSON_ENV = "HYPER_PARALLEL_SUITE_COST_JSON"


def _stat_seconds(pid: int) -> float:
    """CPU seconds of a live process and of the children it has reaped (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            # The command name (field 2) may hold spaces: the fields after its ')' are fixed.
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _forkserver_seconds() -> float:
    """CPU seconds of the worker's fork server and of the ranks it has reaped (0 before it
    starts). The fork server is not this process's child as far as rusage goes: its ranks are
    reaped by it, not by us."""
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    return _stat_seconds(pid) if pid else 0.0


def _kept_workers_seconds() -> float:
    """CPU seconds of the preflight processes this worker keeps across tests (the pool of
    ``preflight.many``, preflight's helper of ``preflight.run``): its children, but reaped only
    when they end, so rusage alone would count their work at the session's end or in
    whichever test ends them. A process reaped during a test moves from here to
    ``RUSAGE_CHILDREN`` with the same seconds: the test is charged what it spent."""
    import sys

    pids: set[int] = set()
    many = sys.modules.get("hyper_parallel.preflight.many")
    run = sys.modules.get("hyper_parallel.preflight.run")
    pool = getattr(many, "_POOL", None)
    for executor in (pool[1] if pool else None, getattr(run, "_HELPER", None)):
        pids.update(getattr(executor, "_processes", None) or {})
    return sum(_stat_seconds(pid) for pid in pids)


def process_tree_seconds() -> float:
    """CPU seconds spent so far by this process, its waited-for children, its fork server's
    tree and the preflight processes it keeps."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
            + _forkserver_seconds() + _kept_workers_seconds())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_START] = process_tree_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "teardown" and _START in item.stash:
        report.user_properties.append((CPU_KEY, process_tree_seconds() - item.stash[_START]))


_START = pytest.StashKey[float]()


class _Ledger:
    """On the controller (or a run without xdist): every test's wall and core-seconds."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report) -> None:
        self.wall[report.nodeid] = self.wall.get(report.nodeid, 0.0) + report.duration
        for key, value in report.user_properties:
            if key == CPU_KEY:
                self.cpu[report.nodeid] = value

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.wall:
            return
        wall = time.monotonic() - self.started
        cores = sum(self.cpu.values())
        write = terminalreporter.write_line
        terminalreporter.section("suite cost")
        write(f"{wall:.0f} s wall, {cores:.0f} core-seconds in tests "
              f"({cores / wall:.2f} cores busy on average), {len(self.wall)} tests")
        budget = BUDGET_SECONDS * (os.cpu_count() or 1)
        write(f"make test's budget: {budget} core-seconds ({BUDGET_SECONDS} s on {os.cpu_count()} "
              f"cores); this run used {cores / budget:.0%} of it"
              + (" -- OVER" if cores > budget else ""))
        costliest = sorted(self.cpu.items(), key=lambda kv: kv[1], reverse=True)[:COSTLIEST]
        for nodeid, seconds in costliest:
            write(f"{seconds:7.1f} core-s {self.wall[nodeid]:7.1f} s wall  {nodeid}")
        path = os.environ.get(JSON_ENV)
        if path:
            tests = {nodeid: {"wall": self.wall[nodeid], "core_seconds": self.cpu.get(nodeid)}
                     for nodeid in self.wall}
            with open(path, "w") as out:
                json.dump({"wall": wall, "core_seconds": cores, "tests": tests}, out, indent=1)


def pytest_configure(config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        config.pluginmanager.register(_Ledger(), "suite_cost_ledger")
