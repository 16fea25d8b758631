"""``python -m hyper_parallel.plan``: the JSON object, the ranking, the dropped families'
reasons, the exit codes, and ``--write`` recipes that load and are the planned layouts.

The plans run in this process on the tiny model at 2 ranks with a budget of 2 preflights
(one worker: no process is spawned); a plan whose every layout the memory floor drops runs no
preflight at all. The planned run (one plan, shared by the tests that read it) is marked slow.
"""

from __future__ import annotations

import json

import pytest

from hyper_parallel.plan import search
from hyper_parallel.plan.__main__ import main
from hyper_parallel.preflight.run import PROCESSES_ENV

TINY = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_fsdp2",
        "--model.config_overrides={\"flavor\": \"tiny\"}"]
CLUSTER = ["--nodes", "1", "--gpus-per-node", "2", "--gpu", "h100-80gb", "--budget", "2"]
KEYS = {"layout", "peak_bytes", "fits", "step_seconds", "tokens_per_second_per_gpu", "mfu",
        "parts"}


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    """One plan of the tiny model on 2 ranks, with --json and --write 2 DIR."""
    folder = tmp_path_factory.mktemp("plans")
    mp = pytest.MonkeyPatch()
    mp.setenv(PROCESSES_ENV, "1")  # preflights in this process, one by one
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*TINY, *CLUSTER, "--json", "--write", "2", str(folder)])
    finally:
        mp.undo()
    return code, json.loads(out.getvalue()), err.getvalue(), folder


@pytest.mark.slow
def test_the_json_object_is_the_issues_schema_best_first(planned):
    code, data, _, _ = planned
    assert code == 0
    assert set(data) == {"world_size", "gpu", "candidates", "dropped"}
    assert data["world_size"] == 2 and data["gpu"] == "h100-80gb"
    assert data["candidates"]
    for c in data["candidates"]:
        assert set(c) == KEYS
        assert set(c["parts"]) == {"compute", "exposed_comm", "bubble"}
        assert {"dp_replicate", "dp_shard", "tp", "pp", "cp", "ep"} <= set(c["layout"])
        assert c["layout"]["dp_replicate"] * c["layout"]["dp_shard"] * c["layout"]["tp"] \
            * c["layout"]["pp"] * c["layout"]["cp"] * c["layout"]["ep"] == 2
    fitting = [c for c in data["candidates"] if c["fits"]]
    assert fitting and data["candidates"][:len(fitting)] == fitting  # those that fit first
    steps = [c["step_seconds"] for c in fitting]
    assert steps == sorted(steps)
    for c in fitting:
        parts = c["parts"]
        assert c["step_seconds"] == pytest.approx(
            parts["compute"] + parts["exposed_comm"] + parts["bubble"])
        assert c["tokens_per_second_per_gpu"] == pytest.approx(
            4 * 128 / c["step_seconds"] / 2)  # the recipe's 4 sequences of 128 tokens
        assert 0 < c["mfu"] < 1
    # The tiny model's 2 key/value heads and its dense feed-forward: families the engine's
    # own checks refuse, each with its reason.
    reasons = [d["reason"] for d in data["dropped"]]
    assert all(set(d) == {"layout", "reason"} for d in data["dropped"])
    assert any(d["layout"].get("ep") == 2 and "no experts" in d["reason"]
               for d in data["dropped"]), reasons
    # The budget: what it did not preflight is listed as such.
    assert any("not preflighted" in r for r in reasons)


@pytest.mark.slow
def test_written_recipes_load_and_are_the_planned_layouts(planned):
    from hyper_parallel.config.recipes import load_recipe
    from hyper_parallel.plan.space import candidate_of
    from hyper_parallel.train import parse_run

    code, data, err, folder = planned
    assert code == 0
    files = sorted(folder.glob("*.py"))
    fitting = [c for c in data["candidates"] if c["fits"]][:2]
    assert len(files) == len(fitting) >= 1
    base = parse_run(TINY).config
    for rank, expected in enumerate(fitting, 1):
        name = f"qwen3_5_v2_debugmodel_fsdp2_plan{rank}"
        path = folder / f"{name}.py"
        text = path.read_text()
        # Derived from the user's recipe: its call, then only the changed fields.
        assert "config = qwen3_5_v2_debugmodel_fsdp2()" in text
        assert f"--module {path}" in err
        loaded = load_recipe(str(path), name)
        candidate = candidate_of(loaded, 2)
        assert candidate.describe(loaded.training.global_batch_size) == expected["layout"]
        # Every other field is the user's run (the tiny flavor the command line chose).
        assert loaded.model.config_overrides == base.model.config_overrides
        assert loaded.training.global_batch_size == base.training.global_batch_size


def _run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_exit_1_when_no_layout_fits_and_nothing_is_preflighted(capsys, monkeypatch):
    """The 9B model on one 80 GB GPU: its parameters, gradients and AdamW state alone are 144
    GB, so the memory floor drops every layout and no preflight runs."""
    def refuse(*args, **kwargs):
        raise AssertionError("a layout the floor drops was preflighted")

    monkeypatch.setattr("hyper_parallel.preflight.many.preflight_many", refuse)
    code, out, _ = _run(["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_9b_fsdp8",
                         "--nodes", "1", "--gpus-per-node", "1", "--json"], capsys)
    assert code == 1
    data = json.loads(out)
    assert data["candidates"] == []
    assert any("needs at least" in d["reason"] for d in data["dropped"])


@pytest.mark.parametrize("argv, field", [
    ([*TINY, "--gpus-per-node", "2"], "--nodes"),
    ([*TINY, "--nodes", "0"], "--nodes"),
    ([*TINY, "--nodes", "1", "--gpu", "h100"], "--gpu"),
    ([*TINY, "--nodes", "1", "--budget", "0"], "--budget"),
    ([*TINY, "--nodes", "1", "--jobs=--scheduler slurm"], "--jobs"),
    (["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel",
      "--training.seq_len=abc", "--nodes", "1"], "training.seq_len"),
])
def test_exit_2_names_the_field(argv, field, capsys):
    code, _, err = _run(argv, capsys)
    assert code == 2
    assert field in err and err.startswith("error: ")


def test_a_process_count_that_is_no_count_is_exit_2_naming_the_variable(monkeypatch, capsys):
    monkeypatch.setenv(PROCESSES_ENV, "two")
    assert main([*TINY, *CLUSTER]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {PROCESSES_ENV}: 'two' is not a number of processes"), err


def test_hardware_file_replaces_the_datasheet(tmp_path, capsys, monkeypatch):
    """``--hardware FILE`` goes to the profile loader: a bad file is a configuration error
    naming it, a good one prices the plan."""
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    code, _, err = _run([*TINY, "--nodes", "1", "--gpus-per-node", "2", "--hardware", str(bad)],
                        capsys)
    assert code == 2 and "error:" in err
    from hyper_parallel.plan import hardware

    seen = {}
    real = hardware.load

    def load(path):
        seen["path"] = path
        return real(path)

    good = tmp_path / "good.json"
    hardware.save(hardware.datasheet("a100-80gb"), str(good))
    monkeypatch.setattr(hardware, "load", load)
    monkeypatch.setattr(search, "plan", lambda base, **kw: (_ for _ in ()).throw(
        SystemExit(kw["hardware"].name)))
    with pytest.raises(SystemExit) as stopped:
        main([*TINY, "--nodes", "1", "--gpus-per-node", "2", "--hardware", str(good)])
    assert seen["path"] == str(good) and stopped.value.code == "a100-80gb"


# ----------------------------------------------------------------------- the search's order
# These plans run on the debug model's space at 4 ranks with preflight replaced by a stand-in
# (every candidate fits, its step as the test says): they hold what the search chooses to
# preflight, not preflight's figures.
DEBUG = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel"]


@pytest.fixture(scope="module")
def debug_base():
    from hyper_parallel.train import parse_run

    return parse_run(DEBUG).config


def _fake_plan(monkeypatch, base, *, budget, step=lambda c: 1.0, key=None):
    """``(result, the configurations handed to preflight_many)`` of a plan whose preflights
    are stand-ins; ``key``: a simulation key of the configuration's to use instead."""
    from types import SimpleNamespace

    from hyper_parallel.plan import hardware
    from hyper_parallel.preflight import many, simulate
    from hyper_parallel.preflight.gpus import GPUS

    handed, rounds = [], []

    def fake_many(configs, gpu, **kw):
        # The candidates' own warnings are not the user's run's: the plan prices them.
        assert kw.get("quiet") is True
        handed.extend(configs)
        rounds.append(list(configs))
        return [SimpleNamespace(roles=[]) for _ in configs]

    def fake_evaluate(item, outcome, nodes, gpus_per_node, profile):
        item.report, item.fits, item.peak_bytes = outcome, True, 1
        item.prediction = SimpleNamespace(step_seconds=step(item.candidate), compute=1.0)

    monkeypatch.setattr(many, "preflight_many", fake_many)
    monkeypatch.setattr(search, "_evaluate", fake_evaluate)
    if key is not None:
        monkeypatch.setattr(simulate, "simulation_key", key)
    result = search.plan(base, nodes=1, gpus_per_node=4, gpu=GPUS["h100-80gb"],
                         hardware=hardware.datasheet("h100-80gb"), budget=budget, workers=2)
    _fake_plan.rounds = rounds
    return result, handed


def test_every_round_checks_a_new_family_while_one_is_left(monkeypatch, debug_base):
    """Families (the model-parallel axes a layout uses) are covered early: a round leads with
    the most promising candidate, and while some family has no preflight, the round also
    checks one that had none; so every family is checked."""
    from hyper_parallel.plan.space import build_space, model_facts
    from hyper_parallel.preflight.gpus import GPUS

    facts = model_facts(debug_base)
    families = {search.family(lay) for lay in build_space(
        debug_base, 4, 4, GPUS["h100-80gb"], facts).layouts}
    assert len(families) >= 3

    def family_of(config):
        return tuple(axis for axis, field in (
            ("tp", "tensor_parallel_degree"), ("pp", "pipeline_parallel_degree"),
            ("cp", "context_parallel_degree"), ("ep", "expert_parallel_degree"))
            if getattr(config.parallelism, field) > 1)

    _fake_plan(monkeypatch, debug_base, budget=3 * len(families) + 4)
    seen: set = set()
    for configs in _fake_plan.rounds:
        new = {family_of(c) for c in configs} - seen
        assert new or seen == families
        seen |= new
    assert seen == families


def test_candidates_that_simulate_the_same_run_share_one_preflight(monkeypatch, debug_base):
    """Candidates whose configurations have one simulation key are preflighted once, in any
    round, and cost the budget once."""
    def by_pipeline(config):  # a stand-in key: one simulation per pipeline degree
        return repr(config.parallelism.pipeline_parallel_degree)

    result, handed = _fake_plan(monkeypatch, debug_base, budget=6, key=by_pipeline)
    keys = [by_pipeline(c) for c in handed]
    assert len(keys) == len(set(keys))  # never the same simulation twice
    assert result.preflights <= 6
    assert len(result.evaluated) > len(handed)  # the others shared one


def test_the_default_search_stops_when_nothing_left_might_be_best(monkeypatch, debug_base):
    """Without --budget the search preflights only what might be best: once a preflighted
    step beats every other estimate by more than the margin, it stops, and the rest are
    listed as not among those that might be best."""
    result, handed = _fake_plan(monkeypatch, debug_base, budget=None, step=lambda c: 1e-9)
    assert 0 < len(handed) <= 2  # the first round only
    assert any("might be best" in d.reason for d in result.dropped)


def test_the_plan_is_the_same_whatever_the_order_of_its_sets(monkeypatch, debug_base):
    """The search keeps candidates in sets, whose order follows the process's hash seed: the
    plan (what it preflights, its table, what it leaves and why, in order) must not."""
    from hyper_parallel.plan.space import Candidate

    def plan_text():
        result, handed = _fake_plan(monkeypatch, debug_base, budget=3)
        return ([repr(h.parallelism) for h in handed],
                [e.candidate for e in result.evaluated], [d.reason for d in result.dropped])

    first = plan_text()
    seeded = Candidate.__hash__
    monkeypatch.setattr(Candidate, "__hash__", lambda self: -seeded(self) // 7)
    assert plan_text() == first


def test_the_estimate_is_calibrated_by_a_preflighted_neighbour():
    """A candidate's estimated compute (and bubble) is scaled by what the nearest preflighted
    candidate's predicted compute was over its own analytic compute; the collectives stay."""
    from types import SimpleNamespace

    from hyper_parallel.plan.space import Candidate, Layout

    a, b = Candidate(Layout(dp_shard=4), 1), Candidate(Layout(tp=2, dp_shard=2), 2)
    promise = search.Promise({a: (2.0, 0.0, 0.5), b: (1.0, 0.25, 0.125)})
    assert promise(b) == 1.375
    promise.learn(search.Evaluated(a, None, prediction=SimpleNamespace(compute=6.0)))
    assert promise(b) == 3 * 1.25 + 0.125
    assert promise(a) == 6.0 + 0.5


def test_preflight_workers_outlive_a_call(monkeypatch):
    """preflight_many's spawned workers are kept for the next call (a fresh one spends
    seconds importing torch and the engine): the same pool, the same process; and a lone
    simulation's deeper short build (``run._spawn``) runs in that warm worker, not in a
    helper process of its own, until the pool is gone."""
    import logging
    import os

    from hyper_parallel.preflight import many, run

    monkeypatch.setenv(PROCESSES_ENV, "2")

    try:
        first = many._pool(1)
        pid = first.submit(os.getpid).result()
        again = many._pool(1)
        assert again is first and again.submit(os.getpid).result() == pid != os.getpid()
        assert run._spawn(os.getpid).result() == pid
        # Under quiet() the build handed over runs quietly there too.
        package = logging.getLogger("hyper_parallel")
        assert run._spawn(logging.Logger.getEffectiveLevel, package).result() < logging.ERROR
        with run.quiet():
            level = run._spawn(logging.Logger.getEffectiveLevel, package).result()
        assert level == logging.ERROR
    finally:
        many._shutdown()
    assert many._POOL is None and run._HELPER is None


def test_workers_still_importing_are_stopped_at_exit_not_awaited(monkeypatch):
    """The planner starts its workers' imports before its space (seconds of overlap); a plan
    that ends first (a configuration error) must not wait seconds at exit for imports nobody
    will use: its workers are stopped while they import (their exit code is SIGTERM's), by a
    call ``threading`` makes at exit before ``concurrent.futures`` waits for running tasks
    (a later-registered exit call runs earlier)."""
    import signal
    import subprocess
    import sys
    import time

    from hyper_parallel.preflight import many

    monkeypatch.setenv(PROCESSES_ENV, "2")
    many._shutdown()  # an earlier test's pool, warm: its imports would be done at once
    try:
        many.start_workers()
        processes = list(many._POOL[1]._processes.values())
        assert many._IMPORTING  # a spawned interpreter imports torch for seconds
        many._stop_at_exit()
        assert many._POOL is None
        for process in processes:
            # The pool's own thread reaps its stopped workers too, on the same Process: when
            # it reaps one first, a join here returns without the exit code, which that thread
            # then sets on the object (a clean clone's CI saw the join's None).
            deadline = time.monotonic() + 60
            while process.exitcode is None and time.monotonic() < deadline:
                process.join(timeout=0.1)
            assert process.exitcode == -signal.SIGTERM
    finally:
        many._shutdown()

    # The child's own exit call is registered first, so it runs after the module's stop.
    child = ("import sys, threading\n"
             "threading._register_atexit(lambda: print('stopped before the wait:', "
             "sys.modules['hyper_parallel.preflight.many']._POOL is None, flush=True))\n"
             "from hyper_parallel.preflight import many\n"
             "many.start_workers()\n")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.strip() == "stopped before the wait: True", out.stderr


def test_the_recomputation_is_priced_at_the_share_the_preflights_measured():
    """Two preflighted candidates alike but for their checkpointing measure what the
    recomputation really costs, as a share of the FLOP count (``search.RECOMPUTE``); every
    estimate then counts its recomputation at that share: a candidate without checkpointing,
    calibrated by a fully checkpointed one, is no longer priced as if full checkpointing cost
    its FLOPs (the 9B plan's third round preflighted a CP candidate without checkpointing,
    7.28 s, over HSDP with selective, 6.88 s). Without such a pair, nothing changes."""
    from types import SimpleNamespace

    from hyper_parallel.plan.space import Candidate, Layout

    full, selective = (Candidate(Layout(dp_shard=8), 1, activation_checkpoint=mode)
                       for mode in ("full", "selective"))
    other = Candidate(Layout(dp_shard=4, cp=2), 1, activation_checkpoint="none")
    flops = 3.0  # every candidate's compute at the matmul rate, before its recomputation
    parts = {c: (flops * (1 + search.RECOMPUTE[c.activation_checkpoint]), 0.0, 0.5)
             for c in (full, selective, other)}
    promise = search.Promise(parts)
    # Measured: the recomputation of full checkpointing costs a quarter of its FLOP count.
    scale = 0.25
    measured = {c: 2.0 * flops * (1 + scale * search.RECOMPUTE[c.activation_checkpoint])
                for c in (full, selective)}
    promise.learn(search.Evaluated(full, None, prediction=SimpleNamespace(compute=measured[full])))
    assert promise.recompute_scale() == 1.0  # one mode preflighted: the FLOP count
    assert promise(other) == pytest.approx(measured[full] / parts[full][0] * flops + 0.5)
    promise.learn(search.Evaluated(selective, None,
                                   prediction=SimpleNamespace(compute=measured[selective])))
    assert promise.recompute_scale() == pytest.approx(scale)
    assert promise(other) == pytest.approx(2.0 * flops + 0.5)  # the ratio without recomputation
    assert promise(full) == pytest.approx(measured[full] + 0.5)
