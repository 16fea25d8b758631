"""GPU throughput of the Gated DeltaNet kernel choices, side by side, through the real trainer.

:func:`gpu_throughput` builds one ``HyperTrainer`` per ``model.kernels`` value (``torch`` and
``fla`` by default) from the flavor's registry recipe (``qwen3_5_v2_0_8b`` for ``0.8b``: bf16
mixed precision, FSDP over every rank -- here one, without torchrun, the private 1-rank process
group the CPU bench uses too -- selective activation checkpointing), on synthetic tokens, with
the same seed, so every trainer starts from the same weights and sees the same batches. One step
of each per round, the order rotating every round, so the GPU's clocks and noise fall on all
alike; each step is timed between two ``torch.cuda.synchronize()``. Reports per choice the
median step time, tokens/s and MFU (``model.num_flops_per_token(seq_len)`` x tokens/s over the
peak), the per-step losses, and the speed-up of each choice over the first.

    python bench/_gpu_throughput.py [--flavor 0.8b] [--steps 10] [--seq-len 4096] [--batch 4]
                                    [--out bench/results/gpu_throughput.json] [--dry-run]

Needs a CUDA device; ``fla`` needs fla-core (the ``gpu`` extra) -- a choice that cannot run is
reported with its error instead of figures. Figures, not assertions. ``--dry-run`` (the GPU
script's dry run, on any machine) builds and validates every choice's configuration -- the
recipe and the fields this bench sets -- and reports the run skipped where there is no CUDA
device; it writes only to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

H200_BF16_PEAK_TFLOPS = 989.0
"""Dense bf16 peak of an H100 / H200 SXM (the MFU denominator unless told otherwise)."""


def recipe_config(flavor: str, kernels: str, *, steps: int, seq_len: int, batch: int,
                  dump_folder: str) -> Any:
    """The flavor's registry recipe, cut to a benchmark: ``steps`` steps of one ``batch`` x
    ``seq_len`` micro-batch of synthetic tokens, no checkpoints, no logging, LR warmup 1."""
    from hyper_parallel.config.recipes import revalidate
    from hyper_parallel.models.qwen3_5_v2 import config_registry

    name = f"qwen3_5_v2_{flavor.replace('.', '_')}"
    recipe = getattr(config_registry, name, None)
    if recipe is None:
        raise ValueError(f"no registry recipe {name} for flavor {flavor!r}")
    config = recipe()
    config.model.kernels = kernels
    config.dump_folder = dump_folder
    config.training.steps = steps
    config.training.seq_len = seq_len
    config.training.local_batch_size = batch
    config.training.global_batch_size = batch  # one rank, one micro-batch a step
    config.parallelism.data_parallel_shard_degree = -1
    config.dataloader.dataset = "dummy"
    config.lr_scheduler.warmup_steps = 1
    config.checkpoint.interval = 0
    config.checkpoint.export_hf = False
    config.metrics.log_freq = 10**6
    config.debug.seed = 0
    return revalidate(config)


def _runner(config: Any):
    """A step function of the trainer ``config`` builds: ``() -> (seconds, loss)``."""
    import torch

    trainer = config.build()
    batches = trainer._micro_batch_iterator()

    def step() -> tuple[float, float]:
        micro = next(batches)
        trainer.state.global_step += 1
        torch.cuda.synchronize()
        start = time.perf_counter()
        trainer.train_step(micro)
        torch.cuda.synchronize()
        return time.perf_counter() - start, trainer.state.loss_history[-1][1]

    return step, trainer


def gpu_throughput(flavor: str = "0.8b", kernels: tuple[str, ...] = ("torch", "fla"), *,
                   steps: int = 10, warmup: int = 3, seq_len: int = 4096, batch: int = 4,
                   peak_tflops: float = H200_BF16_PEAK_TFLOPS) -> dict:
    """Median step time, tokens/s and MFU of each kernel choice, interleaved (see the module
    docstring); ``speedup_over_<first>`` is the first choice's median step time over each
    other's. A choice whose trainer fails to build or step is reported as ``{"error": ...}``."""
    import torch

    if not torch.cuda.is_available():
        return {"error": "no CUDA device: the GPU throughput bench needs one"}
    total = warmup + steps
    out: dict[str, Any] = {
        "flavor": flavor, "seq_len": seq_len, "batch": batch, "tokens_per_step": seq_len * batch,
        "steps_timed": steps, "warmup": warmup, "peak_tflops": peak_tflops,
        "device": torch.cuda.get_device_name(), "torch": torch.__version__, "choices": {},
    }
    runners, trainers = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for choice in kernels:
                config = recipe_config(flavor, choice, steps=total, seq_len=seq_len, batch=batch,
                                       dump_folder=os.path.join(tmp, choice))
                out["param_dtype"] = config.training.mixed_precision_param
                out["activation_checkpoint"] = config.activation_checkpoint.mode
                try:
                    step, trainer = _runner(config)
                except Exception as exc:  # noqa: BLE001 - reported, the other choices still run
                    out["choices"][choice] = {"error": f"{type(exc).__name__}: {exc}"}
                    continue
                trainers.append(trainer)
                flops = float(trainer.model.num_flops_per_token(seq_len))
                runners[choice] = (step, flops)
                out["choices"][choice] = {"flops_per_token": flops, "times": [], "losses": []}
            names = list(runners)
            for i in range(total if names else 0):
                for name in names[i % len(names):] + names[:i % len(names)]:
                    record = out["choices"][name]
                    if "error" in record:
                        continue
                    try:
                        seconds, loss = runners[name][0]()
                    except Exception as exc:  # noqa: BLE001 - e.g. forced fla without fla-core
                        out["choices"][name] = {"error": f"{type(exc).__name__}: {exc}"}
                        continue
                    record["losses"].append(loss)
                    if i >= warmup:
                        record["times"].append(seconds)
            out["max_memory_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        finally:
            if trainers:
                trainers[0].close()  # one process group, shared by every trainer
    for name, record in out["choices"].items():
        if "error" not in record:
            record.update(_summary(record, seq_len * batch, peak_tflops))
    _ratios(out, kernels)
    return out


def _summary(record: dict, tokens: int, peak_tflops: float) -> dict:
    times = sorted(record["times"])
    median = times[len(times) // 2]
    tokens_per_s = tokens / median
    return {
        "median_step_s": median,
        "mean_step_s": sum(times) / len(times),
        "tokens_per_s": tokens_per_s,
        "mfu": tokens_per_s * record["flops_per_token"] / (peak_tflops * 1e12),
        "last_loss": record["losses"][-1],
    }


def _ratios(out: dict, kernels: tuple[str, ...]) -> None:
    """Speed-up of every choice over the first, and how far their losses drift apart."""
    good = {k: v for k, v in out["choices"].items() if "error" not in v}
    if not kernels or kernels[0] not in good:
        return
    base = good[kernels[0]]
    for name, record in good.items():
        if name == kernels[0]:
            continue
        out[f"speedup_{name}_over_{kernels[0]}"] = base["median_step_s"] / record["median_step_s"]
        out[f"max_loss_diff_{name}_vs_{kernels[0]}"] = max(
            abs(a - b) for a, b in zip(base["losses"], record["losses"])
        )


def dry_run(flavor: str, kernels: tuple[str, ...], *, steps: int, warmup: int, seq_len: int,
            batch: int, peak_tflops: float = H200_BF16_PEAK_TFLOPS) -> dict:
    """Every choice's configuration built and validated (what a real run would train), and
    the run itself skipped with the reason when there is no CUDA device."""
    import torch

    out: dict[str, Any] = {"flavor": flavor, "seq_len": seq_len, "batch": batch,
                           "peak_tflops": peak_tflops, "dry_run": True, "choices": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for choice in kernels:
            config = recipe_config(flavor, choice, steps=warmup + steps, seq_len=seq_len,
                                   batch=batch, dump_folder=os.path.join(tmp, choice))
            out["choices"][choice] = {
                "config": "valid", "kernels": config.model.kernels,
                "param_dtype": config.training.mixed_precision_param,
                "activation_checkpoint": config.activation_checkpoint.mode}
    if not torch.cuda.is_available():
        out["skipped"] = "no CUDA: the throughput run needs a CUDA device"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flavor", default="0.8b")
    parser.add_argument("--kernels", nargs="+", default=["torch", "fla"])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--peak-tflops", type=float, default=H200_BF16_PEAK_TFLOPS)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "gpu_throughput.json"))
    parser.add_argument("--dry-run", action="store_true",
                        help="validate every choice's configuration; run nothing")
    opts = parser.parse_args()
    os.environ.setdefault("HYPER_PARALLEL_DISABLE_TQDM", "1")
    run = dry_run if opts.dry_run else gpu_throughput
    result = run(opts.flavor, tuple(opts.kernels), steps=opts.steps, warmup=opts.warmup,
                 seq_len=opts.seq_len, batch=opts.batch, peak_tflops=opts.peak_tflops)
    text = json.dumps(result, indent=2)
    print(text)
    Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
    Path(opts.out).write_text(text + "\n")
    print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
