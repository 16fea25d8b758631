"""Check (c): ``torch.compile`` of the model on fla-core's kernels, against eager.

The debug flavor (``--flavor`` another), bf16 on CUDA, every Gated DeltaNet layer on
``model.kernels: fla``; one copy eager, one compiled the way the trainer compiles
(``apply_compile``: every decoder layer in place, inductor, ``fullgraph=True`` -- a graph break
is an error, not a slow path). Same weights, same batch of 2 x 512 tokens; one forward (logits,
fp32 cross-entropy on the next tokens) and backward each. Reported: the compile's wall time
(the compiled run's first call), the graphs dynamo made and its graph breaks, and the error
ratios of the logits and of every parameter's gradient against eager's.

Bounds: the parity tests' bf16 tolerances (logits 2e-2, gradients 5e-2: inductor fuses and
rounds the same bf16 arithmetic at other points), the loss within 1e-2 relative, no graph
break. Needs CUDA and fla-core: elsewhere (the dry run too) it is skipped with the reason.
:func:`compare` takes any device, kernels and backend: ``compare(report, part, "tiny",
device="cpu", kernels="torch", backend="eager", seq=64)`` runs this code on a CPU in about 3 s
(inductor on the CPU is ``tests/torch/ut/models/test_qwen3_5_v2.py``'s).
"""

from __future__ import annotations

import time

from _check_common import Report, error_ratio, fla_missing

LOGITS_TOL, GRAD_TOL, LOSS_RTOL = 2e-2, 5e-2, 1e-2
BATCH, SEQ = 2, 512


def _loss_and_grads(model, ids) -> tuple:
    import torch.nn.functional as F

    model.zero_grad(set_to_none=True)
    logits = model(ids[:, :-1])
    loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
    loss.backward()
    return loss.detach(), logits.detach(), {n: p.grad for n, p in model.named_parameters()}


def check_compile_fla(report: Report, device: str, flavor: str = "debugmodel") -> None:
    part = f"{flavor} bf16 fla compiled vs eager"
    missing = fla_missing() if device == "cuda" else "no CUDA"
    if missing is None:
        compare(report, part, flavor, device="cuda", kernels="fla", backend="inductor")
        return
    report.skip(part, missing)


def compare(report: Report, part: str, flavor: str, *, device: str, kernels: str,
            backend: str, seq: int = SEQ) -> None:
    """The comparison of the module docstring, on any device, kernels and backend (the check
    runs it on CUDA, fla, inductor; the CPU, torch, eager proves this code in seconds)."""
    import copy

    import torch
    import torch._dynamo.utils

    from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM
    from hyper_parallel.models.qwen3_5.gated_deltanet import Qwen3_5GatedDeltaNet
    from hyper_parallel.models.qwen3_5.parallelize_v2 import apply_compile

    torch.manual_seed(0)
    eager = Qwen3_5ForCausalLM(FLAVORS[flavor])
    eager.init_weights()
    eager = eager.to(device, torch.bfloat16)
    for module in eager.modules():
        if isinstance(module, Qwen3_5GatedDeltaNet):
            module.kernels, module._selected = kernels, None
    compiled = copy.deepcopy(eager)
    layers = apply_compile(compiled, backend=backend, fullgraph=True)
    ids = torch.randint(0, FLAVORS[flavor].vocab_size, (BATCH, seq + 1),
                        generator=torch.Generator().manual_seed(1)).to(device)
    loss_e, logits_e, grads_e = _loss_and_grads(eager, ids)
    torch._dynamo.utils.counters.clear()
    _synchronize(device)
    start = time.perf_counter()
    loss_c, logits_c, grads_c = _loss_and_grads(compiled, ids)
    _synchronize(device)
    figures = report.part(part)
    figures["compiled_layers"] = layers
    figures["first_call_s"] = round(time.perf_counter() - start, 1)
    figures["unique_graphs"] = int(torch._dynamo.utils.counters["stats"]["unique_graphs"])
    breaks = int(sum(torch._dynamo.utils.counters["graph_break"].values()))
    figures["graph_breaks"] = breaks
    chosen = {m.select_kernels().name for m in compiled.modules()
              if isinstance(m, Qwen3_5GatedDeltaNet)}
    report.require(part, f"every Gated DeltaNet layer on {kernels}", chosen == {kernels},
                   str(chosen))
    report.require(part, "no graph break", breaks == 0, f"{breaks} breaks")
    figures["loss_eager"], figures["loss_compiled"] = float(loss_e), float(loss_c)
    report.bound(part, "loss_rel_diff", abs(float(loss_c - loss_e)) / abs(float(loss_e)),
                 LOSS_RTOL)
    report.bound(part, "logits", error_ratio(logits_e, logits_c), LOGITS_TOL)
    grads = {name: error_ratio(grads_e[name], grads_c[name]) for name in grads_e
             if grads_e[name] is not None}
    worst = max(grads, key=grads.get)
    figures["worst_grad"] = worst
    report.bound(part, "grad_max", grads[worst], GRAD_TOL)


def _synchronize(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


__all__ = ["check_compile_fla"]
