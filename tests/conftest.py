"""Shared test configuration."""

import os

# Keep the 2-core CI machine responsive: every test process uses one intra-op thread unless a
# test says otherwise; torchrun workers inherit this.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HYPER_PARALLEL_DISABLE_TQDM", "1")

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

#: The layout harness's session fixture (``layouts``), for every test that compares layouts.
pytest_plugins = ["tests.helpers.layout"]


#: The longest tests of either suite, longest first (each takes 10-100 s alone on the 2-core
#: machine; the two-rank parallelize launch is its module's fixture, made by whichever of its
#: tests runs first). Under pytest-xdist they start before everything else, so that no worker is
#: left alone at the end behind one of them while the other has nothing to do; every other test
#: keeps its collection order behind them, the hundreds of short ones last, where they even out
#: the workers. The slow suite's ordering also makes the tests that need a legacy run *and* a
#: run of their own (test_recipes_from_yaml) the ones that start it; the golden tests then
#: read it from the session cache. A renamed test merely loses its place in this list.
_ST, _UT = "tests/torch/st/qwen3_5/", "tests/torch/ut/"
LONGEST_FIRST = (
    _ST + "test_faults.py::test_faults_end_fast",
    _ST + "test_recipes_from_yaml.py::test_first_steps_bit_identical[train_qwen3_5_fsdp2]",
    _ST + "test_recipes_from_yaml.py::test_first_steps_bit_identical[train_qwen3_5_demo]",
    _UT + "models/test_qwen3_5_v2.py::test_compile_per_layer_inductor_matches_eager",
    _ST + "test_recipes_from_yaml.py::test_first_steps_bit_identical[train_qwen3_5_tp2]",
    _ST + "test_legacy_training.py::test_layouts_agree",
    _ST + "test_legacy_training.py::test_checkpoint_weights_load_on_another_layout",
    _ST + "test_recipes_train.py::test_cpu_recipes_train_and_agree",
    _UT + "trainer/test_field_probes.py::test_layout_probes_on_two_ranks",
    _ST + "test_parallelize.py::test_fsdp_2_ranks_matches_reference",
    _UT + "config/test_fuzz_legacy.py::test_structural_mutations",
    _UT + "config/test_fuzz_cli.py::",
    "tests/codegen/test_fuzz_from_yaml.py::test_from_yaml_converts_or_refuses",
    _UT + "models/test_qwen3_5_model.py::test_init_weights_on_dtensor_params_matches_unsharded",
)


def _place(nodeid: str) -> int:
    return next((i for i, prefix in enumerate(LONGEST_FIRST) if nodeid.startswith(prefix)),
                len(LONGEST_FIRST))


def pytest_collection_modifyitems(config, items):
    # Only on xdist workers (they all collect, and must agree on the order): a plain serial
    # run keeps pytest's own order.
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: _place(item.nodeid))  # stable
