"""torchrun worker for tests/torch/st/qwen3_5/test_parallelize.py (gloo, CPU).

Usage: ``torchrun --standalone --nproc_per_node N parallelize_worker.py <case>[,<case>...]
<workdir>``. Several cases run in one launch (each launch costs seconds of start-up on the CI
machine); each works in ``<workdir>/<case>/``.

Every parallel model is the engine's: ``Qwen3_5Model`` built on ``meta``, parallelised with
:func:`parallelize_qwen3_5_v2` on a real ``ParallelDims`` mesh from ``SimpleNamespace`` sections
(``training`` / ``parallelism`` / ``activation_checkpoint`` / ``compile``), materialised
(``to_empty`` + ``init_weights``) and, where a case says so, loaded with the weights of an
unsharded ``Qwen3_5ForCausalLM`` reference that rank 0 builds with a fixed seed
(``set_model_state_dict(full_state_dict=True, broadcast_from_rank0=True)``). Rank 0 writes
``<workdir>/result.json`` = ``{case: measured numbers}``; the pytest side asserts on them. Exit
code 0 means the runs themselves went through.

Cases by world size:

* 1 rank: ``single`` (fp32 on a size-1 ``dp_shard`` mesh: not wrapped, ``needs_fsdp``);
* 2 ranks: ``fsdp``, ``tp``, ``tp_tied`` (layouts trained 3 AdamW steps against the reference),
  ``ac`` (TP: off / full / selective), ``mp`` (FSDP: fp32 vs bf16 policies, reshard flag,
  float32 logits from bf16 compute),
  ``compile`` (per-layer ``eager``-backend compile vs eager, under FSDP and under TP);
* 4 ranks: ``hsdp``, ``tp_fsdp``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
import torch._dynamo.utils  # counters of captured graphs
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    set_model_state_dict,
)
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor

from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM, Qwen3_5Model
from hyper_parallel.models.qwen3_5.parallelize import strip_wrapper_prefixes
from hyper_parallel.models.qwen3_5.parallelize_v2 import compiled_layers, parallelize_qwen3_5_v2
from hyper_parallel.runtime.parallel_dims import ParallelDims

SEED = 1234
BATCH, SEQ, STEPS, LR = 4, 32, 3, 1e-3
MP_OFF = ("float32", "float32", None)  # (param, reduce, output): the section defaults = no policy
# name -> (mesh dims (canonical order, sizes > 1), tie_word_embeddings, ac mode)
LAYOUTS = {
    "single": ({}, False, "off"),  # 1 rank, fp32: a size-1 dp_shard mesh, not wrapped
    "fsdp": ({"dp_shard": 2}, False, "off"),
    "tp": ({"tp": 2}, False, "off"),
    "tp_tied": ({"tp": 2}, True, "selective"),
    "hsdp": ({"dp_replicate": 2, "dp_shard": 2}, False, "full"),
    "tp_fsdp": ({"dp_shard": 2, "tp": 2}, True, "selective"),
}
PROBE_Q_PROJ = "model.layers.3.self_attn.q_proj.weight"  # layer 3 is the full-attention one


def model_config(tied: bool):
    # The tiny flavor: both mixer types (3 Gated DeltaNet + 1 full attention), head counts that
    # split over 2 TP ranks, at a small part of the debug model's cost a step.
    return dataclasses.replace(FLAVORS["tiny"], layer_types=None, tie_word_embeddings=tied)


def sections(
    ac: str = "off",
    mp: tuple = MP_OFF,
    reshard: bool = True,
    compile_backend: str | None = None,
) -> dict:
    """The keyword sections of ``parallelize_qwen3_5_v2`` (the attribute names it reads)."""
    param, reduce, output = mp
    return {
        "training": SimpleNamespace(
            mixed_precision_param=param,
            mixed_precision_reduce=reduce,
            mixed_precision_output=output,
        ),
        "parallelism": SimpleNamespace(reshard_after_forward=reshard),
        "activation_checkpoint": SimpleNamespace(mode=ac),
        "compile": SimpleNamespace(
            enable=compile_backend is not None,
            backend=compile_backend or "inductor",
            components=["model"],
        ),
    }


def build_parallel_dims(dims: dict) -> ParallelDims:
    pd = ParallelDims(
        dp_replicate=dims.get("dp_replicate", 1),
        dp_shard=dims.get("dp_shard", 1),
        tp=dims.get("tp", 1),
        world_size=dist.get_world_size(),
    )
    pd.build_mesh("cpu")
    return pd


def batches(vocab: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(SEED + 1)
    out = []
    for _ in range(STEPS):
        ids = torch.randint(0, vocab, (BATCH, SEQ + 1), generator=gen)
        out.append((ids[:, :-1].contiguous(), ids[:, 1:].contiguous()))
    return out


def loss_fn(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())


def dp_coords(mesh) -> tuple[int, int]:
    """(dp rank, dp size) of this process: the batch is split over dp_replicate x dp_shard."""
    names = mesh.mesh_dim_names
    rank, size = 0, 1
    for name in ("dp_replicate", "dp_shard"):
        if name in names:
            sub = mesh[name]
            rank = rank * sub.size() + sub.get_local_rank()
            size *= sub.size()
    return rank, size


def full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if isinstance(t, DTensor) else t


def named_full_grads(model) -> dict[str, torch.Tensor]:
    return {
        strip_wrapper_prefixes(n): full(p.grad).detach().float().clone()
        for n, p in model.named_parameters()
    }


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """``||a - b|| / ||b||`` (L2, in float64)."""
    return ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()


def max_rel(got: dict, ref: dict) -> float:
    """Relative L2 error of the whole parameter-shaped collection, ``||got - ref|| / ||ref||``.

    Global rather than per tensor: some gradients (e.g. ``A_log`` of strongly decaying heads) are
    ~1e-8 and made of cancelling terms, so their per-tensor relative error is fp32 noise.
    """
    missing = set(ref) ^ set(got)
    if missing:
        raise AssertionError(f"parameter names differ from the reference: {sorted(missing)}")
    diff = sum((got[k].double() - ref[k].double()).pow(2).sum() for k in ref)
    norm = sum(ref[k].double().pow(2).sum() for k in ref)
    if os.environ.get("PARALLELIZE_WORKER_DEBUG"):
        errs = {k: rel_err(got[k], ref[k]) for k in ref}
        for k, v in sorted(errs.items(), key=lambda kv: -kv[1])[:5]:
            print(f"  {k}: {v:.3e}", flush=True)
    return (diff.sqrt() / norm.sqrt()).item()


def max_abs_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
    return max((a[k] - b[k]).abs().max().item() for k in a)


def partial_grads(model) -> list[str]:
    """Parameters whose gradient is still a ``Partial`` DTensor (should be none)."""
    return [
        n
        for n, p in model.named_parameters()
        if isinstance(p.grad, DTensor) and any(pl.is_partial() for pl in p.grad.placements)
    ]


def fsdp_units(model) -> dict[str, dict]:
    """Every FSDP2 unit by module name: its mesh, mixed-precision policy and reshard flag."""
    units = {}
    for name, module in model.named_modules():
        if isinstance(module, FSDPModule):
            state = module._get_fsdp_state()
            group = state._fsdp_param_group
            units[strip_wrapper_prefixes(name)] = {
                "mesh": list(group.mesh_info.mesh.mesh_dim_names),
                "mp_policy": repr(state._mp_policy),
                "reshard_after_forward": group.post_forward_mesh_info is not None,
            }
    return units


def num_ac_wrapped(model) -> int:
    return sum(isinstance(m, CheckpointWrapper) for m in model.modules())


def state_keys_clean(model) -> bool:
    """No wrapper infix (``_orig_mod``, ``_checkpoint_wrapped_module``) in the state-dict keys."""
    return not any("_orig_mod" in k or "_checkpoint" in k for k in model.state_dict())


def placement(param) -> dict | None:
    """The mesh and placements of a DTensor parameter; None for a plain one."""
    if not isinstance(param, DTensor):
        return None
    return {
        "mesh": list(param.device_mesh.mesh_dim_names),
        "placements": [str(p) for p in param.placements],
    }


# ---------------------------------------------------------------------- reference (rank 0)
def save_reference(cfg, workdir: str) -> str:
    """Rank 0 saves the seeded unsharded reference weights; returns the path (all ranks)."""
    path = os.path.join(workdir, "ref.pt")
    if dist.get_rank() == 0:
        torch.manual_seed(SEED)
        ref = Qwen3_5ForCausalLM(cfg)
        ref.init_weights()
        torch.save(ref.state_dict(), path)
    dist.barrier()
    return path


def run_reference(cfg, data, workdir):
    model = Qwen3_5ForCausalLM(cfg)
    torch.manual_seed(SEED)  # seeded right before init_weights, as in build_parallel
    model.init_weights()
    torch.save(model.state_dict(), os.path.join(workdir, "ref.pt"))
    with torch.no_grad():
        logits = model(data[0][0]).float()
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    losses, grads0 = [], None
    for step, (ids, labels) in enumerate(data):
        loss = loss_fn(model(ids), labels)
        loss.backward()
        if step == 0:
            grads0 = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return {"logits": logits, "losses": losses, "grads0": grads0, "final": model.state_dict()}


# ---------------------------------------------------------------------- parallel model
def load_reference(model, path: str) -> None:
    set_model_state_dict(
        model,
        torch.load(path, weights_only=True) if dist.get_rank() == 0 else {},
        options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True),
    )


def build_parallel(cfg, dims, load_from=None, **settings):
    """meta -> parallelize_qwen3_5_v2 -> to_empty -> init_weights -> (optionally) load the
    reference weights. ``settings`` are the keywords of :func:`sections`."""
    pd = build_parallel_dims(dims)
    with torch.device("meta"):
        model = Qwen3_5Model.Config.from_legacy(cfg).build()
    parallelize_qwen3_5_v2(model, pd, **sections(**settings), dump_folder=None)
    torch.manual_seed(SEED)
    model.to_empty(device="cpu")
    model.init_weights()
    model.tie_weights()
    if load_from is not None:
        load_reference(model, load_from)
    return model, pd.world_mesh


def gather_state(model) -> dict[str, torch.Tensor]:
    return get_model_state_dict(
        model, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )


def train_parallel(model, mesh, data):
    """Logits on the full batch, then STEPS AdamW steps on this rank's data-parallel slice."""
    dp_rank, dp_size = dp_coords(mesh)
    per = BATCH // dp_size
    with torch.no_grad():
        logits = model(data[0][0]).float()
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    losses, grads0 = [], None
    for step, (ids, labels) in enumerate(data):
        sl = slice(dp_rank * per, (dp_rank + 1) * per)
        loss = loss_fn(model(ids[sl]), labels[sl])
        loss.backward()
        if step == 0:
            partial = partial_grads(model)
            grads0 = named_full_grads(model)
        opt.step()
        opt.zero_grad()
        # The global mean over equal-size slices is the mean of the per-rank means.
        avg = loss.detach().clone()
        dist.all_reduce(avg)
        losses.append(avg.item() / dist.get_world_size())
    return {"logits": logits, "losses": losses, "grads0": grads0, "partial_grads": partial}


def layout_case(name, workdir):
    dims, tied, ac = LAYOUTS[name]
    cfg = model_config(tied)
    data = batches(cfg.vocab_size)
    rank = dist.get_rank()
    ref_path = os.path.join(workdir, "ref.pt")
    ref = run_reference(cfg, data, workdir) if rank == 0 else None
    dist.barrier()

    # Initialisation must not depend on the layout: the meta-built, sharded model seeded like
    # the reference gets the same weights before anything is loaded.
    model, mesh = build_parallel(cfg, dims, ac=ac)
    init_sd = gather_state(model)
    result = {}
    if rank == 0:
        result["init_max_abs_diff"] = max(
            (init_sd[k] - v).abs().max().item() for k, v in torch.load(ref_path).items()
        )
    result["all_params_dtensor"] = all(isinstance(p, DTensor) for p in model.parameters())
    result["tied"] = model.lm_head.weight is model.model.embed_tokens.weight
    probe = model.model.layers[0].mlp.up_proj.weight  # through the AC wrapper if any
    probe_placement = placement(probe)
    result["probe_mesh_dims"] = probe_placement and probe_placement["mesh"]
    result["probe_placements"] = probe_placement and probe_placement["placements"]
    params = {strip_wrapper_prefixes(n): p for n, p in model.named_parameters()}
    result["q_proj"] = placement(params[PROBE_Q_PROJ])
    result["fsdp_applied"] = type(model).__name__.startswith("FSDP")
    result["fsdp_units"] = fsdp_units(model)
    result["num_ac_wrapped"] = num_ac_wrapped(model)
    result["compiled_layers"] = compiled_layers(model)
    result["state_keys_clean"] = state_keys_clean(model)

    load_reference(model, ref_path)
    if "tp" in dims:
        result["tp_mesh_ok"] = all(
            p.device_mesh.mesh_dim_names[-1] == "tp" for p in model.parameters()
        )
    out = train_parallel(model, mesh, data)
    result["partial_grads"] = out["partial_grads"]
    final_sd = gather_state(model)
    if rank == 0:
        result.update(
            logits_rel=rel_err(out["logits"], ref["logits"]),
            losses=out["losses"],
            ref_losses=ref["losses"],
            loss_rel=max(abs(a - b) / abs(b) for a, b in zip(out["losses"], ref["losses"])),
            grads0_rel=max_rel(out["grads0"], ref["grads0"]),
            final_params_rel=max_rel(final_sd, ref["final"]),
        )
    return result


# ---------------------------------------------------------------------- AC equivalence
def ac_case(workdir):
    """TP over 2 ranks: off / full / selective must give the same loss and gradients."""
    dims = {"tp": 2}
    cfg = model_config(False)
    ids, labels = batches(cfg.vocab_size)[0]
    path = save_reference(cfg, workdir)
    runs = {}
    for mode in ("off", "full", "selective"):
        model, _ = build_parallel(cfg, dims, ac=mode, load_from=path)
        wrapped = [n for n, _ in model.named_parameters() if "_checkpoint_wrapped_module" in n]
        loss = loss_fn(model(ids), labels)
        loss.backward()
        runs[mode] = {
            "loss": loss.item(),
            "grads": named_full_grads(model),
            "wrapped": len(wrapped),
            "num_ac_wrapped": num_ac_wrapped(model),
            "state_keys_clean": state_keys_clean(model),
        }
    result = {}
    for mode in ("full", "selective"):
        result[mode] = {
            "loss_abs_diff": abs(runs[mode]["loss"] - runs["off"]["loss"]),
            "grads_rel": max_rel(runs[mode]["grads"], runs["off"]["grads"]),
            "wrapped_params": runs[mode]["wrapped"],
            "num_ac_wrapped": runs[mode]["num_ac_wrapped"],
            "state_keys_clean": runs[mode]["state_keys_clean"],
        }
    result["off_wrapped_params"] = runs["off"]["wrapped"]
    result["off_num_ac_wrapped"] = runs["off"]["num_ac_wrapped"]
    return result


# ---------------------------------------------------------------------- mixed precision
MP_MODELS = {
    # name -> (tied, settings)
    "fp32": (False, {}),
    # bf16 compute / fp32 reduce, with full AC and no resharding after forward
    "bf16": (False, {"mp": ("bfloat16", "float32", None), "ac": "full", "reshard": False}),
    # everything bf16 (reduce and output too), tied embeddings, selective AC
    "bf16_all_tied": (True, {"mp": ("bfloat16", "bfloat16", "bfloat16"), "ac": "selective"}),
    # bf16 compute, float32 logits: output_dtype applies at the root unit only
    "bf16_fp32_out": (False, {"mp": ("bfloat16", "float32", "float32")}),
}


def mp_case(workdir):
    """FSDP over 2 ranks: the fp32 run (no policy) vs bf16 policies, on one batch + one step."""
    dims = {"dp_shard": 2}
    data = batches(model_config(False).vocab_size)
    path = save_reference(model_config(False), workdir)
    result = {}
    losses = {}
    for name, (tied, settings) in MP_MODELS.items():
        # the untied models start from the reference; the tied one from its own seeded init
        model, mesh = build_parallel(
            model_config(tied), dims, load_from=None if tied else path, **settings
        )
        dp_rank, dp_size = dp_coords(mesh)
        per = BATCH // dp_size
        ids, labels = data[0]
        sl = slice(dp_rank * per, (dp_rank + 1) * per)
        # after FSDP's post-forward hook: the dtype the last layer hands to the root unit
        last_layer_out = []
        handle = model.model.layers[-1].register_forward_hook(
            lambda _m, _a, out, seen=last_layer_out: seen.append(str(out.dtype))
        )
        logits = model(ids[sl])
        handle.remove()
        loss = loss_fn(logits, labels[sl])
        loss.backward()
        result[f"{name}_logits_dtype"] = str(logits.dtype)
        result[f"{name}_last_layer_out_dtype"] = last_layer_out[0]
        result[f"{name}_loss_finite"] = bool(torch.isfinite(loss).item())
        result[f"{name}_param_dtypes"] = sorted({str(p.dtype) for p in model.parameters()})
        result[f"{name}_grad_dtypes"] = sorted({str(p.grad.dtype) for p in model.parameters()})
        result[f"{name}_fsdp_units"] = fsdp_units(model)
        result[f"{name}_num_ac_wrapped"] = num_ac_wrapped(model)
        opt = torch.optim.AdamW(model.parameters(), lr=LR)
        opt.step()
        losses[name] = loss.item()
        result[f"{name}_params_finite"] = all(
            torch.isfinite(p.to_local()).all().item() for p in model.parameters()
        )
    result["losses"] = losses
    result["loss_rel"] = abs(losses["bf16"] - losses["fp32"]) / abs(losses["fp32"])
    return result


# ---------------------------------------------------------------------- compile
COMPILE_LAYOUTS = {"fsdp": ({"dp_shard": 2}, "full"), "tp": ({"tp": 2}, "off")}


def compile_case(workdir):
    """Per-layer compile (``eager`` backend) vs the same settings uncompiled, bit for bit."""
    cfg = model_config(False)
    ids, labels = batches(cfg.vocab_size)[0]
    path = save_reference(cfg, workdir)
    result = {}
    for layout, (dims, ac) in COMPILE_LAYOUTS.items():
        runs = {}
        for backend in (None, "eager"):
            model, _ = build_parallel(cfg, dims, ac=ac, compile_backend=backend, load_from=path)
            torch._dynamo.utils.counters.clear()
            logits = model(ids)
            loss = loss_fn(logits, labels)
            loss.backward()
            runs[backend] = {
                "logits": logits.detach().float(),
                "loss": loss.item(),
                "grads": named_full_grads(model),
                "compiled_layers": compiled_layers(model),
                "num_ac_wrapped": num_ac_wrapped(model),
                "state_keys_clean": state_keys_clean(model),
                "fsdp_applied": bool(fsdp_units(model)),
                "dynamo_graphs": torch._dynamo.utils.counters["stats"]["unique_graphs"],
                "dynamo_graph_breaks": sum(torch._dynamo.utils.counters["graph_break"].values()),
            }
        eager, compiled = runs[None], runs["eager"]
        result[layout] = {
            "logits_max_abs_diff": (compiled["logits"] - eager["logits"]).abs().max().item(),
            "loss_eager": eager["loss"],
            "loss_compiled": compiled["loss"],
            "grads_max_abs_diff": max_abs_diff(compiled["grads"], eager["grads"]),
            **{
                f"{key}_{which}": run[key]
                for which, run in (("eager", eager), ("compiled", compiled))
                for key in (
                    "compiled_layers",
                    "num_ac_wrapped",
                    "state_keys_clean",
                    "fsdp_applied",
                    "dynamo_graphs",
                    "dynamo_graph_breaks",
                )
            },
        }
    return result


def run_case(case: str, workdir: str) -> dict:
    if case in LAYOUTS:
        return layout_case(case, workdir)
    if case == "ac":
        return ac_case(workdir)
    if case == "mp":
        return mp_case(workdir)
    if case == "compile":
        return compile_case(workdir)
    raise SystemExit(f"unknown case {case!r}")


def main() -> int:
    cases, workdir = sys.argv[1].split(","), Path(sys.argv[2])
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    dist.init_process_group("gloo")
    try:
        results = {}
        for case in cases:
            case_dir = workdir / case
            if dist.get_rank() == 0:
                case_dir.mkdir(parents=True, exist_ok=True)
            dist.barrier()
            results[case] = run_case(case, str(case_dir))
            dist.barrier()
        if dist.get_rank() == 0:
            (workdir / "result.json").write_text(json.dumps(results, indent=2))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    exit_now(main() or 0)
