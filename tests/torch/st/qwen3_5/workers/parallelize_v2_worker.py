"""torchrun worker for tests/torch/st/qwen3_5/test_parallelize_v2.py (gloo, CPU).

Usage: ``torchrun --nproc_per_node 2 parallelize_v2_worker.py <layout> <workdir>``, layout
``fsdp`` (dp_shard=2) or ``tp`` (tp=2).

For every setting of the layout (``SETTINGS``) the same model is parallelised twice on the same
``ParallelDims`` mesh:

* **v1**: the legacy ``Qwen3_5ForCausalLM`` built on ``meta`` and ``parallelize_qwen3_5(model,
  mesh, legacy_cfg)`` (the legacy trainer's call);
* **v2**: ``Qwen3_5Model.Config.from_legacy(cfg).build()`` on ``meta`` and
  ``parallelize_qwen3_5_v2(model, parallel_dims, training=..., parallelism=..., ...)`` with the
  sections that ``hyper_parallel.config.transforms`` derives from the same legacy settings.

Both are materialised (``to_empty`` + ``init_weights`` under the same seed), compared, loaded
with one reference state dict and run forward/backward on one batch. Rank 0 writes
``<workdir>/result.json``: per setting the structural comparison (parameter names, placements,
local shapes, FSDP units with their policy and reshard flag, AC wrappers, compiled layers) and
the numeric one (init, logits, loss, gradients: max abs differences).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import torch
import torch._dynamo.utils  # counters of captured graphs
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor

from hyper_parallel.config.transforms import mixed_precision_forward
from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM
from hyper_parallel.models.qwen3_5.parallelize import parallelize_qwen3_5, strip_wrapper_prefixes
from hyper_parallel.models.qwen3_5_v2 import (
    Qwen3_5Model,
    compiled_layers,
    parallelize_qwen3_5_v2,
)
from hyper_parallel.trainer.parallel_dims import ParallelDims

SEED = 4321
BATCH, SEQ = 2, 32
DIMS = {"fsdp": {"dp_shard": 2}, "tp": {"tp": 2}}

# Legacy settings; v2 gets the sections the field table's transforms derive from them.
# mp = (enabled, param_dtype, reduce_dtype, output_dtype)
_OFF = (False, "bfloat16", "float32", None)
SETTINGS = {
    "fsdp": [
        {"name": "plain", "ac": "off", "mp": _OFF, "reshard": True, "tied": False},
        {
            "name": "full_ac_bf16_noreshard",
            "ac": "full",
            "mp": (True, "bfloat16", "float32", None),
            "reshard": False,
            "tied": False,
        },
        {
            "name": "selective_ac_bf16_reduce_bf16_tied",
            "ac": "selective",
            "mp": (True, "bfloat16", "bfloat16", "bfloat16"),
            "reshard": True,
            "tied": True,
        },
        {
            "name": "compile_eager_full_ac",
            "ac": "full",
            "mp": _OFF,
            "reshard": True,
            "tied": False,
            "compile": "eager",
        },
    ],
    "tp": [
        {"name": "plain", "ac": "off", "mp": _OFF, "reshard": True, "tied": False},
        {"name": "selective_ac_tied", "ac": "selective", "mp": _OFF, "reshard": True, "tied": True},
        {
            "name": "full_ac_dispatch",
            "ac": "full",
            "mp": _OFF,
            "reshard": True,
            "tied": False,
            "dispatch": True,
        },
        {
            "name": "compile_eager",
            "ac": "off",
            "mp": _OFF,
            "reshard": True,
            "tied": False,
            "compile": "eager",
        },
    ],
}


def model_config(tied: bool):
    # 4 layers: 3 Gated DeltaNet + 1 full attention, both mixer types at half the cost.
    return dataclasses.replace(
        FLAVORS["debugmodel"], num_hidden_layers=4, layer_types=None, tie_word_embeddings=tied
    )


def legacy_cfg(dims: dict, s: dict) -> SimpleNamespace:
    enabled, param, reduce, output = s["mp"]
    return SimpleNamespace(
        train=SimpleNamespace(
            accelerator=SimpleNamespace(
                dp_replicate=1,
                dp_shard=dims.get("dp_shard", 1),
                tp=dims.get("tp", 1),
                cp=1,
                pp=1,
                ep=1,
                reshard_after_forward=s["reshard"],
            ),
            mixed_precision=SimpleNamespace(
                enabled=enabled, param_dtype=param, reduce_dtype=reduce, output_dtype=output
            ),
            gradient_checkpointing=SimpleNamespace(activation_checkpoint=s["ac"]),
        )
    )


def v2_sections(s: dict) -> dict:
    enabled, param, reduce, output = s["mp"]
    mp = mixed_precision_forward(
        enabled=enabled, param_dtype=param, reduce_dtype=reduce, output_dtype=output
    )
    return {
        "training": SimpleNamespace(**mp),
        "parallelism": SimpleNamespace(reshard_after_forward=s["reshard"]),
        "activation_checkpoint": SimpleNamespace(mode=s["ac"]),
        "compile": SimpleNamespace(
            enable="compile" in s, backend=s.get("compile", "inductor"), components=["model"]
        ),
        "dump_folder": "unused",
    }


def describe(model) -> dict:
    """The structure the two paths must share."""
    params = {}
    for name, p in model.named_parameters():
        params[name] = {
            "dtensor": isinstance(p, DTensor),
            "mesh": list(p.device_mesh.mesh_dim_names) if isinstance(p, DTensor) else None,
            "placements": [str(x) for x in p.placements] if isinstance(p, DTensor) else None,
            "local_shape": list((p.to_local() if isinstance(p, DTensor) else p).shape),
            "dtype": str(p.dtype),
        }
    fsdp_units = {}
    for name, module in model.named_modules():
        if isinstance(module, FSDPModule):
            state = module._get_fsdp_state()
            group = state._fsdp_param_group
            fsdp_units[name] = {
                # the class FSDP2 subclassed (the roots differ by design: legacy vs v2 class)
                "class": "<root>" if not name else type(module).__mro__[2].__name__,
                "mp_policy": repr(state._mp_policy),
                "reshard_after_forward": group.post_forward_mesh_info is not None,
                "mesh": list(group.mesh_info.mesh.mesh_dim_names),
                "num_params": len(group.fsdp_params),
            }
    wrapped = [n for n, m in model.named_modules() if isinstance(m, CheckpointWrapper)]
    return {
        "params": params,
        "fsdp_units": fsdp_units,
        "ac_wrapped": wrapped,
        "state_keys": sorted(model.state_dict().keys()),
    }


def materialize(model) -> None:
    model.to_empty(device="cpu")
    torch.manual_seed(SEED)
    model.init_weights(buffer_device="cpu")


def full_tensors(named) -> dict[str, torch.Tensor]:
    return {
        strip_wrapper_prefixes(n): (t.full_tensor() if isinstance(t, DTensor) else t)
        .detach()
        .float()
        .clone()
        for n, t in named
    }


def max_abs_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
    return max((a[k] - b[k]).abs().max().item() for k in a)


def run_setting(layout: str, s: dict, ref_sd: dict, batch) -> dict:
    dims = DIMS[layout]
    world = dist.get_world_size()
    pd = ParallelDims(dp_shard=dims.get("dp_shard", 1), tp=dims.get("tp", 1), world_size=world)
    pd.build_mesh("cpu")
    cfg = model_config(s["tied"])

    with torch.device("meta"):
        v1 = Qwen3_5ForCausalLM(cfg)
        v2 = Qwen3_5Model.Config.from_legacy(cfg).build()
    parallelize_qwen3_5(v1, pd.world_mesh, legacy_cfg(dims, s))
    parallelize_qwen3_5_v2(v2, pd, **v2_sections(s))

    d1, d2 = describe(v1), describe(v2)
    out = {
        "same_structure": d1 == d2,
        "diff_keys": [k for k in d1 if d1[k] != d2[k]],
        "fsdp_units": d2["fsdp_units"],
        "num_ac_wrapped": len(d2["ac_wrapped"]),
        "compiled_layers": compiled_layers(v2),
        "v1_compiled_layers": compiled_layers(v1),
        "state_keys_clean": all(
            "_orig_mod" not in k and "_checkpoint" not in k for k in d2["state_keys"]
        ),
        "example_param": {k: v for k, v in d2["params"].items() if k.endswith("q_proj.weight")},
    }
    if not out["same_structure"]:
        for key in out["diff_keys"]:
            a, b = d1[key], d2[key]
            if isinstance(a, dict):
                out.setdefault("diff_detail", {})[key] = {
                    k: [a.get(k), b.get(k)] for k in set(a) | set(b) if a.get(k) != b.get(k)
                }

    # init_weights under the same seed: identical values on both paths
    materialize(v1)
    materialize(v2)
    if s["tied"]:
        v1.tie_weights()
        v2.tie_weights()
    out["init_max_abs_diff"] = max_abs_diff(
        full_tensors(v1.named_parameters()), full_tensors(v2.named_parameters())
    )

    # the same reference weights, one batch forward + backward
    opts = StateDictOptions(full_state_dict=True, broadcast_from_rank0=False)
    for m in (v1, v2):
        set_model_state_dict(m, ref_sd, options=opts)
        if s["tied"]:
            m.tie_weights()
    ids, labels = batch
    torch._dynamo.utils.counters.clear()
    results = []
    for m in (v1, v2):
        logits = m(ids)
        loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
        loss.backward()
        grads = full_tensors((n, p.grad) for n, p in m.named_parameters())
        results.append((logits.detach(), loss.item(), grads))
    (l1, loss1, g1), (l2, loss2, g2) = results
    out.update(
        logits_max_abs_diff=(l1.float() - l2.float()).abs().max().item(),
        loss_v1=loss1,
        loss_v2=loss2,
        grads_max_abs_diff=max_abs_diff(g1, g2),
        logits_dtype=str(l2.dtype),
        # graphs dynamo captured in these forwards/backwards (0 unless v2 compiled its layers)
        dynamo_graphs=torch._dynamo.utils.counters["stats"]["unique_graphs"],
        dynamo_graph_breaks=sum(torch._dynamo.utils.counters["graph_break"].values()),
    )
    return out


def main() -> None:
    layout, workdir = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group("gloo")
    torch.manual_seed(SEED)
    out = {}
    for s in SETTINGS[layout]:
        cfg = model_config(s["tied"])
        torch.manual_seed(SEED + 7)
        ref = Qwen3_5ForCausalLM(cfg)  # same seed on every rank: identical everywhere
        ref.init_weights()
        ref_sd = {k: v.detach().clone() for k, v in ref.state_dict().items()}
        gen = torch.Generator().manual_seed(SEED + 1)
        ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ + 1), generator=gen)
        batch = (ids[:, :-1].contiguous(), ids[:, 1:].contiguous())
        out[s["name"]] = run_setting(layout, s, ref_sd, batch)
    if dist.get_rank() == 0:
        (workdir / "result.json").write_text(json.dumps(out, indent=1))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
