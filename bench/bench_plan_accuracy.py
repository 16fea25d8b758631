"""How right the planner's step times are: predicted against measured, layout by layout.

    .venv/bin/python bench/bench_plan_accuracy.py [--steps 6] [--rounds 2] [--seq-len 64]
                                                  [--smoke] [--out bench/results/plan_accuracy.json]
                                                  [--fake-world N [--gpu NAME] [--hardware FILE]]

On this machine, priced with its own calibrated profiles (``bench/results/
hardware_cpu-gloo-<n>.json``, one per rank count: the ranks share the cores), each layout of
:data:`LAYOUTS` -- 2 to 4 gloo ranks of the Qwen3.5 debug model (the MoE one for expert
parallelism) on synthetic tokens, ``ROWS`` sequences a step -- is

1. preflighted with ``work=True`` in this process and its step predicted
   (:func:`hyper_parallel.plan.timing.predict` on one node of ``n`` ranks), then
2. trained for real (``torchrun``, ``--steps`` steps, one thread a rank) ``--rounds`` times,
   the layouts' runs interleaved (round 1 runs each layout once, then round 2, ...), its step
   time the fastest ``step_time`` of the trainer's ``metrics.jsonl`` past the first
   ``WARMUP`` steps of all its runs: the machine is shared, and other jobs on its cores only
   ever add time. The spread (the median steady step over the fastest, minus 1) says how
   much they added.

``--fake-world N`` (the issue's GPU form; on a CPU, a dry run of it): rank 0 of each layout
of :func:`fake_world_layouts` -- N ranks of the 0.8b recipe on a GPU, of the debug recipe on a
CPU -- runs on this one device, the other ranks a fake process group (``_plan_fake_world.py``, a
process per run), so its collectives cost nothing and a step is the rank's compute and the
engine's host work around its collectives. The prediction it is held to is the role's
``compute`` (preflighted at world N with ``work=True``, priced on the ``--gpu``'s datasheet
profile or ``--hardware FILE``; a CPU's dry run on the 2-rank profile), written to
``plan_accuracy_fake_world_<N>.json``.

It prints and writes each layout's predicted and measured seconds and the error
``predicted / measured - 1``, the mean absolute error, whether the layout predicted fastest is
the one measured fastest and the rank correlation (Spearman) of the two orders, and draws
predicted against measured (``plan_accuracy.svg`` beside the JSON). The issue's goal: a mean
error within 25 % and the best layout predicted best. Figures, not assertions: a loaded machine
moves the measured side, and the calibration's (the load averages at the start and the end are
written with the figures).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _launch import run_trainer  # this directory
from _smoke import SMOKE_HELP, write_results

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
ROWS = 8
WARMUP = 2
DENSE = ("--module", "recipes.train_qwen3_5_debug", "--config", "train_qwen3_5_debug",
         "--debug.check_nan_inf=false")
MOE = ("--module", "bench._moe_recipes", "--config", "moe_1_rank")

#: name -> (ranks, recipe, overrides). Each trains ROWS sequences a step.
LAYOUTS: dict[str, tuple[int, tuple[str, ...], tuple[str, ...]]] = {
    "fsdp2": (2, DENSE, ("--parallelism.data_parallel_shard_degree=2",
                         f"--training.local_batch_size={ROWS // 2}")),
    "fsdp2 ac-full": (2, DENSE, ("--parallelism.data_parallel_shard_degree=2",
                                 f"--training.local_batch_size={ROWS // 2}",
                                 "--activation_checkpoint.mode=full")),
    "fsdp4": (4, DENSE, ("--parallelism.data_parallel_shard_degree=4",
                         f"--training.local_batch_size={ROWS // 4}")),
    "hsdp 2x2": (4, DENSE, ("--parallelism.data_parallel_replicate_degree=2",
                            "--parallelism.data_parallel_shard_degree=2",
                            f"--training.local_batch_size={ROWS // 4}")),
    "tp2": (2, DENSE, ("--parallelism.tensor_parallel_degree=2",
                       f"--training.local_batch_size={ROWS}")),
    "pp2 1F1B": (2, DENSE, ("--parallelism.pipeline_parallel_degree=2",
                            "--parallelism.pipeline_parallel_schedule=1F1B",
                            "--parallelism.num_pp_microbatches=4",
                            f"--training.local_batch_size={ROWS}")),
    "pp2 interleaved": (2, DENSE, ("--parallelism.pipeline_parallel_degree=2",
                                   "--parallelism.pipeline_parallel_schedule=Interleaved1F1B",
                                   "--parallelism.num_pp_microbatches=4",
                                   f"--training.local_batch_size={ROWS}")),
    "cp2": (2, DENSE, ("--parallelism.context_parallel_degree=2",
                       f"--training.local_batch_size={ROWS}")),
    "ep2 (moe)": (2, MOE, ("--parallelism.expert_parallel_degree=2",
                           f"--training.local_batch_size={ROWS}")),
}
SMOKE_LAYOUTS = ("fsdp2", "tp2")
#: ``--fake-world N`` on a GPU: the recipe each layout is built from (the 0.8b flavor, on
#: synthetic tokens); on the CPU (the dry run) the debug recipe above.
GPU_RECIPE = ("--module", "qwen3_5_v2", "--config", "qwen3_5_v2_0_8b",
              "--dataloader.dataset", "dummy")


def fake_world_layouts(world: int) -> dict[str, tuple[str, ...]]:
    """``--fake-world N``'s layouts of ``world`` ranks (name -> overrides), one row a
    data-parallel rank: FSDP with and without full checkpointing, HSDP, and tensor and context
    parallelism inside FSDP. Not a pipeline (a fake group's receives return at once, so its
    bubble would not be there to measure) nor expert parallelism (a dense recipe)."""
    half = world // 2
    shard, replicate = "--parallelism.data_parallel_shard_degree", \
        "--parallelism.data_parallel_replicate_degree"
    rows = "--training.local_batch_size"
    return {
        f"fsdp{world}": (f"{shard}={world}", f"{rows}=1"),
        f"fsdp{world} ac-full": (f"{shard}={world}", f"{rows}=1",
                                 "--activation_checkpoint.mode=full"),
        f"hsdp 2x{half}": (f"{replicate}=2", f"{shard}={half}", f"{rows}=1"),
        f"fsdp{half} x tp2": (f"{shard}={half}", "--parallelism.tensor_parallel_degree=2",
                              f"{rows}=2"),
        f"fsdp{half} x cp2": (f"{shard}={half}", "--parallelism.context_parallel_degree=2",
                              f"{rows}=2"),
    }


def _argv(recipe: tuple[str, ...], overrides: tuple[str, ...], seq_len: int, steps: int
          ) -> list[str]:
    return [*recipe, f"--training.global_batch_size={ROWS}", f"--training.seq_len={seq_len}",
            f"--training.steps={steps}", *overrides]


def _predict(world: int, argv: list[str], hardware, gpu: str = "h100-80gb"):
    """``(the prediction of argv's step on world ranks of one node, preflight's seconds)``:
    preflighted with ``work=True`` and priced on ``hardware``."""
    from hyper_parallel.config.manager import ConfigManager
    from hyper_parallel.plan.timing import predict
    from hyper_parallel.preflight.gpus import GPUS
    from hyper_parallel.preflight.run import preflight
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    config = ConfigManager(root_type=HyperTrainer.Config).parse_args(argv)
    start = time.perf_counter()
    report = preflight(config, GPUS[gpu], world=world, work=True)
    return predict(config, report, 1, world, hardware), round(time.perf_counter() - start, 1)


def predict_layout(ranks: int, argv: list[str]) -> dict:
    from hyper_parallel.plan.hardware import load

    p, seconds = _predict(ranks, argv, load(str(RESULTS / f"hardware_cpu-gloo-{ranks}.json")))
    return {"predicted_s": p.step_seconds, "compute_s": p.compute,
            "exposed_comm_s": p.exposed_comm, "bubble_s": p.bubble,
            "largest_cost": p.largest_cost, "preflight_s": seconds}


def run_layout(ranks: int, argv: list[str]) -> dict:
    """One training run of a layout: its steady steps' times (past :data:`WARMUP`)."""
    with tempfile.TemporaryDirectory(prefix="bench-plan-") as out:
        run = run_trainer([*argv, "--checkpoint.folder", out, "--dump_folder", out], ranks,
                          Path(out) / "metrics.jsonl")
        if "error" in run:  # the MoE recipes write under dump_folder
            return {"error": run["error"]}
    return {"step_times": [r["step_time"] for r in run["rows"] if r["step"] > WARMUP],
            "process_wall_s": run["process_wall_s"]}


def measured(runs: list[dict]) -> dict:
    """A layout's step from its runs: the fastest steady step of all of them (other jobs on
    the cores only ever add time), with the spread -- the median step over the fastest,
    minus 1 -- and each run's median."""
    times = [t for run in runs for t in run["step_times"]]
    fastest = min(times)
    return {"measured_s": fastest, "spread": statistics.median(times) / fastest - 1,
            "run_medians_s": [round(statistics.median(run["step_times"]), 4) for run in runs],
            "process_wall_s": round(sum(run["process_wall_s"] for run in runs), 1)}


def predict_fake_world(world: int, argv: list[str], gpu: str, hardware) -> dict:
    """Rank 0's predicted compute of ``argv`` on ``world`` ranks: what a step under a fake
    process group costs (its collectives cost nothing there)."""
    p, seconds = _predict(world, argv, hardware, gpu)
    return {"predicted_s": p.compute, "compute_s": p.compute,
            "exposed_comm_s_not_measured": p.exposed_comm, "largest_cost": p.largest_cost,
            "preflight_s": seconds}


def run_fake_world(world: int, argv: list[str], steps: int) -> dict:
    """One run of rank 0 of ``argv`` on ``world`` ranks, the others a fake process group
    (``_plan_fake_world.py``, a process of its own): its steady steps' times."""
    import json
    import subprocess

    from _launch import error_line, launch_env

    with tempfile.TemporaryDirectory(prefix="bench-plan-fake-") as out:
        result = Path(out) / "steps.json"
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).with_name("_plan_fake_world.py")),
             "--world", str(world), "--steps", str(steps), "--out", str(result), "--", *argv,
             "--dump_folder", out],
            cwd=REPO, env=launch_env(), capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not result.exists():
            return {"error": error_line(proc.stderr + proc.stdout)}
        run = json.loads(result.read_text())
    return {"step_times": run["step_times"][WARMUP:], "device": run["device"],
            "process_wall_s": round(time.perf_counter() - start, 2)}


def _spearman(a: list[float], b: list[float]) -> float:
    def ranks(xs):
        order = sorted(range(len(xs)), key=xs.__getitem__)
        out = [0] * len(xs)
        for r, i in enumerate(order):
            out[i] = r
        return out
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def figure(rows: list[dict], path: Path) -> None:
    """Predicted against measured, as an SVG (no plotting library needed)."""
    size, pad = 420, 50
    top = max(max(r["predicted_s"], r["measured_s"]) for r in rows) * 1.1

    def xy(pred, meas):
        return pad + meas / top * (size - 2 * pad), size - pad - pred / top * (size - 2 * pad)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{size + 160}" height="{size}">',
             f'<line x1="{pad}" y1="{size - pad}" x2="{size - pad}" y2="{pad}" stroke="#999"/>',
             f'<text x="{size / 2 - 40}" y="{size - 10}">measured (s)</text>',
             f'<text x="5" y="{pad - 20}">predicted (s); grey: y = x, 0..{top:.2f} s</text>']
    for r in rows:
        x, y = xy(r["predicted_s"], r["measured_s"])
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="#36c"/>'
                     f'<text x="{x + 6:.1f}" y="{y + 4:.1f}" font-size="11">{r["layout"]}</text>')
    parts.append("</svg>\n")
    path.write_text("\n".join(parts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2,
                        help="runs of each layout, interleaved: round 1 runs every layout, "
                        "then round 2, ...")
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--out", default=None)
    parser.add_argument("--fake-world", type=int, default=0, metavar="N",
                        help="rank 0 of layouts of N ranks on this one device (a GPU: the 0.8b "
                        "recipe), the other ranks a fake process group: each step's compute "
                        "against the predicted compute (the collectives cost nothing there)")
    parser.add_argument("--gpu", default="h100-80gb",
                        help="--fake-world: the GPU preflight and the datasheet profile assume")
    parser.add_argument("--hardware", default=None,
                        help="--fake-world: a measured profile instead of the GPU's datasheet")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    steps = WARMUP + 1 if args.smoke else args.steps
    wall = time.perf_counter()
    load_start = os.getloadavg()  # other work on the cores moves the measured side
    argvs: dict[str, list[str]] = {}
    predictions: dict[str, tuple[dict, Callable[[], dict]]] = {}  # name -> (row, its prediction)
    if args.fake_world:
        from hyper_parallel.plan.hardware import datasheet, load

        cuda = torch.cuda.is_available()
        layouts = fake_world_layouts(args.fake_world)
        names = tuple(layouts)[:1] if args.smoke else tuple(layouts)
        # A CPU has no datasheet: its dry run prices with the 2-rank profile, whose ranks
        # shared the cores where this one process runs alone (its figures prove the path, they
        # measure no accuracy).
        hardware = (load(args.hardware) if args.hardware else datasheet(args.gpu) if cuda
                    else load(str(RESULTS / "hardware_cpu-gloo-2.json")))
        recipe = GPU_RECIPE if cuda else DENSE
        for name in names:
            argvs[name] = [*recipe, f"--training.global_batch_size={args.fake_world}",
                           f"--training.steps={steps}", *layouts[name],
                           *(() if cuda else (f"--training.seq_len={args.seq_len}",))]
            predictions[name] = (
                {"layout": name, "ranks": args.fake_world, "fake_world": True},
                functools.partial(predict_fake_world, args.fake_world, argvs[name], args.gpu,
                                  hardware))
    else:
        names = SMOKE_LAYOUTS if args.smoke else tuple(LAYOUTS)
        for name in names:
            ranks, recipe, overrides = LAYOUTS[name]
            argvs[name] = _argv(recipe, overrides, args.seq_len, steps)
            predictions[name] = ({"layout": name, "ranks": ranks},
                                 functools.partial(predict_layout, ranks, argvs[name]))
    rows = []
    for row, prediction in predictions.values():
        try:
            row.update(prediction())
        except Exception as exc:  # noqa: BLE001 - reported, the others still run
            row["error"] = f"predict: {type(exc).__name__}: {exc}"[:300]
        rows.append(row)
    # The layouts' runs interleaved, round after round: a stretch of load on the shared cores
    # falls on every layout alike, not on the few that ran during it.
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for _ in range(1 if args.smoke else args.rounds):
        for row in rows:
            if "error" in row:
                continue
            run = (run_fake_world(args.fake_world, argvs[row["layout"]], steps)
                   if args.fake_world else run_layout(row["ranks"], argvs[row["layout"]]))
            if "error" in run:
                row["error"] = run["error"]
            else:
                runs[row["layout"]].append(run)
    for row in rows:
        if "error" not in row:
            row.update(measured(runs[row["layout"]]))
            row["error_rel"] = row["predicted_s"] / row["measured_s"] - 1
        print(f"{row['layout']:16s} " + (
            f"predicted {row['predicted_s']:.3f} s  measured {row['measured_s']:.3f} s "
            f"(spread {row['spread']:.0%})  error {row['error_rel']:+.1%}  "
            f"({row['largest_cost']})" if "error_rel" in row else row["error"]), flush=True)
    good = [r for r in rows if "error_rel" in r]
    summary: dict = {"layouts": rows, "rows_per_step": args.fake_world or ROWS,
                     "seq_len": args.seq_len, "fake_world": args.fake_world,
                     "steps": steps, "rounds": 1 if args.smoke else args.rounds, "wall_s": round(time.perf_counter() - wall, 1),
                     "cpus": os.cpu_count(), "load_average_start": load_start,
                     "load_average_end": os.getloadavg()}
    if len(good) >= 2:
        best_predicted = min(good, key=lambda r: r["predicted_s"])["layout"]
        best_measured = min(good, key=lambda r: r["measured_s"])["layout"]
        summary.update({
            "mean_abs_error": statistics.fmean(abs(r["error_rel"]) for r in good),
            "best_predicted": best_predicted, "best_measured": best_measured,
            "best_predicted_best": best_predicted == best_measured,
            "spearman": _spearman([r["predicted_s"] for r in good],
                                  [r["measured_s"] for r in good]),
            "spread_median": statistics.median(r["spread"] for r in good),
            "spread_max": max(r["spread"] for r in good),
        })
        print(f"mean |error| {summary['mean_abs_error']:.1%}; best predicted {best_predicted}, "
              f"best measured {best_measured}; Spearman {summary['spearman']:.2f}; "
              f"spread of the measured steps (median over fastest - 1): median "
              f"{summary['spread_median']:.0%}, largest {summary['spread_max']:.0%}")
    default = (f"plan_accuracy_fake_world_{args.fake_world}.json" if args.fake_world
               else "plan_accuracy.json")
    out = Path(args.out) if args.out else None if args.smoke else RESULTS / default
    print(write_results(out, summary))
    if out is not None and good:
        figure(good, out.with_suffix(".svg"))
    return 0 if good else 1


if __name__ == "__main__":
    raise SystemExit(main())
