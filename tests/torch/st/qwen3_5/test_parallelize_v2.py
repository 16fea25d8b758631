"""``parallelize_qwen3_5_v2`` (new config sections) against the legacy v1 ``parallelize_qwen3_5``.

Two ranks (torchrun, gloo, CPU) run ``workers/parallelize_v2_worker.py``: for each setting the
same 4-layer debug model is parallelised by both entries on one ``ParallelDims`` mesh, from
equivalent settings (the v2 sections are what ``config.transforms`` derives from the legacy
YAML values). The structure (parameter names, DTensor meshes / placements / local shapes, FSDP
units with their mixed-precision policy, reshard flag and mesh, AC wrappers) must be equal, and
so must the init, the logits, the loss and every gradient -- bit for bit.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.torchrun import torchrun

WORKER = Path(__file__).parent / "workers" / "parallelize_v2_worker.py"


def run_worker(layout: str, tmp_path: Path) -> dict:
    torchrun(WORKER, [layout, str(tmp_path)], nproc=2, timeout=240)
    result = json.loads((tmp_path / "result.json").read_text())
    print(json.dumps(result, indent=1))  # the measured figures, visible with -s
    return result


def assert_identical(name: str, r: dict) -> None:
    assert r["same_structure"], (name, r["diff_keys"], r.get("diff_detail"))
    assert r["state_keys_clean"], name  # no _orig_mod / _checkpoint_wrapped_module in keys
    assert r["init_max_abs_diff"] == 0.0, (name, r["init_max_abs_diff"])
    assert r["logits_max_abs_diff"] == 0.0, (name, r["logits_max_abs_diff"])
    assert r["loss_v1"] == r["loss_v2"], name
    assert r["grads_max_abs_diff"] == 0.0, (name, r["grads_max_abs_diff"])


def test_fsdp_2_ranks_v2_equals_v1(tmp_path):
    r = run_worker("fsdp", tmp_path)
    assert set(r) == {
        "plain",
        "full_ac_bf16_noreshard",
        "selective_ac_bf16_reduce_bf16_tied",
        "compile_eager_full_ac",
    }
    for name, result in r.items():
        assert_identical(name, result)

    plain = r["plain"]
    # FSDP on every decoder layer plus the root, over dp_shard, no MP policy object
    assert sorted(plain["fsdp_units"]) == [
        "",
        "model.layers.0",
        "model.layers.1",
        "model.layers.2",
        "model.layers.3",
    ]
    for unit in plain["fsdp_units"].values():
        assert unit["mesh"] == ["dp_shard"]
        assert unit["reshard_after_forward"] is True
        assert "param_dtype=None" in unit["mp_policy"]  # FSDP's default = no casting
    assert plain["num_ac_wrapped"] == 0 and plain["compiled_layers"] == []
    assert plain["example_param"]["model.layers.3.self_attn.q_proj.weight"]["placements"] == [
        "S(0)"
    ]

    bf16 = r["full_ac_bf16_noreshard"]
    layer = bf16["fsdp_units"]["model.layers.0"]
    assert "param_dtype=torch.bfloat16" in layer["mp_policy"]
    assert "reduce_dtype=torch.float32" in layer["mp_policy"]
    assert layer["reshard_after_forward"] is False
    assert bf16["num_ac_wrapped"] == 4
    assert bf16["logits_dtype"] == "torch.bfloat16"  # computed in bf16 (output_dtype unset)

    tied = r["selective_ac_bf16_reduce_bf16_tied"]
    assert "reduce_dtype=torch.bfloat16" in tied["fsdp_units"]["model.layers.0"]["mp_policy"]

    compiled = r["compile_eager_full_ac"]
    assert compiled["compiled_layers"] == [0, 1, 2, 3]
    assert compiled["v1_compiled_layers"] == []
    assert compiled["dynamo_graphs"] >= 1 and compiled["dynamo_graph_breaks"] == 0
    assert plain["dynamo_graphs"] == 0


def test_tp_2_ranks_v2_equals_v1(tmp_path):
    r = run_worker("tp", tmp_path)
    assert set(r) == {"plain", "selective_ac_tied", "full_ac_dispatch", "compile_eager"}
    for name, result in r.items():
        assert_identical(name, result)
    plain = r["plain"]
    assert plain["fsdp_units"] == {}  # pure TP: no data-parallel axis, no FSDP
    q_proj = plain["example_param"]["model.layers.3.self_attn.q_proj.weight"]
    assert q_proj["mesh"] == ["tp"] and q_proj["placements"] == ["S(0)"]
    assert r["full_ac_dispatch"]["num_ac_wrapped"] == 4
    compiled = r["compile_eager"]
    assert compiled["compiled_layers"] == [0, 1, 2, 3]
    assert compiled["dynamo_graphs"] >= 1 and compiled["dynamo_graph_breaks"] == 0
