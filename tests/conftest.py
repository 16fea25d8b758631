"""Shared test configuration."""

import os

# Keep the 2-core CI machine responsive: every test process uses one intra-op thread unless a
# test says otherwise; torchrun workers inherit this.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HYPER_PARALLEL_DISABLE_TQDM", "1")
