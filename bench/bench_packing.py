"""Benchmark packing: real tokens per second packed against padded, and what ``block_causal``
costs over ``causal`` on full pretraining rows, side by side in one run.

    .venv/bin/python bench/bench_packing.py [--smoke] [--threads N] [--cost-rounds N]
                                            [--skip fine_tuning block_causal_cost]
                                            [--out bench/results/packing.json]

Every entry is the real engine: ``build_trainer`` on the ``qwen3_5_v2_debugmodel`` recipe (the
debug model, one process, fp32, this CPU) with the data fields below, its own loader's batches
and ``HyperTrainer.train_step``. The entries of a section are built side by side and their steps
interleaved (warm-up steps untimed, then rounds alternating which goes first), so a loaded
machine's drift falls on both. A step's time is fetching its batch from the trainer's loader
plus the step.

1. ``fine_tuning``: ``json_file`` Alpaca records, **packed** (``dataloader.packing``, the model
   ``block_causal``: rows of up to ``seq_len`` tokens, first fit) against **padded** (one record
   a row, the batch padded to its longest record, ``causal``), on two sets:

   * ``chat``: the shipped chat corpus (``pkg://vl_corpus/train.jsonl``'s conversations, the
     only chat records shipped; their images dropped, since packing refuses image-text records):
     the turns before the last answer are the prompt, the last answer the response;
   * ``long_tailed``: a synthetic fine-tuning set, lengths (prompt + response + eos) drawn from
     a seeded lognormal (median 300 tokens, sigma 1: about 1 in 9 past ``seq_len`` 1024, cut as
     the loader cuts them), 15 % prompt; the words are the shipped corpus's.

   Both runs take **the same global batch in rows of at most ``seq_len`` tokens**: the step's token bound, hence its peak memory, is the same, which is what a user sizes
   to a device -- a padded run must fit a batch of its longest records (4 rows of 1024). The packed run's rows
   hold several records each, so it takes more records a step; the fair measure is then the
   rate: **real tokens per second** (label tokens the loss trains: neither padding nor the
   ignored prompt; ``StepResult.global_tokens``), with the padding fraction (tokens computed
   that belong to no record) beside it. Target: packed / padded >= 1.5; the same ratio in
   this process's CPU time beside it (see 2.).
2. ``block_causal_cost``: the same pretraining rows (``jsonl``, the shipped corpus: documents of
   median ~130 tokens, ~16 a 2048-token row, joined with eos), ``causal`` without packing against
   ``block_causal`` with packing (the same rows, with position_ids restarting per document):
   median step time, ``block_causal / causal`` (target: at most 1.05), and the same in this
   process's CPU time (``time.process_time``): with one thread, what the step computed, which
   other processes on a shared machine move far less than its wall time.

On this CPU the per-document attention is causal SDPA once per document and the delta rule's
chunked torch path masks its operands at the boundaries; on a GPU the path differs (varlen flash
attention, fla's kernels with ``cu_seqlens``), which ``bench/gpu_check.sh``'s ``packing`` step
checks. Figures, not assertions: ``--smoke`` runs every entry once at its smallest and writes no
file unless ``--out`` names one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _smoke import SMOKE_HELP, exit_status, result_path, write_results

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TARGETS = {"packed_over_padded_real_tokens_per_s": 1.5, "block_causal_over_causal_step": 1.05}
RECIPE = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel"]
SETTINGS = {
    # About 3 minutes on 2 loaded cores at one thread (a long-tailed step is ~10 s there).
    "full": {"rows": 4, "seq": 1024, "chat_seq": 256, "records": 600, "warmup": 1, "rounds": 3,
             "pt_rows": 1, "pt_seq": 2048, "pt_rounds": 4},
    "smoke": {"rows": 2, "seq": 128, "chat_seq": 64, "records": 24, "warmup": 0, "rounds": 1,
              "pt_rows": 1, "pt_seq": 128, "pt_rounds": 1},
}
MEDIAN_TOKENS, SIGMA, PROMPT_SHARE = 300, 1.0, 0.15


# ------------------------------------------------------------------------ the data sets
def chat_records() -> list[dict]:
    """The shipped chat corpus as Alpaca records: the turns before the last answer are the
    prompt (one a line), the last answer the response."""
    from hyper_parallel.assets import resolve_path

    out = []
    for line in Path(resolve_path("pkg://vl_corpus/train.jsonl")).read_text().splitlines():
        turns = [m["content"] for m in json.loads(line)["messages"]]
        out.append({"instruction": "\n".join(turns[:-1]), "input": "", "output": turns[-1]})
    return out


def long_tailed_records(count: int, tokenizer) -> list[dict]:
    """``count`` Alpaca records whose token lengths follow a lognormal of median
    :data:`MEDIAN_TOKENS`; words drawn from the shipped corpus, sized by its tokens a word."""
    from hyper_parallel.assets import resolve_path

    texts = [json.loads(line)["text"] for line in
             Path(resolve_path("pkg://corpus/train.jsonl")).read_text().splitlines()[:400]]
    words = " ".join(texts).split()
    per_word = len(tokenizer.encode(" ".join(words[:5000]))) / 5000
    rng = random.Random(46)
    records = []
    for _ in range(count):
        tokens = max(8, round(rng.lognormvariate(math.log(MEDIAN_TOKENS), SIGMA)))
        prompt = max(2, round(tokens * PROMPT_SHARE / per_word))
        response = max(1, round(tokens * (1 - PROMPT_SHARE) / per_word) - 1)  # the eos
        start = rng.randrange(len(words) - prompt - response)
        records.append({"instruction": " ".join(words[start:start + prompt]), "input": "",
                        "output": " ".join(words[start + prompt:start + prompt + response])})
    return records


def lengths(records: list[dict], tokenizer, seq: int) -> dict:
    """The records' token lengths (prompt + response + eos, before any cut)."""
    sizes = [len(tokenizer.encode(r["instruction"])) + len(tokenizer.encode(r["output"])) + 1
             for r in records]
    return {"records": len(sizes), "median_tokens": statistics.median(sizes),
            "mean_tokens": round(statistics.fmean(sizes), 1), "max_tokens": max(sizes),
            "past_seq_len": round(sum(s > seq for s in sizes) / len(sizes), 3)}


# ------------------------------------------------------------------------ the engine
def _trainer(folder: str, overrides: list[str], steps: int):
    from hyper_parallel.train import build_trainer

    return build_trainer([*RECIPE, *overrides, "--training.steps", str(steps),
                          "--checkpoint.interval", "0", "--checkpoint.folder", folder,
                          "--metrics.log_freq", "1000000"])


def _padding(batch: dict) -> tuple[int, int]:
    """(tokens computed, of which padding) of a batch: a row's padding is what follows its last
    trained label (every record here ends with a trained token, its response's eos)."""
    labels = batch["labels"]
    rows, width = labels.shape
    trained = labels != -100
    last = width - 1 - trained.flip(1).int().argmax(1)
    ends = (last + 1) * trained.any(1)
    return rows * width, int((width - ends).sum())


def interleave(entries: dict[str, list[str]], steps_each: int, warmup: int, rounds: int) -> dict:
    """Every entry a trainer (its overrides), stepped in turn: ``warmup`` untimed steps each,
    then ``rounds`` rounds of ``steps_each`` steps, the order reversed every other round; a
    trainer whose data runs out starts its next epoch."""
    from hyper_parallel.trainer.base import _set_epoch

    trainers, batches, folders = {}, {}, []
    total = warmup + rounds * steps_each
    for name, overrides in entries.items():
        folders.append(tempfile.TemporaryDirectory(prefix="bench-packing-"))
        trainers[name] = _trainer(folders[-1].name, overrides, total)
        batches[name] = trainers[name]._micro_batch_iterator()
    figures = {name: {"seconds": [], "cpu_seconds": [], "real_tokens": 0, "computed": 0, "padding": 0,
                      "rows": 0} for name in entries}

    def step(name: str, timed: bool) -> None:
        trainer = trainers[name]
        start, cpu_start = time.perf_counter(), time.process_time()
        try:
            group = next(batches[name])
        except StopIteration:  # the next epoch, as the trainer's loop starts it
            trainer.state.epoch += 1
            _set_epoch(trainer.train_dataloader, trainer.state.epoch)
            batches[name] = trainer._micro_batch_iterator()
            group = next(batches[name])
        trainer.state.global_step += 1
        result = trainer.train_step(group)
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        if timed:
            f = figures[name]
            f["seconds"].append(elapsed)
            f["cpu_seconds"].append(cpu)
            f["real_tokens"] += int(result.global_tokens)
            for batch in group:
                computed, padding = _padding(batch)
                f["computed"] += computed
                f["padding"] += padding
                f["rows"] += int(batch["labels"].shape[0])

    names = list(entries)
    try:
        for _ in range(warmup):
            for name in names:
                step(name, False)
        for r in range(rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                for _ in range(steps_each):
                    step(name, True)
    finally:
        for folder in folders:
            folder.cleanup()
    out = {}
    for name, f in figures.items():
        seconds = sum(f["seconds"])
        out[name] = {
            "steps_timed": len(f["seconds"]),
            "median_step_ms": round(statistics.median(f["seconds"]) * 1e3, 1),
            "step_ms": [round(t * 1e3, 1) for t in f["seconds"]],
            "median_step_cpu_ms": round(statistics.median(f["cpu_seconds"]) * 1e3, 1),
            "real_tokens_per_s": round(f["real_tokens"] / seconds, 1),
            "real_tokens_per_cpu_s": round(f["real_tokens"] / sum(f["cpu_seconds"]), 1),
            "real_tokens_per_step": round(f["real_tokens"] / len(f["seconds"]), 1),
            "tokens_computed_per_step": round(f["computed"] / len(f["seconds"]), 1),
            "padding_fraction": round(f["padding"] / f["computed"], 4),
        }
    return out


def bench_fine_tuning(settings: dict) -> dict:
    from hyper_parallel.components.tokenizer import HuggingFaceTokenizer

    tokenizer = HuggingFaceTokenizer.Config(path="pkg://tokenizer").build()
    rows = settings["rows"]
    sets = {"chat": (chat_records(), settings["chat_seq"]),
            "long_tailed": (long_tailed_records(settings["records"], tokenizer), settings["seq"])}
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench-packing-data-") as folder:
        for name, (records, seq) in sets.items():
            path = Path(folder) / f"{name}.json"
            path.write_text(json.dumps(records))
            common = ["--dataloader.dataset", "json_file", "--dataloader.dataset_path",
                      str(path), "--tokenizer.path", "pkg://tokenizer",
                      "--training.seq_len", str(seq), "--training.global_batch_size", str(rows),
                      "--training.local_batch_size", str(rows)]
            entries = interleave({
                "packed": [*common, "--dataloader.packing", "true",
                           "--model.attn_mask_type", "block_causal"],
                "padded": common,
            }, 1, settings["warmup"], settings["rounds"])
            ratio = (entries["packed"]["real_tokens_per_s"]
                     / entries["padded"]["real_tokens_per_s"])
            cpu = (entries["packed"]["real_tokens_per_cpu_s"]
                   / entries["padded"]["real_tokens_per_cpu_s"])
            out[name] = {"seq_len": seq, "rows_per_step": rows,
                         "data": lengths(records, tokenizer, seq), "entries": entries,
                         "packed_over_padded_real_tokens_per_s": round(ratio, 3),
                         "packed_over_padded_real_tokens_per_cpu_s": round(cpu, 3)}
    return out


def bench_block_causal(settings: dict) -> dict:
    common = ["--training.seq_len", str(settings["pt_seq"]), "--dataloader.shuffle", "false",
              "--training.global_batch_size", str(settings["pt_rows"]),
              "--training.local_batch_size", str(settings["pt_rows"])]
    entries = interleave({
        "causal": common,
        "block_causal": [*common, "--dataloader.packing", "true",
                         "--model.attn_mask_type", "block_causal"],
    }, 1, settings["warmup"], settings["pt_rounds"])
    ratio = entries["block_causal"]["median_step_ms"] / entries["causal"]["median_step_ms"]
    cpu = (entries["block_causal"]["median_step_cpu_ms"]
           / entries["causal"]["median_step_cpu_ms"])
    return {"seq_len": settings["pt_seq"], "rows_per_step": settings["pt_rows"],
            "data": "pkg://corpus/train.jsonl (jsonl: documents joined with eos)",
            "entries": entries, "block_causal_over_causal_step": round(ratio, 3),
            "block_causal_over_causal_step_cpu_time": round(cpu, 3)}


def _verdict(ratio: float, target: float, higher: bool) -> str:
    met = ratio >= target if higher else ratio <= target
    return f"(target {'>=' if higher else '<='} {target}: {'met' if met else 'MISSED'})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["fine_tuning", "block_causal_cost"], help="sections left out")
    parser.add_argument("--cost-rounds", type=int, default=None,
                        help="timed steps of each block_causal_cost entry (default 4; smoke 1)")
    parser.add_argument("--out", default=None, help="result JSON (default "
                        "bench/results/packing.json; none with --smoke)")
    opts = parser.parse_args()
    os.environ.setdefault("HYPER_PARALLEL_DISABLE_TQDM", "1")
    import torch

    if opts.threads:
        torch.set_num_threads(opts.threads)
    mode = "smoke" if opts.smoke else "full"
    settings = dict(SETTINGS[mode])
    if opts.cost_rounds:
        settings["pt_rounds"] = opts.cost_rounds
    results: dict = {"mode": mode, "threads": torch.get_num_threads(),
                     "torch": torch.__version__, "device": "cpu", "targets": TARGETS}
    ft = results["fine_tuning"] = (
        {} if "fine_tuning" in opts.skip else bench_fine_tuning(settings))
    for name, r in ft.items():
        for entry, e in r["entries"].items():
            print(f"{name:<12} {entry:<7} {e['real_tokens_per_s']:9.1f} real tokens/s  "
                  f"padding {e['padding_fraction']:.3f}  {e['median_step_ms']:8.1f} ms a step")
        ratio = r["packed_over_padded_real_tokens_per_s"]
        print(f"{name}: packed / padded real tokens/s {ratio:.3f} "
              f"{_verdict(ratio, TARGETS['packed_over_padded_real_tokens_per_s'], True)}; in "
              f"this process's CPU time {r['packed_over_padded_real_tokens_per_cpu_s']:.3f}")
    if "block_causal_cost" not in opts.skip:
        cost = results["block_causal_cost"] = bench_block_causal(settings)
        ratio = cost["block_causal_over_causal_step"]
        print(f"pretraining rows of {cost['seq_len']}: block_causal / causal step "
              f"{ratio:.3f} {_verdict(ratio, TARGETS['block_causal_over_causal_step'], False)}"
              f"; in this process's CPU time {cost['block_causal_over_causal_step_cpu_time']:.3f}")
    print(write_results(result_path(opts.out, REPO / "bench" / "results" / "packing.json",
                                    opts.smoke), results))
    return exit_status(results, opts.smoke)


if __name__ == "__main__":
    raise SystemExit(main())
