"""Benchmark context parallelism (CP): activation memory per rank at cp = 1, 2, 4, and the
step time of cp 2 against one rank with the share of its collectives, side by side in one run.

    .venv/bin/python bench/bench_context_parallel.py [--quick | --smoke] [--seq-len 8192]
                                                    [--time-seq-len 4096]
                                                    [--out bench/results/context_parallel.json]

Every figure comes from the model itself, not the trainer: the Qwen3.5 ``debugmodel`` flavor
(8 layers: 6 Gated DeltaNet, 2 full attention; hidden 256; 4 query / 2 KV heads; GDN 2 key / 4
value heads), seeded, fp32, ``kernels="torch"``, one row of synthetic tokens, one thread a rank.
A layout is one process (cp = 1, run plainly) or ``cp`` processes under ``torchrun`` (gloo),
this file with ``--worker``: every rank builds the same model, calls :func:`apply_cp` on a 1-D
``cp`` mesh and runs forward on its contiguous shard ``[r S/cp, (r+1) S/cp)`` of the row with
the global positions; its loss is the summed cross-entropy of its shard's logits (labels shifted
before the split) over the row's ``S - 1`` targets, so the ranks' losses and gradients add up to
the one-rank mean; backward.

1. ``memory`` (at ``--seq-len``, default 8192 tokens; ``--quick`` 2048): one forward + backward
   per layout. The activation memory of a rank is what autograd saves for backward during the
   forward (model and loss), counted with ``torch.autograd.graph.saved_tensors_hooks``: each
   distinct storage once (``untyped_storage().data_ptr()``, its ``nbytes``), the parameters'
   storages skipped (they are the weights). It is split by where it was saved (inside the full-
   attention mixers, inside the Gated DeltaNet mixers, the rest: embedding, norms, MLPs, head,
   loss). Beside it the growth of the rank's peak RSS (``ru_maxrss``) over the step, which also
   holds the transient buffers, the gradients and the allocator's slack. Layouts: cp 1; cp 2
   with Ulysses attention and both Gated DeltaNet forms (``linear`` ``ulysses``: all-to-all
   over heads; ``p2p``: state passing), and all-gather attention; cp 4 with Ulysses attention
   (the 2 KV heads repeated to 4) and ``p2p`` (the 2 GDN key heads do not split 4 ways; a
   layout :func:`cp_head_problems` refuses is reported as such and not run). Per rank: the
   largest rank's figure and ``/ cp 1`` (the issue's goal: <= 0.6 at cp 2). Correctness, cheaply:
   each layout's loss (summed over the ranks) and gradient norm (the ranks' gradients summed,
   as data parallelism over the cp ranks would) against cp 1's, relative (loss goal <= 1e-5).
2. ``step_time`` (at ``--time-seq-len``, default 4096 tokens, ``--quick`` 1024: half the memory
   length, as a forward + backward of the debug model at 8192 tokens takes ~16 s on one core):
   forward + backward of the whole model at cp 1 (one process, one thread) and cp 2 (two
   processes, one thread each: the machine's two cores), the same row; a step is timed from a
   barrier, its time the slowest rank's; the median over ``repeats`` after ``warmup`` steps.
   cp 2 runs Ulysses attention and Ulysses GDN fused (one all-to-all per direction and mixer)
   and with ``async_comm`` (one per projection), interleaved step by step in one process pair;
   in the full run also the ``p2p`` GDN form. The time inside the CP collectives is measured by
   wrapping ``ContextParallel._all_to_all`` / ``gather_sequence`` / ``gather_ranks`` (the
   library is not modified): the forward call's wall time, and in backward the time from the
   gradient reaching the collective's output to its input (the transposed collective; two
   identity autograd functions mark it), the union of the intervals; it includes the wait for
   the slower rank. With ``async_comm`` every Ulysses all-to-all is issued without waiting (the
   wait comes at the result's first use, overlapping what is computed meanwhile) and goes
   untimed, forward and backward: that row shows its step time only. Printed: step time cp 1, cp 2, speed-up ``cp1 / cp2`` (2 is
   ideal) and the collectives' share of the cp 2 step (mean over ranks).

A layout that fails is reported with its error's last line and skipped. Figures, not
assertions: nothing here fails on a slow machine. ``other_work_cpu_share`` says whether other
work shared the cores (as in ``bench_pipeline.py``). The full run takes about 3 to 4 minutes on
two cores, ``--quick`` under one. ``--smoke`` proves in seconds that both figures still run: 64
tokens, cp 1 and its one 2-rank layout, cp 2 with state passing (the form whose fold the GPU
check measures), one timed step each, and no file unless ``--out`` names one.
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

from _launch import TIMEOUT_S, error_line, launch_env, torchrun_command  # this directory
from _smoke import SMOKE_HELP, exit_status, result_path, write_results
from bench_pipeline import _cpu_seconds, _ms, _other_work_share, _share

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FLAVOR = "debugmodel"
SEED = 1234
LOSS_RTOL = 1e-5
MEMORY_GOAL_CP2 = 0.6
MIB = 2**20
REGIONS = ("full_attention", "gated_deltanet", "rest")
COLLECTIVES = ("_all_to_all", "gather_sequence", "gather_ranks")

#: name -> (cp, attention, linear). Memory runs all of them; the first is the reference.
LAYOUTS = {
    "cp 1": (1, None, None),
    "cp 2 ulysses / ulysses": (2, "ulysses", "ulysses"),
    "cp 2 ulysses / p2p": (2, "ulysses", "p2p"),
    "cp 2 allgather / ulysses": (2, "allgather", "ulysses"),
    "cp 4 ulysses / p2p": (4, "ulysses", "p2p"),
}
#: Shown (not run) for why cp 4 needs ``p2p``: its head problems.
REFUSED = {"cp 4 ulysses / ulysses": (4, "ulysses", "ulysses")}

SETTINGS = {
    # layouts: those run (the first, cp 1, is the reference); time_layouts: layout -> the
    # variants timed in it (interleaved step by step).
    "full": {"seq_len": 8192, "time_seq_len": 4096, "warmup": 1, "repeats": 3,
             "layouts": tuple(LAYOUTS),
             "time_layouts": {"cp 1": ("plain",), "cp 2 ulysses / ulysses": ("fused", "async"),
                              "cp 2 ulysses / p2p": ("fused",)}},
    "quick": {"seq_len": 2048, "time_seq_len": 1024, "warmup": 1, "repeats": 2,
              "layouts": tuple(LAYOUTS),
              "time_layouts": {"cp 1": ("plain",), "cp 2 ulysses / ulysses": ("fused", "async")}},
    "smoke": {"seq_len": 64, "time_seq_len": 64, "warmup": 0, "repeats": 1,
              "layouts": ("cp 1", "cp 2 ulysses / p2p"),
              "time_layouts": {"cp 1": ("plain",), "cp 2 ulysses / p2p": ("fused",)}},
}


# ====================================================================== the worker (one rank)
class _Clock:
    """Intervals spent inside the CP collectives, forward and backward (while ``enabled``)."""

    def __init__(self) -> None:
        self.enabled = False
        self.reset()

    def reset(self) -> None:
        self.intervals: dict[str, list[tuple[float, float]]] = {"forward": [], "backward": []}

    def seconds(self, phase: str) -> float:
        """The length of the union of ``phase``'s intervals."""
        total, end = 0.0, float("-inf")
        for a, b in sorted(self.intervals[phase]):
            if b > end:
                total += b - max(a, end)
                end = b
        return total


def _install_timers(clock: _Clock) -> None:
    """Wrap the collectives of :class:`ContextParallel` (the class, in this process only)."""
    import torch

    from hyper_parallel.models.qwen3_5.context_parallel import ContextParallel

    class Enter(torch.autograd.Function):
        """Identity on the collective's input; its backward ends the transposed collective."""

        @staticmethod
        def forward(ctx, x, token):
            ctx.token = token
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            if ctx.token:
                clock.intervals["backward"].append((ctx.token.pop(), time.perf_counter()))
            return grad, None

    class Exit(torch.autograd.Function):
        """Identity on the collective's output; its backward starts the transposed one."""

        @staticmethod
        def forward(ctx, x, token):
            ctx.token = token
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            ctx.token.append(time.perf_counter())
            return grad, None

    def timed(original):
        def wrapper(self, x, **kwargs):
            if not clock.enabled or not kwargs.get("wait", True):
                # An async all-to-all's result waits at its first use; an identity wrapped
                # around it would wait here and undo the overlap, so it goes untimed.
                return original(self, x, **kwargs)
            token: list[float] = []
            x = Enter.apply(x, token)
            start = time.perf_counter()
            out = original(self, x, **kwargs)
            clock.intervals["forward"].append((start, time.perf_counter()))
            return Exit.apply(out, token)

        return wrapper

    for name in COLLECTIVES:
        setattr(ContextParallel, name, timed(getattr(ContextParallel, name)))


def _batch(vocab: int, seq: int, rank: int, cp: int):
    """This rank's ``(ids, positions, labels)`` shard of the seeded row, and its target count."""
    import torch

    generator = torch.Generator().manual_seed(SEED + 1)
    ids = torch.randint(0, vocab, (1, seq), generator=generator)
    labels = torch.full_like(ids, -100)
    labels[:, :-1] = ids[:, 1:]
    positions = torch.arange(seq).unsqueeze(0)
    shard = slice(rank * seq // cp, (rank + 1) * seq // cp)
    return (ids[:, shard], positions[:, shard], labels[:, shard]), seq - 1


def _loss(model, batch, targets: int):
    import torch.nn.functional as F

    ids, positions, labels = batch
    logits = model(ids, positions)
    return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100,
                           reduction="sum") / targets


def _memory_step(model, batch, targets: int, cp: int) -> dict:
    """One forward + backward: the bytes saved for backward (by region), the peak RSS growth,
    the loss summed over the ranks and the norm of the ranks' summed gradients."""
    import resource

    import torch
    import torch.distributed as dist

    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = dict.fromkeys(REGIONS, 0)
    seen: set[int] = set()
    region = ["rest"]

    def pack(t):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in weights and ptr not in seen:
            seen.add(ptr)
            saved[region[0]] += storage.nbytes()
        return t

    hooks = []
    for name, module in model.named_modules():
        kind = ("full_attention" if name.endswith(".self_attn") else
                "gated_deltanet" if name.endswith(".linear_attn") else None)
        if kind:
            hooks.append(module.register_forward_pre_hook(
                lambda _m, _a, kind=kind: region.__setitem__(0, kind)))
            hooks.append(module.register_forward_hook(
                lambda _m, _a, _o: region.__setitem__(0, "rest")))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = _loss(model, batch, targets)
    loss.backward()
    wall = time.perf_counter() - start
    rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) * 1024
    for hook in hooks:
        hook.remove()
    total_loss = loss.detach().double().reshape(1)
    grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    if cp > 1:
        dist.all_reduce(total_loss)
        dist.all_reduce(grads)
    model.zero_grad(set_to_none=True)
    return {"saved_bytes": sum(saved.values()), "saved_bytes_by_region": saved,
            "peak_rss_growth_bytes": rss_growth, "loss": total_loss.item(),
            "grad_norm": grads.double().norm().item(), "step_s": round(wall, 3)}


def _timing(model, plan, batch, targets: int, variants: list[str], warmup: int, repeats: int,
            clock: _Clock) -> dict:
    """Forward + backward ``warmup + repeats`` times per variant, interleaved: this rank's step
    seconds and collective seconds (forward, backward) of each timed step."""
    import torch.distributed as dist

    out = {v: {"step_s": [], "collective_forward_s": [], "collective_backward_s": []}
           for v in variants}
    for step in range(warmup + repeats):
        for variant in variants:
            if plan is not None:
                plan.async_comm = variant == "async"
                dist.barrier()
            clock.reset()
            clock.enabled = plan is not None
            start = time.perf_counter()
            _loss(model, batch, targets).backward()
            elapsed = time.perf_counter() - start
            clock.enabled = False
            model.zero_grad(set_to_none=True)
            if step >= warmup:
                out[variant]["step_s"].append(elapsed)
                out[variant]["collective_forward_s"].append(clock.seconds("forward"))
                out[variant]["collective_backward_s"].append(clock.seconds("backward"))
    return out


def worker(spec: dict) -> None:
    """One rank of a layout (``spec`` from :func:`launch`); rank 0 writes every rank's report
    to ``spec["result"]``."""
    from datetime import timedelta

    import torch

    from hyper_parallel.models.qwen3_5.configuration import FLAVORS
    from hyper_parallel.models.qwen3_5.context_parallel import apply_cp
    from hyper_parallel.models.qwen3_5.model import Qwen3_5ForCausalLM

    torch.set_num_threads(1)
    cp = spec["cp"]
    rank, mesh, plan = 0, None, None
    if cp > 1:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        dist.init_process_group("gloo", timeout=timedelta(seconds=TIMEOUT_S))
        rank = dist.get_rank()
        mesh = init_device_mesh("cpu", (cp,), mesh_dim_names=("cp",))
    config = FLAVORS[FLAVOR].replace(kernels="torch")
    torch.manual_seed(SEED)
    model = Qwen3_5ForCausalLM(config)
    model.init_weights()
    if cp > 1:
        plan = apply_cp(model, mesh, attention=spec["attention"], linear=spec["linear"])
    clock = _Clock()
    _install_timers(clock)
    batch, targets = _batch(config.vocab_size, spec["seq_len"], rank, cp)
    report = {"rank": rank, "memory": _memory_step(model, batch, targets, cp)}
    if spec["variants"]:
        batch, targets = _batch(config.vocab_size, spec["time_seq_len"], rank, cp)
        report["timing"] = _timing(model, plan, batch, targets, spec["variants"],
                                   spec["warmup"], spec["repeats"], clock)
    reports = [report]
    if cp > 1:
        reports = [None] * cp
        dist.all_gather_object(reports, report)
    if rank == 0:
        Path(spec["result"]).write_text(json.dumps(reports))
    if cp > 1:
        dist.destroy_process_group()


# ====================================================================== the driver
def launch(layout: str, settings: dict) -> dict:
    """Run ``layout`` (memory, then its timed variants): every rank's report, or an error."""
    cp, attention, linear = LAYOUTS[layout]
    with tempfile.TemporaryDirectory(prefix="bench-cp-") as tmp:
        spec = {"cp": cp, "attention": attention, "linear": linear,
                "seq_len": settings["seq_len"], "time_seq_len": settings["time_seq_len"],
                "variants": list(settings["time_layouts"].get(layout, ())),
                "warmup": settings["warmup"], "repeats": settings["repeats"],
                "result": str(Path(tmp) / "result.json")}
        script = [str(Path(__file__).resolve()), "--worker", json.dumps(spec)]
        cmd = [*(torchrun_command(cp) if cp > 1 else [sys.executable]), *script]
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=REPO, env=launch_env(1), capture_output=True,
                                  text=True, timeout=TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {TIMEOUT_S} s"}
        result = Path(spec["result"])
        if proc.returncode != 0 or not result.exists():
            return {"error": error_line(proc.stderr + proc.stdout)}
        return {"ranks": json.loads(result.read_text()),
                "process_wall_s": round(time.perf_counter() - start, 1)}


def head_problems(layout: tuple) -> list[str]:
    from hyper_parallel.models.qwen3_5.configuration import FLAVORS
    from hyper_parallel.models.qwen3_5.context_parallel_rules import cp_head_problems

    cp, attention, linear = layout
    return cp_head_problems(FLAVORS[FLAVOR], cp, 1, attention=attention, linear=linear)


def _rel(value: float, reference: float) -> float:
    return abs(value - reference) / abs(reference)


def memory_rows(runs: dict) -> dict:
    reference = runs["cp 1"]["ranks"][0]["memory"] if "ranks" in runs["cp 1"] else None
    rows = {}
    for layout, run in runs.items():
        cp, attention, linear = LAYOUTS[layout]
        row: dict = {"cp": cp, "attention": attention, "linear": linear}
        if "error" in run:
            rows[layout] = {**row, **run}
            continue
        mems = [r["memory"] for r in run["ranks"]]
        peak = max(mems, key=lambda m: m["saved_bytes"])
        row.update({
            "saved_bytes_per_rank": [m["saved_bytes"] for m in mems],
            "saved_bytes_max_rank": peak["saved_bytes"],
            "saved_bytes_by_region_max_rank": peak["saved_bytes_by_region"],
            "peak_rss_growth_bytes_per_rank": [m["peak_rss_growth_bytes"] for m in mems],
            "loss": mems[0]["loss"], "grad_norm": mems[0]["grad_norm"],
            "step_s_per_rank": [m["step_s"] for m in mems],
        })
        if reference is not None:
            row["saved_over_cp1"] = round(peak["saved_bytes"] / reference["saved_bytes"], 4)
            row["rss_growth_over_cp1"] = round(
                max(row["peak_rss_growth_bytes_per_rank"]) / reference["peak_rss_growth_bytes"], 4)
            row["loss_rel_diff_vs_cp1"] = _rel(mems[0]["loss"], reference["loss"])
            row["grad_norm_rel_diff_vs_cp1"] = _rel(mems[0]["grad_norm"], reference["grad_norm"])
        rows[layout] = row
    return rows


def timing_rows(runs: dict, settings: dict) -> dict:
    out: dict = {}
    base = None
    for layout, variants in settings["time_layouts"].items():
        run = runs[layout]
        for variant in variants:
            name = layout if variant == "plain" else f"{layout}, {variant}"
            if "error" in run:
                out[name] = {"error": run["error"]}
                continue
            per_rank = [r["timing"][variant] for r in run["ranks"]]
            # A step's time: its slowest rank's (they start at a barrier).
            steps = [max(ts) for ts in zip(*(r["step_s"] for r in per_rank))]
            step = statistics.median(steps)
            fwd = statistics.mean(statistics.median(r["collective_forward_s"]) for r in per_rank)
            bwd = statistics.mean(statistics.median(r["collective_backward_s"]) for r in per_rank)
            entry = {"cp": LAYOUTS[layout][0], "step_ms": _ms(step),
                     "min_step_ms": _ms(min(steps))}
            if entry["cp"] > 1:
                entry.update({"collective_forward_ms": _ms(fwd),
                              "collective_backward_ms": _ms(bwd),
                              "collective_share": round((fwd + bwd) / step, 4)})
            if base is None:
                base = step
            else:
                entry["speedup_vs_cp1"] = round(base / step, 3)
            out[name] = entry
    return out


def print_summary(results: dict) -> None:
    print(f"\nqwen3_5 {results['flavor']} (kernels=torch, fp32), batch 1, 1 thread a rank "
          f"({results['mode']} run on {results['cpus']} CPUs; other processes and the "
          f"hypervisor took {_share(results['other_work_cpu_share'])} of their time)")
    if (results["other_work_cpu_share"] or 0) > 0.1:
        print("  warning: other work shared the cores; the figures are noisy")
    print(f"\n1. activation memory per rank at {results['seq_len']} tokens: bytes saved for "
          "backward (distinct storages, weights excluded), the largest rank; goal at cp 2: "
          f"<= {MEMORY_GOAL_CP2}x cp 1")
    print(f"  {'layout':<26} {'saved MiB':>9} {'x cp1':>6} {'attn':>7} {'gdn':>7} {'rest':>7} "
          f"{'RSS+ MiB':>9} {'x cp1':>6} {'loss rel':>9} {'|g| rel':>9}")
    for layout, row in results["memory"].items():
        if "error" in row:
            print(f"  {layout:<26} FAILED, skipped: {row['error']}")
            continue
        by = row["saved_bytes_by_region_max_rank"]
        rss = max(row["peak_rss_growth_bytes_per_rank"])
        print(f"  {layout:<26} {row['saved_bytes_max_rank'] / MIB:9.1f} "
              f"{row.get('saved_over_cp1', float('nan')):6.3f} "
              f"{by['full_attention'] / MIB:7.1f} {by['gated_deltanet'] / MIB:7.1f} "
              f"{by['rest'] / MIB:7.1f} {rss / MIB:9.1f} "
              f"{row.get('rss_growth_over_cp1', float('nan')):6.3f} "
              f"{row.get('loss_rel_diff_vs_cp1', 0.0):9.1e} "
              f"{row.get('grad_norm_rel_diff_vs_cp1', 0.0):9.1e}")
    for layout, problems in results["refused"].items():
        print(f"  {layout:<26} refused by cp_head_problems: {'; '.join(problems)}")
    print(f"  (attn / gdn / rest: MiB saved inside the full-attention mixers, the Gated DeltaNet "
          f"mixers, elsewhere; RSS+: peak RSS growth over the step; loss rel / |g| rel: relative "
          f"difference of the loss and the summed gradients' norm from cp 1's, loss goal "
          f"<= {LOSS_RTOL:g})")
    print(f"\n2. step time (forward + backward) at {results['time_seq_len']} tokens: median of "
          f"{results['repeats']} after {results['warmup']} warm-up, slowest rank")
    print(f"  {'layout':<32} {'step ms':>9} {'min ms':>9} {'speed-up':>9} {'coll fwd':>9} "
          f"{'coll bwd':>9} {'coll share':>10}")
    for name, entry in results["step_time"].items():
        if "error" in entry:
            print(f"  {name:<32} FAILED, skipped: {entry['error']}")
            continue
        speedup = f"{entry['speedup_vs_cp1']:9.3f}" if "speedup_vs_cp1" in entry else f"{'-':>9}"
        coll = (f"{entry['collective_forward_ms']:9.1f} {entry['collective_backward_ms']:9.1f} "
                f"{entry['collective_share']:10.1%}" if "collective_share" in entry
                else f"{'-':>9} {'-':>9} {'-':>10}")
        print(f"  {name:<32} {entry['step_ms']:9.1f} {entry['min_step_ms']:9.1f} {speedup} "
              f"{coll}")
    print("  (speed-up: cp 1's step / this one's, 2 ideal on two cores; coll: ms a rank spends "
          "inside the CP collectives, waiting for the other rank included, mean over ranks)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--quick", action="store_true",
                       help="a <1 minute run (2048 / 1024 tokens)")
    modes.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--seq-len", type=int, help="tokens of the memory figure (default "
                        "8192; quick 2048)")
    parser.add_argument("--time-seq-len", type=int, help="tokens of the step-time figure "
                        "(default 4096; quick 1024)")
    parser.add_argument("--out", help="the JSON (default bench/results/context_parallel.json; "
                                      "none with --smoke)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.worker:
        worker(json.loads(opts.worker))
        return 0
    mode = "smoke" if opts.smoke else "quick" if opts.quick else "full"
    settings = dict(SETTINGS[mode])
    settings["seq_len"] = opts.seq_len or settings["seq_len"]
    settings["time_seq_len"] = opts.time_seq_len or settings["time_seq_len"]
    largest = max(LAYOUTS[layout][0] for layout in settings["layouts"])
    for key in ("seq_len", "time_seq_len"):
        if settings[key] % largest:
            parser.error(f"--{key.replace('_', '-')} must divide by {largest} (the largest cp)")
    results: dict = {"mode": mode, "flavor": FLAVOR, "batch": 1, "threads_per_rank": 1,
                     "seq_len": settings["seq_len"], "time_seq_len": settings["time_seq_len"],
                     "warmup": settings["warmup"], "repeats": settings["repeats"],
                     "memory_goal_cp2": MEMORY_GOAL_CP2, "loss_rtol": LOSS_RTOL}
    cpu_before, start = _cpu_seconds(), time.perf_counter()
    runs = {}
    for layout in settings["layouts"]:
        spec = LAYOUTS[layout]
        problems = head_problems(spec)
        runs[layout] = ({"error": "cp_head_problems: " + "; ".join(problems)} if problems
                        else launch(layout, settings))
        run = runs[layout]
        print(f"  {layout}: " + (f"FAILED: {run['error']}" if "error" in run
                                 else f"{run['process_wall_s']} s"), flush=True)
    results["memory"] = memory_rows(runs)
    results["refused"] = {layout: head_problems(spec) for layout, spec in REFUSED.items()}
    results["step_time"] = timing_rows(runs, settings)
    results["process_wall_s"] = {layout: run.get("process_wall_s") for layout, run in runs.items()}
    results["wall_s"] = round(time.perf_counter() - start, 1)
    results["other_work_cpu_share"] = _other_work_share(cpu_before, results["wall_s"])
    results["cpus"] = os.cpu_count()
    print_summary(results)
    written = write_results(result_path(
        opts.out, REPO / "bench" / "results" / "context_parallel.json", opts.smoke), results)
    print(f"\n{written} ({results['wall_s']} s, {len(runs)} layouts)")
    return exit_status(results, opts.smoke)


if __name__ == "__main__":
    code = main()
    from hyper_parallel.utils.process import exit_now

    # Finalization after a worker's destroy_process_group can abort ("terminate called without
    # an active exception", gloo) and fail a finished layout; leave as the entry points do.
    exit_now(code)
