"""Check (f): ``block_causal`` packed rows on the GPU paths, against their documents run alone
on the torch path.

The debug flavor, ``attn_mask_type: block_causal``, bf16 on CUDA: two rows of 2048 tokens packed
with documents of many lengths (longer than a 64-token chunk, shorter than the 4-token
convolution window, boundaries inside chunks). The full attention then takes torch's
variable-length flash attention (``varlen_attn`` with the documents' ``cu_seqlens``; the check
requires that it ran), and the Gated DeltaNet layers either fla's kernels on the rows flattened
with ``cu_seqlens`` (``model.kernels: fla``) or the torch path (``torch``: the varlen attention
alone). One forward (fp32 cross-entropy summed over every document's next tokens, no token
predicting the next document) and backward; the reference is the same weights in fp32 on the
torch path, every document run alone as a row of its own (causal), their losses summed. Reported:
the error ratios of the logits, of every parameter's gradient (the largest) and the loss.

Bounds: the kernel parity tests' bf16 tolerances (logits 2e-2, gradients 5e-2), the loss
within 1e-2 relative. Needs CUDA (and fla-core for its part): elsewhere those parts are skipped
with the reason. The CPU form (``--cpu``, the dry run) runs the same comparison in fp32 on the
tiny flavor's torch path -- per-document SDPA, the masked delta rule -- at fp32's bounds: the
code path.
"""

from __future__ import annotations

from _check_common import NO_CUDA, Report, error_ratio, fla_missing

BF16_TOL = {"logits": 2e-2, "grads": 5e-2, "loss": 1e-2}
#: fp32: the gradients' bound is looser than the logits' because the decay parameter
#: (``A_log``) sums its gradient over every position with cancellation, so the order of that
#: sum (one row against one document at a time) shows relative to its small norm (2.3e-4).
FP32_TOL = {"logits": 1e-4, "grads": 1e-3, "loss": 1e-5}
#: Each row's documents (2048 tokens a row): a chunk's 64 and the conv's 4 straddled.
ROWS = ((700, 2, 3, 61, 450, 190, 642), (1300, 3, 745))
CPU_ROWS = ((70, 2, 3, 61), (100, 36))


def check_packing(report: Report, device: str) -> None:
    if device != "cuda":
        compare(report, "tiny fp32 torch, packed vs documents alone (CPU form)", "tiny",
                device="cpu", kernels="torch", rows=CPU_ROWS)
    for kernels in ("fla", "torch"):
        part = f"debugmodel bf16 {kernels}: varlen attention, packed vs documents alone"
        missing = NO_CUDA if device != "cuda" else fla_missing() if kernels == "fla" else None
        if missing is None:
            compare(report, part, "debugmodel", device="cuda", kernels=kernels, rows=ROWS)
        else:
            report.skip(part, missing)


def _model(flavor: str, kernels: str, device: str, dtype):
    import torch

    from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM
    from hyper_parallel.models.qwen3_5.gated_deltanet import Qwen3_5GatedDeltaNet

    torch.manual_seed(0)
    model = Qwen3_5ForCausalLM(FLAVORS[flavor].replace(attn_mask_type="block_causal"))
    model.init_weights()
    model = model.to(device, dtype)
    for module in model.modules():
        if isinstance(module, Qwen3_5GatedDeltaNet):
            module.kernels, module._selected = kernels, None
    return model


def compare(report: Report, part: str, flavor: str, *, device: str, kernels: str,
            rows=ROWS) -> None:
    """The comparison of the module docstring on any device and kernels (bf16 on CUDA, fp32
    on the CPU)."""
    import torch
    import torch.nn.functional as F

    from hyper_parallel.models.qwen3_5 import documents as docs_module

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    tol = BF16_TOL if dtype == torch.bfloat16 else FP32_TOL
    packed = _model(flavor, kernels, device, dtype)
    reference = _model(flavor, "torch", device, torch.float32)
    seq = sum(rows[0])
    vocab = packed.config.vocab_size
    ids = torch.randint(0, vocab, (len(rows), seq),
                        generator=torch.Generator().manual_seed(1)).to(device)
    positions = torch.stack([torch.cat([torch.arange(n) for n in row]) for row in rows])
    positions = positions.to(device)
    count = sum(n - 1 for row in rows for n in row)

    calls = {"varlen_attn": 0}
    varlen = docs_module._varlen_attn()
    if varlen is not None:
        def counted(*args, **kwargs):
            calls["varlen_attn"] += 1
            return varlen(*args, **kwargs)
        original, docs_module._varlen_attn = docs_module._varlen_attn, lambda: counted
    try:
        logits = packed(ids, position_ids=positions)
    finally:
        if varlen is not None:
            docs_module._varlen_attn = original
    targets = ids.masked_fill(positions == 0, -100)[:, 1:]
    loss = F.cross_entropy(logits[:, :-1].float().flatten(0, 1), targets.flatten(),
                           ignore_index=-100, reduction="sum") / count
    loss.backward()

    ref_logits, ref_loss = torch.zeros(logits.shape, device=device), 0.0
    for r, row in enumerate(rows):
        start = 0
        for n in row:
            doc = ids[r:r + 1, start:start + n]
            out = reference(doc)
            ref_logits[r, start:start + n] = out[0].detach()
            doc_loss = F.cross_entropy(out[0, :-1].float(), doc[0, 1:], reduction="sum") / count
            doc_loss.backward()
            ref_loss += float(doc_loss.detach())
            start += n
    figures = report.part(part)
    figures.update({"rows": [list(row) for row in rows], "dtype": str(dtype),
                    "kernels": kernels, "varlen_attn_calls": calls["varlen_attn"],
                    "loss": float(loss.detach()), "reference_loss": ref_loss})
    if device == "cuda":
        report.require(part, "the full attention ran torch's varlen_attn",
                       calls["varlen_attn"] > 0, "no call: the per-document SDPA ran")
    report.bound(part, "logits_err", error_ratio(ref_logits, logits.float()), tol["logits"])
    grads = dict(reference.named_parameters())
    ratios = {name: error_ratio(grads[name].grad, p.grad.float())
              for name, p in packed.named_parameters() if p.grad is not None}
    worst = max(ratios, key=ratios.get)
    figures["grads_worst_parameter"] = worst
    report.bound(part, "grads_err_max", ratios[worst], tol["grads"])
    report.bound(part, "loss_rel", abs(float(loss.detach()) - ref_loss) / abs(ref_loss), tol["loss"])


__all__ = ["check_packing", "compare"]
