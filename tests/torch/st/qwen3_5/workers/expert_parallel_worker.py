"""Rank worker for tests/torch/st/qwen3_5/test_expert_parallel.py (gloo, CPU, 2 ranks).

Usage (through ``tests.helpers.torchrun.spawn_ranks``): ``expert_parallel_worker.py
<result.json>``. Every case of :data:`CASES` runs in this one job: each rank builds its own
tokens and a routing of them to ``k`` of ``E`` experts, and computes
``y[t] = sum over t's experts e of x[t] @ W[e] + b[e]`` twice:

* the reference: a plain per-token function with all ``E`` experts on the rank (no sorting,
  no dispatcher);
* expert parallel: sort the token-slots by expert as the MoE block does, ``dispatch`` to the
  ranks owning the experts (``E / 2`` each), the rank's local experts on what arrived,
  ``combine``, sum the slots per token.

Then ``loss = sum(y * c)`` backward in both. Each rank reports, per case, the max abs
difference of ``y``, of the input-token gradient, and of the local experts' weight and bias
gradients against the reference's (all-reduced over the ranks, then sliced to the rank's
experts), plus the splits and counts dispatch saw. Rank 0 writes ``{case: [rank 0, rank 1]}``
to ``<result.json>``; the pytest side asserts on it.
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from hyper_parallel.models.qwen3_5_moe.expert_parallel import AllToAllDispatcher

E, H, O = 4, 8, 6  # experts (2 per rank), token width, expert output width
SEED = 1234


def spec(n: tuple[int, int], k: int = 2, route: str = "random", data: str = "int",
         **extra) -> dict:
    """One case: n: tokens per rank, k: experts per token, route: "random" (k distinct experts),
    "rank0_to_rank1" (rank 0 only to rank 1's experts, rank 1 random), "expert3" (everyone to
    expert 3: rank 0 receives nothing, experts 0-2 get no rows); data: "int" (small integers:
    every sum exact, so any order gives the same bits) or "gauss"; extra: frozen (ranks whose
    tokens do not require grad), group ("mesh": a 1-D DeviceMesh, else the world group),
    no_grad (forward only, under torch.no_grad)."""
    return {"n": n, "k": k, "route": route, "data": data, **extra}


CASES = {
    "exact": spec((7, 5)),
    "gaussian": spec((7, 5), data="gauss"),
    "mesh_top3": spec((4, 9), k=3, group="mesh"),
    "rank0_to_rank1": spec((6, 5), route="rank0_to_rank1"),
    "all_to_expert3": spec((5, 3), k=1, route="expert3"),
    "rank1_no_tokens": spec((6, 0)),
    "no_tokens": spec((0, 0)),
    "rank1_tokens_frozen": spec((5, 6), frozen=(1,)),
    "inference": spec((7, 5), data="gauss", no_grad=True),
}


def make_inputs(case: dict, rank: int, case_index: int):
    """The rank's tokens, routing and loss weights, and the expert weights (the same on every
    rank)."""
    g = torch.Generator().manual_seed(SEED)
    n, k = case["n"][rank], case["k"]
    if case["data"] == "int":
        w = torch.randint(-2, 3, (E, H, O), generator=g).float()
        b = torch.randint(-2, 3, (E, O), generator=g).float()
    else:
        w, b = torch.randn(E, H, O, generator=g), torch.randn(E, O, generator=g)
    g = torch.Generator().manual_seed(SEED + 100 * case_index + rank)
    if case["data"] == "int":
        x = torch.randint(-3, 4, (n, H), generator=g).float()
        c = torch.randint(-2, 3, (n, O), generator=g).float()
    else:
        x, c = torch.randn(n, H, generator=g), torch.randn(n, O, generator=g)
    route = case["route"]
    if route == "expert3":
        ids = torch.full((n, k), 3, dtype=torch.int64)
    elif route == "rank0_to_rank1" and rank == 0:
        ids = torch.rand(n, E // 2, generator=g).argsort(-1)[:, :k] + E // 2
    else:
        ids = torch.rand(n, E, generator=g).argsort(-1)[:, :k]
    return x, ids, c, w, b


def reference(x, ids, w, b):
    """``y[t] = sum_j x[t] @ w[ids[t, j]] + b[ids[t, j]]``, per token, all experts local."""
    y = x.new_zeros(x.shape[0], O)
    for j in range(ids.shape[1]):
        y = y + torch.einsum("nh,nho->no", x, w[ids[:, j]]) + b[ids[:, j]]
    return y


def local_experts(rows, counts, w_local, b_local):
    """The rank's experts on rows grouped by local expert (``counts[j]`` rows for expert j)."""
    chunks = torch.split(rows, counts.tolist())
    outs = [chunk @ w_local[j] + b_local[j] for j, chunk in enumerate(chunks)]
    return torch.cat(outs) if outs else rows.new_zeros(0, O)


def expert_parallel(dispatcher, x, ids, w_local, b_local):
    """The MoE block's path: sort slots by expert, dispatch, local experts, combine, sum."""
    n, k = ids.shape
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    token_of_slot = torch.arange(n).repeat_interleave(k)[order]
    counts = torch.bincount(flat, minlength=E)
    local_tokens, local_counts, handle = dispatcher.dispatch(x[token_of_slot], counts)
    out_local = local_experts(local_tokens, local_counts, w_local, b_local)
    out = dispatcher.combine(out_local, handle)
    y = x.new_zeros(n, O).index_add(0, token_of_slot, out)
    seen = {"input_splits": handle.input_splits, "output_splits": handle.output_splits,
            "local_counts": local_counts.tolist(), "local_rows": local_tokens.shape[0],
            "combine_plain_tensor": type(out) is torch.Tensor,
            "local_counts_dtype": str(local_counts.dtype)}
    return y, counts, seen


def max_abs(a, b) -> float:
    if a is None or b is None:
        return -1.0 if a is not b else 0.0
    return (a - b).abs().max().item() if a.numel() else 0.0


def run_case(name: str, case: dict, case_index: int) -> dict:
    rank = dist.get_rank()
    x, ids, c, w, b = make_inputs(case, rank, case_index)
    if case.get("group") == "mesh":
        dispatcher = AllToAllDispatcher(init_device_mesh("cpu", (2,), mesh_dim_names=("ep",)), E)
    else:
        dispatcher = AllToAllDispatcher(dist.group.WORLD, E)
    local = slice(dispatcher.local_experts.start, dispatcher.local_experts.stop)
    needs_grad = not case.get("no_grad") and rank not in case.get("frozen", ())
    train = not case.get("no_grad")

    x_ref = x.clone().requires_grad_(needs_grad)
    w_ref, b_ref = w.clone().requires_grad_(train), b.clone().requires_grad_(train)
    x_ep = x.clone().requires_grad_(needs_grad)
    w_local = w[local].clone().requires_grad_(train)
    b_local = b[local].clone().requires_grad_(train)

    with torch.set_grad_enabled(train):
        y_ref = reference(x_ref, ids, w_ref, b_ref)
        y_ep, counts, seen = expert_parallel(dispatcher, x_ep, ids, w_local, b_local)
    result = {"fwd": max_abs(y_ep, y_ref), "ref_max": y_ref.abs().max().item() if len(y_ref) else 0,
              "n": x.shape[0], "local_experts": list(dispatcher.local_experts), **seen}
    expected = counts.clone()
    dist.all_reduce(expected)
    result["expected_local_counts"] = expected[local].tolist()
    result["sent_per_rank"] = counts.view(2, E // 2).sum(1).tolist()
    if train:
        (y_ref * c).sum().backward()
        (y_ep * c).sum().backward()
        for grad in (w_ref.grad, b_ref.grad):
            dist.all_reduce(grad)  # every rank's tokens' contribution to every expert
        result.update(
            x_grad=max_abs(x_ep.grad, x_ref.grad), x_grad_is_none=x_ep.grad is None,
            w_grad=max_abs(w_local.grad, w_ref.grad[local]),
            b_grad=max_abs(b_local.grad, b_ref.grad[local]),
            w_grad_local_max=w_local.grad.abs().max().item(),
            x_grad_max=x_ref.grad.abs().max().item() if x_ref.grad is not None and len(x) else 0)
    return result


def refusals() -> dict:
    """The dispatcher's argument checks (raised on both ranks alike: no collective is left
    half-entered)."""
    out = {}
    try:
        AllToAllDispatcher(dist.group.WORLD, 3)
        out["odd_experts"] = "accepted"
    except ValueError as error:
        out["odd_experts"] = str(error)
    dispatcher = AllToAllDispatcher(dist.group.WORLD, E)
    try:
        dispatcher.dispatch(torch.zeros(2, H), torch.ones(E + 1, dtype=torch.int64))
        out["bad_counts_shape"] = "accepted"
    except ValueError as error:
        out["bad_counts_shape"] = str(error)
    try:
        dispatcher.dispatch(torch.zeros(2, H), torch.ones(E, dtype=torch.int64))
        out["rows_mismatch"] = "accepted"
    except ValueError as error:
        out["rows_mismatch"] = str(error)
    return out


def main() -> int:
    result_file = Path(sys.argv[1])
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    # a rank that skipped a collective (e.g. a backward all-to-all) fails within a minute
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    try:
        results = {name: run_case(name, case, i) for i, (name, case) in enumerate(CASES.items())}
        results["refusals"] = refusals()
        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, results)
        if dist.get_rank() == 0:
            merged = {name: [r[name] for r in gathered] for name in results}
            result_file.write_text(json.dumps(merged, indent=1))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    from hyper_parallel.utils.process import exit_now

    exit_now(main() or 0)
