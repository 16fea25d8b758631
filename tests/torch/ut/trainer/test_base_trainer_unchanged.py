"""The legacy path is unchanged by the trainer seam.

The golden loss files were recorded by the legacy trainer before ``HyperTrainer`` and the helper
extraction existed (commit 70f70f5). Their contents are pinned here by hash, so they can only be
re-recorded deliberately (together with this table); the slow suite
(``tests/torch/st/qwen3_5/test_legacy_training.py::test_golden_losses_bit_for_bit``) re-runs
every one of them through the legacy trainer and compares bit for bit.
"""

from __future__ import annotations

import hashlib
from ...st.qwen3_5.test_legacy_training import GOLDEN_DIR, GOLDEN_RUNS

PINNED_SHA256 = {
    "train_qwen3_5_debug": "f205bad0c47ea1311ddbbc97866b5b32b63a62b510d1c20c2d9cd90baf5fb3a6",
    "train_qwen3_5_demo": "53a1da971a223d08bee243e839ec28bb059f4d7a2ee757b515c42c56090b55d0",
    "train_qwen3_5_fsdp2": "e31461137894a1679ea4f5cb00a46c0123dd3036492e7cb09e4a40e363da2508",
    "train_qwen3_5_tp2": "9820c168712f6d26ac94ee90f6e1edb9298d8021e80304923c8702e2ea85a5e6",
}


def test_golden_files_are_the_pre_refactor_ones():
    assert sorted(GOLDEN_RUNS) == sorted(PINNED_SHA256)
    for name, digest in PINNED_SHA256.items():
        data = (GOLDEN_DIR / f"{name}.json").read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"{name}.json changed"
