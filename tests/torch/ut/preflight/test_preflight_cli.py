"""``python -m hyper_parallel.preflight``: its verdicts, exit codes, JSON and errors, in this
process (the fake process group is made and destroyed by each preflight)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hyper_parallel.preflight.__main__ import main
from hyper_parallel.preflight.gpus import GIB
from hyper_parallel.preflight.simulate import in_flight

REPO = Path(__file__).resolve().parents[4]
DEBUG = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel"]
ROLE_KEYS = {"ranks", "params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes",
             "buffers_bytes", "total_bytes", "verdict"}


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def debug_report() -> dict:
    """The debug recipe's ``--json`` object (its run is shared by the tests below)."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*DEBUG, "--json"])
    assert code == 0
    return json.loads(out.getvalue())


def test_a_run_that_fits_exits_0_with_the_json_object(debug_report):
    report = debug_report
    assert {"world_size", "gpu", "gpu_bytes", "roles", "problems"} <= set(report)
    assert report["world_size"] == 1 and report["gpu"] == "h100-80gb"
    assert report["problems"] == []
    (role,) = report["roles"]
    assert ROLE_KEYS <= set(role)
    assert role["ranks"] == [0] and role["verdict"] == "fits"
    parts = sum(role[k] for k in ("params_bytes", "grads_bytes", "optimizer_bytes",
                                  "activations_bytes", "buffers_bytes"))
    assert role["total_bytes"] == parts + sum(role["allowances_bytes"].values())
    # AdamW: two fp32 moments per fp32 parameter, and a 4-byte step per tensor.
    assert 2 * role["params_bytes"] < role["optimizer_bytes"] < 2.01 * role["params_bytes"]
    assert report["flops_per_token"] > 6 * role["params_bytes"] / 4 / 2


@pytest.mark.slow
def test_out_of_memory_exits_1_and_its_suggestions_fit(capsys, debug_report):
    """A GPU just too small for the run without checkpointing: exit 1, and every suggestion
    was preflighted (the AC ones fit: they shrink the activations)."""
    role = debug_report["roles"][0]
    size = (role["total_bytes"] - role["activations_bytes"] // 2) / GIB
    code, out, _ = _run(capsys, [*DEBUG, "--gpu-memory", f"{size:.4f}", "--json"])
    report = json.loads(out)
    assert code == 1 and report["roles"][0]["verdict"] == "oom"
    assert report["suggestions"], report
    assert report["suggestions"][0].startswith("--activation_checkpoint.mode=")
    flags = report["suggestions"][0].split(":")[0].split()
    code, _, _ = _run(capsys, [*DEBUG, *flags, "--gpu-memory", f"{size:.4f}", "--no-suggest"])
    assert code == 0


def test_a_simulation_is_measured_once_a_process(monkeypatch):
    """The same run on two GPUs (or tried again) is one simulation; a run that shapes a
    tensor differently, or another imbalance, is another; each report owns its figures."""
    import collections
    import dataclasses

    from hyper_parallel.config.manager import ConfigManager
    from hyper_parallel.preflight import measurement_cache, run
    from hyper_parallel.preflight.gpus import GPUS
    from hyper_parallel.preflight.simulate import RoleMemory
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    simulated = []

    def measure_role(sim, rank, world, imbalance):
        simulated.append((sim.training.seq_len, rank, world, imbalance))
        return RoleMemory(params_bytes=1, grads_bytes=2, optimizer_bytes=3, buffers_bytes=4,
                          activations_bytes=5 * sim.training.seq_len, detail={"ACT": 5}), 6.0

    monkeypatch.setattr(run, "measure_role", measure_role)
    # Neither kept on disk for other tests (these figures are made up) nor read from there.
    monkeypatch.setenv(measurement_cache.CACHE_ENV, "off")
    # A memory of its own (none before this process measured once a simulation).
    monkeypatch.setattr(run, "_MEASURED", collections.OrderedDict(), raising=False)
    config = ConfigManager(root_type=HyperTrainer.Config).parse_args([*DEBUG])
    first = run.preflight(config, GPUS["h100-80gb"], world=2)
    first.roles[0].memory.detail["ACT"] = 0  # the caller's copy
    again = run.preflight(config, GPUS["b200"], world=2)
    assert simulated == [(128, 0, 2, run.DEFAULT_IMBALANCE)]
    assert again.roles[0].memory.detail == {"ACT": 5} and again.flops_per_token == 6.0
    assert again.roles[0].total_bytes == first.roles[0].total_bytes
    longer = dataclasses.replace(
        config, training=dataclasses.replace(config.training, seq_len=256))
    run.preflight(longer, GPUS["h100-80gb"], world=2)
    run.preflight(config, GPUS["h100-80gb"], world=2, imbalance=2.0)
    run.preflight(config, GPUS["h100-80gb"], world=4)
    assert simulated[1:] == [(256, 0, 2, run.DEFAULT_IMBALANCE), (128, 0, 2, 2.0),
                             (128, 0, 4, run.DEFAULT_IMBALANCE)]


def test_the_deeper_build_runs_in_one_kept_helper_process(monkeypatch):
    """The deeper short build of a depth extrapolation runs in a helper process that later
    preflights reuse (a fresh one is seconds of imports each); one that died is replaced."""
    import signal
    import time
    from concurrent.futures.process import BrokenProcessPool

    from hyper_parallel.preflight import run

    monkeypatch.setenv(run.PROCESSES_ENV, "2")
    monkeypatch.setattr(run, "_POOL_WORKER", False)
    monkeypatch.setattr(run, "_HELPER", None, raising=False)
    try:
        first = run._spawn(os.getpid).result(timeout=120)
        assert first != os.getpid()
        assert run._spawn(os.getpid).result(timeout=120) == first
        running = run._spawn(time.sleep, 120)
        os.kill(first, signal.SIGKILL)
        with pytest.raises(BrokenProcessPool):
            running.result(timeout=120)
        second = run._spawn(os.getpid).result(timeout=120)
        assert second not in (first, os.getpid())
    finally:
        if getattr(run, "_HELPER", None) is not None:
            run._HELPER.shutdown(wait=True, cancel_futures=True)


def test_a_legacy_yaml_gets_the_suggestions_its_recipe_gets():
    """A legacy YAML names its spec by ``model.name`` (no ``model_spec``): its FSDP ranks
    are offered to tensor parallelism as its recipe's are."""
    import importlib

    from hyper_parallel.preflight.suggest import candidates
    from hyper_parallel.train import parse_run

    legacy = parse_run([str(REPO / "examples/yaml/train_qwen3_5_fsdp2.yaml")]).config
    sys.path.insert(0, str(REPO))
    try:
        module = importlib.import_module("recipes.train_qwen3_5_fsdp2")
    finally:
        sys.path.remove(str(REPO))
    recipe = module.train_qwen3_5_fsdp2()
    flags = [flag for flag, _ in candidates(legacy)]
    assert flags == [flag for flag, _ in candidates(recipe)]
    assert ("--parallelism.tensor_parallel_degree=2 "
            "--parallelism.data_parallel_shard_degree=1") in flags, flags


def test_the_table_names_the_role_verdict_and_allowances(capsys):
    code, out, _ = _run(capsys, [*DEBUG, "--gpu", "b200", "--world", "1"])
    assert code == 0
    assert "1 ranks on b200" in out and "fits" in out
    assert "CUDA context" in out and "NCCL" in out and "fragmentation" in out
    assert "GFLOPs per token" in out


@pytest.mark.parametrize("argv, names", [
    ([*DEBUG, "--gpu", "h100"], ["--gpu", "did you mean", "h100-80gb"]),
    ([*DEBUG, "--parallelism.tensor_parallel_degree=4", "--world", "4"],
     ["parallelism.tensor_parallel_degree"]),
    ([str(REPO / "examples/yaml/train_qwen3_5_debug.yaml"), "--train.accelerator.tp=4",
      "--world", "4"], ["train.accelerator.tp"]),
    ([*DEBUG, "--imbalance", "0.5"], ["--imbalance"]),
])
def test_a_configuration_error_exits_2_in_the_entrys_names(capsys, argv, names):
    code, out, err = _run(capsys, argv)
    assert code == 2, out
    assert err.startswith("error: ")
    for name in names:
        assert name in err, err
    assert "Traceback" not in err


def _cli(module: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m module args`` from ``cwd``, as a user runs it (started warm:
    :mod:`tests.helpers.warm_python`, its own process, files, directory and exit status)."""
    from tests.helpers.warm_python import warm_python

    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([warm_python(), "-m", module, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def _bad_yaml(folder: Path, name: str, edits: dict[str, str]) -> tuple[Path, dict[str, int]]:
    """The debug example with ``edits`` (a line's text -> its replacement) as ``name``, and the
    1-based line of each replacement."""
    lines = (REPO / "examples/yaml/train_qwen3_5_debug.yaml").read_text().splitlines()
    where = {}
    for old, new in edits.items():
        index = next(i for i, line in enumerate(lines) if line.split("#")[0].rstrip() == old)
        lines[index] = new
        where[new.strip()] = index + 1
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path, where


def _located(text: str) -> list[str]:
    """Each problem line naming a YAML's ``file:line``, from that point on."""
    return [match.group(0) for match in re.finditer(r"\S+\.yaml:\d+: .*", text)]


def test_a_legacy_yamls_problems_are_located_as_from_yaml_locates_them(tmp_path):
    """``python -m hyper_parallel.preflight old.yaml`` reports a legacy YAML's problems as
    ``codegen --from-yaml old.yaml --preflight`` does, exit 2 and no traceback: the legacy
    parser's (an unknown key with its did-you-mean and a wrong type, both at once) and the one
    only the built run finds (a tensor-parallel degree the debug model's heads cannot take,
    named by the YAML's key at its line, not by the recipe field)."""
    parsed, parsed_at = _bad_yaml(tmp_path, "parsed.yaml", {
        "  max_steps: 10": "  max_step: 10", "  global_batch_size: 4": "  global_batch_size: four"})
    built, built_at = _bad_yaml(tmp_path, "built.yaml", {"    dp_shard: 1": "    tp: 8"})
    expected = {
        "parsed.yaml": [f"parsed.yaml:{parsed_at['max_step: 10']}: train.max_step: unknown key",
                        (f"parsed.yaml:{parsed_at['global_batch_size: four']}: "
                         "train.global_batch_size: expected int")],
        "built.yaml": [f"built.yaml:{built_at['tp: 8']}: train.accelerator.tp: 8 cannot shard"],
    }
    for path in (parsed, built):
        preflight = _cli("hyper_parallel.preflight", [path.name], tmp_path)
        codegen = _cli("hyper_parallel.codegen", ["--from-yaml", path.name, "-o",
                                                  f"{path.stem}.py", "--preflight"], tmp_path)
        for proc in (preflight, codegen):
            assert proc.returncode == 2, proc.stdout + proc.stderr
            assert "Traceback" not in proc.stderr, proc.stderr
        problems = _located(preflight.stderr)
        assert problems == _located(codegen.stdout + codegen.stderr), preflight.stderr
        assert [p[:len(e)] for p, e in zip(problems, expected[path.name])] \
            == expected[path.name], problems
        if path is parsed:
            assert "did you mean 'train.max_steps'" in problems[0], problems


def test_a_problem_an_override_sets_is_located_at_the_override(capsys):
    """The run's own check (heads the tensor-parallel degree must divide) on a value the
    command line set: named by the override as written and the YAML's key."""
    code, out, err = _run(capsys, [str(REPO / "examples/yaml/train_qwen3_5_debug.yaml"),
                                   "--train.accelerator.tp=8"])
    assert code == 2, out
    assert err.startswith("error: command line (--train.accelerator.tp=8): train.accelerator.tp: "
                          "8 cannot shard"), err
    assert "(recipe field: parallelism.tensor_parallel_degree)" in err


@pytest.mark.parametrize("schedule, n, pp, rank, v, held", [
    ("GPipe", 8, 4, 0, 1, 8),
    ("1F1B", 8, 4, 0, 1, 4),
    ("1F1B", 8, 4, 3, 1, 1),
    ("1F1B", 2, 4, 0, 1, 2),
    ("Interleaved1F1B", 8, 2, 0, 2, 3),
])
def test_micro_batches_in_flight_per_schedule(schedule, n, pp, rank, v, held):
    assert in_flight(schedule, n, pp, rank, v) == held


def test_preflight_runs_as_many_processes_as_it_may_use(monkeypatch):
    """Preflight's processes side by side: the cores this process may run on (its affinity,
    not the machine's count), or HYPER_PARALLEL_PREFLIGHT_PROCESSES; one means no helper
    process at all; a value that is not a count is a ConfigError naming the variable."""
    from hyper_parallel.preflight import run
    from hyper_parallel.utils.errors import ConfigError

    monkeypatch.delenv(run.PROCESSES_ENV, raising=False)
    assert run.processes() == len(os.sched_getaffinity(0))
    monkeypatch.setenv(run.PROCESSES_ENV, "3")
    assert run.processes() == 3
    monkeypatch.setenv(run.PROCESSES_ENV, "1")
    monkeypatch.setattr(run, "_POOL_WORKER", False)
    assert run._spawn(os.getpid) is None  # the deeper build waits for this process
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(run.PROCESSES_ENV, bad)
        with pytest.raises(ConfigError) as caught:
            run.processes()
        assert caught.value.path == run.PROCESSES_ENV and repr(bad) in str(caught.value)


def test_a_simulation_starts_at_the_bottom_of_a_stack_of_its_own():
    """A role's simulation runs on a thread of its own (its speed must not depend on how deep
    the caller's stack is: CPython 3.11 maps and unmaps a frame chunk each time a hot loop
    straddles a chunk's edge), once however nested; its result and its errors are the caller's."""
    import threading

    from hyper_parallel.preflight import run
    from hyper_parallel.utils.errors import ConfigError

    @run._at_the_bottom_of_a_stack
    def where(nested: bool = False):
        if nested:
            return where()
        return threading.current_thread().name, threading.get_ident()

    name, ident = where()
    assert name == run.SIMULATION_THREAD and ident != threading.get_ident()
    assert where(nested=True)[0] == run.SIMULATION_THREAD
    assert run._FREEZE_AT_EXIT  # a process that simulated skips its last collections at exit

    @run._at_the_bottom_of_a_stack
    def refuse():
        raise ConfigError("no", path="training.seq_len")

    with pytest.raises(ConfigError, match="no"):
        refuse()
    assert run.measure_role.__wrapped__ and run._short_role.__wrapped__
