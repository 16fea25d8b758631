"""Preflight's role measurements kept on disk (``preflight/measurement_cache.py``): what one
process measured, another reads instead of simulating it, and only that."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyper_parallel.config.manager import ConfigManager
from hyper_parallel.preflight import measurement_cache, run
from hyper_parallel.preflight.gpus import GPUS
from hyper_parallel.preflight.report import to_text
from hyper_parallel.preflight.simulate import PROCESS_LOCAL, RoleMemory, simulation_key
from hyper_parallel.preflight.work import Collective, RoleWork
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

REPO = Path(__file__).resolve().parents[4]
DEBUG = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel"]
#: Figures no simulation makes: a preflight that reports them read them from the cache.
MADE_UP = RoleMemory(params_bytes=11, grads_bytes=13, optimizer_bytes=17, buffers_bytes=19,
                     activations_bytes=23, depth="whole", detail={"ACT": 23})


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """A cache of this test's own, and a process that has measured nothing yet."""
    monkeypatch.setenv(measurement_cache.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(run, "_MEASURED", collections.OrderedDict())
    monkeypatch.setattr(run, "_WORK", {})
    monkeypatch.setattr(run, "_KEPT", set())
    return tmp_path / "cache"


def _made_up_measurements(monkeypatch) -> list[tuple]:
    """``run.measure_role`` answering :data:`MADE_UP`; returns the simulations asked for."""
    asked: list[tuple] = []

    def measure_role(sim, rank, world, imbalance, work=None):
        asked.append((rank, world, imbalance))
        if work is not None:
            work.append(RoleWork(flops={"matmul": 5.0}, collectives=[
                Collective("all_gather", 64, (0, 1), count=3, phase="forward", axis="fsdp")]))
        return MADE_UP, 7.0

    monkeypatch.setattr(run, "measure_role", measure_role)
    return asked


def _config(*extra: str):
    return ConfigManager(root_type=HyperTrainer.Config).parse_args([*DEBUG, *extra])


# --------------------------------------------------------------------------- across processes
def test_another_process_reads_what_this_one_measured(folder, monkeypatch):
    """A fresh interpreter's ``python -m hyper_parallel.preflight`` of the same recipe reports
    the figures this process kept (made-up ones: it cannot have simulated them), says so, and
    simulates nothing: the key is the same in both processes (a spec's functions by their
    import path, not their address)."""
    asked = _made_up_measurements(monkeypatch)
    here = run.preflight(_config(), GPUS["h100-80gb"])
    assert asked == [(0, 1, run.DEFAULT_IMBALANCE)] and not here.roles[0].kept
    assert len(list(folder.glob("*.json"))) == 1
    env = {**os.environ, "OMP_NUM_THREADS": "1", measurement_cache.CACHE_ENV: str(folder)}
    done = subprocess.run([sys.executable, "-m", "hyper_parallel.preflight", *DEBUG, "--json"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr
    (role,) = json.loads(done.stdout)["roles"]
    assert role["kept"] is True
    assert (role["params_bytes"], role["grads_bytes"], role["activations_bytes"]) == (11, 13, 23)


# --------------------------------------------------------------------------- in one process
def test_a_kept_measurement_is_read_not_simulated(folder, monkeypatch):
    asked = _made_up_measurements(monkeypatch)
    config = _config()
    run.preflight(config, GPUS["h100-80gb"], world=2, work=True)
    monkeypatch.setattr(run, "_MEASURED", collections.OrderedDict())  # as a new process
    monkeypatch.setattr(run, "_WORK", {})
    again = run.preflight(config, GPUS["b200"], world=2, work=True)
    assert len(asked) == 1
    (role,) = again.roles
    assert role.kept and role.memory == MADE_UP and again.flops_per_token == 7.0
    assert role.work.collectives[0].group_ranks == (0, 1)  # a tuple again, as measured
    assert "kept from an earlier preflight" in to_text(again)


def test_preflight_many_hands_its_workers_only_what_is_not_kept(folder, monkeypatch):
    """A configuration whose roles are all kept is put together in the calling process (no
    worker to wait for: a plan run again reads its preflights in milliseconds); the others
    go to the workers as before."""
    from hyper_parallel.preflight import many

    asked = _made_up_measurements(monkeypatch)
    kept, fresh = _config(), _config("--training.seq_len=64")
    run.preflight(kept, GPUS["h100-80gb"], work=True)
    monkeypatch.setattr(run, "_MEASURED", collections.OrderedDict())  # as another process
    monkeypatch.setattr(run, "_WORK", {})
    handed: list = []

    def run_tasks(tasks, workers, order=None):
        handed.extend(tasks)
        return [fn(*args) for fn, *args in tasks]

    monkeypatch.setattr(many, "_run_tasks", run_tasks)
    reports = many.preflight_many([kept, fresh], GPUS["h100-80gb"], workers=2, work=True,
                                  suggest=False)
    assert [task[1] for task in handed] == [fresh] and len(asked) == 2
    assert [report.roles[0].kept for report in reports] == [True, False]
    assert reports[0].roles[0].work.collectives == reports[1].roles[0].work.collectives


def test_what_a_measurement_depends_on_is_measured_again(folder, monkeypatch):
    """Another role, world, imbalance, recipe or code is another entry; a measurement
    without the step's work does not answer one that asks for it."""
    asked = _made_up_measurements(monkeypatch)
    config = _config()
    run.preflight(config, GPUS["h100-80gb"], world=2)
    for changes in ({"world": 4}, {"imbalance": 2.0}):
        run.preflight(config, GPUS["h100-80gb"], **{"world": 2, **changes})
    run.preflight(_config("--training.seq_len=64"), GPUS["h100-80gb"], world=2)
    monkeypatch.setattr(run, "_MEASURED", collections.OrderedDict())
    run.preflight(config, GPUS["h100-80gb"], world=2, work=True)  # kept without work
    monkeypatch.setattr(measurement_cache, "code_fingerprint", lambda: "another tree")
    monkeypatch.setattr(run, "_MEASURED", collections.OrderedDict())
    monkeypatch.setattr(run, "_WORK", {})
    run.preflight(config, GPUS["h100-80gb"], world=2)
    assert asked == [(0, 2, 1.25), (0, 4, 1.25), (0, 2, 2.0), (0, 2, 1.25), (0, 2, 1.25),
                     (0, 2, 1.25)]
    assert len(list(folder.glob("*.json"))) == 5  # the work replaced its entry's


def test_the_code_fingerprint_follows_every_source_file(tmp_path):
    """An edit of any ``.py`` file, a new one, a renamed one or other versions: another
    fingerprint; other files and the files' times: the same."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "b.py").write_text("y = 2\n")
    base = measurement_cache.source_fingerprint(package, "torch 2.13")
    (package / "notes.txt").write_text("not code")
    os.utime(package / "a.py", (1, 1))
    assert measurement_cache.source_fingerprint(package, "torch 2.13") == base
    assert measurement_cache.source_fingerprint(package, "torch 2.14") != base
    seen = {base}
    for change in (lambda: (package / "sub" / "b.py").write_text("y = 3\n"),
                   lambda: (package / "c.py").write_text(""),
                   lambda: (package / "c.py").rename(package / "sub" / "c.py")):
        change()
        seen.add(measurement_cache.source_fingerprint(package, "torch 2.13"))
    assert len(seen) == 4
    assert measurement_cache.code_fingerprint() == measurement_cache.code_fingerprint()


def test_a_recipe_holding_a_lambda_is_kept_in_this_process_only(folder, monkeypatch):
    """A lambda prints by its address: its key holds in this process, never on disk."""
    import dataclasses

    from hyper_parallel.models.spec import resolve_model_spec

    asked = _made_up_measurements(monkeypatch)
    config = _config()
    spec = resolve_model_spec(config.model.name, config.model_spec)
    config.model_spec = dataclasses.replace(spec, clip_grad_fn=lambda *args: None)
    assert simulation_key(config).startswith(PROCESS_LOCAL)
    assert not simulation_key(_config()).startswith(PROCESS_LOCAL)
    run.preflight(config, GPUS["h100-80gb"], world=2)
    run.preflight(config, GPUS["h100-80gb"], world=2)
    assert len(asked) == 1 and not list(folder.glob("*.json"))


def test_a_function_of_a_users_module_is_keyed_by_its_source(tmp_path, monkeypatch):
    """A recipe may name a function of its own module (a ``parallelize_fn``), which the
    package's fingerprint does not cover: the key holds its file's hash, so an edit of that
    file is another measurement, never the old one's figures."""
    import dataclasses
    import importlib

    from hyper_parallel.models.spec import resolve_model_spec
    from hyper_parallel.preflight import simulate

    (tmp_path / "my_recipe.py").write_text(
        "from hyper_parallel.models.qwen3_5.parallelize_v2 import parallelize_qwen3_5_v2\n"
        "def parallelize(*args, **kwargs):\n"
        "    return parallelize_qwen3_5_v2(*args, **kwargs)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("my_recipe")
    config = _config()
    spec = resolve_model_spec(config.model.name, config.model_spec)
    config.model_spec = dataclasses.replace(spec, parallelize_fn=module.parallelize)
    simulate._module_digest.cache_clear()
    before = simulation_key(config)
    assert "my_recipe.parallelize@" in before and not before.startswith(PROCESS_LOCAL)
    (tmp_path / "my_recipe.py").write_text(
        (tmp_path / "my_recipe.py").read_text().replace("return", "return  # edited\n    return"))
    simulate._module_digest.cache_clear()  # as a process that imports the edited file
    assert simulation_key(config) != before


def test_off_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for value in ("off", "0", "no", "false", "OFF", ""):
        monkeypatch.setenv(measurement_cache.CACHE_ENV, value)
        assert measurement_cache.cache_folder() is None
    monkeypatch.delenv(measurement_cache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert measurement_cache.cache_folder() == tmp_path / "hyper_parallel" / "preflight"


def test_an_unwritable_folder_is_said_once_and_the_preflight_goes_on(tmp_path, monkeypatch,
                                                                     caplog):
    asked = _made_up_measurements(monkeypatch)
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv(measurement_cache.CACHE_ENV, str(blocker / "cache"))
    monkeypatch.setattr(run, "_MEASURED", collections.OrderedDict())
    monkeypatch.setattr(measurement_cache, "_UNWRITABLE", set())
    for world in (2, 4):
        report = run.preflight(_config(), GPUS["h100-80gb"], world=world)
        assert report.roles[0].memory == MADE_UP
    warned = [r for r in caplog.records if "cannot keep measurements" in r.getMessage()]
    assert len(asked) == 2 and len(warned) == 1, caplog.text
    assert measurement_cache.CACHE_ENV in warned[0].getMessage()


def test_entries_are_written_under_the_umask_and_the_least_recently_used_go_first(
        folder, monkeypatch):
    monkeypatch.setattr(measurement_cache, "KEPT_ENTRIES", 3)
    old = os.umask(0o027)
    try:
        entries = [(f"key {i}", 0, 2, 1.0) for i in range(4)]
        for i, entry in enumerate(entries[:3]):
            measurement_cache.store(entry, MADE_UP, float(i), None)
            os.utime(next(p for p in folder.glob("*.json")
                          if json.loads(p.read_text())["entry"][0] == entry[0]),
                     (1000 + i, 1000 + i))
        assert measurement_cache.load(entries[0], work=False) is not None  # used: newest
        measurement_cache.store(entries[3], MADE_UP, 3.0, None)
    finally:
        os.umask(old)
    kept = {json.loads(p.read_text())["entry"][0] for p in folder.glob("*.json")}
    assert kept == {"key 0", "key 2", "key 3"}
    assert {p.stat().st_mode & 0o777 for p in folder.glob("*.json")} == {0o640}
    assert not [p for p in folder.iterdir() if p.suffix != ".json"]  # no temporary left


def test_an_unreadable_entry_is_simulated_again(folder, monkeypatch):
    asked = _made_up_measurements(monkeypatch)
    config = _config()
    run.preflight(config, GPUS["h100-80gb"], world=2)
    (path,) = folder.glob("*.json")
    path.write_text(path.read_text()[:100])
    monkeypatch.setattr(run, "_MEASURED", collections.OrderedDict())
    assert not run.preflight(config, GPUS["h100-80gb"], world=2).roles[0].kept
    assert len(asked) == 2


# --------------------------------------------------------------------------- the entry itself
_counts = st.integers(min_value=0, max_value=2**62)
_floats = st.floats(allow_nan=False, allow_infinity=False)
_names = st.text(min_size=1, max_size=8)
_memories = st.builds(
    RoleMemory, params_bytes=_counts, grads_bytes=_counts, optimizer_bytes=_counts,
    buffers_bytes=_counts, activations_bytes=_counts, process_groups=_counts,
    in_flight=st.integers(1, 64), depth=st.text(max_size=30),
    detail=st.dictionaries(_names, _counts, max_size=6), micro_batches=st.integers(1, 64),
    micro_batches_stepped=st.integers(1, 3), deferred_grads_bytes=_counts)
_collectives = st.builds(
    Collective, kind=st.sampled_from(["all_gather", "reduce_scatter", "all_to_all"]),
    bytes=_counts, group_ranks=st.lists(st.integers(0, 511), max_size=8).map(tuple),
    count=st.integers(1, 1000), phase=st.sampled_from(["forward", "backward", ""]),
    axis=st.sampled_from(["dp_shard", "tp", "ep", ""]))
_works = st.none() | st.builds(
    RoleWork, flops=st.dictionaries(_names, _floats, max_size=4), memory_bytes=_floats,
    collectives=st.lists(_collectives, max_size=6),
    phase_flops=st.dictionaries(_names, _floats, max_size=4),
    phase_memory_bytes=st.dictionaries(_names, _floats, max_size=4),
    micro_batches=st.integers(1, 64), operators=_floats, dtensor_operators=_floats)


@settings(max_examples=60, deadline=None)
@given(memory=_memories, flops=_floats, work=_works, rank=st.integers(0, 511),
       imbalance=st.floats(1.0, 4.0))
def test_an_entry_reads_back_exactly_what_was_kept(tmp_path_factory, memory, flops, work,
                                                   rank, imbalance):
    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(measurement_cache.CACHE_ENV, str(folder))
        entry = ("a simulation", rank, 512, imbalance)
        measurement_cache.store(entry, memory, flops, work)
        assert measurement_cache.load(entry, work=False) == (memory, flops, work)
        if work is None:
            assert measurement_cache.load(entry, work=True) is None
        assert measurement_cache.load(("a simulation", rank + 1, 512, imbalance), False) is None
        assert measurement_cache.load(("another", rank, 512, imbalance), False) is None
