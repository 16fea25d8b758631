"""Benchmark the legacy trainer against a minimal plain-torch loop, plus start-up and memory.

    .venv/bin/python bench/bench_train.py [--steps 20] [--warmup 3] [--out bench/results/train.json]

Prints and writes to JSON:

1. tokens/s and step time of ``LLMTrainer`` (the legacy front door) and of ``HyperTrainer`` (the
   same YAML converted by the generated adapter) on the debug model (1 rank, CPU, fp32, dummy
   data, 2,048 tokens a step) and of a plain loop on the same model config, init, data, batch and
   optimizer, interleaved step by step in this one process; the ratios are the trainer overheads
   and new/legacy (one engine: 1.00 up to noise);
2. the time from launching ``torchrun`` to the end of the first optimizer step, through the
   legacy entry point (a YAML) and the new one (a generated recipe);
3. the peak RSS of building the ``0.8b`` flavor on the meta device and materializing it, against
   its fp32 parameter bytes (in a fresh subprocess, so the figure is not polluted by 1.).

Figures, not assertions: nothing here fails on a slow machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SEQ_LEN = 256
GLOBAL_BATCH = 8  # 8 x 256 = 2,048 tokens a step
MICRO_BATCH = 8
LR = 1e-3


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _legacy_args(steps: int, output_dir: str):
    from hyper_parallel.trainer.config_parser import load_config
    from hyper_parallel.trainer.config import HyperTrainerConfig

    text = f"""
model: {{name: qwen3_5, config_overrides: {{flavor: debugmodel}}}}
data: {{type: dummy, max_seq_len: {SEQ_LEN}, shuffle: false, pin_memory: false}}
train:
  max_steps: {steps}
  global_batch_size: {GLOBAL_BATCH}
  micro_batch_size: {MICRO_BATCH}
  seed: 0
  comm_backend: gloo
  optimizer: {{lr: {LR}, lr_warmup_ratio: 0.0, lr_decay_style: constant, weight_decay: 0.0,
               max_grad_norm: 1.0}}
  checkpoint: {{output_dir: {output_dir}, save_steps: 0, save_hf_weights: false}}
  logging: {{log_steps: 1000000, report_throughput: false}}
"""
    return load_config(HyperTrainerConfig, text, source="bench")


def _trainer_runner(which: str, steps: int, tmp: str):
    """A step function of LLMTrainer (``legacy``: the YAML front door) or of HyperTrainer built
    from the same YAML converted by the generated adapter (``new``); the runner's state."""
    from hyper_parallel.config.legacy_adapter import _legacy_to_trainer_config
    from hyper_parallel.models.spec import discover_model_spec
    from hyper_parallel.trainer.llm_trainer import LLMTrainer

    args = _legacy_args(steps, os.path.join(tmp, which))
    discover_model_spec(args.model.name)
    trainer = LLMTrainer(args) if which == "legacy" else _legacy_to_trainer_config(args).build()
    batches = trainer._micro_batch_iterator()

    def step() -> float:
        micro = next(batches)
        trainer.state.global_step += 1
        trainer.train_step(micro)
        return trainer.state.loss_history[-1][1]

    return step, trainer


def _plain_runner(steps: int):
    """The same work with nothing but torch: model, AdamW, cross-entropy, clip, step."""
    import torch
    import torch.nn.functional as F

    from hyper_parallel.data import DummyDataset
    from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM

    config = FLAVORS["debugmodel"]
    torch.manual_seed(0)
    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(config)
    model.to_empty(device="cpu")
    model.init_weights()
    decay = [p for n, p in model.named_parameters() if "norm" not in n and "bias" not in n]
    no_decay = [p for n, p in model.named_parameters() if "norm" in n or "bias" in n]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.0}, {"params": no_decay, "weight_decay": 0.0}], lr=LR
    )
    data = DummyDataset(GLOBAL_BATCH * steps, SEQ_LEN, config.vocab_size)
    counter = iter(range(steps))

    def step() -> float:
        i = next(counter)
        batch = torch.stack([data[i * GLOBAL_BATCH + j]["input_ids"] for j in range(GLOBAL_BATCH)])
        logits = model(batch)
        loss = F.cross_entropy(
            logits[:, :-1].float().reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1)
        )
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step


def bench_throughput(steps: int, warmup: int) -> dict:
    """The plain loop, LLMTrainer and HyperTrainer, one step each per round, interleaved (the
    order rotates every round) so that machine noise falls on all three alike; ratios are of
    medians, and new/legacy also as the median of the per-round ratios."""
    total = steps + warmup
    with tempfile.TemporaryDirectory() as tmp:
        new_step, new = _trainer_runner("new", total, tmp)
        legacy_step, legacy = _trainer_runner("legacy", total, tmp)
        runners = {"plain": _plain_runner(total), "trainer": legacy_step,
                   "hyper_trainer": new_step}
        times: dict[str, list[float]] = {name: [] for name in runners}
        losses: dict[str, float] = {}
        names = list(runners)
        for i in range(total):
            order = names[i % len(names):] + names[:i % len(names)]
            for name in order:
                start = time.perf_counter()
                losses[name] = runners[name]()
                if i >= warmup:
                    times[name].append(time.perf_counter() - start)
        new.close()  # one process group, shared by both trainers
        del legacy
    out = {name: _summary(times[name], losses[name]) for name in names}
    paired = sorted(b / a for a, b in zip(times["trainer"], times["hyper_trainer"]))
    out["new_over_legacy_paired_median"] = paired[len(paired) // 2]
    return out


def _summary(times: list[float], loss: float) -> dict:
    times = sorted(times)
    median = times[len(times) // 2]
    tokens = GLOBAL_BATCH * SEQ_LEN
    return {
        "steps_timed": len(times),
        "median_step_s": median,
        "mean_step_s": sum(times) / len(times),
        "tokens_per_s": tokens / median,
        "last_loss": loss,
    }


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
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
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
import json, torch
from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM

def hwm_kib():
    # VmHWM (peak RSS) belongs to this address space: unlike ru_maxrss it is not inherited
    # from the parent across exec, so a big parent process does not pollute the figure.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

base = hwm_kib()
with torch.device("meta"):
    model = Qwen3_5ForCausalLM(FLAVORS["0.8b"])
meta = hwm_kib()
model.to_empty(device="cpu")
model.init_weights()
peak = hwm_kib()
params = sum(p.numel() for p in model.parameters())
print(json.dumps({"params": params, "param_bytes_fp32": params * 4,
                  "rss_before_build_kib": base, "rss_after_meta_build_kib": meta,
                  "peak_rss_kib": peak}))
"""


def bench_memory() -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_CODE], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    info = json.loads(out.strip().splitlines()[-1])
    growth = (info["peak_rss_kib"] - info["rss_before_build_kib"]) * 1024
    info["materialize_growth_over_param_bytes"] = growth / info["param_bytes_fp32"]
    info["peak_rss_over_param_bytes"] = info["peak_rss_kib"] * 1024 / info["param_bytes_fp32"]
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "train.json"))
    parser.add_argument("--skip", nargs="*", default=[], choices=["throughput", "startup", "memory"])
    opts = parser.parse_args()
    os.environ.setdefault("HYPER_PARALLEL_DISABLE_TQDM", "1")
    results: dict = {"threads": int(os.environ.get("OMP_NUM_THREADS", "0")) or None}
    if "throughput" not in opts.skip:
        import torch

        results["torch_threads"] = torch.get_num_threads()
        results.update(bench_throughput(opts.steps, opts.warmup))
        results["peak_rss_mib"] = _peak_rss_mib()
        plain = results["plain"]["median_step_s"]
        results["trainer_overhead_pct"] = 100 * (results["trainer"]["median_step_s"] / plain - 1)
        results["hyper_trainer_overhead_pct"] = 100 * (
            results["hyper_trainer"]["median_step_s"] / plain - 1
        )
        results["new_over_legacy_step_time"] = (
            results["hyper_trainer"]["median_step_s"] / results["trainer"]["median_step_s"]
        )
    if "startup" not in opts.skip:
        results["startup"] = {entry: bench_startup(entry) for entry in ENTRY_POINTS}
    if "memory" not in opts.skip:
        results["memory_0_8b"] = bench_memory()
    print(json.dumps(results, indent=2))
    Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
    Path(opts.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {opts.out}")


if __name__ == "__main__":
    main()
