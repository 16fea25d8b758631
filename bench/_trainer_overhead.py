"""Trainer overhead: the real training loop against plain torch loops, interleaved step by step.

One measurement (:func:`measure`) runs one trainer's whole ``train()`` loop -- data loading, the
step, the callbacks (logging, metrics, checkpoint bookkeeping, progress, gc), the stop check --
and, from a callback that runs last after every trainer step, one step of each plain loop:

* ``plain_same_wrapping`` -- model, AdamW, cross-entropy, clip, step, and nothing else, on a
  model parallelized exactly as the trainer's: the project's ``apply_tp`` over the ``tp`` mesh
  and ``apply_fsdp`` over the data-parallel mesh; on one rank, in fp32, no wrapping at all, as
  the trainer does (``parallelize_v2.needs_fsdp``);
* ``plain_fsdp_1_rank`` (one rank only) -- the same loop on a model wrapped in FSDP2 over a
  1-rank mesh: what the trainer used to do, and what the wrapping would cost.

The trainer's step time is the time between two of its step ends minus the plain steps run in
between, so machine noise falls on all of them alike. ``trainer / plain_same_wrapping`` is what
the trainer adds; ``plain_fsdp_1_rank / plain_same_wrapping`` is what 1-rank FSDP2 costs.

Run by ``bench/bench_train.py`` under ``torchrun``, one entry a process, so that neither entry
inherits the other's warm allocator and caches (``torchrun --nproc_per_node 2
bench/_trainer_overhead.py --layout fsdp --entry legacy --out result.json``; ``--layout single``
on one rank).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SEQ_LEN = 256
GLOBAL_BATCH = 8  # 8 x 256 = 2,048 tokens a step
LR = 1e-3
#: Parallel layouts: legacy accelerator degrees.
LAYOUTS = {"single": {}, "fsdp": {"dp_shard": 2}, "tp": {"tp": 2}}
ENTRIES = ("legacy", "new")


def legacy_args(layout: str, steps: int, output_dir: str, seq_len: int = SEQ_LEN):
    """The bench's YAML: debug model, dummy data, constant LR, no checkpoints; logging at the
    legacy defaults (every 10 steps, with throughput), so the trainer does its usual work."""
    from hyper_parallel.trainer.config import HyperTrainerConfig
    from hyper_parallel.trainer.config_parser import load_config

    degrees = LAYOUTS[layout]
    dp = degrees.get("dp_shard", 1)
    accelerator = ", ".join(f"{k}: {v}" for k, v in degrees.items())
    text = f"""
model: {{name: qwen3_5, config_overrides: {{flavor: debugmodel}}}}
data: {{type: dummy, max_seq_len: {seq_len}, shuffle: false, pin_memory: false}}
train:
  max_steps: {steps}
  global_batch_size: {GLOBAL_BATCH}
  micro_batch_size: {GLOBAL_BATCH // dp}
  seed: 0
  comm_backend: gloo
  accelerator: {{{accelerator}}}
  optimizer: {{lr: {LR}, lr_warmup_ratio: 0.0, lr_decay_style: constant, weight_decay: 0.0,
               max_grad_norm: 1.0}}
  checkpoint: {{output_dir: {output_dir}, save_steps: 0, save_hf_weights: false}}
"""
    return load_config(HyperTrainerConfig, text, source="bench")


def build_trainer(entry: str, layout: str, steps: int, output_dir: str, seq_len: int = SEQ_LEN):
    """``LLMTrainer`` (the YAML front door) or ``HyperTrainer`` built from the same YAML
    converted by the generated adapter."""
    from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
    from hyper_parallel.models.spec import discover_model_spec
    from hyper_parallel.trainer.llm_trainer import LLMTrainer

    args = legacy_args(layout, steps, output_dir, seq_len)
    discover_model_spec(args.model.name)
    return LLMTrainer(args) if entry == "legacy" else legacy_to_trainer_config(args).build()


def plain_runner(layout: str, wrapped: bool, rank: int, world: int, seq_len: int = SEQ_LEN):
    """One step of a plain loop: the trainer's model config, init and optimizer settings, with
    ``apply_tp`` (``tp``) or ``apply_fsdp`` (``fsdp``, and ``single`` when ``wrapped``) over all
    ranks; each rank takes its share of the batch under FSDP and the whole batch under TP, like
    the trainer."""
    import torch
    import torch.nn.functional as F
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    from hyper_parallel.data import DummyDataset
    from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM
    from hyper_parallel.models.qwen3_5.parallelize import apply_fsdp, apply_tp

    config = FLAVORS["debugmodel"]
    torch.manual_seed(0)
    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(config)
    if wrapped:
        if layout == "tp":
            apply_tp(model, init_device_mesh("cpu", (world,), mesh_dim_names=("tp",)))
        else:
            apply_fsdp(model, init_device_mesh("cpu", (world,), mesh_dim_names=("dp_shard",)))
    elif layout != "single":
        raise ValueError("the trainer wraps every 2-rank layout")
    model.to_empty(device="cpu")
    model.init_weights()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    shards = world if layout == "fsdp" else 1
    local = GLOBAL_BATCH // shards
    data = DummyDataset(1 << 16, seq_len, config.vocab_size)
    step_index = iter(range(1 << 30))

    def step() -> None:
        i = next(step_index)
        first = i * GLOBAL_BATCH + (rank % shards) * local
        batch = torch.stack([data[first + j]["input_ids"] for j in range(local)])
        logits = model(batch)
        # Next-token targets, the last position ignored: shifting the labels rather than
        # slicing the logits, as the trainer does, so both sides do the same work.
        targets = torch.cat([batch[:, 1:], torch.full_like(batch[:, :1], -100)], dim=1)
        loss = F.cross_entropy(
            logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100
        )
        loss.backward()
        # torchtitan's clipping: the norm of sharded (DTensor) gradients reduced to a plain
        # tensor once, before scaling, rather than every scale being a DTensor operation.
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = torch.nn.utils.get_total_norm(grads, norm_type=2.0)
        if isinstance(norm, DTensor):
            norm = norm.full_tensor()
        torch.nn.utils.clip_grads_with_norm_(model.parameters(), 1.0, norm)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def measure(entry: str, layout: str, steps: int, warmup: int, seq_len: int = SEQ_LEN) -> dict:
    """Per-step seconds of the trainer's loop and of the plain loops run between its steps."""
    import torch.distributed as dist

    from hyper_parallel.runtime.callbacks import Callback

    with tempfile.TemporaryDirectory() as tmp:
        trainer = build_trainer(entry, layout, steps + warmup, tmp, seq_len)
        rank, world = dist.get_rank(), dist.get_world_size()
        # On one rank the trainer wraps nothing (fp32, no offload); elsewhere it wraps.
        plains = {"plain_same_wrapping": plain_runner(layout, layout != "single", rank, world,
                                                      seq_len)}
        if layout == "single":
            plains["plain_fsdp_1_rank"] = plain_runner(layout, True, rank, world, seq_len)
        times: dict[str, list[float]] = {"trainer": [], **{name: [] for name in plains}}

        class Interleave(Callback):
            """Registered last. Runs the plain steps after the trainer's odd steps and before its
            even ones, in rotating order, so that neither side always follows the other; the
            trainer's time for a step is the time between its step ends less the plain steps
            run in between."""

            last_end: float | None = None
            plain_since_last_end = 0.0

            def _run_plain(self, step: int) -> None:
                names = list(plains)
                for name in names[step % len(names):] + names[: step % len(names)]:
                    start = time.perf_counter()
                    plains[name]()
                    elapsed = time.perf_counter() - start
                    self.plain_since_last_end += elapsed
                    if step > warmup:
                        times[name].append(elapsed)

            def on_train_begin(self) -> None:
                self.last_end = time.perf_counter()

            def on_step_begin(self) -> None:
                step = self.trainer.state.global_step
                if step % 2 == 0:
                    self._run_plain(step)

            def on_step_end(self, loss, grad_norm) -> None:
                step = self.trainer.state.global_step
                ended = time.perf_counter()
                if step > warmup:
                    times["trainer"].append(ended - self.last_end - self.plain_since_last_end)
                self.last_end, self.plain_since_last_end = ended, 0.0
                if step % 2 == 1:
                    self._run_plain(step)

        trainer.add_callback(Interleave(trainer))
        trainer.train()
        # The mean, not the median: throughput is tokens over total time, so the trainer's
        # logging steps count; and each side's steps are half after a plain step, half after
        # its own (cold and warm caches), whose median falls on the gap between the two modes.
        return {name: statistics.fmean(t) for name, t in times.items()} | {"steps_timed": steps}


def ratios(step_s: dict) -> dict:
    """Throughput ratios (higher is faster): trainer / plain loop with the same wrapping, and,
    on one rank, the plain loop in 1-rank FSDP2 / the unwrapped one (the trainer's old cost)."""
    out = {"trainer_over_same_wrapping": step_s["plain_same_wrapping"] / step_s["trainer"]}
    if "plain_fsdp_1_rank" in step_s:
        out["fsdp_1_rank_over_unwrapped"] = (
            step_s["plain_same_wrapping"] / step_s["plain_fsdp_1_rank"])
    return out


def main() -> None:
    """torchrun worker: one entry on one layout; rank 0 writes its mean step times."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layout", choices=list(LAYOUTS), required=True)
    parser.add_argument("--entry", choices=ENTRIES, required=True)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--seq-len", type=int, default=SEQ_LEN,
                        help=f"tokens a sequence (default {SEQ_LEN}; the smoke run's are fewer)")
    parser.add_argument("--out", required=True)
    opts = parser.parse_args()
    import torch.distributed as dist

    results = measure(opts.entry, opts.layout, opts.steps, opts.warmup, opts.seq_len)
    if dist.get_rank() == 0:
        Path(opts.out).write_text(json.dumps(results))
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("HYPER_PARALLEL_DISABLE_TQDM", "1")
    main()
    from hyper_parallel.utils.process import exit_now

    # Finalization after destroy_process_group can abort with "terminate called without an
    # active exception" (gloo) and turn a finished measurement into a failed torchrun job.
    exit_now(0)
