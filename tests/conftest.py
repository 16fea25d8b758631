"""Shared test configuration."""

import os
import sys
from pathlib import Path

import pytest

# Keep the 2-core CI machine responsive: every test process uses one intra-op thread unless a
# test says otherwise; torchrun workers inherit this.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HYPER_PARALLEL_DISABLE_TQDM", "1")

# Everything the tests and the processes they start put in the temporary folder (torchrun's
# `torchelastic_*` logs, the workers' run folders, the warm-python servers' sockets) goes to a
# folder of this process's, removed at exit: a suite run leaves nothing behind in /tmp. The
# inductor's compile cache stays where it would be without this (kept between runs, as for a
# user), so that moving the temporary folder costs no compilation.
if "HP_TESTS_TMPDIR" not in os.environ:
    import atexit
    import getpass
    import shutil
    import tempfile

    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(
        tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}"))
    _tmp = tempfile.mkdtemp(prefix="hp_tests_tmp_")
    atexit.register(shutil.rmtree, _tmp, ignore_errors=True)
    os.environ["TMPDIR"] = os.environ["HP_TESTS_TMPDIR"] = tempfile.tempdir = _tmp
    # Preflight's role measurements are kept for the session (never in the user's cache), in
    # one folder every worker shares: a recipe the shipped-recipes test simulated, the
    # preflight and plan commands, launch and the benches' smoke runs read, not simulate again.
    os.environ["HYPER_PARALLEL_PREFLIGHT_CACHE"] = os.path.join(_tmp, "preflight")

# The `datasets` library caches what it loads (hf_datasets) under ~/.cache/huggingface; tests
# keep that in a folder of their own, removed at exit, and never reach the network.
if "HF_HOME" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _hf_home = tempfile.mkdtemp(prefix="hp_tests_hf_")
    atexit.register(shutil.rmtree, _hf_home, ignore_errors=True)
    os.environ["HF_HOME"] = _hf_home
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

# Weights & Biases (metrics.enable_wandb): every test run is offline (never the network, even
# with an API key in the environment) and quiet, and what wandb keeps outside a run's folder
# (its service logs, settings, staging) goes to a folder of the session, removed at exit.
os.environ["WANDB_MODE"] = "offline"
os.environ["WANDB_SILENT"] = "true"
if "WANDB_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    _wandb_home = tempfile.mkdtemp(prefix="hp_tests_wandb_")
    atexit.register(shutil.rmtree, _wandb_home, ignore_errors=True)
    for _var, _sub in (("WANDB_CACHE_DIR", "cache"), ("WANDB_CONFIG_DIR", "config"),
                       ("WANDB_DATA_DIR", "data")):
        os.environ[_var] = os.path.join(_wandb_home, _sub)

# Under pytest-xdist the session already runs one test a core: a test's preflight spreading its
# simulations over the cores (preflight/run.py: processes()) would only take them from the other
# worker's test, and pay a spawned interpreter's imports. The tests of that spreading ask for
# their processes themselves.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("HYPER_PARALLEL_PREFLIGHT_PROCESSES", "1")

#: The layout harness's session fixture (``layouts``), for every test that compares layouts;
#: the suite's cost, printed at its end.
pytest_plugins = ["tests.helpers.layout", "tests.helpers.suite_cost"]


_ST, _UT = "tests/torch/st/qwen3_5/", "tests/torch/ut/"
#: Under pytest-xdist (one test handed out at a time) these start first, longest first: each
#: takes 10-100 s on the 2-core machine, most of them a job that other tests then read from the
#: session cache (the module's layout-harness plan, a torchrun worker's cases). Started early,
#: no worker is left alone at the end behind one of them. A renamed test merely loses its place.
STARTERS = (
    _ST + "test_legacy_training.py::test_golden_losses_bit_for_bit[train_qwen3_5_debug]",
    # A second asker of the same plan: its two pinned 2-rank jobs are made side by side.
    _ST + "test_legacy_training.py::test_golden_losses_bit_for_bit[train_qwen3_5_tp2]",
    # Every shipped recipe preflighted at its world size (both cores, ~270 s of CPU).
    _UT + "preflight/test_shipped_recipes.py::test_every_shipped_recipe_fits",
    _ST + "test_faults.py::test_faults_end_fast",
    # The real steps preflight's figures are held to: one job per world size (1 and 2 ranks),
    # which the module's other layouts and the preflight bench's smoke run then read.
    "tests/torch/st/preflight/test_preflight_accuracy.py::test_preflight_matches_a_real_step[FSDP 2]",
    "tests/torch/st/preflight/test_preflight_accuracy.py::test_preflight_matches_a_real_step[1 rank",
    _UT + "preflight/test_accumulation.py::test_preflight_peaks_where_the_real_accumulated_step",
    # The planner's preflighted searches (10-20 s of CPU each).
    _UT + "plan/test_space.py::test_the_memory_floor_never_exceeds_what_preflight_measures",
    _UT + "plan/test_plan_cli.py::test_the_json_object_is_the_issues_schema_best_first",
    _ST + "test_worker_restart.py::test_a_killed_worker_is_restarted",
    # The generated Slurm script run, stopped, requeued and resumed (the reference run first).
    "tests/torch/st/launch/test_launch_jobs.py::test_the_slurm_script",
    "tests/torch/st/launch/test_launch_jobs.py::test_the_kubernetes_pods",
    # One job of six simulated 2-rank CUDA layouts (fake_cuda), read by its seven tests.
    _ST + "test_gpu_collectives.py::test_every_collective_gets_a_tensor_nccl_serves[FSDP 2]",
    _UT + "models/test_qwen3_5_v2.py::test_compile_per_layer_inductor_matches_eager",
    _ST + "test_recipes_from_yaml.py::test_every_step_bit_identical[train_qwen3_5_debug]",
    _ST + "test_moe_layouts.py::test_legacy_yaml_and_recipe_are_one_run[1 rank]",
    # A second asker of the same plan: it makes the world sizes the first one is not making.
    _ST + "test_moe_layouts.py::test_layouts_agree_with_one_rank[EP 2 x TP 2]",
    _ST + "test_parallelize.py::test_fsdp_2_ranks_matches_reference",
    _ST + "test_context_parallel.py::test_context_parallel_layouts_train_the_one_rank_run[CP 2]",
    _ST + "test_context_parallel.py::test_context_parallel_layouts_train_the_one_rank_run[CP 2 x FSDP 2]",
    _ST + "test_one_engine.py::test_a_checkpoint_resumes_through_the_other_entry[yaml then recipe]",
    _ST + "test_parallelize.py::test_hsdp_2x2_matches_reference",
    _ST + "test_preset_pt.py::test_the_recipe_replays_the_same_batches",
    _UT + "trainer/test_field_probes.py::test_layout_probes_on_two_ranks",
    _UT + "config/test_fuzz_legacy.py::test_structural_mutations",
    "tests/codegen/test_fuzz_from_yaml.py::test_from_yaml_converts_or_refuses",
    _UT + "config/test_fuzz_cli.py::",
    _UT + "models/test_qwen3_5_model.py::test_init_weights_on_dtensor_params_matches_unsharded",
    # The bench smoke runs: 10-25 s each, every one its own processes (no shared job).
    "tests/bench/test_bench_smoke.py::test_gpu_check_dry_run",
    "tests/bench/test_bench_smoke.py::test_bench_smoke_run[bench_moe]",
    "tests/bench/test_bench_smoke.py::test_bench_smoke_run[bench_train]",
)
#: Modules whose other tests read a starter's job: they go last, when it is likely done (a
#: worker that asks for a job still running waits for it, idle).
READERS = tuple(_ST + name for name in (
    "test_legacy_training.py", "test_recipes_from_yaml.py", "test_parallelize.py",
    "test_one_engine.py", "test_preset_pt.py", "test_moe_layouts.py",
    "test_context_parallel.py"))


def _place(nodeid: str) -> tuple[int, int]:
    starter = next((i for i, prefix in enumerate(STARTERS) if nodeid.startswith(prefix)), None)
    if starter is not None:
        return (0, starter)
    return (2, 0) if nodeid.startswith(READERS) else (1, 0)


#: Single-process tests of more than a core-second, marked slow here (the file says why).
SLOW_SINGLE_PROCESS = Path(__file__).with_name("slow_single_process.txt")


def _slow_single_process() -> set[str]:
    lines = SLOW_SINGLE_PROCESS.read_text().splitlines()
    return {line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()}


@pytest.hookimpl(tryfirst=True)  # before -m "not slow" deselects by the marks
def pytest_collection_modifyitems(config, items):
    listed = _slow_single_process()
    for item in items:
        if item.nodeid.split("[")[0] in listed:
            item.add_marker(pytest.mark.slow)
    # A listed name no test has any more: tests/test_slow_single_process_list.py (a check here
    # would also fire on every run that selects one test of a listed test's file).
    # Only on xdist workers (they all collect, and must agree on the order): a plain serial
    # run keeps pytest's own order.
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: _place(item.nodeid))  # stable


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Before a test's fixtures (a module's shared job too) are set up: whether it may start a
    multi-rank job (:data:`tests.helpers.torchrun.MULTI_RANK_ALLOWED`)."""
    from tests.helpers import torchrun

    torchrun.MULTI_RANK_ALLOWED = item.get_closest_marker("slow") is not None
    try:
        yield
    finally:
        torchrun.MULTI_RANK_ALLOWED = True


@pytest.fixture(autouse=True)
def _no_process_group_left_behind(request):
    """A test that ends with a process group up fails here, by name: the next test of its
    worker would join that group (its backend, its world size) instead of making its own."""
    yield
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        pytest.fail(f"{request.node.nodeid} left a process group up", pytrace=False)
