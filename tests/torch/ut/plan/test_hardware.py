"""Hardware profiles: a datasheet one for every GPU preflight knows, measured ones read back
from the JSON the calibration writes, and bad input refused as a configuration error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hyper_parallel.plan.hardware import DATASHEETS, datasheet, load, save
from hyper_parallel.preflight.gpus import GPUS
from hyper_parallel.utils.errors import ConfigError

RESULTS = Path(__file__).resolve().parents[4] / "bench" / "results"


def test_every_gpu_preflight_knows_has_a_datasheet_profile_with_its_sources():
    assert set(DATASHEETS) == set(GPUS)
    for name, gpu in GPUS.items():
        hw = datasheet(name)
        assert hw.bf16_flops == gpu.bf16_tflops * 1e12  # one peak, preflight's and ours
        assert hw.inter_node_bytes_per_s < hw.intra_node_bytes_per_s < hw.hbm_bytes_per_s
        assert hw.sources


def test_an_unknown_gpu_is_a_config_error_with_a_suggestion():
    with pytest.raises(ConfigError, match="did you mean 'h200'"):
        datasheet("h2000")


def test_a_saved_profile_loads_back_equal_and_respects_the_umask(tmp_path):
    path = tmp_path / "hw.json"
    old = os.umask(0o027)
    try:
        save(datasheet("h200"), str(path))
    finally:
        os.umask(old)
    assert load(str(path)) == datasheet("h200")
    assert path.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize(("text", "match"), [
    ("{", "not JSON"),
    ("[]", "JSON object"),
    ('{"name": "x"}', "missing"),
    ('{"nmae": "x"}', "did you mean 'name'"),
])
def test_a_bad_profile_file_is_a_config_error_naming_the_file(tmp_path, text, match):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match) as error:
        load(str(path))
    assert "bad.json" in str(error.value)


def test_a_bad_value_names_its_field(tmp_path):
    data = json.loads(json.dumps({**vars(datasheet("h100-80gb"))}, default=list))
    data["hbm_bytes_per_s"] = -1
    path = tmp_path / "neg.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match="hbm_bytes_per_s"):
        load(str(path))


def test_a_profiles_collective_cost_factors_load_back_and_a_bad_one_names_its_kind(tmp_path):
    import dataclasses

    measured = dataclasses.replace(datasheet("h100-80gb"),
                                   collective_cost_factors={"reduce_scatter": 2.1})
    path = tmp_path / "hw.json"
    save(measured, str(path))
    assert load(str(path)) == measured
    for factors, match in (({"reduce_scater": 2.0}, "did you mean 'reduce_scatter'"),
                           ({"all_to_all": 0}, "collective_cost_factors.all_to_all"),
                           ([2.0], "kind -> factor")):
        data = json.loads(path.read_text())
        data["collective_cost_factors"] = factors
        path.write_text(json.dumps(data))
        with pytest.raises(ConfigError, match=match) as error:
            load(str(path))
        assert "hw.json" in str(error.value)


def test_a_missing_file_says_what_writes_one(tmp_path):
    with pytest.raises(ConfigError, match="calibrate_hardware"):
        load(str(tmp_path / "none.json"))


def test_the_committed_cpu_profiles_load():
    profiles = sorted(RESULTS.glob("hardware_*.json"))
    assert profiles, "bench/calibrate_hardware.py's output is committed under bench/results/"
    for path in profiles:
        hw = load(str(path))
        assert hw.name.startswith("cpu-gloo")
        # FSDP2 has no stream to overlap on a CPU (bench/calibrate_hardware.py), and gloo's
        # reduce-scatter is an all-reduce of the whole input: measured dearer than its price.
        assert hw.overlap == 0
        assert hw.collective_cost_factors["reduce_scatter"] > 1.5
