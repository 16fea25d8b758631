"""One layout of ``bench/gpu_multi_check.sh``: the trainer on N ranks against one rank.

    python bench/_layout_check.py LAYOUT --out OUT/LAYOUT.json [--dry]

Each layout is a registry recipe plus its degrees (:data:`LAYOUTS`), trained by the real entry
point under ``torchrun`` (``bench/_launch.py``): on the GPUs with NCCL, one GPU a rank, or with
``--dry`` on CPU ranks with gloo (every GPU hidden), at the tiniest size. A reference
(``one_rank``, ``moe_one_rank``) trains the same recipe on one rank and writes its losses; a
layout compares each step's loss and gradient norm with its reference's (read from
``OUT/<reference>.json``), as the layout tests do with one rank (``tests/helpers/layout.py``:
the same global batch, so the same losses up to the order of the sums).

Bounds, relative, the largest over the steps: on CPU in fp32 1e-5 (the layout tests measure
1e-7 to 1e-6); on GPUs in fp32 1e-4 -- the fla kernels' dots are TF32 and cuBLAS picks other
algorithms for other shapes -- and for CP 2 2e-3, whose state passing folds the read matrix
that TF32 dots computed. These GPU bounds are first estimates, to be tightened from the first
committed run (``bench/results/``). The gradient norm's bound is ten times the loss's (it sums
every parameter's square, in float32). The report: ``status`` (pass / fail / skipped), the
per-step losses, the largest differences.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from _launch import run_trainer  # this directory (sys.path[0])

REPO = Path(__file__).resolve().parents[1]
DENSE = ("--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel")
MOE = ("--module", "qwen3_5_moe", "--config", "qwen3_5_moe_debugmodel")
P = "--parallelism."
#: name -> (recipe, overrides, ranks, reference or None, GPU loss bound).
LAYOUTS = {
    "one_rank": (DENSE, (), 1, None, None),
    "dp2": (DENSE, (P + "data_parallel_shard_degree", "2"), 2, "one_rank", 1e-4),
    "tp2": (DENSE, (P + "tensor_parallel_degree", "2"), 2, "one_rank", 1e-4),
    "cp2": (DENSE, (P + "context_parallel_degree", "2",
                    P + "context_parallel_linear_attention_mode", "p2p"), 2, "one_rank", 2e-3),
    "pp2": (DENSE, (P + "pipeline_parallel_degree", "2", P + "num_pp_microbatches", "2"), 2,
            "one_rank", 1e-4),
    "moe_one_rank": (MOE, (), 1, None, None),
    "ep2": (MOE, (P + "expert_parallel_degree", "2"), 2, "moe_one_rank", 1e-4),
}
CPU_LOSS_RTOL = 1e-5
GRAD_NORM_FACTOR = 10.0
#: The dry run's size: the tiniest that every layout takes (CP 2 splits 32 positions in two).
DRY = {"steps": 2, "overrides": ("--training.seq_len", "32")}
GPU_STEPS = 10


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-30)


def run_layout(name: str, dry: bool) -> dict:
    """Train ``name``; its report (without the comparison)."""
    recipe, overrides, nproc, _, _ = LAYOUTS[name]
    steps = DRY["steps"] if dry else GPU_STEPS
    size = DRY["overrides"] if dry else ()
    with tempfile.TemporaryDirectory(prefix=f"layout-{name}-") as folder:
        args = [*recipe, *overrides, *size, "--training.steps", str(steps),
                "--metrics.log_freq", "1", "--checkpoint.interval", "0",
                "--checkpoint.folder", folder]
        if dry:
            args += ["--comm.backend", "gloo"]
        run = run_trainer(args, nproc, Path(folder) / "metrics.jsonl", threads=1 if dry else 4)
    report = {"layout": name, "ranks": nproc, "backend": "gloo (CPU)" if dry else "nccl",
              "command": " ".join(args[:-2]), "steps": steps}
    if "error" in run:
        return {**report, "status": "fail", "problems": [f"the run failed: {run['error']}"]}
    rows = run["rows"]
    report.update(losses=[r["loss"] for r in rows], grad_norms=[r.get("grad_norm") for r in rows],
                  step_times=[r.get("step_time") for r in rows],
                  process_wall_s=run["process_wall_s"])
    if len(rows) != steps:
        return {**report, "status": "fail", "problems": [f"{len(rows)} of {steps} steps ran"]}
    return {**report, "status": "pass", "problems": []}


def compare(report: dict, reference: dict | None, name: str, dry: bool) -> dict:
    """``report`` against its reference's losses and gradient norms, within the bounds."""
    ref_name, gpu_bound = LAYOUTS[name][3], LAYOUTS[name][4]
    if ref_name is None or report["status"] != "pass":
        return report
    if reference is None or reference.get("status") != "pass":
        report.update(status="fail", problems=[f"no passing reference run {ref_name!r}"])
        return report
    bound = CPU_LOSS_RTOL if dry else gpu_bound
    loss = max(_rel(a, b) for a, b in zip(report["losses"], reference["losses"]))
    norms = [(a, b) for a, b in zip(report["grad_norms"], reference["grad_norms"])
             if a is not None and b is not None]
    norm = max((_rel(a, b) for a, b in norms), default=0.0)
    report.update(reference=ref_name, max_loss_rel_diff=loss, max_grad_norm_rel_diff=norm,
                  loss_bound=bound, grad_norm_bound=GRAD_NORM_FACTOR * bound)
    if loss > bound:
        report["problems"].append(f"loss differs from {ref_name}'s by {loss:.2e} > {bound:.0e}")
    if norm > GRAD_NORM_FACTOR * bound:
        report["problems"].append(f"grad norm differs from {ref_name}'s by {norm:.2e} > "
                                  f"{GRAD_NORM_FACTOR * bound:.0e}")
    if report["problems"]:
        report["status"] = "fail"
    return report


def _gpus() -> int:
    import torch

    return torch.cuda.device_count()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("layout", choices=list(LAYOUTS))
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--dry", action="store_true",
                        help="CPU ranks with gloo, every GPU hidden, 2 steps at 32 tokens")
    opts = parser.parse_args(argv)
    if opts.dry:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the ranks inherit it: CPU, gloo
    nproc = LAYOUTS[opts.layout][2]
    if not opts.dry and _gpus() < nproc:
        report = {"layout": opts.layout, "status": "skipped",
                  "skipped": {opts.layout: f"needs {nproc} GPUs, {_gpus()} here"}}
    else:
        report = run_layout(opts.layout, opts.dry)
        ref_name = LAYOUTS[opts.layout][3]
        reference = None
        if ref_name is not None:
            path = opts.out.with_name(f"{ref_name}.json")
            reference = json.loads(path.read_text()) if path.exists() else None
        report = compare(report, reference, opts.layout, opts.dry)
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{opts.layout}: {report['status'].upper()}", {
        k: report[k] for k in ("ranks", "backend", "max_loss_rel_diff", "loss_bound",
                               "max_grad_norm_rel_diff", "losses", "problems", "skipped")
        if k in report})
    return 1 if report["status"] == "fail" else 0


if __name__ == "__main__":
    sys.exit(main())
