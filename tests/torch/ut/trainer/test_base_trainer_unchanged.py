"""The legacy path is unchanged by the trainer seam.

The golden loss files were recorded by the legacy trainer before ``HyperTrainer`` and the helper
extraction existed: commit 70f70f5's own ``test_golden_losses_bit_for_bit``, run with
``HYPER_PARALLEL_UPDATE_GOLDEN=1`` on the pinned kernel paths of :mod:`tests.helpers.numerics`
(the variables of ``PORTABLE_NUMERICS`` exported, oneDNN off in each process through a
``sitecustomize`` on ``PYTHONPATH``), where a float32 run is the same on most x86-64 CPUs. (The
recordings on native kernels, then on MKL's AVX2 path, made on an Intel Xeon, drifted by an ulp
on an AMD EPYC: the pre-refactor trainer drifted with them.) Their contents are pinned here by hash, so
they can only be re-recorded deliberately, that way, together with this table; the slow suite
(``tests/torch/st/qwen3_5/test_legacy_training.py::test_golden_losses_bit_for_bit``) re-runs
every one of them through the legacy trainer on the same kernel paths and compares bit for bit.

A CPU whose pinned numerics still differ (:mod:`tests.helpers.golden`) gets its own recording
the same way: a worktree of 70f70f5, its test run there with ``HYPER_PARALLEL_UPDATE_GOLDEN=1``,
the ``PORTABLE_NUMERICS`` exported and ``PYTHONPATH=<a folder whose sitecustomize.py turns
oneDNN off when HYPER_PARALLEL_TEST_ONEDNN_OFF=1>:<the worktree>``; its files go to
``golden/other_cpus/<cpu>/`` with where and by what they were recorded, and their hashes here.
On the first such CPU (an Intel Xeon with AVX-512 and AMX) the pre-refactor trainer's
recordings and the current trainer's runs were the same, bit for bit, as on the others.

A machine may also have native recordings (``golden/native/<cpu key>/``), on which its golden
runs train at native speed: the same worktree's test run with ``HYPER_PARALLEL_UPDATE_GOLDEN=1``
and only ``OMP_NUM_THREADS=1`` exported, then ``python -m tests.helpers.golden --record-native
<the worktree's golden folder> --recorded-by "..."`` on the same machine, which files them
under its key with its fingerprint; their hashes go here too.
"""

from __future__ import annotations

import hashlib
import json

from tests.helpers.golden import NATIVE, OTHER_CPUS, cpu_key

from ...st.qwen3_5.test_legacy_training import GOLDEN_DIR, GOLDEN_RUNS

PINNED_SHA256 = {
    "train_qwen3_5_debug": "3d17c1276921b689d0a7fe4882a75c9bd56f1ce8635f6645d747e4f21eaf19b4",
    "train_qwen3_5_demo": "b204c12159060859296772f137cc4c343512f2ed9ad771b0255af038ef045d76",
    "train_qwen3_5_fsdp2": "49b10f76ea3da295da918cce64470c3cea5343ae238e8106057deb0e579e9da2",
    "train_qwen3_5_tp2": "84876192b1ada801f7831294ca29010fdcd4bed9ee472b4000b514f55282ead4",
}
#: cpu -> name -> the hash of the pre-refactor trainer's recording on that CPU.
OTHER_CPUS_SHA256 = {
    "intel_xeon_avx512_amx": {
        "train_qwen3_5_debug": "7b8e5c8a31bc3fe76551c1d9a14e7267f4bc83eb40eed32e8a6481a275cbb056",
        "train_qwen3_5_demo": "2ec2505fd766594c8ec956bebedd4311af991a6625429ec4ecb7542535896161",
        "train_qwen3_5_fsdp2": "800562c09d85880f9a774190278caba8bb0a2e01ca1b3fea5828fa9264f0e4ce",
        "train_qwen3_5_tp2": "d7585363989d94a75bebd7e2912009a289593276265e6673cfc2d6ef641fe01e",
    },
}

#: cpu key -> name -> the hash of the pre-refactor trainer's recording on that machine's native
#: kernels.
NATIVE_SHA256 = {
    "GenuineIntel-6-167-e45ae37c4096": {
        "train_qwen3_5_debug": "c42618e0d1a16728af9781c9cdef3706182a325efdf93c8377945f638fced0f5",
        "train_qwen3_5_demo": "942b978f588af1398cb7b05bdbde2ebbd19a1b81e265ca9244ac03ea01399c36",
        "train_qwen3_5_fsdp2": "71ebeb5c24d6b3a95d05f817ba71eab26cf7a85224fa66030425aec169e531c1",
        "train_qwen3_5_tp2": "0d3f1f3cc292783940f30d68236749ad1f6b33258bc6deeb799b464bf2f38be3",
    },
}


def _pinned_by_hash(folder_name: str, table: dict) -> None:
    """Every legacy recording under ``golden/<folder_name>/`` is in ``table``, each machine
    records every golden run, and each file has its hash."""
    on_disk = {(path.parent.name, path.stem)
               for path in GOLDEN_DIR.glob(f"{folder_name}/*/train_*.json")}
    assert on_disk == {(where, name) for where, names in table.items() for name in names}
    for where, names in table.items():
        assert sorted(names) == sorted(GOLDEN_RUNS), where
        for name, digest in names.items():
            data = (GOLDEN_DIR / folder_name / where / f"{name}.json").read_bytes()
            assert hashlib.sha256(data).hexdigest() == digest, f"{where}/{name}.json changed"


def test_golden_files_are_the_pre_refactor_ones():
    assert sorted(GOLDEN_RUNS) == sorted(PINNED_SHA256)
    for name, digest in PINNED_SHA256.items():
        data = (GOLDEN_DIR / f"{name}.json").read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"{name}.json changed"


def test_every_other_cpus_recording_is_the_pre_refactor_trainers():
    """No legacy golden recording is added or changed but deliberately: every file under
    ``golden/other_cpus/`` is pinned here, each CPU records every golden run."""
    _pinned_by_hash(OTHER_CPUS, OTHER_CPUS_SHA256)


def test_every_native_recording_is_the_pre_refactor_trainers_on_the_machine_it_names():
    """The same for ``golden/native/``; and each file's fingerprint is the one its folder's key
    is made from, so a recording is only ever held against the machine it was made on."""
    _pinned_by_hash(NATIVE, NATIVE_SHA256)
    for path in GOLDEN_DIR.glob(f"{NATIVE}/*/*.json"):
        assert cpu_key(json.loads(path.read_text())["fingerprint"]) == path.parent.name, path
