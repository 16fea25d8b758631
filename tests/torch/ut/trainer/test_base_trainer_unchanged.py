"""The legacy path is unchanged by the trainer seam.

The golden loss files were recorded by the legacy trainer before ``HyperTrainer`` and the helper
extraction existed: commit 70f70f5's own ``test_golden_losses_bit_for_bit``, run with
``HYPER_PARALLEL_UPDATE_GOLDEN=1`` on the pinned kernel paths of :mod:`tests.helpers.numerics`
(the variables of ``PORTABLE_NUMERICS`` exported), where a float32 run is the same on every
x86-64 CPU with AVX2. (The first recording, on the native kernels of one CPU, drifted by an ulp on
another: the pre-refactor trainer drifted with it.) Their contents are pinned here by hash, so
they can only be re-recorded deliberately, that way, together with this table; the slow suite
(``tests/torch/st/qwen3_5/test_legacy_training.py::test_golden_losses_bit_for_bit``) re-runs
every one of them through the legacy trainer on the same kernel paths and compares bit for bit.
"""

from __future__ import annotations

import hashlib

from ...st.qwen3_5.test_legacy_training import GOLDEN_DIR, GOLDEN_RUNS

PINNED_SHA256 = {
    "train_qwen3_5_debug": "2358b227a4580de3218c60694b61f8217be0f0e555e6cdb965962274f2274175",
    "train_qwen3_5_demo": "63d5abcbc733e467f9d4c6fcb2ac2db414b4fb201a691e87566d1f7a6f8462b9",
    "train_qwen3_5_fsdp2": "04a60bdd5a7d4051603ab1babbb54f876579ba6a2277f2d26a9cb029f981b2d9",
    "train_qwen3_5_tp2": "cf9f06652df6cd56e879ac61972460c324c08656d60ef9f1d77a1594930363cd",
}


def test_golden_files_are_the_pre_refactor_ones():
    assert sorted(GOLDEN_RUNS) == sorted(PINNED_SHA256)
    for name, digest in PINNED_SHA256.items():
        data = (GOLDEN_DIR / f"{name}.json").read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"{name}.json changed"
