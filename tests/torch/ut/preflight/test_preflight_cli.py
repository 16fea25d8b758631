"""``python -m hyper_parallel.preflight``: its verdicts, exit codes, JSON and errors, in this
process (the fake process group is made and destroyed by each preflight)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hyper_parallel.preflight.__main__ import main
from hyper_parallel.preflight.gpus import GIB
from hyper_parallel.preflight.simulate import in_flight

REPO = Path(__file__).resolve().parents[4]
DEBUG = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel"]
ROLE_KEYS = {"ranks", "params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes",
             "buffers_bytes", "total_bytes", "verdict"}


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def debug_report() -> dict:
    """The debug recipe's ``--json`` object (its run is shared by the tests below)."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*DEBUG, "--json"])
    assert code == 0
    return json.loads(out.getvalue())


def test_a_run_that_fits_exits_0_with_the_json_object(debug_report):
    report = debug_report
    assert {"world_size", "gpu", "gpu_bytes", "roles", "problems"} <= set(report)
    assert report["world_size"] == 1 and report["gpu"] == "h100-80gb"
    assert report["problems"] == []
    (role,) = report["roles"]
    assert ROLE_KEYS <= set(role)
    assert role["ranks"] == [0] and role["verdict"] == "fits"
    parts = sum(role[k] for k in ("params_bytes", "grads_bytes", "optimizer_bytes",
                                  "activations_bytes", "buffers_bytes"))
    assert role["total_bytes"] == parts + sum(role["allowances_bytes"].values())
    # AdamW: two fp32 moments per fp32 parameter, and a 4-byte step per tensor.
    assert 2 * role["params_bytes"] < role["optimizer_bytes"] < 2.01 * role["params_bytes"]
    assert report["flops_per_token"] > 6 * role["params_bytes"] / 4 / 2


def test_out_of_memory_exits_1_and_its_suggestions_fit(capsys, debug_report):
    """A GPU just too small for the run without checkpointing: exit 1, and every suggestion
    was preflighted (the AC ones fit: they shrink the activations)."""
    role = debug_report["roles"][0]
    size = (role["total_bytes"] - role["activations_bytes"] // 2) / GIB
    code, out, _ = _run(capsys, [*DEBUG, "--gpu-memory", f"{size:.4f}", "--json"])
    report = json.loads(out)
    assert code == 1 and report["roles"][0]["verdict"] == "oom"
    assert report["suggestions"], report
    assert report["suggestions"][0].startswith("--activation_checkpoint.mode=")
    flags = report["suggestions"][0].split(":")[0].split()
    code, _, _ = _run(capsys, [*DEBUG, *flags, "--gpu-memory", f"{size:.4f}", "--no-suggest"])
    assert code == 0


def test_the_table_names_the_role_verdict_and_allowances(capsys):
    code, out, _ = _run(capsys, [*DEBUG, "--gpu", "b200", "--world", "1"])
    assert code == 0
    assert "1 ranks on b200" in out and "fits" in out
    assert "CUDA context" in out and "NCCL" in out and "fragmentation" in out
    assert "GFLOPs per token" in out


@pytest.mark.parametrize("argv, names", [
    ([*DEBUG, "--gpu", "h100"], ["--gpu", "did you mean", "h100-80gb"]),
    ([*DEBUG, "--parallelism.tensor_parallel_degree=4", "--world", "4"],
     ["parallelism.tensor_parallel_degree"]),
    ([str(REPO / "examples/yaml/train_qwen3_5_debug.yaml"), "--train.accelerator.tp=4",
      "--world", "4"], ["train.accelerator.tp"]),
    ([*DEBUG, "--imbalance", "0.5"], ["--imbalance"]),
])
def test_a_configuration_error_exits_2_in_the_entrys_names(capsys, argv, names):
    code, out, err = _run(capsys, argv)
    assert code == 2, out
    assert err.startswith("error: ")
    for name in names:
        assert name in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("schedule, n, pp, rank, v, held", [
    ("GPipe", 8, 4, 0, 1, 8),
    ("1F1B", 8, 4, 0, 1, 4),
    ("1F1B", 8, 4, 3, 1, 1),
    ("1F1B", 2, 4, 0, 1, 2),
    ("Interleaved1F1B", 8, 2, 0, 2, 3),
])
def test_micro_batches_in_flight_per_schedule(schedule, n, pp, rank, v, held):
    assert in_flight(schedule, n, pp, rank, v) == held
