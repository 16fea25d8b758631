"""``tests/helpers/golden.py``: a run matches a golden when it equals one of its recordings
(the file, or a CPU's under ``other_cpus/``) bit for bit, and a mismatch names every
recording's differing steps."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers.golden import OTHER_CPUS, assert_matches_a_recording, recordings

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
