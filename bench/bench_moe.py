"""Benchmark the Qwen3.5 MoE model: our training step against transformers', grouped GEMM against
the per-expert loop, and expert parallelism over 2 ranks against 1, side by side in one run.

    .venv/bin/python bench/bench_moe.py [--quick | --smoke] [--threads N]
                                        [--out bench/results/moe.json]
                                        [--skip train_step experts expert_parallel]

Prints and writes to JSON:

1. ``train_step``: one training step (forward, fp32 cross-entropy on next-token targets,
   backward, ``torch.optim.AdamW``; no clipping) of the ``qwen3_5_moe`` ``debugmodel`` flavor
   on a batch of 4 x 256 tokens, ours with ``experts_implementation`` ``grouped_mm`` and
   ``loop`` against ``transformers.Qwen3_5MoeForCausalLM`` with every experts implementation
   that runs on a CPU (``eager``, HF's per-expert loop; ``batched_mm``; ``grouped_mm``; the
   CUDA-only ``deepgemm`` / ``sonicmoe`` are left out). Every model starts from the same
   weights (HF's init, loaded into ours with ``Qwen3_5MoeStateDictAdapter.from_hf``) and trains
   the same batches; the first logits of each are checked against HF ``eager``'s. Warm-up steps
   are not timed; then every round runs one step of each model, in an order rotated each round,
   so machine noise falls on all alike. Median step ms; ``ours / fastest transformers`` (goal
   < 1).
2. ``experts``: ``GroupedExperts`` alone, forward + backward (``x`` and both weights) on the rows
   a top-k router sends it (random router logits, ``permute_by_expert``), ``grouped_mm``
   against ``loop`` interleaved on one module: the debug model's layer (8 experts, top 2,
   hidden 32, width 32), and two wider ones, 8 experts top 2 and 64 experts top 8 (hidden 256,
   width 128). Median ms and ``grouped_mm / loop``.
3. ``expert_parallel``: the real trainer (``torchrun -m hyper_parallel.train --module
   bench._moe_recipes``, ``bench/_moe_recipes.py``) on the same debug model and global batch:
   one rank (``--threads`` threads) against expert parallelism over 2 ranks and, for
   reference, FSDP over 2 ranks (one thread per rank: the same cores). Median ``step_time``
   of ``metrics.jsonl`` past the warm-up steps, pooled over the processes of a layout (two
   each, in mirrored order; one with ``--quick``); each layout's losses are checked against
   the one-rank run's. A layout that fails is reported with its error's last line and skipped.

Figures, not assertions: nothing here fails on a slow machine. ``--quick`` is a ~30 s run;
``--smoke`` proves in seconds that every section still runs (a batch of 2 x 32, one round, the
debug layer's experts alone, the 1-rank trainer run for 2 steps: the same code as EP 2's, whose
recipe ``tests/bench`` parses, without its two ranks' processes) and writes no file unless
``--out`` names one.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _launch import run_trainer  # this directory (sys.path[0])
from _smoke import SMOKE_HELP, exit_status, result_path, write_results

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FLAVOR = "debugmodel"
BATCH, SEQ_LEN = 4, 256
LR = 1e-3
#: transformers' experts implementations with a CPU path (``deepgemm``, ``sonicmoe``: CUDA).
HF_IMPLEMENTATIONS = ("eager", "batched_mm", "grouped_mm")
OURS_IMPLEMENTATIONS = ("grouped_mm", "loop")
#: ``GroupedExperts`` shapes: (label, experts, top_k, hidden, intermediate).
EXPERT_SHAPES = (
    ("debugmodel layer: 8 experts top 2, hidden 32, width 32", 8, 2, 32, 32),
    ("8 experts top 2, hidden 256, width 128", 8, 2, 256, 128),
    ("64 experts top 8, hidden 256, width 128", 64, 8, 256, 128),
)
#: expert-parallel figure: recipe -> ranks (``bench/_moe_recipes.py``).
LAYOUTS = {"1 rank": ("moe_1_rank", 1), "EP 2": ("moe_ep2", 2), "FSDP 2": ("moe_fsdp2", 2)}

SETTINGS = {
    # batch/rounds/warmup: train_step; expert_*: experts; ep_*: expert_parallel (ep_seq_len:
    # None keeps the recipe's SEQ_LEN).
    "full": {"batch": (BATCH, SEQ_LEN), "warmup": 3, "rounds": 15, "expert_reps": 15,
             "expert_tokens": BATCH * SEQ_LEN, "expert_shapes": len(EXPERT_SHAPES),
             "ep_steps": 20, "ep_warmup": 5, "ep_processes": 2, "ep_seq_len": None,
             "ep_layouts": ("1 rank", "EP 2", "FSDP 2")},
    "quick": {"batch": (BATCH, SEQ_LEN), "warmup": 1, "rounds": 4, "expert_reps": 4,
              "expert_tokens": 256, "expert_shapes": len(EXPERT_SHAPES), "ep_steps": 6,
              "ep_warmup": 2, "ep_processes": 1, "ep_seq_len": None,
              "ep_layouts": ("1 rank", "EP 2")},
    # Every section's code at its smallest; the trainer run on one rank (EP 2 runs the same
    # code, in two torchrun ranks: 4-5 CPU seconds more).
    "smoke": {"batch": (2, 32), "warmup": 1, "rounds": 1, "expert_reps": 1, "expert_tokens": 64,
              "expert_shapes": 1, "ep_steps": 2, "ep_warmup": 1, "ep_processes": 1,
              "ep_seq_len": 32, "ep_layouts": ("1 rank",)},
}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


# --------------------------------------------------------------------------- 1. training step


def _hf_config():
    """``Qwen3_5MoeTextConfig`` of the flavor, from our config's ``config.json`` dict."""
    import transformers

    from hyper_parallel.models.qwen3_5_moe import flavor_config

    hf = flavor_config(FLAVOR).to_hf_dict()
    hf = {k: v for k, v in hf.items() if k not in ("architectures", "model_type")}
    return transformers.Qwen3_5MoeTextConfig(**hf)


def build_models() -> dict:
    """name -> (model, forward returning logits): HF's per implementation, ours per
    implementation, all with the weights of one HF init."""
    import torch
    import transformers

    from hyper_parallel.models.qwen3_5_moe import Qwen3_5MoeStateDictAdapter, flavor_config

    hf_config = _hf_config()
    torch.manual_seed(0)
    reference = transformers.Qwen3_5MoeForCausalLM._from_config(
        copy.deepcopy(hf_config), experts_implementation="eager")
    weights = {k: v.detach().clone() for k, v in reference.state_dict().items()}
    models = {}
    for impl in HF_IMPLEMENTATIONS:
        model = transformers.Qwen3_5MoeForCausalLM._from_config(
            copy.deepcopy(hf_config), experts_implementation=impl)
        model.load_state_dict(weights)
        if model.config._experts_implementation != impl:
            raise RuntimeError(f"transformers picked {model.config._experts_implementation!r} "
                               f"for experts_implementation={impl!r}")
        # No KV cache in training: what a training loop asks for, and less work for HF.
        models[f"transformers {impl}"] = (
            model, lambda x, m=model: m(input_ids=x, use_cache=False).logits)
    cfg = flavor_config(FLAVOR)
    ours_weights = Qwen3_5MoeStateDictAdapter.from_hf(weights, cfg)
    for impl in OURS_IMPLEMENTATIONS:
        model = cfg.replace(experts_implementation=impl).build()
        model.load_state_dict(ours_weights)
        models[f"ours {impl}"] = (model, model)
    for model, _ in models.values():
        model.train()
    return models


def bench_train_step(settings: dict) -> dict:
    import torch
    import torch.nn.functional as F

    models = build_models()
    vocab = _hf_config().vocab_size
    gen = torch.Generator().manual_seed(1)
    batch, seq_len = settings["batch"]
    batches = [torch.randint(0, vocab, (batch, seq_len), generator=gen) for _ in range(4)]

    # Same function: every model's first logits against HF eager's (same weights, same batch).
    with torch.no_grad():
        logits = {name: fwd(batches[0]) for name, (_, fwd) in models.items()}
    ref = logits["transformers eager"]
    max_diff = {name: float((out - ref).abs().max()) for name, out in logits.items()}
    del logits

    steppers, times = {}, {name: [] for name in models}
    for name, (model, fwd) in models.items():
        opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
        steppers[name] = _stepper(model, fwd, opt, batches, F)
    names = list(models)
    for _ in range(settings["warmup"]):
        for name in names:
            steppers[name]()
    for r in range(settings["rounds"]):
        for name in names[r % len(names):] + names[: r % len(names)]:
            start = time.perf_counter()
            steppers[name]()
            times[name].append(time.perf_counter() - start)

    median = {name: statistics.median(t) for name, t in times.items()}
    hf_best = min((n for n in names if n.startswith("transformers")), key=median.get)
    out = {"batch": [batch, seq_len], "flavor": FLAVOR, "rounds": settings["rounds"],
           "warmup_steps": settings["warmup"], "fastest_transformers": hf_best, "entries": {}}
    for name in names:
        out["entries"][name] = {
            "median_step_ms": _ms(median[name]), "min_step_ms": _ms(min(times[name])),
            "tokens_per_s": round(batch * seq_len / median[name], 1),
            "over_fastest_transformers": round(median[name] / median[hf_best], 4),
            "max_abs_logits_diff_vs_hf_eager": max_diff[name],
        }
    for impl in OURS_IMPLEMENTATIONS:
        out[f"ours_{impl}_over_fastest_transformers"] = (
            out["entries"][f"ours {impl}"]["over_fastest_transformers"])
    return out


def _stepper(model, fwd, opt, batches, F):
    """One training step over the next of ``batches`` (next-token targets, last one ignored)."""
    import torch

    index = iter(range(1 << 30))

    def step() -> None:
        batch = batches[next(index) % len(batches)]
        logits = fwd(batch)
        targets = torch.cat([batch[:, 1:], torch.full_like(batch[:, :1], -100)], dim=1)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                               targets.reshape(-1), ignore_index=-100)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


# --------------------------------------------------------------------------- 2. the experts alone


def bench_experts(settings: dict) -> dict:
    import torch

    from hyper_parallel.models.qwen3_5_moe.moe import GroupedExperts, permute_by_expert

    tokens, reps = settings["expert_tokens"], settings["expert_reps"]
    out = {}
    for label, experts, top_k, hidden, inter in EXPERT_SHAPES[:settings["expert_shapes"]]:
        torch.manual_seed(0)
        module = GroupedExperts(experts, hidden, inter, "grouped_mm")
        # The rows a softmax router over random logits routes (roughly balanced, not exactly).
        indices = torch.topk(torch.randn(tokens, experts).softmax(-1), top_k, dim=-1).indices
        order, counts = permute_by_expert(indices, experts)
        x = torch.randn(tokens, hidden)[order // top_k].contiguous().requires_grad_(True)
        grad = torch.randn(x.shape[0], hidden)
        if not module._grouped_mm_runs(x):  # the module's own rule for taking the kernel
            out[label] = {"skipped": "torch._grouped_mm does not take these operands (a row "
                                     "stride not a multiple of 16 bytes): grouped_mm would run "
                                     "the loop"}
            continue

        run = _experts_runner(module, x, counts, grad)
        check = {impl: run(impl) for impl in ("grouped_mm", "loop")}  # also the warm-up
        diff = float((check["grouped_mm"] - check["loop"]).abs().max())
        times = {"grouped_mm": [], "loop": []}
        for r in range(reps):
            for impl in (("grouped_mm", "loop") if r % 2 == 0 else ("loop", "grouped_mm")):
                start = time.perf_counter()
                run(impl)
                times[impl].append(time.perf_counter() - start)
        median = {impl: statistics.median(t) for impl, t in times.items()}
        out[label] = {
            "experts": experts, "top_k": top_k, "hidden": hidden, "intermediate": inter,
            "rows": int(x.shape[0]), "rows_per_expert_min_max": [int(counts.min()),
                                                                 int(counts.max())],
            "median_ms": {impl: _ms(t) for impl, t in median.items()},
            "grouped_mm_over_loop": round(median["grouped_mm"] / median["loop"], 4),
            "max_abs_output_diff": diff,
        }
    return out


def _experts_runner(module, x, counts, grad):
    """``run(impl)``: one forward + backward of ``module`` with ``implementation=impl`` (the
    gradients of the previous run dropped first); returns the output."""

    def run(impl: str):
        module.implementation = impl
        x.grad = None
        for p in module.parameters():
            p.grad = None
        y = module(x, counts)
        y.backward(grad)
        return y.detach()

    return run


# --------------------------------------------------------------------------- 3. expert parallelism


def run_layout(layout: str, steps: int, threads: int, seq_len: int | None = None) -> dict:
    """One training run of ``layout`` under ``torchrun``; its ``metrics.jsonl`` rows."""
    recipe, nproc = LAYOUTS[layout]
    shorter = [] if seq_len is None else ["--training.seq_len", str(seq_len)]
    with tempfile.TemporaryDirectory(prefix="bench-moe-") as tmp:
        return run_trainer(["--module", "bench._moe_recipes", "--config", recipe,
                            "--training.steps", str(steps), "--dump_folder", tmp, *shorter],
                           nproc, Path(tmp) / "outputs" / "metrics.jsonl",
                           threads=threads if nproc == 1 else 1)


def bench_expert_parallel(settings: dict, threads: int) -> dict:
    layouts = settings["ep_layouts"]
    steps, warmup = settings["ep_steps"], settings["ep_warmup"]
    order = list(layouts)
    if settings["ep_processes"] > 1:
        order += list(reversed(layouts))  # mirrored: a place in the sequence weighs on all alike
    runs: dict[str, list[dict]] = {layout: [] for layout in layouts}
    for layout in order:
        if runs[layout] and "error" in runs[layout][-1]:
            continue  # failed once: do not wait for it to fail again
        runs[layout].append(run_layout(layout, steps, threads, settings["ep_seq_len"]))
    out = {"steps": steps, "warmup_steps": warmup,
           "batch": [BATCH, settings["ep_seq_len"] or SEQ_LEN],
           "threads_1_rank": threads, "threads_per_rank_2_ranks": 1, "layouts": {}}
    base_losses = None
    for layout in layouts:
        recipe, nproc = LAYOUTS[layout]
        failed = [r for r in runs[layout] if "error" in r]
        if failed:
            out["layouts"][layout] = {"recipe": recipe, "ranks": nproc,
                                      "error": failed[0]["error"]}
            continue
        timed = [r["step_time"] for run in runs[layout] for r in run["rows"]
                 if r["step"] > warmup]
        losses = [r["loss"] for r in runs[layout][0]["rows"]]
        entry = {
            "recipe": recipe, "ranks": nproc, "processes": len(runs[layout]),
            "median_step_ms": _ms(statistics.median(timed)), "min_step_ms": _ms(min(timed)),
            "per_process_median_step_ms": [
                _ms(statistics.median([r["step_time"] for r in run["rows"] if r["step"] > warmup]))
                for run in runs[layout]],
            "process_wall_s": [run["process_wall_s"] for run in runs[layout]],
            "losses": losses,
        }
        if layout == "1 rank":
            base_losses = losses
        elif base_losses is not None:
            entry["max_abs_loss_diff_vs_1_rank"] = max(
                abs(a - b) for a, b in zip(losses, base_losses))
        out["layouts"][layout] = entry
    one = out["layouts"].get("1 rank", {})
    for layout, entry in out["layouts"].items():
        if layout != "1 rank" and "median_step_ms" in entry and "median_step_ms" in one:
            entry["over_1_rank"] = round(entry["median_step_ms"] / one["median_step_ms"], 4)
    return out


# --------------------------------------------------------------------------- summary


def print_summary(results: dict) -> None:
    print(f"\nqwen3_5_moe {FLAVOR}, {results['threads']} threads ({results['mode']} run; 1-minute "
          f"load average {results['load_average_1min_start']} at the start, "
          f"{results['load_average_1min']} at the end, on {results['cpus']} CPUs)")
    if max(results["load_average_1min_start"], results["load_average_1min"]) > 0.5 * results["cpus"]:
        print("  warning: the machine was busy with other work; the figures are noisy (the min "
              "columns and per-process figures show how much)")
    ts = results.get("train_step")
    if ts:
        print(f"\n1. training step (fwd + bwd + AdamW), batch {ts['batch'][0]} x "
              f"{ts['batch'][1]}, median of "
              f"{ts['rounds']} interleaved rounds")
        width = max(map(len, ts["entries"]))
        print(f"  {'':<{width}}  {'step ms':>9}  {'min ms':>9}  {'tokens/s':>9}  "
              f"{'/ fastest HF':>12}  {'max |logits - HF eager|':>23}")
        for name, e in ts["entries"].items():
            print(f"  {name:<{width}}  {e['median_step_ms']:>9.1f}  {e['min_step_ms']:>9.1f}  "
                  f"{e['tokens_per_s']:>9.0f}  "
                  f"{e['over_fastest_transformers']:>12.3f}  "
                  f"{e['max_abs_logits_diff_vs_hf_eager']:>23.2e}")
        for impl in OURS_IMPLEMENTATIONS:
            ratio = ts[f"ours_{impl}_over_fastest_transformers"]
            print(f"  ours {impl} / fastest transformers ({ts['fastest_transformers']}): "
                  f"{ratio:.3f}  (goal < 1: {'met' if ratio < 1 else 'MISSED'})")
    ex = results.get("experts")
    if ex:
        print("\n2. GroupedExperts forward + backward, grouped_mm vs loop (median ms)")
        for label, e in ex.items():
            if "skipped" in e:
                print(f"  {label}: skipped ({e['skipped']})")
                continue
            ms = e["median_ms"]
            print(f"  {label}, {e['rows']} rows: grouped_mm {ms['grouped_mm']:.2f}, loop "
                  f"{ms['loop']:.2f} -> grouped_mm / loop {e['grouped_mm_over_loop']:.3f} "
                  f"(max |diff| {e['max_abs_output_diff']:.1e})")
    ep = results.get("expert_parallel")
    if ep:
        print(f"\n3. trainer step time (metrics.jsonl step_time, median past step "
              f"{ep['warmup_steps']} of {ep['steps']}), global batch {ep['batch'][0]} x "
              f"{ep['batch'][1]}")
        for layout, e in ep["layouts"].items():
            if "error" in e:
                print(f"  {layout} ({e['ranks']} ranks): FAILED, skipped: {e['error']}")
                continue
            extra = ""
            if "over_1_rank" in e:
                extra = (f" -> {e['over_1_rank']:.3f}x 1 rank's time; max |loss - 1 rank's| "
                         f"{e.get('max_abs_loss_diff_vs_1_rank', float('nan')):.1e}")
            print(f"  {layout} ({e['ranks']} rank{'s' if e['ranks'] > 1 else ''}): "
                  f"{e['median_step_ms']:.1f} ms (min {e['min_step_ms']:.1f}; per process "
                  f"{', '.join(f'{m:.1f}' for m in e['per_process_median_step_ms'])}){extra}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--quick", action="store_true", help="a ~30 s run")
    modes.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--threads", type=int,
                        default=int(os.environ.get("OMP_NUM_THREADS", "0")) or os.cpu_count(),
                        help="torch threads in this process and of the 1-rank trainer run "
                             "(default: OMP_NUM_THREADS, else every CPU)")
    parser.add_argument("--out", help="the JSON (default bench/results/moe.json; none with "
                                      "--smoke)")
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["train_step", "experts", "expert_parallel"])
    opts = parser.parse_args()
    os.environ.setdefault("HYPER_PARALLEL_DISABLE_TQDM", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import torch

    torch.set_num_threads(opts.threads)
    mode = "smoke" if opts.smoke else "quick" if opts.quick else "full"
    settings = SETTINGS[mode]
    results: dict = {"mode": mode, "threads": opts.threads, "settings": settings,
                     "torch": torch.__version__}
    try:
        import transformers

        results["transformers"] = transformers.__version__
    except ImportError:
        results["transformers"] = None
    results["load_average_1min_start"] = round(os.getloadavg()[0], 2)
    start = time.perf_counter()
    sections = {"train_step": lambda: bench_train_step(settings),
                "experts": lambda: bench_experts(settings),
                "expert_parallel": lambda: bench_expert_parallel(settings, opts.threads)}
    results["section_wall_s"] = {}
    for name, bench in sections.items():
        if name not in opts.skip:
            section_start = time.perf_counter()
            results[name] = bench()
            results["section_wall_s"][name] = round(time.perf_counter() - section_start, 1)
    results["wall_s"] = round(time.perf_counter() - start, 1)
    results["load_average_1min"] = round(os.getloadavg()[0], 2)
    results["cpus"] = os.cpu_count()
    print_summary(results)
    written = write_results(
        result_path(opts.out, REPO / "bench" / "results" / "moe.json", opts.smoke), results)
    per_section = ", ".join(f"{k} {v} s" for k, v in results["section_wall_s"].items())
    print(f"\n{written} ({results['wall_s']} s: {per_section})")
    return exit_status(results, opts.smoke)


if __name__ == "__main__":
    raise SystemExit(main())
