"""Check (b): the experts' ``torch._grouped_mm`` path in bf16 against the per-expert loop
(``GroupedExperts``, ``hyper_parallel/models/qwen3_5_moe/moe.py``).

One module, the rows a top-k router sends it (random router logits sorted by
``permute_by_expert``, as the MoE block does), forward and backward (input rows and both weight
tensors), three ways on the same bf16-rounded weights and rows: ``grouped_mm`` in bf16, ``loop``
in bf16, and ``loop`` in fp32 -- the reference. Each bf16 path's error ratio ``||x - ref|| /
||ref||`` against the reference, and ``grouped_mm``'s against ``loop``'s. The profiler must show
``aten::_grouped_mm`` in the grouped run (else ``grouped_mm`` fell back to the loop and the
check would compare the loop with itself), and the module's own rule (``_grouped_mm_runs``)
must accept the operands.

Bounds: each bf16 path within 1e-2 of the reference on the output and 2e-2 on the gradients
(bf16 keeps 8 bits: one rounding of a GEMM's fp32 sum is ~2e-3 relative), and ``grouped_mm``
no further from the reference than ``GROUPED_OVER_LOOP`` times the loop (the two run the same
bf16 GEMMs, grouped or one by one). On CUDA also the median milliseconds of each path.
"""

from __future__ import annotations

import statistics
import time

from _check_common import Report, error_ratio

#: (label, experts, top_k, hidden, intermediate, tokens). CUDA: the debug flavor's shape at a
#: real token count and the 35b_a3b flavor's layer; the CPU form: the debug layer, 64 tokens.
SHAPES = {
    "cuda": (("debugmodel-wide: 8 experts top 2, hidden 256, width 128", 8, 2, 256, 128, 4096),
             ("35b_a3b layer: 256 experts top 8, hidden 2048, width 512", 256, 8, 2048, 512,
              4096)),
    "cpu": (("debugmodel layer: 8 experts top 2, hidden 32, width 32", 8, 2, 32, 32, 64),),
}
OUT_TOL, GRAD_TOL = 1e-2, 2e-2
GROUPED_OVER_LOOP = 2.0
TIMED_REPS = {"cuda": 10, "cpu": 0}


def _rows(experts: int, top_k: int, hidden: int, tokens: int, device: str):
    """The routed rows (expert-sorted, bf16-rounded, fp32) and the per-expert counts."""
    import torch

    from hyper_parallel.models.qwen3_5_moe.moe import permute_by_expert

    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(tokens, experts, generator=gen)
    indices = torch.topk(logits.softmax(-1), top_k, dim=-1).indices
    order, counts = permute_by_expert(indices, experts)
    x = torch.randn(tokens, hidden, generator=gen)[order // top_k]
    return x.bfloat16().float().to(device), counts.to(device)


def _run(module, x, counts, grad) -> dict:
    module.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_(True)
    y = module(x, counts)
    y.backward(grad.to(y.dtype))
    return {"out": y.detach(), "x": x.grad, "gate_up_proj": module.gate_up_proj.grad,
            "down_proj": module.down_proj.grad}


def _grouped_kernel_ran(module, x, counts, grad) -> bool:
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        _run(module, x, counts, grad)
    return any(event.name == "aten::_grouped_mm" for event in prof.events())


def _median_ms(module, x, counts, grad, reps: int, device: str) -> float:
    import torch

    times = []
    for _ in range(reps):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        _run(module, x, counts, grad)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1000, 3)


def check_grouped_mm(report: Report, device: str) -> None:
    import copy

    import torch

    from hyper_parallel.models.qwen3_5_moe.moe import GroupedExperts

    for label, experts, top_k, hidden, inter, tokens in SHAPES[device]:
        try:
            torch.manual_seed(0)
            with torch.device(device):  # the 35b_a3b layer's fp32 weights are 3 GB
                ref = GroupedExperts(experts, hidden, inter, "loop")
            with torch.no_grad():  # the bf16 weights, exactly, in the fp32 reference too
                for p in ref.parameters():
                    p.copy_(p.bfloat16().float())
            bf16 = copy.deepcopy(ref).to(torch.bfloat16)
            x, counts = _rows(experts, top_k, hidden, tokens, device)
            grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(1)).to(device)
            xb = x.bfloat16()
            figures = report.part(label)
            figures.update(rows=int(x.shape[0]),
                           rows_per_expert_min_max=[int(counts.min()), int(counts.max())])
            report.require(label, "grouped_mm takes these operands (GroupedExperts' rule)",
                           bf16._grouped_mm_runs(xb))
            want = _run(ref, x, counts, grad)
            got = {}
            for impl in ("grouped_mm", "loop"):
                bf16.implementation = impl
                got[impl] = _run(bf16, xb, counts, grad)
            bf16.implementation = "grouped_mm"
            report.require(label, "aten::_grouped_mm ran", _grouped_kernel_ran(bf16, xb, counts,
                                                                                grad))
            for impl, tensors in got.items():
                ratios = {name: error_ratio(want[name], t) for name, t in tensors.items()}
                figures[f"{impl}_vs_fp32"] = ratios
                report.bound(label, f"{impl}_out", ratios["out"], OUT_TOL)
                report.bound(label, f"{impl}_grad_max",
                             max(v for k, v in ratios.items() if k != "out"), GRAD_TOL)
            figures["grouped_mm_vs_loop"] = {name: error_ratio(got["loop"][name], t)
                                             for name, t in got["grouped_mm"].items()}
            worst = {impl: max(figures[f"{impl}_vs_fp32"].values()) for impl in got}
            report.bound(label, "grouped_mm_worst_over_loop_worst",
                         worst["grouped_mm"] / max(worst["loop"], 1e-30), GROUPED_OVER_LOOP)
            if TIMED_REPS[device]:
                for impl in ("grouped_mm", "loop"):
                    bf16.implementation = impl
                    figures[f"{impl}_median_ms"] = _median_ms(bf16, xb, counts, grad,
                                                              TIMED_REPS[device], device)
        except Exception as exc:  # noqa: BLE001 - reported; the other shapes still run
            report.failed(label, exc)


__all__ = ["check_grouped_mm"]
