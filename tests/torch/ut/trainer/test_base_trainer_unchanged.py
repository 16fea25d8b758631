"""The legacy path is unchanged by the trainer seam.

The golden loss files were recorded by the legacy trainer before ``HyperTrainer`` and the helper
extraction existed: commit 70f70f5's own ``test_golden_losses_bit_for_bit``, run with
``HYPER_PARALLEL_UPDATE_GOLDEN=1`` on the pinned kernel paths of :mod:`tests.helpers.numerics`
(the variables of ``PORTABLE_NUMERICS`` exported, oneDNN off in each process through a
``sitecustomize`` on ``PYTHONPATH``), where a float32 run is the same on every x86-64 CPU. (The
recordings on native kernels, then on MKL's AVX2 path, made on an Intel Xeon, drifted by an ulp
on an AMD EPYC: the pre-refactor trainer drifted with them.) Their contents are pinned here by hash, so
they can only be re-recorded deliberately, that way, together with this table; the slow suite
(``tests/torch/st/qwen3_5/test_legacy_training.py::test_golden_losses_bit_for_bit``) re-runs
every one of them through the legacy trainer on the same kernel paths and compares bit for bit.
"""

from __future__ import annotations

import hashlib

from ...st.qwen3_5.test_legacy_training import GOLDEN_DIR, GOLDEN_RUNS

PINNED_SHA256 = {
    "train_qwen3_5_debug": "3d17c1276921b689d0a7fe4882a75c9bd56f1ce8635f6645d747e4f21eaf19b4",
    "train_qwen3_5_demo": "b204c12159060859296772f137cc4c343512f2ed9ad771b0255af038ef045d76",
    "train_qwen3_5_fsdp2": "49b10f76ea3da295da918cce64470c3cea5343ae238e8106057deb0e579e9da2",
    "train_qwen3_5_tp2": "84876192b1ada801f7831294ca29010fdcd4bed9ee472b4000b514f55282ead4",
}


def test_golden_files_are_the_pre_refactor_ones():
    assert sorted(GOLDEN_RUNS) == sorted(PINNED_SHA256)
    for name, digest in PINNED_SHA256.items():
        data = (GOLDEN_DIR / f"{name}.json").read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"{name}.json changed"
