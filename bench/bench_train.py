"""Benchmark the trainers against plain torch loops, plus start-up, memory and the GPU kernels.

    .venv/bin/python bench/bench_train.py [--steps 40] [--warmup 3] [--out bench/results/train.json]
                                          [--skip throughput two_ranks startup memory] [--gpu]
                                          [--smoke]

Prints and writes to JSON:

1. trainer overhead on one rank (debug model, CPU, fp32, dummy data, 2,048 tokens a step): the
   whole ``train()`` loop of ``LLMTrainer`` (the legacy front door) and of ``HyperTrainer`` (the
   same YAML converted by the generated adapter), each interleaved step by step with a plain
   loop on a model wrapped like the trainer's (on one rank in fp32: not wrapped) and a plain
   loop in 1-rank FSDP2 (``bench/_trainer_overhead.py``; each entry in two ``torchrun``
   processes of its own, in mirrored order, mean step times over ``--steps`` timed steps each:
   :func:`bench_layout`). ``trainer_over_same_wrapping`` (throughput, target >= 0.99) is what
   the trainer adds; ``fsdp_1_rank_over_unwrapped`` is what wrapping one rank in FSDP2 would
   cost;
2. the same on two ranks under ``torchrun`` (FSDP over 2, TP over 2; target >= 0.98), each entry
   against a plain 2-rank loop with the same parallelism;
3. the time from launching ``torchrun`` to the end of the first optimizer step, through the
   legacy entry point (a YAML) and the new one (a generated recipe);
4. the peak RSS of building the ``0.8b`` flavor on the meta device and materializing it, against
   its fp32 parameter bytes (in a fresh subprocess, so the figure is not polluted by 1.);
5. with ``--gpu`` (a CUDA machine): the 0.8b flavor through the real trainer, bf16, FSDP on one
   rank, ``model.kernels`` torch and fla interleaved: tokens/s, MFU and the speed-up
   (``bench/_gpu_throughput.py``).

Figures, not assertions: nothing here fails on a slow machine. ``--smoke`` proves in seconds
that the sections still run, each once at its smallest: 1. for the legacy entry in one process
(2 timed steps), 3. for the recipe entry, 4. on the debug flavor; 2. (two ranks) is left out --
the same ``bench_layout`` with two ranks -- and it writes no file unless ``--out`` names one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _launch import launcher_command  # this directory (sys.path[0])
from _smoke import SMOKE_HELP, exit_status, result_path, write_results

TARGETS = {"trainer_over_same_wrapping_1_rank": 0.99, "trainer_over_same_wrapping_2_ranks": 0.98}


def bench_layout(layout: str, steps: int, warmup: int, entries: tuple[str, ...] | None = None,
                 mirrored: bool = True, seq_len: int | None = None) -> dict:
    """Both entries (or ``entries``) on one layout, each in ``torchrun`` processes of its own
    (one rank for ``single``, with this process's thread count, a plain process; two ranks of
    one thread each otherwise), in the order legacy, new, new, legacy (unless not
    ``mirrored``: legacy, new).

    One process per measurement: an entry measured second in a process starts with the first
    one's warm allocator and caches, which moved its ratio by 3-4 %. Two per entry, mirrored:
    on this machine a process's ratio drifts 1-4 % with its place in the sequence (the first
    was often the low one), which the mirrored order averages out. An entry's figures pool
    its two processes' step times; ``per_process`` keeps each one's ratio."""
    from bench import _trainer_overhead as overhead

    nproc = 1 if layout == "single" else 2
    threads = os.environ.get("OMP_NUM_THREADS", "2") if nproc == 1 else "1"
    entries = entries or overhead.ENTRIES
    seq_len = seq_len or overhead.SEQ_LEN
    runs: dict[str, list[dict]] = {entry: [] for entry in entries}
    errors: dict[str, str] = {}
    for entry in (*entries, *(reversed(entries) if mirrored else ())):
        with tempfile.TemporaryDirectory() as tmp:
            out_file = Path(tmp) / "result.json"
            cmd = [
                *launcher_command(nproc), str(REPO / "bench" / "_trainer_overhead.py"),
                "--layout", layout, "--entry", entry, "--steps", str(steps),
                "--warmup", str(warmup), "--seq-len", str(seq_len), "--out", str(out_file),
            ]
            env = {**os.environ, "OMP_NUM_THREADS": threads, "HYPER_PARALLEL_DISABLE_TQDM": "1"}
            proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True,
                                  timeout=1800, check=False)
            if proc.returncode != 0:
                errors[entry] = proc.stderr[-2000:]
                continue
            runs[entry].append(json.loads(out_file.read_text()))
    out = {}
    for entry, measured in runs.items():
        if entry in errors:
            out[entry] = {"error": errors[entry]}
            continue
        step_s = {key: statistics.fmean(m[key] for m in measured) for key in measured[0]}
        out[entry] = {
            "mean_step_s": step_s, **overhead.ratios(step_s),
            "per_process": [overhead.ratios(m)["trainer_over_same_wrapping"] for m in measured],
            "tokens_per_s": overhead.GLOBAL_BATCH * seq_len / step_s["trainer"],
        }
    return out


ENTRY_POINTS = {
    "legacy yaml (scripts/train_lm.py)": lambda tmp: [
        str(REPO / "scripts" / "train_lm.py"),
        str(REPO / "examples" / "yaml" / "train_qwen3_5_debug.yaml"),
        "--train.max_steps=1", f"--train.checkpoint.output_dir={tmp}", "--train.logging.log_steps=1",
    ],
    "recipe (-m hyper_parallel.train)": lambda tmp: [
        "-m", "hyper_parallel.train", "--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel",
        "--training.steps", "1", "--checkpoint.folder", tmp, "--checkpoint.interval", "0",
        "--metrics.log_freq", "1",
    ],
}


def bench_startup(entry: str) -> dict:
    """Seconds from launching torchrun (1 rank) to the end of the first optimizer step."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1",
            "--standalone", *ENTRY_POINTS[entry](tmp),
        ]
        env = {**os.environ, "HYPER_PARALLEL_DISABLE_TQDM": "1"}
        start = time.time()
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
                              check=False)
        total = time.time() - start
        if proc.returncode != 0:
            return {"error": proc.stderr[-2000:]}
        # With max_steps=1 the metrics file is written once, right after the first optimizer
        # step, so its modification time is when that step ended.
        first_step_end = (Path(tmp) / "metrics.jsonl").stat().st_mtime
        return {
            "torchrun_to_first_step_s": first_step_end - start,
            "torchrun_total_s": total,
        }


_MEMORY_CODE = """
import json, sys, torch
from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM

def hwm_kib():
    # VmHWM (peak RSS) belongs to this address space: unlike ru_maxrss it is not inherited
    # from the parent across exec, so a big parent process does not pollute the figure.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

base = hwm_kib()
with torch.device("meta"):
    model = Qwen3_5ForCausalLM(FLAVORS[sys.argv[1]])
meta = hwm_kib()
model.to_empty(device="cpu")
model.init_weights()
peak = hwm_kib()
params = sum(p.numel() for p in model.parameters())
print(json.dumps({"params": params, "param_bytes_fp32": params * 4,
                  "rss_before_build_kib": base, "rss_after_meta_build_kib": meta,
                  "peak_rss_kib": peak}))
"""


def bench_memory(flavor: str = "0.8b") -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_CODE, flavor], cwd=REPO, capture_output=True, text=True,
        check=True,
    ).stdout
    info = json.loads(out.strip().splitlines()[-1])
    growth = (info["peak_rss_kib"] - info["rss_before_build_kib"]) * 1024
    info["materialize_growth_over_param_bytes"] = growth / info["param_bytes_fp32"]
    info["peak_rss_over_param_bytes"] = info["peak_rss_kib"] * 1024 / info["param_bytes_fp32"]
    return info


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, help="timed steps (default 40; smoke 2)")
    parser.add_argument("--warmup", type=int, help="untimed steps first (default 3; smoke 1)")
    parser.add_argument("--out", help="the JSON (default bench/results/train.json; none with "
                                      "--smoke)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["throughput", "two_ranks", "startup", "memory"])
    parser.add_argument("--layouts", nargs="+", default=["fsdp", "tp"], choices=["fsdp", "tp"],
                        help="the 2-rank layouts to measure")
    parser.add_argument("--gpu", action="store_true",
                        help="also the 0.8b kernel comparison on CUDA (bench/_gpu_throughput.py)")
    opts = parser.parse_args()
    os.environ.setdefault("HYPER_PARALLEL_DISABLE_TQDM", "1")
    steps = opts.steps or (2 if opts.smoke else 40)
    warmup = opts.warmup if opts.warmup is not None else (1 if opts.smoke else 3)
    skip = set(opts.skip) | ({"two_ranks"} if opts.smoke else set())
    results: dict = {"mode": "smoke" if opts.smoke else "full", "steps": steps, "warmup": warmup,
                     "threads": int(os.environ.get("OMP_NUM_THREADS", "0")) or None,
                     "targets": TARGETS}
    if "throughput" not in skip:
        # The smoke run: one entry (the legacy front door; the recipe's starts in 3.), once.
        results["one_rank"] = bench_layout("single", steps, warmup,
                                           ("legacy",) if opts.smoke else None, not opts.smoke,
                                           32 if opts.smoke else None)
    if "two_ranks" not in skip:
        results["two_ranks"] = {
            layout: bench_layout(layout, steps, warmup) for layout in opts.layouts
        }
    if "startup" not in skip:
        entries = [e for e in ENTRY_POINTS if not opts.smoke or e.startswith("recipe")]
        results["startup"] = {entry: bench_startup(entry) for entry in entries}
    if "memory" not in skip:
        flavor = "debugmodel" if opts.smoke else "0.8b"
        results[f"memory_{flavor.replace('.', '_')}"] = bench_memory(flavor)
    if opts.gpu:
        from bench._gpu_throughput import gpu_throughput

        results["gpu_0_8b"] = gpu_throughput("0.8b")
    print(json.dumps(results, indent=2))
    _print_ratios(results)
    print(write_results(result_path(opts.out, REPO / "bench" / "results" / "train.json",
                                    opts.smoke), results))
    return exit_status(results, opts.smoke)


def _print_ratios(results: dict) -> None:
    """One line per measured ratio, with its target (throughput: higher is faster)."""
    rows = []

    def per_process(r: dict) -> str:
        return ", ".join(f"{x:.3f}" for x in r["per_process"])

    for entry, r in results.get("one_rank", {}).items():
        if "error" in r:
            rows.append((f"1 rank, {entry}: failed", float("nan"), None))
            continue
        label = (f"1 rank, {entry}: trainer / plain with the same wrapping "
                 f"(per process: {per_process(r)})")
        rows.append((label, r["trainer_over_same_wrapping"],
                     TARGETS["trainer_over_same_wrapping_1_rank"]))
        label = (f"1 rank, {entry}: plain in 1-rank FSDP2 / plain unwrapped "
                 "(what the wrapping would cost)")
        rows.append((label, r["fsdp_1_rank_over_unwrapped"], None))
    for layout, by_entry in results.get("two_ranks", {}).items():
        for entry, r in by_entry.items():
            if "error" in r:
                rows.append((f"2 ranks {layout}: failed", float("nan"), None))
                continue
            label = (f"2 ranks {layout}, {entry}: trainer / plain with the same parallelism "
                     f"(per process: {per_process(r)})")
            rows.append((label, r["trainer_over_same_wrapping"],
                         TARGETS["trainer_over_same_wrapping_2_ranks"]))
    for label, ratio, target in rows:
        verdict = "" if target is None else f"  (target >= {target}: {'met' if ratio >= target else 'MISSED'})"
        print(f"{label}: {ratio:.3f}{verdict}")


if __name__ == "__main__":
    raise SystemExit(main())
