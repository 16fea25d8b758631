"""Preflight's output: a table a person reads, and one JSON object for tools."""

from __future__ import annotations

from typing import Any

from hyper_parallel.preflight.flops import MFU_RANGE, step_seconds
from hyper_parallel.preflight.gpus import (
    CUDA_CONTEXT_BYTES,
    FRAGMENTATION,
    GIB,
    NCCL_BYTES_PER_GROUP,
    Gpu,
)
from hyper_parallel.preflight.run import Preflight


def _ranks(ranks: list[int]) -> str:
    """``0-127``, or ``1, 5, ..., 125`` (a pipeline position's ranks, a stride apart)."""
    if len(ranks) == 1:
        return str(ranks[0])
    step = ranks[1] - ranks[0]
    if step == 1:
        return f"{ranks[0]}-{ranks[-1]}"
    if len(ranks) <= 3:
        return ", ".join(map(str, ranks))
    return f"{ranks[0]}, {ranks[1]}, ..., {ranks[-1]}"


def _aligned(rows: list) -> list[str]:
    """``rows`` (the header first) as indented lines: the first and last columns (a name, a
    verdict) aligned left, the figures between them right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    last = len(widths) - 1
    return [("  " + "  ".join(cell.ljust(w) if i in (0, last) else cell.rjust(w)
                              for i, (cell, w) in enumerate(zip(row, widths)))).rstrip()
            for row in rows]


def _on_gpu(gpu: Gpu) -> str:
    """``preflight on h100-80gb (79.6 GiB a GPU)``."""
    return f"preflight on {gpu.name} ({gpu.memory_bytes / GIB:.1f} GiB a GPU)"


def _gib(n: float) -> str:
    return f"{n / GIB:.2f}"


def to_json(report: Preflight, origin: str = "") -> dict[str, Any]:
    """The ``--json`` object (figures in bytes)."""
    seconds = step_seconds(report.flops_per_token, report.tokens_per_step, report.world_size,
                           report.gpu.bf16_tflops)
    return {
        "config": origin,
        "world_size": report.world_size,
        "gpu": report.gpu.name,
        "gpu_bytes": report.gpu.memory_bytes,
        "roles": [
            {
                "ranks": role.ranks,
                "rank": role.rank,
                "params_bytes": role.memory.params_bytes,
                "grads_bytes": role.memory.grads_bytes,
                "optimizer_bytes": role.memory.optimizer_bytes,
                "activations_bytes": role.memory.activations_bytes,
                "buffers_bytes": role.memory.buffers_bytes,
                "allowances_bytes": role.overheads,
                "total_bytes": role.total_bytes,
                "headroom_bytes": report.gpu.memory_bytes - role.total_bytes,
                "verdict": role.verdict,
                "in_flight_microbatches": role.memory.in_flight,
                "accumulation_microbatches": role.memory.micro_batches,
                "stepped_microbatches": role.memory.micro_batches_stepped,
                "deferred_grads_bytes": role.memory.deferred_grads_bytes,
                "measured_depth": role.memory.depth,
                "tracked_kinds_bytes": role.memory.detail,
                "seconds": round(role.seconds, 2),
                "kept": role.kept,
            }
            for role in report.roles
        ],
        "problems": report.problems,
        "suggestions": report.suggestions,
        "flops_per_token": report.flops_per_token,
        "tokens_per_step": report.tokens_per_step,
        "step_seconds_range": list(seconds) if seconds else None,
        "mfu_range": list(MFU_RANGE),
        "expert_imbalance": report.imbalance,
        "seconds": round(report.seconds, 2),
    }


_COLUMNS = ("ranks", "params", "grads", "optimizer", "buffers", "activations", "allowances",
            "total", "headroom", "verdict")


def to_text(report: Preflight, origin: str = "") -> str:
    """The table (GiB) and what it assumed."""
    gpu = report.gpu
    lines = [(f"preflight of {origin or 'the configuration'}: {report.world_size} ranks on "
             f"{gpu.name} ({gpu.memory_bytes / GIB:.1f} GiB)")]
    rows = [_COLUMNS]
    for role in report.roles:
        m = role.memory
        rows.append((
            _ranks(role.ranks), _gib(m.params_bytes), _gib(m.grads_bytes),
            _gib(m.optimizer_bytes), _gib(m.buffers_bytes), _gib(m.activations_bytes),
            _gib(sum(role.overheads.values())), _gib(role.total_bytes),
            _gib(gpu.memory_bytes - role.total_bytes), role.verdict))
    lines += _aligned(rows)
    for role in report.roles:
        m = role.memory
        flight = f", {m.in_flight} micro-batches in flight" if m.in_flight > 1 else ""
        when = ("kept from an earlier preflight (HYPER_PARALLEL_PREFLIGHT_CACHE)" if role.kept
                else f"{role.seconds:.1f} s")
        lines.append(f"  rank {role.rank}: step measured at {m.depth or 'whole'} depth"
                     f"{flight}, {m.process_groups} process groups, {when}")
    lines.extend(accumulation_lines(report))
    lines.append(
        f"allowances: CUDA context {CUDA_CONTEXT_BYTES / GIB:g} GiB, NCCL "
        f"{NCCL_BYTES_PER_GROUP / 2**20:g} MiB per process group, fragmentation "
        f"{FRAGMENTATION:.0%} of the allocated peak; routed-expert load {report.imbalance:g}x "
        "the balanced share on the busiest rank")
    seconds = step_seconds(report.flops_per_token, report.tokens_per_step, report.world_size,
                           gpu.bf16_tflops)
    compute = (f"; step {seconds[0]:.2f}-{seconds[1]:.2f} s at {MFU_RANGE[0]:.0%}-"
               f"{MFU_RANGE[1]:.0%} MFU of {gpu.bf16_tflops:g} bf16 TFLOPs" if seconds else "")
    lines.append(f"{report.flops_per_token / 1e9:.2f} GFLOPs per token (training), "
                 f"{report.tokens_per_step} tokens per step{compute}")
    for problem in report.problems:
        lines.append(f"problem: {problem}")
    if report.suggestions:
        lines.append("would fit (each preflighted):")
        lines.extend(f"  {s}" for s in report.suggestions)
    elif report.suggestions_tried and not report.fits and report.roles:
        lines.append("no change preflight tries makes it fit at this world size: more GPUs, "
                     "pipeline parallelism or a shorter sequence")
    lines.append(f"({report.seconds:.1f} s)")
    return "\n".join(lines)


def accumulation_lines(report: Preflight) -> list[str]:
    """What the step's gradient accumulation holds, said once for the job: how many
    micro-batches a step runs and preflight stepped, and, when FSDP holds its gradients
    unsharded across them (``parallelism.fsdp_defer_gradient_sync``), what that costs."""
    role = peak_role(report)
    if role is None or role.memory.micro_batches_stepped < 2:
        return []
    m = role.memory
    line = (f"gradient accumulation: {m.micro_batches} micro-batches a step "
            f"({m.micro_batches_stepped} stepped; the others repeat one of them)")
    if not m.deferred_grads_bytes:
        return [line]
    cost = (f"  parallelism.fsdp_defer_gradient_sync holds every FSDP unit's unsharded "
            f"gradients across them: {_gib(m.deferred_grads_bytes)} GiB of the fullest rank's "
            "buffers; off, each micro-batch reduce-scatters (one collective more per "
            "micro-batch) and they stay sharded")
    return [line, cost]


def deferred_cost(role: Any) -> str:
    """``", 8 micro-batches holding 33.4 GiB of unsharded gradients (...)"``, or ``""``
    when the role's step holds none (a suggestion states what it costs)."""
    m = role.memory
    if not m.deferred_grads_bytes:
        return ""
    return (f", {m.micro_batches} micro-batches holding {m.deferred_grads_bytes / GIB:.1f} GiB "
            "of unsharded gradients (parallelism.fsdp_defer_gradient_sync)")


def peak_role(report: Preflight) -> Any:
    """The role with the largest total (the one a GPU must hold), None when none was built."""
    return max(report.roles, key=lambda role: role.total_bytes, default=None)


def summary(named: list[tuple[str, Preflight | Exception]], gpu: Gpu) -> str:
    """One row per configuration (a fleet's recipes): its world, its largest role's figure,
    the verdict; then each problem, suggestion and configuration error, under its name."""
    rows = [("recipe", "ranks", "peak GiB/rank", "headroom", "verdict")]
    notes = []
    for name, result in named:
        if isinstance(result, Exception):
            rows.append((name, "-", "-", "-", "config error"))
            notes.append(f"{name}: error: {result}")
            continue
        role = peak_role(result)
        rows.append((name, str(result.world_size),
                     _gib(role.total_bytes) if role else "-",
                     _gib(gpu.memory_bytes - role.total_bytes) if role else "-",
                     (role.verdict if role and not result.problems else "fails to build")))
        notes.extend(f"{name}: problem: {p}" for p in result.problems)
        if not result.fits and result.suggestions:
            notes.append(f"{name}: would fit with {result.suggestions[0]}")
    lines = [f"{_on_gpu(gpu)}:"]
    lines += _aligned(rows)
    lines += [f"  {note}" for note in notes]
    return "\n".join(lines)


def verdict_line(report: Preflight) -> str:
    """The verdict in one line (a launched job's header): the fullest rank's figure and the
    headroom it leaves, or why it does not build."""
    gpu = report.gpu
    role = peak_role(report)
    if report.problems or role is None:
        problem = report.problems[0] if report.problems else "no rank role was built"
        return f"{_on_gpu(gpu)}: fails to build: {problem}"
    ranks = f"rank{'s' if len(role.ranks) > 1 else ''} {_ranks(role.ranks)}"
    return (f"{_on_gpu(gpu)}: {role.verdict}, {_gib(role.total_bytes)} GiB on the fullest rank "
            f"({ranks}), {_gib(gpu.memory_bytes - role.total_bytes)} GiB headroom")


def exit_status(results: list[Preflight | Exception]) -> int:
    """Preflight's exit status for several configurations: 2 when one has a configuration
    error, else 1 when one does not fit (or fails to build), else 0."""
    if any(isinstance(r, Exception) for r in results):
        return 2
    return 0 if all(r.fits for r in results) else 1


__all__ = ["accumulation_lines", "deferred_cost", "exit_status", "peak_role", "summary", "to_json", "to_text", "verdict_line"]
