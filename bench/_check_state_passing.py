"""Check (a): context parallelism's state passing for the Gated DeltaNet (``linear: p2p``,
:func:`hyper_parallel.models.qwen3_5.context_parallel.state_passing_delta_rule`) on each kernel
path and dtype, against the one-rank torch path in fp32.

The ``cp`` ranks run one after another in this process: :class:`_Ranks` stands for the
``ContextParallel`` the function takes (it uses only ``rank`` and ``gather_ranks``). A first
pass runs every shard and records its ``[S_loc | M]`` (what the all-gather would carry); a
second runs ranks ``1 .. cp-1`` again, their gather returning the recorded maps of every rank,
so each folds its predecessors' states exactly as on ``cp`` ranks. The maps keep their graph,
so one backward through the ranks' outputs gives the gradients the distributed run would (the
all-gather's backward, a reduce-scatter, is the sum over the ranks that read a map).

Measured per kernel path (``torch``; ``fla`` on CUDA with fla-core) and dtype (fp32, bf16),
each as fla-core's error ratio ``||x - ref|| / ||ref||`` against the torch path in fp32 over
the whole sequence on one rank, on the same (dtype-rounded) inputs:

* ``one_rank``: the kernel over the whole sequence -- its own error, the floor;
* ``p2p``: the state-passing output (overall and per shard) and the gradients of q, k, v, g,
  beta;
* ``reads``: the read matrix ``A`` of every shard after the first, as the kernel returns it
  (in the dtype of the values: bf16 in a bf16 run, rounded *before* the fp32 fold), against the
  fp32 torch path's. This is the error the fold inherits; ``p2p_over_one_rank`` shows what it
  costs on the outputs (the shards after the first against the first, which folds nothing).

Bounds: the p2p output and gradients within the kernel parity tests' tolerances (fp32 5e-3 /
1e-2: fla's fp32 dots are TF32; bf16 2e-2 / 5e-2); the torch path in fp32 within 1e-5 / 1e-4
(the same arithmetic split at the shard boundaries); and the p2p output at most
``FOLD_FACTOR`` times the kernel's own one-rank error plus the bf16 rounding unit, so that the
bf16 read matrix may add rounding but not amplify it.
"""

from __future__ import annotations

from _check_common import NO_CUDA, Report, error_ratio, fla_missing

#: name -> (key heads, value heads, key dim, value dim): the debug model's GQA layer and the
#: 0.8b flavor's.
GEOMETRIES = {"debug_gqa": (2, 4, 64, 64), "0.8b": (16, 16, 128, 128)}
#: dtype name -> (output bound, gradient bound), fla-core's and the parity tests' error ratios.
TOLERANCES = {"fp32": (5e-3, 1e-2), "bf16": (2e-2, 5e-2)}
#: The torch path in fp32: only the shard boundaries change its arithmetic.
TORCH_FP32_TOLERANCES = (1e-5, 1e-4)
FOLD_FACTOR = 2.0
BF16_UNIT = 2.0**-8
#: Sizes: (batch, sequence, cp, geometries). The CPU form is the cheapest that still folds
#: through more than one predecessor (cp 4) and ends a shard mid-chunk (32 of 64 positions).
SIZES = {"cuda": (2, 2048, 4, tuple(GEOMETRIES)), "cpu": (1, 128, 4, ("debug_gqa",))}


class _Ranks:
    """The ``ContextParallel`` of rank ``rank``, its all-gather served from this process:
    recording each shard's maps (``finals is None``) or returning every rank's."""

    def __init__(self, rank: int, finals: list | None = None) -> None:
        self.rank, self._finals, self.recorded = rank, finals, None

    def gather_ranks(self, x):
        import torch

        if self._finals is None:
            self.recorded = x
            return x.unsqueeze(0)  # as rank 0 sees it: nothing it reads
        return torch.stack(self._finals)


def _recording(delta_rule_with_state, reads: list):
    """``delta_rule_with_state`` that keeps each call's read columns (``out[..., dv:]``)."""

    def run(q, k, v, g, beta, initial_state):
        out, final = delta_rule_with_state(q, k, v, g, beta, initial_state)
        reads.append(out[..., initial_state.shape[-1] - initial_state.shape[-2]:])
        return out, final

    return run


def _state_passing(kernels, inputs: dict, cp: int) -> tuple:
    """The whole sequence's output through ``cp`` emulated ranks (``(B, S, H, Dv)``), and the
    read matrices of ranks ``1 .. cp-1``."""
    import torch

    from hyper_parallel.models.qwen3_5.context_parallel import state_passing_delta_rule

    seq = inputs["q"].shape[1]
    # Each rank's shard as its own contiguous tensor, as a rank's projections make it.
    shards = [{name: t[:, r * seq // cp:(r + 1) * seq // cp].contiguous()
               for name, t in inputs.items()} for r in range(cp)]
    outs, finals, reads = [], [], []
    for r, shard in enumerate(shards):  # pass 1: every shard's maps (rank 0's output is final)
        ranks = _Ranks(0)
        out = state_passing_delta_rule(ranks, kernels.delta_rule_with_state, **shard)
        finals.append(ranks.recorded)
        if r == 0:
            outs.append(out)
    record = _recording(kernels.delta_rule_with_state, reads)
    for r in range(1, cp):  # pass 2: the folds
        outs.append(state_passing_delta_rule(_Ranks(r, finals), record, **shards[r]))
    return torch.cat(outs, dim=1), reads


def _inputs(batch: int, seq: int, geometry: tuple, device: str, seed: int = 0) -> dict:
    """Seeded q, k, v, g, beta in fp32 shaped like a Gated DeltaNet layer's (g as the layer
    makes it: ``-exp(A_log) * softplus(a + dt_bias)`` with HF's ``A_log`` init)."""
    import torch
    import torch.nn.functional as F

    from hyper_parallel.models.qwen3_5.gated_deltanet import sample_A_log

    hk, hv, dk, dv = geometry
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, seq, hk, dk, generator=gen)
    k = torch.randn(batch, seq, hk, dk, generator=gen)
    v = torch.randn(batch, seq, hv, dv, generator=gen)
    torch.manual_seed(seed)
    a_log = sample_A_log((hv,))
    g = -a_log.exp() * F.softplus(torch.randn(batch, seq, hv, generator=gen) + 1.0)
    beta = torch.randn(batch, seq, hv, generator=gen).sigmoid()
    return {name: t.to(device) for name, t in
            {"q": q, "k": k, "v": v, "g": g, "beta": beta}.items()}


def _cast(inputs: dict, dtype) -> dict:
    """The inputs as fresh leaves, in ``dtype`` (None: as they are; g stays fp32 either way, as
    the layer computes it)."""
    return {name: (t if name == "g" or dtype is None else t.to(dtype)).detach().clone()
            .requires_grad_(True) for name, t in inputs.items()}


def _forward_backward(fn, inputs: dict, dout) -> tuple:
    out = fn(inputs)
    (out.float() * dout).sum().backward()
    return out.detach(), {name: t.grad for name, t in inputs.items()}


def _per_shard(ref, got, cp: int) -> list[float]:
    seq = ref.shape[1]
    return [error_ratio(ref[:, r * seq // cp:(r + 1) * seq // cp],
                        got[:, r * seq // cp:(r + 1) * seq // cp]) for r in range(cp)]


def check_state_passing(report: Report, device: str) -> None:
    import torch

    from hyper_parallel.models.qwen3_5 import kernels as K

    batch, seq, cp, geometries = SIZES[device]
    paths = {"torch": K.select_gdn_kernels("torch", device)}
    missing = fla_missing() if device == "cuda" else NO_CUDA
    if missing is None:
        paths["fla"] = K.select_gdn_kernels("fla", device)
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    report.notes.append(f"batch {batch}, {seq} positions over cp {cp} emulated ranks "
                        f"({seq // cp} each); reference: the torch path in fp32 on one rank")
    for geometry in geometries:
        base = _inputs(batch, seq, GEOMETRIES[geometry], device)
        dout = torch.randn(base["v"].shape, generator=torch.Generator().manual_seed(1)).to(device)
        if missing is not None:
            report.skip(f"{geometry} fla", missing)
        for dname, dtype in dtypes.items():
            rounded = {n: (t if n == "g" else t.to(dtype).float()) for n, t in base.items()}
            ref_in = _cast(rounded, None)
            ref_out, ref_grads = _forward_backward(
                lambda x: K.TORCH_KERNELS.delta_rule(**x), ref_in, dout)
            with torch.no_grad():
                _, ref_reads = _state_passing(K.TORCH_KERNELS, rounded, cp)
            for path, kernels in paths.items():
                part = f"{geometry} {path} {dname}"
                try:
                    _measure(report, part, kernels, base, dtype, dname, ref_out, ref_grads,
                             ref_reads, dout, cp, torch_fp32=(path == "torch" and dname == "fp32"))
                except Exception as exc:  # noqa: BLE001 - reported; the other parts still run
                    report.failed(part, exc)


def _measure(report, part, kernels, base, dtype, dname, ref_out, ref_grads, ref_reads, dout,
             cp, *, torch_fp32: bool) -> None:
    one_out, _ = _forward_backward(lambda x: kernels.delta_rule(**x), _cast(base, dtype), dout)
    reads_box: list = []

    def p2p(x):
        out, reads = _state_passing(kernels, x, cp)
        reads_box.extend(reads)
        return out

    p2p_out, p2p_grads = _forward_backward(p2p, _cast(base, dtype), dout)
    figures = report.part(part)
    figures["one_rank_out"] = error_ratio(ref_out, one_out)
    figures["p2p_out"] = error_ratio(ref_out, p2p_out)
    figures["p2p_out_by_shard"] = _per_shard(ref_out, p2p_out, cp)
    figures["one_rank_out_by_shard"] = _per_shard(ref_out, one_out, cp)
    figures["p2p_grads"] = {n: error_ratio(ref_grads[n], g) for n, g in p2p_grads.items()}
    figures["reads_by_shard"] = [error_ratio(r, got) for r, got in zip(ref_reads, reads_box)]
    figures["reads_dtype"] = str(reads_box[0].dtype).replace("torch.", "") if reads_box else None
    shards = figures["p2p_out_by_shard"]
    # What the folds add: the shards that fold against the first, which does not (each over
    # the same floor: the kernel's one-rank error); None where that floor is 0 (torch fp32).
    figures["later_shards_over_first"] = _over(max(shards[1:]), shards[0])
    figures["p2p_over_one_rank"] = _over(figures["p2p_out"], figures["one_rank_out"])
    out_tol, grad_tol = TORCH_FP32_TOLERANCES if torch_fp32 else TOLERANCES[dname]
    report.bound(part, "p2p_out", figures["p2p_out"], out_tol)
    report.bound(part, "p2p_grad_max", max(figures["p2p_grads"].values()), grad_tol)
    if not torch_fp32:  # fp32 torch: its one-rank error is 0, the absolute bound is the rule
        report.bound(part, "p2p_out_excess", figures["p2p_out"],
                     FOLD_FACTOR * figures["one_rank_out"] + (BF16_UNIT if dname == "bf16"
                                                              else 1e-5))


def _over(value: float, floor: float) -> float | None:
    return value / floor if floor > 0 else None


__all__ = ["check_state_passing"]
