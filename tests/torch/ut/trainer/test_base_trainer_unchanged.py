"""The legacy path is unchanged by the trainer seam.

The golden loss files were recorded by the legacy trainer before ``HyperTrainer`` and the helper
extraction existed: commit 70f70f5's own ``test_golden_losses_bit_for_bit``, run with
``HYPER_PARALLEL_UPDATE_GOLDEN=1`` on the pinned kernel paths of :mod:`tests.helpers.numerics`
(the variables of ``PORTABLE_NUMERICS`` exported), where a float32 run is the same on every
x86-64 CPU. (The first recording, on the native kernels of one CPU, drifted by an ulp on
another: the pre-refactor trainer drifted with it.) Their contents are pinned here by hash, so
they can only be re-recorded deliberately, that way, together with this table; the slow suite
(``tests/torch/st/qwen3_5/test_legacy_training.py::test_golden_losses_bit_for_bit``) re-runs
every one of them through the legacy trainer on the same kernel paths and compares bit for bit.
"""

from __future__ import annotations

import hashlib

from ...st.qwen3_5.test_legacy_training import GOLDEN_DIR, GOLDEN_RUNS

PINNED_SHA256 = {
    "train_qwen3_5_debug": "d2606101fb835ebe51b9a7384e801e268a65ff5ad27ac91430934d382cd45cf8",
    "train_qwen3_5_demo": "2f0e2e4b278c913576e4c1a14dfddf31c3630904b18b800a39a556bfe9e61f38",
    "train_qwen3_5_fsdp2": "203fc97258f1de8faccd60632ddd6667152da2ef705e7418e3fc7a1fc3fcf788",
    "train_qwen3_5_tp2": "49b00f85ce626ea870a98a1034e84c55f25cc90264996b1389dc9a2fc327b35f",
}


def test_golden_files_are_the_pre_refactor_ones():
    assert sorted(GOLDEN_RUNS) == sorted(PINNED_SHA256)
    for name, digest in PINNED_SHA256.items():
        data = (GOLDEN_DIR / f"{name}.json").read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"{name}.json changed"
