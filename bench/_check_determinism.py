"""Check (d): ``debug.deterministic: true`` repeats a run bit for bit.

Each case is one registry recipe trained twice, each time in a fresh process (``python -m
hyper_parallel.train``, one rank): a fresh process because what makes CUDA deterministic is
read once per process -- ``CUBLAS_WORKSPACE_CONFIG`` when cuBLAS first creates its handle (the
trainer sets it, ``runtime/distributed.set_determinism``, before its first matmul), the
deterministic-algorithms flag by SDPA's backward and by ``index_add_`` (the MoE block's combine
of the experts' outputs). The two runs' per-step losses and gradient norms (``metrics.jsonl``)
must be equal as floats, every step.

Cases on CUDA: the dense debug recipe as a GPU runs it (``model.kernels: auto``, the fla
kernels where fla-core imports), the same on the torch path (so that a failure says whether
fla-core or the rest is at fault), and the MoE debug recipe (the experts' grouped GEMM and
``index_add_``). The CPU form (the dry run) trains the MoE case for 2 steps at 32 tokens.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from _check_common import Report
from _launch import run_trainer

#: name -> (module, recipe, extra overrides).
CASES = {
    "dense debugmodel, kernels auto": ("qwen3_5_v2", "qwen3_5_v2_debugmodel", []),
    "dense debugmodel, kernels torch": ("qwen3_5_v2", "qwen3_5_v2_debugmodel",
                                        ["--model.kernels", "torch"]),
    "moe debugmodel": ("qwen3_5_moe", "qwen3_5_moe_debugmodel", []),
}
#: device -> (cases, steps, overrides of the size).
PLAN = {
    "cuda": (tuple(CASES), 6, []),
    "cpu": (("moe debugmodel",), 2, ["--training.seq_len", "32"]),
}


def _train(module: str, recipe: str, steps: int, overrides: list[str], device: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="gpu-check-determinism-") as folder:
        args = ["--module", module, "--config", recipe, "--training.steps", str(steps),
                "--debug.deterministic", "true", "--metrics.log_freq", "1",
                "--checkpoint.interval", "0", "--checkpoint.folder", folder, *overrides]
        # On the CPU the check proves the code path: one thread, like every test process.
        return run_trainer(args, 1, Path(folder) / "metrics.jsonl",
                           threads=1 if device == "cpu" else 4)


def check_deterministic(report: Report, device: str) -> None:
    cases, steps, size = PLAN[device]
    report.notes.append(f"{steps} steps a run, two runs a case, each a fresh process")
    for name in cases:
        module, recipe, extra = CASES[name]
        runs = [_train(module, recipe, steps, [*extra, *size], device) for _ in range(2)]
        failed = [run["error"] for run in runs if "error" in run]
        if failed:
            report.problems.append(f"{name}: a run failed: {failed[0]}")
            report.part(name)["error"] = failed[0]
            continue
        first, second = ([(row["loss"], row.get("grad_norm")) for row in run["rows"]]
                         for run in runs)
        differing = [i + 1 for i, (a, b) in enumerate(zip(first, second)) if a != b]
        figures = report.part(name)
        figures.update(steps=len(first), losses=[loss for loss, _ in first],
                       first_differing_step=differing[0] if differing else None)
        if differing:
            a, b = first[differing[0] - 1], second[differing[0] - 1]
            figures["differing"] = {"run 1": a, "run 2": b}
        report.require(name, "two runs bit-identical (loss and grad norm of every step)",
                       not differing and len(first) == len(second) == steps,
                       f"first difference at step {differing[0]}" if differing
                       else f"{len(first)} and {len(second)} steps of {steps}")


__all__ = ["check_deterministic"]
