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
