"""Qwen3.5 parallelization: TP / FSDP / HSDP / AC / mixed precision / compile vs a reference.

The multi-process tests start the ranks of ``workers/parallelize_worker.py`` (gloo, CPU; as
torchrun would, without its launcher), which parallelises a tiny fp32 Qwen3.5 (the tiny flavor,
4 layers: 3 Gated DeltaNet + 1 full attention) through the engine's entry
``parallelize_qwen3_5_v2``, trains it for 3 AdamW steps in a parallel layout and compares it
with a 1-process unsharded reference loaded with the same weights. To keep the start-up cost
down, one launch runs every case of a world size
(1, 2 and 4 ranks: three launches); the tests assert on their case's part of the result. The
in-process tests cover the pure functions (validation, AC policy, mixed-precision policy, name
stripping) and the entry's refusals without any process group.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM
from hyper_parallel.models.qwen3_5.parallelize import (
    SAC_SAVED_OPS,
    apply_ac,
    build_mp_policy,
    normalize_ac_mode,
    strip_wrapper_prefixes,
    validate_tp_degree,
)
from hyper_parallel.models.qwen3_5.parallelize_v2 import (
    compiled_layers,
    needs_fsdp,
    parallelize_qwen3_5_v2,
)
from tests.helpers.torchrun import spawn_ranks
from tests.torch.st.qwen3_5.workers.parallelize_worker import sections

WORKER = Path(__file__).parent / "workers" / "parallelize_worker.py"
TWO_RANK_CASES = ("fsdp", "tp", "tp_tied", "ac", "mp", "compile")
FOUR_RANK_CASES = ("hsdp", "tp_fsdp")

# Tolerances. Loss: the target is 1e-5 relative; layouts without TP reduce in a different order
# only across data-parallel ranks and land near 1e-7, TP's row-parallel all-reduces change
# summation order inside every block and land near 5e-7. Gradients are compared as one vector
# (relative L2). Parameters after 3 AdamW steps: Adam divides by sqrt(v), which amplifies the
# rounding noise of tiny gradients, hence a looser bound.
LOSS_RTOL = 1e-5
LOGITS_RTOL = 1e-5
GRAD_RTOL = 1e-5
PARAM_RTOL = 5e-4
LAYERS = ["model.layers.0", "model.layers.1", "model.layers.2", "model.layers.3"]


def run_worker(cases, nproc: int, tmp_path: Path, timeout: int = 240) -> dict:
    """``nproc`` ranks of ``worker.py <case,...> <tmp_path>``; returns its JSON
    (``{case: result}``).

    A non-zero exit fails with the output tail; a hang fails with ``TimeoutExpired``.
    """
    tmp_path.mkdir(parents=True, exist_ok=True)
    spawn_ranks(WORKER, [",".join(cases), str(tmp_path)], nproc=nproc, timeout=timeout)
    result_file = tmp_path / "result.json"
    assert result_file.is_file(), f"worker {cases!r} wrote no result"
    result = json.loads(result_file.read_text())
    print(f"{cases}: {json.dumps(result, indent=1)}")  # visible with -s: the measured figures
    return result


@pytest.fixture(scope="module")
def two_ranks(run_once) -> dict:
    """Every 2-rank case, in one launch (shared by the tests of this module, and by
    the session's xdist workers)."""
    return run_once.get(("parallelize", TWO_RANK_CASES, 2),
                        lambda folder: run_worker(TWO_RANK_CASES, 2, folder, timeout=400))


@pytest.fixture(scope="module")
def four_ranks(run_once) -> dict:
    """Every 4-rank case, in one launch (only the slow tests use it)."""
    return run_once.get(("parallelize", FOUR_RANK_CASES, 4),
                        lambda folder: run_worker(FOUR_RANK_CASES, 4, folder, timeout=500))


def assert_matches_reference(r: dict, *, dtensor: bool = True) -> None:
    assert r["init_max_abs_diff"] == 0.0, "meta -> parallelize -> init_weights depends on layout"
    assert r["all_params_dtensor"] is dtensor
    assert r["partial_grads"] == [], "replicated-weight gradients left Partial (unreduced)"
    assert r["state_keys_clean"]  # no _checkpoint_wrapped_module / _orig_mod in the keys
    assert r["compiled_layers"] == []  # compile is off unless compile.enable
    assert r["logits_rel"] <= LOGITS_RTOL, r["logits_rel"]
    assert r["loss_rel"] <= LOSS_RTOL, (r["losses"], r["ref_losses"])
    assert r["grads0_rel"] <= GRAD_RTOL, r["grads0_rel"]
    assert r["final_params_rel"] <= PARAM_RTOL, r["final_params_rel"]
    # the losses must actually move (AdamW steps were taken on fresh batches)
    assert len(set(r["ref_losses"])) == len(r["ref_losses"])


def assert_fsdp_units(units: dict, mesh: list[str], *, reshard: bool = True, mp: str) -> None:
    """FSDP on every decoder layer plus the root, all on ``mesh`` with one policy."""
    assert sorted(units) == ["", *LAYERS], sorted(units)
    for name, unit in units.items():
        assert unit["mesh"] == mesh, (name, unit)
        assert unit["reshard_after_forward"] is reshard, (name, unit)
        assert mp in unit["mp_policy"], (name, unit)


# ====================================================================== multi-process layouts
def test_single_rank_fp32_is_unwrapped_and_bit_exact(tmp_path):
    """One fp32 rank is not wrapped in FSDP (it would shard nothing; ``needs_fsdp``): plain
    parameters, and bit-identical to the unsharded reference."""
    r = run_worker(["single"], 1, tmp_path)["single"]
    assert not r["fsdp_applied"] and r["fsdp_units"] == {}
    assert r["probe_mesh_dims"] is None
    assert_matches_reference(r, dtensor=False)
    assert r["logits_rel"] == 0.0 and r["loss_rel"] == 0.0 and r["final_params_rel"] == 0.0


@pytest.mark.slow
def test_fsdp_2_ranks_matches_reference(two_ranks):
    r = two_ranks["fsdp"]
    assert r["fsdp_applied"]
    assert r["probe_mesh_dims"] == ["dp_shard"] and r["probe_placements"] == ["S(0)"]
    assert r["q_proj"] == {"mesh": ["dp_shard"], "placements": ["S(0)"]}
    # the section defaults (float32 / float32 / unset) mean no casting: FSDP's default policy
    assert_fsdp_units(r["fsdp_units"], ["dp_shard"], mp="param_dtype=None")
    assert r["num_ac_wrapped"] == 0
    assert r["logits_rel"] == 0.0  # all-gathered weights: forward is unchanged
    assert_matches_reference(r)


@pytest.mark.slow
def test_tp_2_ranks_matches_reference(two_ranks):
    """Pure TP: every layer type sharded, no FSDP (no dp axis in the mesh)."""
    r = two_ranks["tp"]
    assert r["tp_mesh_ok"] and not r["fsdp_applied"] and r["fsdp_units"] == {}
    assert r["probe_mesh_dims"] == ["tp"] and r["probe_placements"] == ["S(0)"]
    assert r["q_proj"] == {"mesh": ["tp"], "placements": ["S(0)"]}  # colwise on head boundaries
    assert_matches_reference(r)


@pytest.mark.slow
def test_tp_2_ranks_tied_embeddings_selective_ac(two_ranks):
    """Tied embedding + lm_head stay one vocab-sharded parameter under TP (with selective AC)."""
    r = two_ranks["tp_tied"]
    assert r["tied"]
    assert r["num_ac_wrapped"] == 4
    assert_matches_reference(r)


@pytest.mark.slow
def test_activation_checkpointing_is_exact_under_tp(two_ranks):
    """full and selective AC give the same loss and gradients as no AC (TP over 2 ranks)."""
    r = two_ranks["ac"]
    assert r["off_wrapped_params"] == 0 and r["off_num_ac_wrapped"] == 0
    for mode in ("full", "selective"):
        assert r[mode]["wrapped_params"] > 0
        assert r[mode]["num_ac_wrapped"] == 4  # every decoder layer
        assert r[mode]["state_keys_clean"]
        assert r[mode]["loss_abs_diff"] <= 1e-6, r[mode]
        assert r[mode]["grads_rel"] <= 1e-6, r[mode]


@pytest.mark.slow
def test_mixed_precision_bf16_policy_runs(two_ranks):
    r = two_ranks["mp"]
    assert r["bf16_logits_dtype"] == "torch.bfloat16"  # compute in bf16 (output_dtype inherits)
    assert r["fp32_logits_dtype"] == "torch.float32"
    # fp32 master weights and fp32 gradients (after the reduction) in every case
    for name in ("fp32", "bf16", "bf16_all_tied"):
        assert r[f"{name}_param_dtypes"] == ["torch.float32"]
        assert r[f"{name}_grad_dtypes"] == ["torch.float32"]
        assert r[f"{name}_params_finite"]
    assert 0.0 < r["loss_rel"] < 2e-2, r["losses"]  # bf16 differs, but not wildly
    # the policies FSDP got: none for float32 / float32 / unset; reshard_after_forward honoured
    assert_fsdp_units(r["fp32_fsdp_units"], ["dp_shard"], mp="param_dtype=None")
    assert r["fp32_num_ac_wrapped"] == 0
    assert_fsdp_units(
        r["bf16_fsdp_units"],
        ["dp_shard"],
        reshard=False,
        mp="param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=None",
    )
    assert r["bf16_num_ac_wrapped"] == 4
    assert_fsdp_units(
        r["bf16_all_tied_fsdp_units"],
        ["dp_shard"],
        mp="param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, output_dtype=torch.bfloat16",
    )
    assert r["bf16_all_tied_logits_dtype"] == "torch.bfloat16"
    assert r["bf16_all_tied_num_ac_wrapped"] == 4


@pytest.mark.slow
def test_mixed_precision_float32_logits_from_bf16_compute(two_ranks):
    """output_dtype float32 with bf16 compute: float32 logits, bf16 between the FSDP units (the
    root's final norm and lm_head never meet float32 activations), only the root casts."""
    r = two_ranks["mp"]
    assert r["bf16_fp32_out_logits_dtype"] == "torch.float32"
    assert r["bf16_fp32_out_last_layer_out_dtype"] == "torch.bfloat16"
    assert r["bf16_last_layer_out_dtype"] == "torch.bfloat16"
    assert r["bf16_fp32_out_loss_finite"] and r["bf16_fp32_out_params_finite"]
    assert r["bf16_fp32_out_param_dtypes"] == ["torch.float32"]
    assert r["bf16_fp32_out_grad_dtypes"] == ["torch.float32"]
    assert abs(r["losses"]["bf16_fp32_out"] - r["losses"]["fp32"]) / r["losses"]["fp32"] < 2e-2
    units = r["bf16_fp32_out_fsdp_units"]
    assert_fsdp_units(
        units, ["dp_shard"], mp="param_dtype=torch.bfloat16, reduce_dtype=torch.float32"
    )
    assert "output_dtype=torch.float32" in units[""]["mp_policy"], units[""]
    for layer in LAYERS:  # the layers hand on the compute dtype
        assert "output_dtype=torch.bfloat16" in units[layer]["mp_policy"], (layer, units[layer])


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["fsdp", "tp"])
def test_compile_per_layer_is_bit_exact(two_ranks, layout):
    """compile.enable (``eager`` backend) compiles every decoder layer in place -- under FSDP
    with full AC, and under TP -- without graph breaks, and changes no bit of the logits, the
    loss or any gradient."""
    r = two_ranks["compile"][layout]
    assert r["compiled_layers_compiled"] == [0, 1, 2, 3]
    assert r["compiled_layers_eager"] == []
    assert r["dynamo_graphs_compiled"] >= 1 and r["dynamo_graph_breaks_compiled"] == 0
    assert r["dynamo_graphs_eager"] == 0  # the counters see only the compiled run
    assert r["state_keys_clean_compiled"]  # in place: no _orig_mod in the keys
    assert r["fsdp_applied_compiled"] is (layout == "fsdp")
    assert r["num_ac_wrapped_compiled"] == (4 if layout == "fsdp" else 0)
    assert r["logits_max_abs_diff"] == 0.0, r
    assert r["loss_compiled"] == r["loss_eager"], r
    assert r["grads_max_abs_diff"] == 0.0, r


@pytest.mark.slow
def test_hsdp_2x2_matches_reference(four_ranks):
    """HSDP (dp_replicate=2 x dp_shard=2) with full AC on 4 ranks."""
    r = four_ranks["hsdp"]
    assert r["probe_mesh_dims"] == ["dp_replicate", "dp_shard"]
    assert r["probe_placements"] == ["R", "S(0)"]
    assert_fsdp_units(r["fsdp_units"], ["dp_replicate", "dp_shard"], mp="param_dtype=None")
    assert r["num_ac_wrapped"] == 4
    assert_matches_reference(r)


@pytest.mark.slow
def test_fsdp_x_tp_2x2_tied_selective_ac(four_ranks):
    """2-D FSDP x TP with tied embeddings and selective AC on 4 ranks."""
    r = four_ranks["tp_fsdp"]
    assert r["probe_mesh_dims"] == ["dp_shard", "tp"]
    # FSDP shards dim 0 over dp_shard (strided over the TP shards), TP shards it colwise
    assert r["q_proj"]["mesh"] == ["dp_shard", "tp"] and r["q_proj"]["placements"][1] == "S(0)"
    assert_fsdp_units(r["fsdp_units"], ["dp_shard"], mp="param_dtype=None")
    assert r["tied"] and r["num_ac_wrapped"] == 4
    assert_matches_reference(r)


# ====================================================================== in-process unit tests
def tiny_config(**overrides):
    fields = {"num_hidden_layers": 4, "layer_types": None, "vocab_size": 256, **overrides}
    return dataclasses.replace(FLAVORS["debugmodel"], **fields)


class FakeMesh:
    """Just enough DeviceMesh surface for the checks that run before any collective."""

    def __init__(self, **dims):
        self.mesh_dim_names = tuple(dims)
        self._dims = dims

    def __getitem__(self, name):
        return SimpleNamespace(size=lambda: self._dims[name])


def fake_parallel_dims(mesh: FakeMesh, *, tp=1, cp=1, pp=1, ep=1) -> SimpleNamespace:
    """What ``parallelize_qwen3_5_v2`` reads of a ``ParallelDims``: degrees, mesh, get_mesh."""
    return SimpleNamespace(
        tp=tp, cp=cp, pp=pp, ep=ep, world_mesh=mesh, get_mesh=lambda name: mesh[name]
    )


def untouched(model) -> bool:
    """No TP DTensor, AC wrapper or compiled layer: the refusal came before any change."""
    return (
        not any(type(p).__name__ == "DTensor" for p in model.parameters())
        and all(type(layer).__name__ == "Qwen3_5DecoderLayer" for layer in model.model.layers)
        and compiled_layers(model) == []
    )


def test_validate_tp_degree_names_every_field():
    cfg = FLAVORS["debugmodel"]  # 4 Q / 2 KV heads, GDN 2 K / 4 V heads
    validate_tp_degree(cfg, 1)
    validate_tp_degree(cfg, 2)
    with pytest.raises(ValueError) as err:
        validate_tp_degree(cfg, 4)
    msg = str(err.value)
    assert "linear_num_key_heads=2 is not divisible by tp=4" in msg
    assert "num_key_value_heads=2 is not divisible by tp=4" in msg
    assert "num_attention_heads" not in msg  # 4 % 4 == 0
    with pytest.raises(ValueError, match=r"num_attention_heads=4 is not divisible by tp=3"):
        validate_tp_degree(cfg, 3)


def test_validate_tp_degree_skips_absent_layer_types():
    # only Gated DeltaNet layers: the attention head counts do not matter
    cfg = tiny_config(
        layer_types=["linear_attention"] * 4, num_attention_heads=3, num_key_value_heads=3
    )
    validate_tp_degree(cfg, 2)
    with pytest.raises(ValueError, match="num_attention_heads=3"):
        validate_tp_degree(dataclasses.replace(cfg, layer_types=None), 2)


def test_entry_rejects_unsupported_axes():
    model = Qwen3_5ForCausalLM(tiny_config())
    dims = fake_parallel_dims(FakeMesh(dp_shard=2), ep=2)
    with pytest.raises(
        NotImplementedError,
        match=r"parallelism\.expert_parallel_degree=2: .* not supported by qwen3_5_v2 yet"
    ):
        parallelize_qwen3_5_v2(model, dims, **sections(ac="full", compile_backend="eager"))
    assert untouched(model)


def test_entry_checks_tp_against_mesh():
    model = Qwen3_5ForCausalLM(tiny_config())
    with pytest.raises(
        ValueError, match=r"parallel_dims\.tp=2 but the device mesh .* tp axis of size 1"
    ):
        parallelize_qwen3_5_v2(
            model, fake_parallel_dims(FakeMesh(dp_shard=2), tp=2), **sections(ac="full")
        )
    assert untouched(model)


def test_one_rank_is_wrapped_only_for_mixed_precision_or_offload():
    from torch.distributed.fsdp import MixedPrecisionPolicy

    def mesh(size: int) -> SimpleNamespace:
        return SimpleNamespace(size=lambda: size)

    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16)
    assert needs_fsdp(mesh(2), None, False)  # more than one rank: always
    assert not needs_fsdp(mesh(1), None, False)  # one fp32 rank: nothing to shard
    assert needs_fsdp(mesh(1), bf16, False)  # FSDP2's mixed precision
    assert needs_fsdp(mesh(1), None, True)  # FSDP2's CPU offload
    assert not needs_fsdp(None, None, False)  # no data-parallel axis (pure TP)


def test_pure_tp_mesh_rejects_low_precision_policy():
    model = Qwen3_5ForCausalLM(tiny_config())
    with pytest.raises(
        ValueError,
        match=r"training\.mixed_precision_param / _reduce / _output ask for mixed precision"
        r".*no dp_shard / dp_replicate axis",
    ):
        parallelize_qwen3_5_v2(
            model,
            fake_parallel_dims(FakeMesh(tp=2), tp=2),
            **sections(ac="full", mp=("bfloat16", "float32", None)),
        )
    assert untouched(model)


@pytest.mark.parametrize("mode", [None, False, "", "off", "none", "OFF", " None "])
def test_ac_mode_off_spellings(mode):
    assert normalize_ac_mode(mode) == "off"


def test_ac_mode_values_and_errors():
    assert normalize_ac_mode("Full") == "full"
    assert normalize_ac_mode(True) == "full"  # legacy: any truthy value wrapped every layer
    assert normalize_ac_mode("selective") == "selective"
    with pytest.raises(
        ValueError, match=r"activation_checkpoint='selectiv'.*did you mean 'selective'"
    ):
        normalize_ac_mode("selectiv")


class OpCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def _count_ops(mode: str) -> collections.Counter:
    torch.manual_seed(0)
    model = Qwen3_5ForCausalLM(tiny_config())
    apply_ac(model, mode)
    ids = torch.randint(0, 256, (1, 16))
    with OpCounter() as counter:
        model(ids).sum().backward()
    return counter.counts


def test_selective_ac_saves_matmuls_and_recomputes_the_rest():
    off, full, sel = _count_ops("off"), _count_ops("full"), _count_ops("selective")
    for op in ("mm", "bmm", "linalg_solve_triangular"):
        assert full[op] > off[op], op  # full AC recomputes matmuls in backward ...
        assert sel[op] == off[op], op  # ... selective AC keeps them
    for op in ("rsqrt", "silu", "convolution"):
        assert sel[op] > off[op], op  # pointwise / norm / conv work is recomputed
        assert sel[op] == full[op], op
    names = {str(op) for op in SAC_SAVED_OPS}
    assert "aten.mm.default" in names and "_c10d_functional.all_reduce.default" in names


def test_ac_parameter_names_and_state_dict():
    model = Qwen3_5ForCausalLM(tiny_config())
    plain_names = [n for n, _ in model.named_parameters()]
    plain_keys = list(model.state_dict())
    apply_ac(model, "full")
    wrapped = [n for n, _ in model.named_parameters()]
    assert any("._checkpoint_wrapped_module." in n for n in wrapped)
    assert [strip_wrapper_prefixes(n) for n in wrapped] == plain_names
    assert list(model.state_dict()) == plain_keys  # the wrapper's state-dict hook strips it
    model.load_state_dict(model.state_dict())  # and its load hook adds it back
    with pytest.raises(RuntimeError, match="already wrapped"):
        apply_ac(model, "selective")


def test_strip_wrapper_prefixes():
    assert (
        strip_wrapper_prefixes("model.layers.0._checkpoint_wrapped_module.mlp.up_proj.weight")
        == "model.layers.0.mlp.up_proj.weight"
    )
    assert strip_wrapper_prefixes("_orig_mod.lm_head.weight") == "lm_head.weight"
    assert strip_wrapper_prefixes("model.norm.weight") == "model.norm.weight"


def test_build_mp_policy():
    assert build_mp_policy(None) is None
    assert build_mp_policy(SimpleNamespace(enabled=False, param_dtype="bf16")) is None
    policy = build_mp_policy(
        SimpleNamespace(enabled=True, param_dtype="bf16", reduce_dtype="fp32", output_dtype=None)
    )
    assert policy.param_dtype == torch.bfloat16
    assert policy.reduce_dtype == torch.float32
    assert policy.output_dtype is None
    policy = build_mp_policy(
        SimpleNamespace(
            enabled=True, param_dtype="Float16", reduce_dtype="float32", output_dtype="bfloat16"
        )
    )
    assert (policy.param_dtype, policy.output_dtype) == (torch.float16, torch.bfloat16)
    # a caller-provided map (e.g. the platform's dtype_map) is used for the lookup
    custom = {"half": torch.float16, "single": torch.float32}
    policy = build_mp_policy(
        SimpleNamespace(enabled=True, param_dtype="half", reduce_dtype="single", output_dtype=None),
        custom,
    )
    assert (policy.param_dtype, policy.reduce_dtype) == (torch.float16, torch.float32)
    with pytest.raises(ValueError, match=r"train\.mixed_precision\.reduce_dtype='fp33'"):
        build_mp_policy(
            SimpleNamespace(
                enabled=True, param_dtype="bf16", reduce_dtype="fp33", output_dtype=None
            )
        )
