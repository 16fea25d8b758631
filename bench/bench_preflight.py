"""Preflight's speed and accuracy, side by side in one run.

    .venv/bin/python bench/bench_preflight.py [--smoke] [--out bench/results/preflight.json]
    .venv/bin/python bench/bench_preflight.py --only "FSDP 2, 4 micro-batches" [--only ...]

1. **Speed**: ``python -m hyper_parallel.preflight`` of the shipped MoE recipes at their world
   sizes (``qwen3_5_moe_397b_a17b``: 128 ranks; the issue's bar: under 30 s on the 2-core
   machine), the time per rank role and in all, and each role's figures (GiB).
2. **Accuracy**: preflight's rank-0 figures against a real step of the same layout on CPU ranks
   with gloo (``bench/_preflight_truth.py``: the profiler's allocator totals): the parameter,
   gradient and optimizer bytes (equal or not) and the step's peak, predicted / measured (the
   bar: within 10 %), for the layouts of ``tests/torch/st/preflight/test_preflight_accuracy.py``
   and FSDP 2 with 4 gradient-accumulation micro-batches a step, reduce-scattered each (the
   default) and held unsharded across them (``parallelism.fsdp_defer_gradient_sync``): the
   real step runs all 4, preflight steps 2 / 3 (:data:`ACCUMULATION`).

3. **A fleet**: ``python -m hyper_parallel.codegen --from-yaml DIR --preflight`` over 100 YAMLs
   made from the shipped examples the way a team's sweeps grow (learning rates, seeds, run
   lengths and output folders; micro-batch sizes and sequence lengths, which change the
   memory): the conversion and every preflight, in one command (the issue's bar: under 10
   minutes), with how many distinct simulations the fleet needed.

``--smoke``: the debug recipe's preflight, one one-rank layout and a fleet of 2 made from the debug
example (value-only variants: one simulation), seconds long.
``--only LAYOUT``: those accuracy rows alone (``bench/results/preflight_only.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _smoke import SMOKE_HELP, exit_status, result_path, write_results

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HYPER_PARALLEL_PLATFORM", "torch")

GIB = 1 << 30
SPEED = {
    "full": [("qwen3_5_moe", "qwen3_5_moe_397b_a17b"), ("qwen3_5_moe", "qwen3_5_moe_122b_a10b"),
             ("qwen3_5_moe", "qwen3_5_moe_35b_a3b")],
    "smoke": [("qwen3_5_v2", "qwen3_5_v2_debugmodel")],
}


def bench_speed(recipes: list[tuple[str, str]]) -> list[dict]:
    from hyper_parallel.preflight.check import run_preflight

    out = []
    for module, config in recipes:
        start = time.perf_counter()
        try:
            result = run_preflight(["--module", module, "--config", config], suggest=False)
        except Exception as exc:  # noqa: BLE001 - a bench reports a part that failed
            out.append({"recipe": config, "error": f"{type(exc).__name__}: {exc}"})
            continue
        report = result.json
        out.append({
            "recipe": config,
            "world_size": report["world_size"],
            "seconds": round(time.perf_counter() - start, 1),
            "roles": [{"ranks": f"{r['ranks'][0]}-{r['ranks'][-1]}", "seconds": r["seconds"],
                       "total_gib": round(r["total_bytes"] / GIB, 2), "verdict": r["verdict"],
                       "measured_depth": r["measured_depth"]} for r in report["roles"]],
        })
    return out


def _truth(world: int, layouts: list[list[str]]) -> list[dict]:
    args: list[str] = []
    for layout in layouts:
        args += [*(["--next"] if args else []), *layout]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "truth.json"
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world),
               "--standalone", str(REPO / "bench" / "_preflight_truth.py"), str(out), *args]
        subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO)
        return [ranks[0] for ranks in json.loads(out.read_text())]


def bench_accuracy(layouts: dict[str, tuple[int, tuple[str, ...]]]) -> list[dict]:
    from hyper_parallel.config.manager import ConfigManager
    from hyper_parallel.preflight.run import measure_role
    from hyper_parallel.preflight.simulate import simulation_config, step_added_bytes
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    rows = []
    for world in sorted({w for w, _ in layouts.values()}):
        names = [n for n, (w, _) in layouts.items() if w == world]
        try:
            truths = _truth(world, [list(layouts[n][1]) for n in names])
        except subprocess.CalledProcessError as exc:
            rows += [{"layout": n, "error": exc.stderr[-2000:]} for n in names]
            continue
        for name, real in zip(names, truths):
            config = ConfigManager(root_type=HyperTrainer.Config).parse_args(
                list(layouts[name][1]))
            memory, _ = measure_role(simulation_config(config), 0, world, 1.0)
            added = step_added_bytes(memory)
            rows.append({
                "layout": name, "ranks": world,
                "held_bytes_equal": (memory.params_bytes, memory.grads_bytes,
                                     memory.optimizer_bytes) == (
                    real["params_bytes"], real["grads_bytes"], real["optimizer_bytes"]),
                "params_bytes": memory.params_bytes,
                "step_peak_predicted_bytes": added,
                "step_peak_measured_bytes": real["step_peak_bytes"],
                "ratio": round(added / real["step_peak_bytes"], 4),
                # The profiler's running total, gloo's buffers and missed frees in it (what this
                # bench measured before: bench/_preflight_truth.step_peak_of_trace).
                "profiler_total_peak_bytes": real["profiler_total_peak_bytes"],
            })
    return rows


#: Gradient accumulation under FSDP (bf16 compute, fp32 reduction, as the GPU recipes): 2 ranks
#: x 2 rows x 4 micro-batches a step.
_ACCUMULATED = ("--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_fsdp2",
                "--training.mixed_precision_param=bfloat16", "--training.global_batch_size=16")
ACCUMULATION = {
    "FSDP 2, 4 micro-batches": (2, _ACCUMULATED),
    "FSDP 2, 4 held unsharded": (2, (*_ACCUMULATED,
                                     "--parallelism.fsdp_defer_gradient_sync=true")),
}

EXAMPLES = REPO / "examples" / "yaml"


def fleet_yamls(folder: Path, count: int, examples: list[Path] | None = None) -> None:
    """``count`` YAMLs in ``folder``: the shipped examples (or ``examples``) in turn, the
    ``k``-th turn with its own learning rate, seed, run length and output folder (value-only:
    one simulation for all) and one of four memory settings (micro-batch 1 or 2, the file's
    sequence length or twice it: a simulation each)."""
    import yaml

    examples = examples or sorted(EXAMPLES.glob("*.yaml"))
    for i in range(count):
        text = examples[i % len(examples)].read_text()
        data = yaml.safe_load(text)
        turn = i // len(examples)
        train = data.setdefault("train", {})
        accelerator = train.setdefault("accelerator", {})
        if accelerator.get("dp_shard") == -1:
            # "Every rank": the world of the launch line in the file's header.
            world = int(re.search(r"--nproc_per_node[= ](\d+)", text).group(1))
            others = math.prod(accelerator.get(axis, 1) or 1
                               for axis in ("dp_replicate", "tp", "cp", "pp", "ep"))
            accelerator["dp_shard"] = world // others
        optimizer = train.setdefault("optimizer", {})
        optimizer["lr"] = optimizer.get("lr", 1e-4) * (1, 1.5, 2, 3)[turn % 4]
        train["seed"] = turn
        train["max_steps"] = 100 * (1 + turn % 3)
        train.setdefault("checkpoint", {})["output_dir"] = f"runs/{i:03d}"
        if (turn // 2) % 2:  # two sequences a micro-batch, the same accumulation
            train["micro_batch_size"] = 2 * train.get("micro_batch_size", 1)
            train["global_batch_size"] = 2 * train.get("global_batch_size", 1)
        if (turn // 4) % 2:
            data.setdefault("data", {})["max_seq_len"] = 2 * data["data"].get("max_seq_len", 2048)
        (folder / f"run_{i:03d}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def bench_fleet(count: int, examples: list[Path] | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-preflight-fleet-") as tmp:
        folder = Path(tmp) / "fleet"
        folder.mkdir()
        fleet_yamls(folder, count, examples)
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "hyper_parallel.codegen", "--from-yaml", str(folder),
             "-o", str(Path(tmp) / "registry.py"), "--preflight", "-q"],
            cwd=REPO, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
    rows = [line.split() for line in done.stdout.splitlines()
            if line.startswith("  run_") and ": " not in line]
    figures = {tuple(row[1:]) for row in rows}
    result = {"yamls": count, "seconds": round(seconds, 1), "exit_status": done.returncode,
              "rows": len(rows), "distinct_results": len(figures),
              "verdicts": sorted({row[-1] for row in rows})}
    if done.returncode not in (0, 1) or len(rows) != count:
        result["error"] = (done.stdout + done.stderr)[-3000:]
    return result


def print_summary(results: dict) -> None:
    print("1. preflight time (suggestions off)")
    for row in results["speed"]:
        if "error" in row:
            print(f"  {row['recipe']}: FAILED {row['error']}")
            continue
        roles = ", ".join(f"ranks {r['ranks']} {r['seconds']:.1f} s {r['total_gib']} GiB "
                          f"{r['verdict']}" for r in row["roles"])
        print(f"  {row['recipe']} at {row['world_size']} ranks: {row['seconds']:.1f} s ({roles})")
    print("\n2. preflight / a real CPU step (gloo, profiler), rank 0")
    for row in results["accuracy"]:
        if "error" in row:
            print(f"  {row['layout']}: FAILED")
            continue
        print(f"  {row['layout']:<22} bytes {'equal' if row['held_bytes_equal'] else 'DIFFER'}"
              f"  step peak {row['step_peak_predicted_bytes'] / 2**20:8.2f} MiB / "
              f"{row['step_peak_measured_bytes'] / 2**20:8.2f} MiB = {row['ratio']:.3f}"
              f"  (profiler's total {row['profiler_total_peak_bytes'] / 2**20:.2f} MiB)")
    fleet = results["fleet"]
    if fleet is None:
        return
    print(f"\n3. --from-yaml --preflight of {fleet['yamls']} YAMLs: {fleet['seconds']:.1f} s "
          f"(exit {fleet['exit_status']}; {fleet['rows']} rows, {fleet['distinct_results']} "
          f"distinct figures; verdicts {', '.join(fleet['verdicts'])})")


def main() -> int:
    sys.path.insert(0, str(REPO / "tests" / "torch" / "st" / "preflight"))
    from test_preflight_accuracy import LAYOUTS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--out", help="the JSON (default bench/results/preflight.json; none "
                                      "with --smoke)")
    parser.add_argument("--only", action="append", metavar="LAYOUT",
                        help="the accuracy rows of this layout alone (repeatable; e.g. 'FSDP 2, "
                             "4 micro-batches'), without the speed and fleet sections; the "
                             "JSON goes to bench/results/preflight_only.json unless --out "
                             "names one")
    opts = parser.parse_args()
    if not opts.smoke:
        # Timed as a first run pays: every role simulated, none read from an earlier process's
        # measurements (docs/preflight.md). A smoke run checks the machinery, not the time.
        os.environ["HYPER_PARALLEL_PREFLIGHT_CACHE"] = "off"
    mode = "smoke" if opts.smoke else "full"
    layouts = ({"1 rank, selective AC": LAYOUTS["1 rank, selective AC"]} if opts.smoke
               else {**LAYOUTS, **ACCUMULATION})
    if opts.only:
        unknown = sorted(set(opts.only) - set(layouts))
        if unknown:
            parser.error(f"--only {unknown}: not a layout of this bench; the layouts: "
                         f"{', '.join(layouts)}")
        layouts = {name: layouts[name] for name in opts.only}
        mode += " (--only)"
    start = time.perf_counter()
    results = {"mode": mode, "cpus": os.cpu_count(),
               "speed": [] if opts.only else bench_speed(SPEED[mode]),
               "accuracy": bench_accuracy(layouts),
               "fleet": None if opts.only else (
                   bench_fleet(2, [EXAMPLES / "train_qwen3_5_debug.yaml"]) if opts.smoke
                   else bench_fleet(100))}
    results["wall_s"] = round(time.perf_counter() - start, 1)
    print_summary(results)
    default = "preflight_only.json" if opts.only else "preflight.json"
    written = write_results(
        result_path(opts.out, REPO / "bench" / "results" / default, opts.smoke), results)
    print(f"\n{written} ({results['wall_s']} s)")
    return exit_status(results, opts.smoke)


if __name__ == "__main__":
    sys.exit(main())
