"""Benchmark pipeline parallelism: the bubble of GPipe and 1F1B against the ideal, and PP 2
against DP 2 and one rank, side by side in one run.

    .venv/bin/python bench/bench_pipeline.py [--quick] [--steps N] [--out bench/results/pipeline.json]

Every run is the real trainer (``torchrun -m hyper_parallel.train --module qwen3_5_v2 --config
qwen3_5_v2_debugmodel``: the debug model, synthetic tokens) on one global batch of
``ROWS`` sequences of ``--seq-len`` tokens, one thread per rank (two ranks: the two cores of the
CI machine). The step time is the median ``step_time`` of ``metrics.jsonl`` past the first two
steps (the first one compiles nothing but allocates and infers the stages' shapes).

1. ``bubble``: GPipe and 1F1B over 2 stages (``pipeline_parallel_degree 2``) with m = 2, 4, 8
   pipeline micro-batches of ``ROWS / m`` rows, each against one rank training the same
   micro-batches as gradient accumulation (``local_batch_size = ROWS / m``, m accumulation
   steps: the same shapes). A stage holds half the model, so without a bubble a pipeline step
   would take ``T_1 / p``; the measured bubble is ``1 - (T_1 / p) / T_pp``, the share of a
   pipeline step its ranks are not computing -- point-to-point transfers and the schedule's
   own overhead included -- printed beside the ideal ``(p - 1) / (m + p - 1)``.
2. ``pp_vs_dp``: PP 2 (1F1B, m = 8), DP 2 (FSDP over 2 ranks, ``ROWS / 2`` rows each) and one
   rank, the same global batch: step times, ``PP 2 / DP 2`` and each against one rank, and the
   largest relative loss difference of each layout from the one-rank run (the same run).

Figures, not assertions: nothing here fails on a slow machine. ``--quick`` is a short smoke run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROWS = 8
STAGES = 2
WARMUP_STEPS = 2


def train(nproc: int, overrides: list[str], steps: int, seq_len: int) -> dict:
    """One real training run; ``{"step_time": median seconds, "losses": [...]}``."""
    with tempfile.TemporaryDirectory() as out:
        command = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={nproc}", "-m", "hyper_parallel.train",
            "--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel",
            f"--training.steps={steps}", f"--training.seq_len={seq_len}",
            f"--training.global_batch_size={ROWS}", "--checkpoint.interval=0",
            f"--checkpoint.folder={out}", "--metrics.log_freq=1", *overrides,
        ]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "HYPER_PARALLEL_DISABLE_TQDM": "1"}
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                              check=False)  # a failed layout is reported, not raised
        if done.returncode:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            return {"error": tail[0] if tail else f"exit {done.returncode}"}
        records = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text()
                   .splitlines()]
    steps_ = [r for r in records if "loss" in r]
    timed = [r["step_time"] for r in steps_[WARMUP_STEPS:]] or [r["step_time"] for r in steps_]
    return {"step_time": statistics.median(timed), "losses": [r["loss"] for r in steps_]}


def max_relative(losses: list[float], reference: list[float]) -> float:
    return max(abs(a - b) / abs(b) for a, b in zip(losses, reference))


def pipeline(schedule: str, micro: int, steps: int, seq_len: int) -> dict:
    return train(STAGES, [
        f"--parallelism.pipeline_parallel_degree={STAGES}",
        f"--parallelism.pipeline_parallel_schedule={schedule}",
        f"--parallelism.num_pp_microbatches={micro}", "--training.local_batch_size=1",
    ], steps, seq_len)


def bubble(micro_batches: list[int], steps: int, seq_len: int) -> list[dict]:
    rows = []
    for m in micro_batches:
        one = train(1, [f"--training.local_batch_size={ROWS // m}"], steps, seq_len)
        for schedule in ("GPipe", "1F1B"):
            pp = pipeline(schedule, m, steps, seq_len)
            row = {"schedule": schedule, "micro_batches": m,
                   "ideal_bubble": (STAGES - 1) / (m + STAGES - 1)}
            if "error" in pp or "error" in one:
                row["error"] = pp.get("error") or one.get("error")
            else:
                row.update(
                    one_rank_step_s=one["step_time"], pp_step_s=pp["step_time"],
                    measured_bubble=1 - (one["step_time"] / STAGES) / pp["step_time"],
                    max_loss_rel_diff=max_relative(pp["losses"], one["losses"]),
                )
            rows.append(row)
            print(_bubble_line(row), flush=True)
    return rows


def _bubble_line(row: dict) -> str:
    head = f"  {row['schedule']:6s} m={row['micro_batches']}"
    if "error" in row:
        return f"{head}: failed: {row['error']}"
    return (f"{head}: pp {row['pp_step_s'] * 1e3:7.1f} ms, 1 rank {row['one_rank_step_s'] * 1e3:7.1f}"
            f" ms, bubble {row['measured_bubble']:.3f} (ideal {row['ideal_bubble']:.3f}), "
            f"loss diff {row['max_loss_rel_diff']:.1e}")


def pp_vs_dp(steps: int, seq_len: int) -> dict:
    one = train(1, [f"--training.local_batch_size={ROWS}"], steps, seq_len)
    layouts = {
        "PP 2 (1F1B, m=8)": pipeline("1F1B", 8, steps, seq_len),
        "DP 2 (FSDP)": train(2, ["--parallelism.data_parallel_shard_degree=2",
                                 f"--training.local_batch_size={ROWS // 2}"], steps, seq_len),
    }
    out = {"1 rank": {"step_s": one.get("step_time"), "error": one.get("error")}}
    for name, run in layouts.items():
        if "error" in run or "error" in one:
            out[name] = {"error": run.get("error") or one.get("error")}
            continue
        out[name] = {"step_s": run["step_time"], "vs_1_rank": run["step_time"] / one["step_time"],
                     "max_loss_rel_diff": max_relative(run["losses"], one["losses"])}
    pp, dp = out["PP 2 (1F1B, m=8)"], out["DP 2 (FSDP)"]
    if "step_s" in pp and "step_s" in dp:
        out["pp2_over_dp2"] = pp["step_s"] / dp["step_s"]
    for name, row in out.items():
        print(f"  {name}: {row}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="m = 2 and 8 only, 4 steps")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "pipeline.json"))
    args = parser.parse_args(argv)
    steps = 4 if args.quick else args.steps
    micro = [2, 8] if args.quick else [2, 4, 8]
    print(f"bubble over {STAGES} stages, {ROWS} rows x {args.seq_len} tokens, debug model:")
    result = {"rows": ROWS, "seq_len": args.seq_len, "steps": steps, "model": "debugmodel",
              "bubble": bubble(micro, steps, args.seq_len)}
    print("PP 2 against DP 2 and one rank, the same global batch:")
    result["pp_vs_dp"] = pp_vs_dp(steps, args.seq_len)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(tmp, out)  # atomic: a reader never sees half a file
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
