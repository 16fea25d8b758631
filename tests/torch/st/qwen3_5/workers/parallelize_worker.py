"""torchrun worker for tests/torch/st/qwen3_5/test_parallelize.py (gloo, CPU).

Usage: ``torchrun --standalone --nproc_per_node N parallelize_worker.py <case> <workdir>``.

Every case compares a parallel layout against one unsharded reference that rank 0 builds with a
fixed seed and saves to ``<workdir>/ref.pt``. The parallel model is built on ``meta``, parallelized
with :func:`parallelize_qwen3_5`, materialized (``to_empty`` + ``init_weights``) and then loaded
with the reference weights (``set_model_state_dict(full_state_dict=True,
broadcast_from_rank0=True)``). Rank 0 writes the measured numbers to ``<workdir>/result.json``;
the pytest side asserts on them. Exit code 0 means the run itself went through.

Cases: single (1 rank), fsdp (2 ranks), tp (2), tp_tied (2), ac (2), mp (2), hsdp (4), tp_fsdp (4).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from types import SimpleNamespace

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    set_model_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM
from hyper_parallel.models.qwen3_5.parallelize import (
    parallelize_qwen3_5,
    strip_wrapper_prefixes,
)

SEED = 1234
BATCH, SEQ, STEPS, LR = 4, 32, 3, 1e-3
# name -> (mesh dims (canonical order, sizes > 1), tie_word_embeddings, ac mode)
LAYOUTS = {
    "single": ({}, False, "off"),  # 1 rank: FSDP on a size-1 dp_shard mesh
    "fsdp": ({"dp_shard": 2}, False, "off"),
    "tp": ({"tp": 2}, False, "off"),
    "tp_tied": ({"tp": 2}, True, "off"),
    "hsdp": ({"dp_replicate": 2, "dp_shard": 2}, False, "full"),
    "tp_fsdp": ({"dp_shard": 2, "tp": 2}, True, "selective"),
}


def model_config(tied: bool):
    # 4 layers keep both mixer types (3 Gated DeltaNet + 1 full attention) at half the cost.
    return dataclasses.replace(
        FLAVORS["debugmodel"], num_hidden_layers=4, layer_types=None, tie_word_embeddings=tied
    )


def legacy_cfg(dims: dict, ac: str = "off", mp: dict | None = None) -> SimpleNamespace:
    """The slice of the legacy HyperTrainerConfig that parallelize_qwen3_5 reads."""
    mp = mp or {}
    return SimpleNamespace(
        train=SimpleNamespace(
            accelerator=SimpleNamespace(
                dp_replicate=dims.get("dp_replicate", 1),
                dp_shard=dims.get("dp_shard", 1),
                tp=dims.get("tp", 1),
                cp=1,
                pp=1,
                ep=1,
                reshard_after_forward=True,
            ),
            mixed_precision=SimpleNamespace(
                enabled=mp.get("enabled", False),
                param_dtype=mp.get("param_dtype", "bfloat16"),
                reduce_dtype=mp.get("reduce_dtype", "float32"),
                output_dtype=mp.get("output_dtype"),
            ),
            gradient_checkpointing=SimpleNamespace(activation_checkpoint=ac),
        )
    )


def build_mesh(dims: dict):
    world = dist.get_world_size()
    if not dims:
        return init_device_mesh("cpu", (world,), mesh_dim_names=("dp_shard",))
    return init_device_mesh("cpu", tuple(dims.values()), mesh_dim_names=tuple(dims))


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


def partial_grads(model) -> list[str]:
    """Parameters whose gradient is still a ``Partial`` DTensor (should be none)."""
    return [
        n
        for n, p in model.named_parameters()
        if isinstance(p.grad, DTensor) and any(pl.is_partial() for pl in p.grad.placements)
    ]


# ---------------------------------------------------------------------- reference (rank 0)
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
def build_parallel(cfg, dims, ac="off", mp=None, load_from=None):
    """meta -> parallelize -> to_empty -> init_weights -> (optionally) load reference weights."""
    mesh = build_mesh(dims)
    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(cfg)
    parallelize_qwen3_5(model, mesh, legacy_cfg(dims, ac, mp))
    torch.manual_seed(SEED)
    model.to_empty(device="cpu")
    model.init_weights()
    model.tie_weights()
    if load_from is not None:
        full_sd = torch.load(load_from, weights_only=True) if dist.get_rank() == 0 else {}
        set_model_state_dict(
            model,
            full_sd,
            options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True),
        )
    return model, mesh


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
    result["probe_mesh_dims"] = list(probe.device_mesh.mesh_dim_names)
    result["probe_placements"] = [str(p) for p in probe.placements]
    result["fsdp_applied"] = type(model).__name__.startswith("FSDP")

    set_model_state_dict(
        model,
        torch.load(ref_path, weights_only=True) if rank == 0 else {},
        options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True),
    )
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
    if dist.get_rank() == 0:
        torch.manual_seed(SEED)
        ref = Qwen3_5ForCausalLM(cfg)
        ref.init_weights()
        torch.save(ref.state_dict(), os.path.join(workdir, "ref.pt"))
    dist.barrier()
    runs = {}
    for mode in ("off", "full", "selective"):
        model, _ = build_parallel(cfg, dims, ac=mode, load_from=os.path.join(workdir, "ref.pt"))
        wrapped = [n for n, _ in model.named_parameters() if "_checkpoint_wrapped_module" in n]
        loss = loss_fn(model(ids), labels)
        loss.backward()
        runs[mode] = {
            "loss": loss.item(),
            "grads": named_full_grads(model),
            "wrapped": len(wrapped),
            "state_keys_clean": not any("_checkpoint" in k for k in model.state_dict()),
        }
    result = {}
    for mode in ("full", "selective"):
        result[mode] = {
            "loss_abs_diff": abs(runs[mode]["loss"] - runs["off"]["loss"]),
            "grads_rel": max_rel(runs[mode]["grads"], runs["off"]["grads"]),
            "wrapped_params": runs[mode]["wrapped"],
            "state_keys_clean": runs[mode]["state_keys_clean"],
        }
    result["off_wrapped_params"] = runs["off"]["wrapped"]
    return result


# ---------------------------------------------------------------------- mixed precision
def mp_case(workdir):
    """FSDP over 2 ranks with a bf16 compute / fp32 reduce policy vs the same run in fp32."""
    dims = {"dp_shard": 2}
    cfg = model_config(False)
    data = batches(cfg.vocab_size)
    if dist.get_rank() == 0:
        torch.manual_seed(SEED)
        ref = Qwen3_5ForCausalLM(cfg)
        ref.init_weights()
        torch.save(ref.state_dict(), os.path.join(workdir, "ref.pt"))
    dist.barrier()
    path = os.path.join(workdir, "ref.pt")
    fp32, mesh = build_parallel(cfg, dims, load_from=path)
    bf16, _ = build_parallel(
        cfg,
        dims,
        mp={"enabled": True, "param_dtype": "bf16", "reduce_dtype": "fp32"},
        load_from=path,
    )
    dp_rank, dp_size = dp_coords(mesh)
    per = BATCH // dp_size
    ids, labels = data[0]
    sl = slice(dp_rank * per, (dp_rank + 1) * per)
    result = {}
    losses = {}
    for name, model in (("fp32", fp32), ("bf16", bf16)):
        logits = model(ids[sl])
        loss = loss_fn(logits, labels[sl])
        loss.backward()
        result[f"{name}_logits_dtype"] = str(logits.dtype)
        result[f"{name}_param_dtypes"] = sorted({str(p.dtype) for p in model.parameters()})
        result[f"{name}_grad_dtypes"] = sorted({str(p.grad.dtype) for p in model.parameters()})
        opt = torch.optim.AdamW(model.parameters(), lr=LR)
        opt.step()
        losses[name] = loss.item()
        result[f"{name}_params_finite"] = all(
            torch.isfinite(p.to_local()).all().item() for p in model.parameters()
        )
    result["losses"] = losses
    result["loss_rel"] = abs(losses["bf16"] - losses["fp32"]) / abs(losses["fp32"])
    return result


def main() -> int:
    case, workdir = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    dist.init_process_group("gloo")
    try:
        if case in LAYOUTS:
            result = layout_case(case, workdir)
        elif case == "ac":
            result = ac_case(workdir)
        elif case == "mp":
            result = mp_case(workdir)
        else:
            raise SystemExit(f"unknown case {case!r}")
        if dist.get_rank() == 0:
            with open(os.path.join(workdir, "result.json"), "w") as f:
                json.dump(result, f, indent=2)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    exit_now(main() or 0)
