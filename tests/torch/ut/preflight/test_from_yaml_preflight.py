"""``python -m hyper_parallel.codegen --from-yaml ... --preflight``: a converted YAML, or a whole
fleet, preflighted at each recipe's world size; the exit status is preflight's, a recipe that
cannot be built is named in its YAML's keys at their lines, and variants that differ only in
what the simulation never reads are preflighted once."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import yaml

from hyper_parallel.codegen.__main__ import main
from hyper_parallel.preflight.gpus import GPUS
from hyper_parallel.preflight.simulate import simulation_config, simulation_key

REPO = Path(__file__).resolve().parents[4]
EXAMPLES = REPO / "examples" / "yaml"


def _yaml(folder: Path, name: str, source: str, changes: dict) -> Path:
    """``source``'s YAML with ``changes`` ({"train.accelerator.tp": 4, ...}) as ``name``."""
    data = yaml.safe_load((EXAMPLES / source).read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split(".")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _row(out: str, recipe: str) -> list[str]:
    return next(line.split() for line in out.splitlines() if line.split()[:1] == [recipe])


@pytest.mark.slow
def test_a_fleet_is_preflighted_recipe_by_recipe(tmp_path, capsys):
    """The debug YAML, a sweep of it over what no tensor depends on (learning rate, seed,
    output folder: one simulation), the FSDP 2 example, and a YAML whose tensor-parallel
    degree does not divide the debug model's heads: the fleet is written (its conversion is
    proven), the table has a row per recipe, the broken one is named by its YAML key and line,
    and the exit status is 2."""
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    shutil.copy(EXAMPLES / "train_qwen3_5_debug.yaml", fleet / "debug.yaml")
    _yaml(fleet, "debug_sweep", "train_qwen3_5_debug.yaml",
          {"train.optimizer.lr": 3e-4, "train.seed": 7, "train.checkpoint.output_dir": "elsewhere"})
    shutil.copy(EXAMPLES / "train_qwen3_5_fsdp2.yaml", fleet / "fsdp2.yaml")
    _yaml(fleet, "tp8", "train_qwen3_5_debug.yaml", {"train.accelerator.tp": 8})
    output = tmp_path / "registry.py"
    code, out, err = _run(capsys, ["--from-yaml", str(fleet), "-o", str(output), "--preflight",
                                   "--gpu", "h100-80gb"])
    assert output.is_file(), err
    assert code == 2, out + err
    assert "preflight on h100-80gb (79.6 GiB a GPU):" in out
    debug, sweep = _row(out, "debug"), _row(out, "debug_sweep")
    assert debug[1:] == sweep[1:] and debug[-1] == "fits", out
    fsdp2 = _row(out, "fsdp2")
    assert fsdp2[1] == "2" and fsdp2[-1] == "fits", out
    assert _row(out, "tp8")[-2:] == ["config", "error"], out
    error = next(line for line in out.splitlines() if line.strip().startswith("tp8: error:"))
    line = next(i for i, text in enumerate((fleet / "tp8.yaml").read_text().splitlines(), 1)
                if text.strip().startswith("tp:"))
    assert f"tp8.yaml:{line}" in error and "train.accelerator.tp" in error, error


@pytest.mark.slow
def test_one_yaml_that_does_not_fit_exits_1(tmp_path, capsys):
    """A GPU too small: the recipe is written, its row says oom, the exit status is 1; the
    same YAML on a GPU it fits exits 0."""
    source = EXAMPLES / "train_qwen3_5_debug.yaml"
    code, out, err = _run(capsys, ["--from-yaml", str(source), "-o", str(tmp_path / "a.py"),
                                   "--preflight", "--gpu-memory", "0.05"])
    assert (tmp_path / "a.py").is_file() and code == 1, out + err
    assert _row(out, "train_qwen3_5_debug")[-1] == "oom", out
    code, out, err = _run(capsys, ["--from-yaml", str(source), "-o", str(tmp_path / "b.py"),
                                   "--preflight", "-q"])
    assert code == 0 and _row(out, "train_qwen3_5_debug")[-1] == "fits", out + err


@pytest.mark.parametrize("argv, words", [
    (["--gpu", "h100"], "--gpu / --gpu-memory choose the GPU of --preflight; add --preflight"),
    (["--preflight", "--gpu", "h100"], "'h100' is not a GPU preflight knows"),
    (["--preflight", "--gpu", "h100-80gb", "--gpu-memory", "80"], "pass one of them"),
])
def test_a_bad_preflight_option_exits_2_and_writes_nothing(tmp_path, capsys, argv, words):
    output = tmp_path / "r.py"
    try:
        code = main(["--from-yaml", str(EXAMPLES / "train_qwen3_5_debug.yaml"), "-o",
                     str(output), *argv])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    assert code == 2 and words in capsys.readouterr().err
    assert not output.exists()


def test_the_simulation_never_sees_what_does_not_move_a_tensor():
    """The sections a rank role's build never reads, and the values that scale no tensor, are
    the defaults in what is simulated: a sweep over them is one simulation; anything that
    shapes a tensor (a sequence length) is another."""
    from hyper_parallel.models.qwen3_5_v2.config_registry import qwen3_5_v2_debugmodel

    config = qwen3_5_v2_debugmodel()
    sweep = dataclasses.replace(
        config,
        optimizer=dataclasses.replace(config.optimizer, lr=config.optimizer.lr * 3),
        training=dataclasses.replace(config.training, steps=config.training.steps + 5),
        debug=dataclasses.replace(config.debug, seed=config.debug.seed + 1),
        checkpoint=dataclasses.replace(config.checkpoint, folder="elsewhere"),
        dump_folder="other",
    )
    assert simulation_key(sweep) == simulation_key(config)
    longer = dataclasses.replace(
        config, training=dataclasses.replace(config.training, seq_len=config.training.seq_len * 2))
    assert simulation_key(longer) != simulation_key(config)
    simulated = simulation_config(config)
    assert simulated.training.init_device == "meta" and not simulated.compile.enable


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_the_preflighting_process_is_one_of_the_fleets_workers(monkeypatch, workers):
    """``preflight_many`` runs its distinct simulations ``workers`` at a time, this process one
    of the workers (it has imported everything; a spawned one starts by importing torch) and
    the pool the others, each worker taking the next as it ends one; each simulation once, the
    results in the configurations' order. (The pool here runs threads: the scheduling is what
    is checked; the fleet test above runs the spawned processes.)"""
    import concurrent.futures
    import threading

    from hyper_parallel.models.qwen3_5_v2.config_registry import qwen3_5_v2_debugmodel
    from hyper_parallel.preflight import many

    ran: list[tuple[int, bool]] = []
    started = threading.Event()  # the pool's first waits for this process's: both take one

    def one(config, world, gpu, imbalance, suggest, work=False, silent=False):
        here = threading.current_thread() is main
        if here:
            started.set()
        else:
            started.wait(timeout=10)
        ran.append((config.training.seq_len, here))
        return config.training.seq_len

    class Pool(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, max_workers, mp_context, initializer):
            assert max_workers == workers - 1
            super().__init__(max_workers=max_workers)

    main = threading.current_thread()
    monkeypatch.setattr(many, "_one", one)
    monkeypatch.setattr(many.concurrent.futures, "ProcessPoolExecutor", Pool)
    # The process keeps its pool between calls: an earlier test's spawned workers would take
    # the jobs here (and run the real ``_one``). This test's pool is its own, shut down after.
    monkeypatch.setattr(many, "_POOL", None)
    base = qwen3_5_v2_debugmodel()
    lengths = [64, 128, 64, 256, 512, 128, 1024]
    configs = [dataclasses.replace(base, training=dataclasses.replace(base.training, seq_len=n))
               for n in lengths]
    try:
        results = many.preflight_many(configs, GPUS["h100-80gb"], workers=workers)
    finally:
        many._shutdown()
    assert results == lengths
    assert sorted(n for n, _ in ran) == sorted(set(lengths))
    in_this_process = sum(here for _, here in ran)
    assert in_this_process == len(ran) if workers == 1 else 1 <= in_this_process < len(ran), ran


@pytest.mark.parametrize("name", ["train_qwen3_5_debug", "train_qwen3_5_fsdp2"])
def test_a_recipe_and_the_yaml_it_was_converted_from_are_one_simulation(name):
    """``recipes/`` states the spec the legacy YAML names by ``model.name``: the same build, so
    one simulation key; another flavor of the same spec is another."""
    import importlib
    import sys

    from hyper_parallel.train import parse_run

    sys.path.insert(0, str(REPO))
    try:
        recipe = getattr(importlib.import_module(f"recipes.{name}"), name)()
    finally:
        sys.path.remove(str(REPO))
    legacy = parse_run([str(EXAMPLES / f"{name}.yaml")]).config
    assert recipe.model_spec is not None and legacy.model_spec is None
    assert simulation_key(recipe) == simulation_key(legacy)
    other = dataclasses.replace(legacy, model=dataclasses.replace(
        legacy.model, config_overrides={**(legacy.model.config_overrides or {}),
                                        "flavor": "0.8b"}))
    assert simulation_key(other) != simulation_key(legacy)


@pytest.mark.slow
def test_a_launch_command_gives_the_world_of_every_rank_degree(tmp_path, capsys):
    """``dp_shard: -1`` takes what the launch gives: pasted with its ``torchrun`` line, the TP
    example is preflighted at the 2 ranks it names (its degrees alone would mean a node of 8
    per tensor-parallel group)."""
    launch = ("torchrun --nproc_per_node 2 scripts/train_lm.py "
              f"{EXAMPLES / 'train_qwen3_5_tp2.yaml'}")
    code, out, err = _run(capsys, ["--from-yaml", launch, "-o", str(tmp_path / "tp2.py"),
                                   "--preflight", "-q"])
    assert code == 0, out + err
    assert _row(out, "train_qwen3_5_tp2")[1] == "2", out


def test_quiet_simulations_print_no_warning_but_every_error():
    """``preflight_many(quiet=True)`` (the planner's candidates): the engine's and torch's
    warnings about a simulated configuration are not printed, its errors are, and the levels
    are restored after."""
    import io
    import logging
    import warnings

    from hyper_parallel.preflight import many

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    engine = logging.getLogger("hyper_parallel.models.pipelining")
    torch_logger = logging.getLogger("torch.distributed.tensor._redistribute")
    package = logging.getLogger("hyper_parallel")
    saved = package.level
    package.setLevel(logging.WARNING)  # whatever an earlier test of this worker left
    for logger in (engine, torch_logger):
        logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # what quiet() must override
            with many.quiet():
                engine.warning("3 pipeline micro-batches for 4 stages")
                torch_logger.warning("2 sequential all_reduce operations")
                warnings.warn("a UserWarning", stacklevel=1)
                engine.error("the simulation failed")
        assert stream.getvalue() == "the simulation failed\n"
        assert not caught
        engine.warning("after")
        assert stream.getvalue().endswith("after\n")
    finally:
        package.setLevel(saved)
        for logger in (engine, torch_logger):
            logger.removeHandler(handler)
