"""Rank worker for tests/torch/st/qwen3_5/test_context_parallel.py (gloo, CPU, cp = world size).

Usage: ``context_parallel_worker.py <result.json>``. For every case of :data:`CASES` each rank
builds the same token mixer (a full-attention or a Gated DeltaNet layer, same seed on every
rank) twice: the reference runs the whole sequence, the context-parallel copy (its plan from
:func:`apply_cp`'s :class:`ContextParallel`) runs this rank's shard ``[r S/cp, (r+1) S/cp)``
with the global positions. Both get ``loss = sum(y * c)`` backward. Each rank reports the max
abs difference of its output shard, of its input-gradient shard, and of every parameter
gradient (the CP copy's all-reduced over the ranks, as FSDP does) against the reference, with
the magnitudes to state relative bounds, and the collectives the CP forward issued.

The causality cases change the input at one position ``p`` (and every later one) and report
how much the outputs *before* ``p`` moved (must be exactly 0) and after it (must move).

The packed cases (``packed_*``, :data:`PACKED`) run the same comparison on rows of documents
(``block_causal``): the reference layer gets the whole rows'
:class:`~hyper_parallel.utils.documents.Documents`, the context-parallel copy this rank's
:meth:`~hyper_parallel.utils.documents.Documents.shard` of them, and the positions restart at
each document. The packed model cases (``model_*``) train a small ``block_causal`` LM's step on
this rank's part of a packed batch as the trainer splits it (``with_documents`` then
``split_sequence``) and report its loss (the ranks' sums over their count), logits and
gradients against the one-rank packed model, and the loss of every document run alone.

Rank 0 writes ``{case: [rank 0's report, ...]}`` to ``<result.json>``.
"""

from __future__ import annotations

import copy
import json
import sys
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from hyper_parallel.models.qwen3_5.attention import Qwen3_5Attention
from hyper_parallel.models.qwen3_5.configuration import Qwen3_5Config
from hyper_parallel.models.qwen3_5.context_parallel import ContextParallel
from hyper_parallel.models.qwen3_5.gated_deltanet import Qwen3_5GatedDeltaNet
from hyper_parallel.models.qwen3_5.model import Qwen3_5ForCausalLM
from hyper_parallel.models.qwen3_5.rope import Qwen3_5RotaryEmbedding
from hyper_parallel.utils.documents import Documents, DocumentShard

SEED = 1234
BATCH, SEQ = 2, 256


def config(q_heads: int, kv_heads: int, k_heads: int, v_heads: int) -> Qwen3_5Config:
    return Qwen3_5Config(
        vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=4,
        num_attention_heads=q_heads, num_key_value_heads=kv_heads, head_dim=16,
        partial_rotary_factor=0.5, mrope_section=[1, 1, 2], linear_num_key_heads=k_heads,
        linear_num_value_heads=v_heads, linear_key_head_dim=16, linear_value_head_dim=16,
        kernels="torch",
    )


#: name -> (mixer, attention mode, linear mode, async, head counts (q, kv, k, v))
CASES = {
    "attention_ulysses": ("attention", "ulysses", "ulysses", False, (4, 4, 2, 4)),
    "attention_ulysses_async": ("attention", "ulysses", "ulysses", True, (4, 4, 2, 4)),
    "attention_ulysses_kv_repeat": ("attention", "ulysses", "ulysses", False, (4, 1, 2, 4)),
    "attention_allgather": ("attention", "allgather", "ulysses", False, (4, 2, 2, 4)),
    "gdn_ulysses": ("gdn", "ulysses", "ulysses", False, (4, 2, 4, 4)),
    "gdn_ulysses_async": ("gdn", "ulysses", "ulysses", True, (4, 2, 4, 8)),
    "gdn_p2p": ("gdn", "ulysses", "p2p", False, (4, 2, 1, 2)),
}
CAUSALITY = ("attention_ulysses", "attention_allgather", "gdn_ulysses", "gdn_p2p")

#: Packed rows of SEQ tokens, as document lengths (``0``: a padded tail, positions 0, which
#: stays with the document before it). The shard boundaries are at 128 (2 ranks) and 64, 128,
#: 192 (4 ranks): documents cross them (0-100 crosses 64; 127-250 crosses 128 and 192 and is
#: longer than a chunk of 64), one begins exactly at 128, some begin inside the
#: convolution's window before a boundary they cross (62, 127, 190: 2, 1 and 2 tokens before
#: 64, 128 and 192), some are shorter than that window (126-128, 254-256).
PACKED = ((100, 26, 2, 62, 64, 2), (62, 65, 123, 0))
PACKED_CASES = ("attention_ulysses", "attention_ulysses_kv_repeat", "attention_allgather",
                "gdn_ulysses", "gdn_p2p")
#: The packed model cases: (attention, linear) context-parallel modes.
MODEL_CASES = {"model_ulysses": ("ulysses", "ulysses"), "model_allgather_p2p": ("allgather", "p2p")}


def packed_positions() -> torch.Tensor:
    rows = []
    for lengths in PACKED:
        row = [torch.arange(n) for n in lengths if n]
        pad = SEQ - sum(lengths)
        rows.append(torch.cat([*row, torch.zeros(pad, dtype=torch.long)]))
    return torch.stack(rows)


def packed_documents() -> list[tuple[int, int, int]]:
    """Every document as ``(row, start, stop)`` (a padded tail is none)."""
    out = []
    for row, lengths in enumerate(PACKED):
        start = 0
        for n in lengths:
            if n:
                out.append((row, start, start + n))
            start += n
    return out


def build(case: str):
    mixer, attention, linear, async_comm, heads = CASES[case]
    cfg = config(*heads)
    torch.manual_seed(SEED)
    module = Qwen3_5Attention(cfg) if mixer == "attention" else Qwen3_5GatedDeltaNet(cfg)
    if mixer == "gdn":  # the Linears keep torch's init; make the mixer's own weights matter
        module.reset_parameters(std=0.2)
    return cfg, module, (attention, linear, async_comm)


def run(module, cfg, x, positions, grad, documents=None):
    x = x.detach().clone().requires_grad_(True)
    if positions.dim() == 1:
        positions = positions.unsqueeze(0).expand(x.shape[0], -1)
    if isinstance(module, Qwen3_5Attention):
        rope = Qwen3_5RotaryEmbedding(cfg)
        y = module(x, rope(positions), documents)
    else:
        y = module(x, documents)
    if grad is not None:
        (y * grad).sum().backward()
    return y.detach(), None if grad is None else x.grad


def compare(case: str, mesh, rank: int, world: int, packed: bool = False) -> dict:
    cfg, reference, (attention, linear, async_comm) = build(case)
    cp_module = copy.deepcopy(reference)
    plan = ContextParallel(mesh, attention=attention, linear=linear, async_comm=async_comm)
    cp_module.context_parallel = plan
    generator = torch.Generator().manual_seed(SEED + 1)
    x = torch.randn(BATCH, SEQ, cfg.hidden_size, generator=generator)
    grad = torch.randn(BATCH, SEQ, cfg.hidden_size, generator=generator)
    shard = slice(rank * SEQ // world, (rank + 1) * SEQ // world)
    positions = packed_positions() if packed else torch.arange(SEQ)
    whole = Documents.from_positions(packed_positions()) if packed else None
    mine = whole.shard(rank, world) if packed else None
    y_ref, gx_ref = run(reference, cfg, x, positions, grad, whole)
    y_cp, gx_cp = run(cp_module, cfg, x[:, shard], positions[..., shard], grad[:, shard], mine)
    report = {
        "out": (y_cp - y_ref[:, shard]).abs().max().item(),
        "out_max": y_ref.abs().max().item(),
        "x_grad": (gx_cp - gx_ref[:, shard]).abs().max().item(),
        "x_grad_max": gx_ref.abs().max().item(),
        "collectives": plan.collectives,
        "params": {},
    }
    for (name, p_ref), (_, p_cp) in zip(reference.named_parameters(),
                                        cp_module.named_parameters()):
        g = p_cp.grad.clone()
        dist.all_reduce(g)
        report["params"][name] = [(g - p_ref.grad).abs().max().item(),
                                  p_ref.grad.abs().max().item()]
    return report


def causality(case: str, mesh, rank: int, world: int) -> dict:
    cfg, module, (attention, linear, async_comm) = build(case)
    module.context_parallel = ContextParallel(mesh, attention=attention, linear=linear,
                                              async_comm=async_comm)
    generator = torch.Generator().manual_seed(SEED + 2)
    x = torch.randn(BATCH, SEQ, cfg.hidden_size, generator=generator)
    changed = x.clone()
    at = SEQ // 2 + SEQ // (2 * world)  # inside the shard of rank world / 2
    changed[:, at:] += torch.randn(BATCH, SEQ - at, cfg.hidden_size, generator=generator)
    shard = slice(rank * SEQ // world, (rank + 1) * SEQ // world)
    positions = torch.arange(SEQ)
    with torch.no_grad():
        y, _ = run(module, cfg, x[:, shard], positions[shard], None)
        y2, _ = run(module, cfg, changed[:, shard], positions[shard], None)
    earlier = torch.arange(SEQ)[shard] < at
    return {
        "before": (y2 - y)[:, earlier].abs().max().item() if earlier.any() else 0.0,
        "after": (y2 - y)[:, ~earlier].abs().max().item() if (~earlier).any() else None,
    }


def packed_model(mesh, rank: int, world: int, attention: str, linear: str) -> dict:
    """One step's loss, logits and gradients of a ``block_causal`` LM on this rank's part of
    a packed batch, against the one-rank packed model and the documents run alone."""
    from hyper_parallel.data import split_sequence
    from hyper_parallel.models.qwen3_5.context_parallel import apply_cp
    from hyper_parallel.runtime.loss import token_loss_sum
    from hyper_parallel.runtime.step import DOCUMENTS, forward_logits, with_documents

    cfg = config(4, 2, 4, 8).replace(attn_mask_type="block_causal", initializer_range=0.1)
    torch.manual_seed(SEED)
    reference = Qwen3_5ForCausalLM(cfg)
    reference.init_weights()
    model = copy.deepcopy(reference)
    apply_cp(model, mesh, attention=attention, linear=linear)
    positions = packed_positions()
    ids = torch.randint(0, cfg.vocab_size, positions.shape,
                        generator=torch.Generator().manual_seed(SEED + 3))
    labels = ids.masked_fill(positions == 0, -100)  # each document's first label (and pads)
    batch = {"input_ids": ids, "labels": labels, "position_ids": positions}
    # The trainer's own split (trainer.base._own_part): documents of the whole rows, then
    # this rank's part of everything.
    mine = split_sequence(with_documents(model, batch), rank, world)
    assert isinstance(mine[DOCUMENTS], DocumentShard), mine
    logits = forward_logits(model, mine)
    total, count = token_loss_sum(logits, mine["labels"])
    sums = torch.stack([total.detach(), count.float()])
    dist.all_reduce(sums)
    (total / sums[1]).backward()
    ref_logits = forward_logits(reference, with_documents(reference, batch))
    ref_total, ref_count = token_loss_sum(ref_logits, labels)
    (ref_total / ref_count).backward()
    shard = slice(rank * SEQ // world, (rank + 1) * SEQ // world)
    report = {
        "loss": (sums[0] / sums[1]).item(),
        "reference_loss": (ref_total / ref_count).item(),
        "tokens": int(sums[1].item()),
        "logits": (logits - ref_logits[:, shard]).abs().max().item(),
        "logits_max": ref_logits.abs().max().item(),
        "params": {},
    }
    with torch.no_grad():  # the documents alone: one row each, the model's own causal run
        alone = [token_loss_sum(reference(ids[r:r + 1, a:b]), labels[r:r + 1, a:b])
                 for r, a, b in packed_documents()]
    report["alone_loss"] = (sum(t for t, _ in alone) / sum(n for _, n in alone)).item()
    report["alone_tokens"] = int(sum(n for _, n in alone))
    for (name, p_ref), (_, p_cp) in zip(reference.named_parameters(), model.named_parameters()):
        g = p_cp.grad.clone()
        dist.all_reduce(g)
        report["params"][name] = [(g - p_ref.grad).abs().max().item(),
                                  p_ref.grad.abs().max().item()]
    return report


def main() -> None:
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("cp",))
    results = {}
    for case in CASES:
        reports = [None] * world
        dist.all_gather_object(reports, compare(case, mesh, rank, world))
        results[case] = reports
    for case in PACKED_CASES:
        reports = [None] * world
        dist.all_gather_object(reports, compare(case, mesh, rank, world, packed=True))
        results[f"packed_{case}"] = reports
    for case, modes in MODEL_CASES.items():
        reports = [None] * world
        dist.all_gather_object(reports, packed_model(mesh, rank, world, *modes))
        results[case] = reports
    for case in CAUSALITY:
        reports = [None] * world
        dist.all_gather_object(reports, causality(case, mesh, rank, world))
        results[f"causal_{case}"] = reports
    if rank == 0:
        with open(sys.argv[1], "w") as out:
            json.dump(results, out, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    main()
    exit_now(0)
