"""Benchmark pipeline parallelism: the bubble of GPipe and 1F1B against the ideal, and PP 2
against DP 2 and one rank, side by side in one run.

    .venv/bin/python bench/bench_pipeline.py [--quick | --smoke] [--steps N] [--seq-len 64]
                                             [--flavor debugmodel|tiny]
                                             [--out bench/results/pipeline.json]

Every figure comes from the real trainer (``torchrun -m hyper_parallel.train --module
recipes.train_qwen3_5_debug --config train_qwen3_5_debug``: the Qwen3.5 ``debugmodel`` flavor,
or ``tiny`` with ``--flavor tiny``, on synthetic tokens, fp32) training one global batch of
``ROWS`` = 8 sequences of ``--seq-len`` tokens a step, one thread per rank (two ranks: the two
cores of the CI machine). A layout's step time is the median ``step_time`` of its
``metrics.jsonl`` past the first ``WARMUP_STEPS`` = 2 steps (the first step of a pipeline also
runs torch's shape inference). The default, the debug model at 64 tokens, keeps a one-rank step
around a second; the ``tiny`` flavor is so small that fixed per-micro-batch costs would be most
of what is measured.

1. ``bubble``: GPipe and 1F1B over p = 2 stages (``pipeline_parallel_degree 2``, one stage a
   rank) at m = 2, 4, 8 pipeline micro-batches (``num_pp_microbatches``; the step's 8 rows, so
   ``8 / m`` rows each), each against one rank training the same micro-batches by gradient
   accumulation (``local_batch_size 8 / m``, m accumulation steps): the same shapes and the
   same losses (up to the last bit once clipping acts: the debug recipe clips at 1.0, and the
   norm summed over the stages may differ from one rank's in its last bit, and with it the
   clipping coefficient); besides the schedule only the loading differs (the pipeline loads
   the 8 rows at once, the one rank in m fetches of synthetic tokens, a cost small beside a
   micro-batch's forward and backward). One rank busy for ``T_1`` would need ``T_1 / p`` per
   stage without a bubble, so the measured bubble is

       bubble = 1 - (T_1 / p) / T_pp

   the share of a pipeline step a stage is not computing -- the point-to-point transfers, the
   schedule's own work and the imbalance of the stages (the first holds the embedding, the last
   the norm, the head and the loss) included -- printed beside the ideal
   ``(p - 1) / (m + p - 1)``. With ``--quick``, m = 4 only.
2. ``pp_vs_dp``: PP 2 (1F1B, m = 4: the run of 1.), DP 2 (``data_parallel_shard_degree 2``:
   FSDP, 4 rows a rank) and one rank (all 8 rows in one micro-batch), the same global batch:
   step times, ``PP 2 / DP 2`` and each against one rank, and the largest relative difference
   of each layout's per-step losses from the one-rank run's.

A layout that fails is reported with its error's last line and skipped. Figures, not
assertions: nothing here fails on a slow machine. ``other_work_cpu_share`` says whether other
work shared the cores: the CPU time the machine spent or had stolen by its hypervisor
(``/proc/stat``) less this process's and its trainers', over the run's wall time times the CPUs
(a load average would count the bench's own two ranks). ``--quick`` (4 steps, 5 trainer runs)
takes about a minute; the full run (8 steps, 11 runs) about two and a half. ``--smoke`` proves
in seconds that both figures still run: the ``tiny`` flavor at 16 tokens, 2 steps (1 timed), 1F1B
at m = 2 against one rank (its one 2-rank run), ``pp_vs_dp`` on those two runs without DP 2; it
writes no file unless ``--out`` names one.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from _launch import run_trainer  # this directory (sys.path[0])
from _smoke import SMOKE_HELP, exit_status, result_path, write_results

REPO = Path(__file__).resolve().parents[1]

ROWS = 8
STAGES = 2
WARMUP_STEPS = 2
SCHEDULES = ("GPipe", "1F1B")
#: micro-batches of the PP 2 layout of ``pp_vs_dp`` (a run ``bubble`` makes too: reused).
PP_VS_DP_MICRO = 4
BUBBLE_FORMULA = "1 - (T_1 / p) / T_pp"
IDEAL_FORMULA = "(p - 1) / (m + p - 1)"

SETTINGS = {
    # pp_vs_dp_micro: m of pp_vs_dp's PP 2 run; one_rank_micro: the accumulation micro-batches
    # of its 1-rank run (1: all the rows at once); with_dp: whether it runs DP 2.
    "full": {"steps": 8, "warmup": WARMUP_STEPS, "micro_batches": (2, 4, 8),
             "schedules": SCHEDULES, "pp_vs_dp_micro": PP_VS_DP_MICRO, "one_rank_micro": 1,
             "with_dp": True},
    "quick": {"steps": 4, "warmup": WARMUP_STEPS, "micro_batches": (PP_VS_DP_MICRO,),
              "schedules": SCHEDULES, "pp_vs_dp_micro": PP_VS_DP_MICRO, "one_rank_micro": 1,
              "with_dp": True},
    # Both figures' code on two runs (one of them the one 2-rank run), reused by pp_vs_dp.
    "smoke": {"steps": 2, "warmup": 1, "micro_batches": (2,), "schedules": ("1F1B",),
              "pp_vs_dp_micro": 2, "one_rank_micro": 2, "with_dp": False,
              "flavor": "tiny", "seq_len": 16},
}


def _cpu_seconds() -> tuple[float, float] | None:
    """(CPU seconds the machine has spent or had stolen by its hypervisor, those of this process
    and its finished children), or None without ``/proc/stat``."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    machine = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    ours = sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))
    return machine, ours


def _other_work_share(before: tuple[float, float] | None, wall_s: float) -> float | None:
    """The share of the machine's CPU time over ``wall_s`` that went to other processes (or
    the hypervisor)."""
    after = _cpu_seconds()
    if before is None or after is None:
        return None
    other = (after[0] - before[0]) - (after[1] - before[1])
    return round(max(other, 0.0) / (wall_s * os.cpu_count()), 3)


class Trainer:
    """Runs the real trainer, one layout at a time, each layout once (asking again for a layout
    gets the figures of its first run)."""

    def __init__(self, flavor: str, seq_len: int, steps: int, warmup: int = WARMUP_STEPS
                 ) -> None:
        self.flavor, self.seq_len, self.steps, self.warmup = flavor, seq_len, steps, warmup
        self.done: dict[str, dict] = {}

    def one_rank(self, micro: int) -> dict:
        """One rank, the step's rows in ``micro`` accumulation micro-batches."""
        return self._run(f"1 rank, m={micro} accumulated", 1,
                         [f"--training.local_batch_size={ROWS // micro}"])

    def pipeline(self, schedule: str, micro: int) -> dict:
        """PP over ``STAGES`` ranks; all the rows are loaded at once (no accumulation) and the
        schedule splits them into ``micro`` micro-batches."""
        return self._run(f"PP {STAGES} {schedule}, m={micro}", STAGES, [
            f"--parallelism.pipeline_parallel_degree={STAGES}",
            f"--parallelism.pipeline_parallel_schedule={schedule}",
            f"--parallelism.num_pp_microbatches={micro}",
            f"--training.local_batch_size={ROWS}",
        ])

    def data_parallel(self) -> dict:
        """FSDP over 2 ranks, half the rows each."""
        return self._run("DP 2", 2, ["--parallelism.data_parallel_shard_degree=2",
                                     f"--training.local_batch_size={ROWS // 2}"])

    def _run(self, label: str, nproc: int, overrides: list[str]) -> dict:
        if label not in self.done:
            self.done[label] = self._train(nproc, overrides)
        return self.done[label]

    def _train(self, nproc: int, overrides: list[str]) -> dict:
        """One ``torchrun`` (one rank: a plain process): the median step time past the
        warm-up and the per-step losses."""
        flavor = [] if self.flavor == "debugmodel" else [
            f"--model.config_overrides={{flavor: {self.flavor}}}"]
        with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as out:
            # One thread a rank, the 1-rank run's too: every rank computes on one core, so
            # T_1 / p is what a stage would be busy for.
            run = run_trainer(["--module", "recipes.train_qwen3_5_debug", "--config",
                               "train_qwen3_5_debug", *flavor, "--training.steps",
                               str(self.steps), "--training.seq_len", str(self.seq_len),
                               "--training.global_batch_size", str(ROWS),
                               "--checkpoint.folder", out, *overrides],
                              nproc, Path(out) / "metrics.jsonl")
        if "error" in run:
            return {"error": run["error"]}
        steps = run["rows"]
        timed = [r["step_time"] for r in steps if r["step"] > self.warmup]
        return {"step_s": statistics.median(timed), "min_step_s": min(timed),
                "losses": [r["loss"] for r in steps], "process_wall_s": run["process_wall_s"]}


def max_relative_diff(losses: list[float], reference: list[float]) -> float:
    return max(abs(a - b) / abs(b) for a, b in zip(losses, reference, strict=True))


def _failed(*runs: dict) -> dict | None:
    errors = [run["error"] for run in runs if "error" in run]
    return {"error": errors[0]} if errors else None


def bench_bubble(trainer: Trainer, micro_batches: tuple[int, ...],
                 schedules: tuple[str, ...] = SCHEDULES) -> list[dict]:
    rows = []
    for m in micro_batches:
        one = trainer.one_rank(m)
        for schedule in schedules:
            pp = trainer.pipeline(schedule, m)
            row = {"schedule": schedule, "micro_batches": m, "rows_per_micro_batch": ROWS // m,
                   "ideal_bubble": round((STAGES - 1) / (m + STAGES - 1), 4)}
            row.update(_failed(pp, one) or {
                "one_rank_step_ms": _ms(one["step_s"]), "pp_step_ms": _ms(pp["step_s"]),
                "pp_min_step_ms": _ms(pp["min_step_s"]),
                "measured_bubble": round(1 - (one["step_s"] / STAGES) / pp["step_s"], 4),
                "max_loss_rel_diff_vs_1_rank": max_relative_diff(pp["losses"], one["losses"]),
            })
            rows.append(row)
    return rows


def bench_pp_vs_dp(trainer: Trainer, micro: int = PP_VS_DP_MICRO, one_rank_micro: int = 1,
                   with_dp: bool = True) -> dict:
    one = trainer.one_rank(one_rank_micro)
    layouts = {"1 rank": one, f"PP 2 (1F1B, m={micro})": trainer.pipeline("1F1B", micro)}
    if with_dp:
        layouts["DP 2 (FSDP)"] = trainer.data_parallel()
    out: dict = {"layouts": {}}
    for name, run in layouts.items():
        entry = _failed(run) or {"step_ms": _ms(run["step_s"]),
                                 "min_step_ms": _ms(run["min_step_s"])}
        if name != "1 rank" and not _failed(run, one):
            entry["over_1_rank"] = round(run["step_s"] / one["step_s"], 4)
            entry["max_loss_rel_diff_vs_1_rank"] = max_relative_diff(run["losses"], one["losses"])
        out["layouts"][name] = entry
    pp, dp = out["layouts"][f"PP 2 (1F1B, m={micro})"], out["layouts"].get("DP 2 (FSDP)", {})
    if "step_ms" in pp and "step_ms" in dp:
        out["pp2_over_dp2"] = round(pp["step_ms"] / dp["step_ms"], 4)
    return out


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _share(share: float | None) -> str:
    return "an unknown share" if share is None else f"{share:.1%}"


def print_summary(results: dict) -> None:
    print(f"\nqwen3_5 {results['flavor']}, global batch {ROWS} x {results['seq_len']} tokens, "
          f"1 thread a rank, median step_time past step {results['warmup_steps']} of "
          f"{results['steps']} "
          f"({results['mode']} run on {results['cpus']} CPUs; other processes and the "
          f"hypervisor took {_share(results['other_work_cpu_share'])} of their time)")
    if (results["other_work_cpu_share"] or 0) > 0.1:
        print("  warning: other work shared the cores; the figures are noisy")
    print(f"\n1. bubble over p = {STAGES} stages: measured {BUBBLE_FORMULA} (T_1: one rank, the "
          f"same micro-batches accumulated; p2p included), ideal {IDEAL_FORMULA}")
    for row in results["bubble"]:
        head = f"  {row['schedule']:<5} m={row['micro_batches']}"
        if "error" in row:
            print(f"{head}: FAILED, skipped: {row['error']}")
            continue
        print(f"{head}: PP {row['pp_step_ms']:7.1f} ms (min {row['pp_min_step_ms']:7.1f}), "
              f"1 rank {row['one_rank_step_ms']:7.1f} ms -> bubble {row['measured_bubble']:.3f} "
              f"(ideal {row['ideal_bubble']:.3f}); max rel. loss diff "
              f"{row['max_loss_rel_diff_vs_1_rank']:.1e}")
    pvd = results["pp_vs_dp"]
    others = "DP 2 and one rank" if "DP 2 (FSDP)" in pvd["layouts"] else "one rank"
    print(f"\n2. PP 2 against {others}, the same global batch")
    for name, entry in pvd["layouts"].items():
        if "error" in entry:
            print(f"  {name}: FAILED, skipped: {entry['error']}")
            continue
        extra = ""
        if "over_1_rank" in entry:
            extra = (f" -> {entry['over_1_rank']:.3f}x 1 rank's time; max rel. loss diff "
                     f"{entry['max_loss_rel_diff_vs_1_rank']:.1e}")
        print(f"  {name}: {entry['step_ms']:.1f} ms (min {entry['min_step_ms']:.1f}){extra}")
    if "pp2_over_dp2" in pvd:
        print(f"  PP 2 / DP 2: {pvd['pp2_over_dp2']:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--quick", action="store_true", help="a ~1 minute run (m = 4)")
    modes.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--steps", type=int,
                        help="trainer steps a run (default 8; quick 4; smoke 2)")
    parser.add_argument("--seq-len", type=int, help="default 64; smoke 16")
    parser.add_argument("--flavor", choices=("debugmodel", "tiny"),
                        help="default debugmodel; smoke tiny")
    parser.add_argument("--out", help="the JSON (default bench/results/pipeline.json; none "
                                      "with --smoke)")
    opts = parser.parse_args()
    mode = "smoke" if opts.smoke else "quick" if opts.quick else "full"
    settings = dict(SETTINGS[mode])
    settings["steps"] = opts.steps or settings["steps"]
    flavor = opts.flavor or settings.get("flavor", "debugmodel")
    seq_len = opts.seq_len or settings.get("seq_len", 64)
    warmup = settings["warmup"]
    if settings["steps"] <= warmup:
        parser.error(f"--steps must exceed the {warmup} warm-up steps")
    results: dict = {"mode": mode, "flavor": flavor, "seq_len": seq_len, "rows": ROWS,
                     "stages": STAGES, "steps": settings["steps"], "warmup_steps": warmup,
                     "bubble_formula": BUBBLE_FORMULA, "ideal_bubble_formula": IDEAL_FORMULA}
    cpu_before, start = _cpu_seconds(), time.perf_counter()
    trainer = Trainer(flavor, seq_len, settings["steps"], warmup)
    results["bubble"] = bench_bubble(trainer, settings["micro_batches"], settings["schedules"])
    results["pp_vs_dp"] = bench_pp_vs_dp(trainer, settings["pp_vs_dp_micro"],
                                         settings["one_rank_micro"], settings["with_dp"])
    results["process_wall_s"] = {label: run.get("process_wall_s")
                                 for label, run in trainer.done.items()}
    results["wall_s"] = round(time.perf_counter() - start, 1)
    results["other_work_cpu_share"] = _other_work_share(cpu_before, results["wall_s"])
    results["cpus"] = os.cpu_count()
    print_summary(results)
    written = write_results(
        result_path(opts.out, REPO / "bench" / "results" / "pipeline.json", opts.smoke), results)
    print(f"\n{written} ({results['wall_s']} s, {len(trainer.done)} trainer runs)")
    return exit_status(results, opts.smoke)


if __name__ == "__main__":
    raise SystemExit(main())
