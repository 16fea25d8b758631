"""``tests/helpers/golden.py``: a run matches a golden when it equals one of its recordings
(the file, or a CPU's under ``other_cpus/``) bit for bit, and a mismatch names every
recording's differing steps; where this machine has a native recording, the golden runs on the
native kernels and that recording alone is the one to equal."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.golden import (
    FORCE_NUMERICS,
    NATIVE,
    NATIVE_ENV,
    OTHER_CPUS,
    PINNED_ENV,
    assert_matches_a_recording,
    cpu_fingerprint,
    cpu_key,
    golden_numerics,
    record_native,
    record_native_figures,
    recordings,
)

LOSSES = st.lists(st.floats(0.1, 20, allow_nan=False), min_size=1, max_size=12)


def _write(folder, first, others):
    golden = folder / "run.json"
    golden.write_text(json.dumps({"losses": first}))
    for cpu, losses in others.items():
        (folder / OTHER_CPUS / cpu).mkdir(parents=True, exist_ok=True)
        (folder / OTHER_CPUS / cpu / "run.json").write_text(json.dumps({"losses": losses}))
    return golden


@given(first=LOSSES, other=LOSSES, which=st.sampled_from(["first", "cpu_a"]))
def test_a_run_equal_to_any_recording_matches(tmp_path_factory, first, other, which):
    golden = _write(tmp_path_factory.mktemp("g"), first, {"cpu_a": other})
    assert set(recordings(golden)) == {"first", "cpu_a"}
    assert_matches_a_recording(first if which == "first" else other, golden)


@given(first=LOSSES, other=LOSSES)
def test_one_ulp_off_every_recording_fails_and_says_where(tmp_path_factory, first, other):
    import math

    golden = _write(tmp_path_factory.mktemp("g"), first, {"cpu_a": other})
    run = [math.nextafter(x, math.inf) for x in first]
    if run == other:
        return
    with pytest.raises(AssertionError, match="match none of its 2 recordings") as failure:
        assert_matches_a_recording(run, golden)
    assert "first: differs at steps [" in str(failure.value)
    assert "cpu_a: differs at steps" in str(failure.value)


def test_another_golden_of_the_same_cpu_is_not_a_recording(tmp_path):
    golden = _write(tmp_path, [1.0], {"cpu_a": [2.0]})
    (tmp_path / OTHER_CPUS / "cpu_a" / "other_run.json").write_text(json.dumps({"losses": [3.0]}))
    with pytest.raises(AssertionError):
        assert_matches_a_recording([3.0], golden)


def _native(folder, key, losses):
    (folder / NATIVE / key).mkdir(parents=True, exist_ok=True)
    (folder / NATIVE / key / "run.json").write_text(json.dumps({"losses": losses}))


def test_this_machines_native_recording_replaces_the_pinned_ones(tmp_path, monkeypatch):
    monkeypatch.delenv(FORCE_NUMERICS, raising=False)
    golden = _write(tmp_path, [1.0, 2.0], {"cpu_a": [1.0, 2.5]})
    assert golden_numerics(golden) == PINNED_ENV  # no native recording: the pinned paths
    _native(tmp_path, cpu_key() + "x", [3.0, 4.0])  # another machine's: not this one's
    assert golden_numerics(golden) == PINNED_ENV
    assert set(recordings(golden)) == {"first", "cpu_a"}
    _native(tmp_path, cpu_key(), [5.0, 6.0])
    assert golden_numerics(golden) == NATIVE_ENV
    assert recordings(golden) == {f"{NATIVE}/{cpu_key()}": [5.0, 6.0]}
    assert_matches_a_recording([5.0, 6.0], golden)
    for pinned_losses in ([1.0, 2.0], [1.0, 2.5], [3.0, 4.0]):  # a native run equals its own
        with pytest.raises(AssertionError, match=f"{NATIVE}/{cpu_key()}: differs at steps"):
            assert_matches_a_recording(pinned_losses, golden)
    # Forced back onto the pinned paths: the pinned recordings again.
    monkeypatch.setenv(FORCE_NUMERICS, "pinned")
    assert golden_numerics(golden) == PINNED_ENV
    assert_matches_a_recording([1.0, 2.5], golden)


def test_the_key_covers_what_picks_a_kernel():
    fingerprint = cpu_fingerprint()
    assert cpu_key(fingerprint) == cpu_key()
    for field, other in (("flags", [*fingerprint["flags"], "avx10_1"]), ("model", "1"),
                         ("caches", ["2 Unified 1024K"]), ("torch", "2.99.0"),
                         ("torch_config_sha256", "0" * 64)):
        assert cpu_key({**fingerprint, field: other}) != cpu_key(), field
    # ATen's capability, MKL's and oneDNN's versions are in torch's build summary.
    assert dict(PINNED_ENV)["OMP_NUM_THREADS"] == dict(NATIVE_ENV)["OMP_NUM_THREADS"] == "1"


def test_record_native_files_the_recorders_runs_under_this_machines_key(tmp_path, monkeypatch):
    monkeypatch.delenv(FORCE_NUMERICS, raising=False)
    (tmp_path / "golden").mkdir()
    golden = _write(tmp_path / "golden", [1.0], {})
    source = tmp_path / "recorder"
    source.mkdir()
    (source / "run.json").write_text(json.dumps({"yaml": "run.yaml", "losses": [7.0]}))
    (source / "unknown.json").write_text(json.dumps({"losses": [8.0]}))  # no such golden here
    written = record_native(source, golden.parent, "a recorder")
    assert written == [golden.parent / NATIVE / cpu_key() / "run.json"]
    data = json.loads(written[0].read_text())
    assert data["losses"] == [7.0] and data["recorded_by"] == "a recorder"
    assert cpu_key(data["fingerprint"]) == cpu_key()
    assert sorted(p.name for p in written[0].parent.iterdir()) == ["run.json"]  # no temp file
    assert recordings(golden) == {f"{NATIVE}/{cpu_key()}": [7.0]}


def test_figures_measured_natively_switch_this_machine_to_the_native_kernels(tmp_path,
                                                                            monkeypatch):
    """A bounded comparison (no pinned file of its own) runs on the pinned paths until this
    machine's native figures are recorded; ``native`` forces the native kernels to make them."""
    monkeypatch.delenv(FORCE_NUMERICS, raising=False)
    bound = tmp_path / "golden" / "bounded_runs.json"
    assert golden_numerics(bound) == PINNED_ENV
    monkeypatch.setenv(FORCE_NUMERICS, "native")
    assert golden_numerics(bound) == NATIVE_ENV
    monkeypatch.delenv(FORCE_NUMERICS)
    written = record_native_figures(bound, {"CP 2": {"loss": 6e-8}}, "a test")
    assert written == bound.parent / NATIVE / cpu_key() / bound.name
    data = json.loads(written.read_text())
    assert data["figures"] == {"CP 2": {"loss": 6e-8}} and cpu_key(data["fingerprint"]) == cpu_key()
    assert golden_numerics(bound) == NATIVE_ENV
    monkeypatch.setenv(FORCE_NUMERICS, "pinned")
    assert golden_numerics(bound) == PINNED_ENV
