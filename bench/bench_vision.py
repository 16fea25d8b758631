"""Benchmark the image-text model: our training step against transformers', and the image data
pipeline against what a step consumes, side by side in one run.

    .venv/bin/python bench/bench_vision.py [--quick | --smoke] [--threads N] [--positions]
                                           [--out bench/results/vision.json]

Prints and writes to JSON:

1. ``train_step``: one training step (forward with the images, fp32 cross-entropy on the text's
   next-token targets, backward, ``torch.optim.AdamW``; no clipping) of the ``debugmodel_vl``
   flavor (the debug decoder and a 2-block tower) against
   ``transformers.Qwen3_5ForConditionalGeneration`` of the same config (its SDPA attention; the
   Gated DeltaNet on its torch fallback, as ours on a CPU), on one batch of 4 rows of 256
   tokens, each row with one 128 x 128 image (8 x 8 patches, 16 tokens). Both start from the
   same weights (transformers' init, loaded into ours through the adapter); the first logits
   are compared. Warm-up steps untimed, then rounds alternating which model goes first. Median
   step ms and ``ours / transformers`` (goal < 1).
2. ``data``: images per second of the data pipeline -- the shipped demo corpus's chat records
   (``ImageTextDataset``: PNG decode, transformers' ``Qwen2VLImageProcessor``, tokenization),
   collated by ``collate_vision`` with the tower's positions -- on one process (no workers),
   against the images per second our training step consumes on the same machine at the same
   batch. ``pipeline / step demand`` above 1: one loader process keeps up.
3. ``positions``: the decoder's three-row positions (``decoder_positions``, what the loader
   computes for every batch) of one 131072-token row packed with image-text records (each 512
   tokens of text and one 256 x 256 image: 16 x 16 patches, 64 tokens); median ms of a call.
   ``--positions`` runs this section alone (seconds; ``bench/results/vision_positions.json``).

Figures, not assertions. ``--quick`` is a ~20 s run; ``--smoke`` runs every section at its
smallest (1 row of 32 tokens, one round; 8 records) and writes no file unless ``--out``
names one.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from _smoke import SMOKE_HELP, exit_status, result_path, write_results

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

FLAVOR = "debugmodel_vl"
LR = 1e-3
SETTINGS = {
    "full": {"rows": 4, "seq": 256, "side": 8, "warmup": 2, "rounds": 10, "records": 256,
             "long_row": 131_072},
    "quick": {"rows": 4, "seq": 256, "side": 8, "warmup": 1, "rounds": 4, "records": 128,
              "long_row": 131_072},
    "smoke": {"rows": 1, "seq": 32, "side": 2, "warmup": 0, "rounds": 1, "records": 8,
              "long_row": 2048},
}


def _ms(seconds: float) -> float:
    return round(seconds * 1e3, 2)


def _models():
    """(ours, transformers') with one init: transformers', loaded into ours."""
    import torch
    import transformers

    from hyper_parallel.models.qwen3_5.configuration import FLAVORS
    from hyper_parallel.models.qwen3_5.model import Qwen3_5ForCausalLM
    from hyper_parallel.models.qwen3_5.state_dict_adapter import Qwen3_5StateDictAdapter

    config = FLAVORS[FLAVOR]
    torch.manual_seed(0)
    hf = transformers.Qwen3_5ForConditionalGeneration(
        transformers.Qwen3_5Config(**config.to_hf_dict()))
    ours = Qwen3_5ForCausalLM(config)
    ours.load_state_dict(Qwen3_5StateDictAdapter.from_hf(hf.state_dict(), config))
    return config, ours.train(), hf.train()


def _batch(config, rows: int, seq: int, side: int):
    """``rows`` rows of ``seq`` tokens, each with one image of ``side x side`` patches at the
    start; the loader's positions."""
    import torch

    vision = config.vision_config
    tokens = vision.tokens_per_image(1, side, side)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 2000, (rows, seq), generator=gen)
    ids[:, 0] = vision.vision_start_token_id
    ids[:, 1:1 + tokens] = vision.image_token_id
    ids[:, 1 + tokens] = vision.vision_end_token_id
    grid = torch.tensor([[1, side, side]] * rows)
    pixels = torch.randn(rows * side * side, vision.patch_dim, generator=gen)
    labels = ids.clone()
    labels[:, : 2 + tokens] = -100
    return {"input_ids": ids, "labels": labels, "pixel_values": pixels, "image_grid_thw": grid,
            "position_ids": vision.decoder_positions(ids, grid),
            "mm_token_type_ids": (ids == vision.image_token_id).int()}


def bench_train_step(settings: dict) -> dict:
    import torch
    import torch.nn.functional as F

    config, ours, hf = _models()
    batch = _batch(config, settings["rows"], settings["seq"], settings["side"])

    def ours_logits():
        return ours(batch["input_ids"], position_ids=batch["position_ids"],
                    pixel_values=batch["pixel_values"], image_grid_thw=batch["image_grid_thw"])

    def hf_logits():
        return hf(input_ids=batch["input_ids"], pixel_values=batch["pixel_values"],
                  image_grid_thw=batch["image_grid_thw"],
                  mm_token_type_ids=batch["mm_token_type_ids"], use_cache=False).logits

    with torch.no_grad():
        diff = float((ours_logits() - hf_logits()).abs().max())
    targets = torch.roll(batch["labels"], -1, dims=1)
    targets[:, -1] = -100

    def stepper(model, logits_fn):
        opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)

        def step() -> None:
            logits = logits_fn()
            loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(),
                                   ignore_index=-100)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        return step

    steps = {"ours": stepper(ours, ours_logits), "transformers": stepper(hf, hf_logits)}
    names = list(steps)
    for _ in range(settings["warmup"]):
        for name in names:
            steps[name]()
    times = {name: [] for name in names}
    for r in range(settings["rounds"]):
        for name in (names if r % 2 == 0 else names[::-1]):
            start = time.perf_counter()
            steps[name]()
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(t) for name, t in times.items()}
    rows = settings["rows"]
    return {
        "flavor": FLAVOR, "batch": [rows, settings["seq"]],
        "image_patches": [1, settings["side"], settings["side"]],
        "max_abs_logits_diff_vs_transformers": diff,
        "entries": {name: {"median_step_ms": _ms(median[name]), "min_step_ms": _ms(min(t)),
                           "images_per_s": round(rows / median[name], 1)}
                    for name, t in times.items()},
        "ours_over_transformers": round(median["ours"] / median["transformers"], 4),
    }


def bench_data(settings: dict, step: dict) -> dict:
    from hyper_parallel.components.tokenizer import HuggingFaceTokenizer
    from hyper_parallel.data.vision import ImageTextDataset, collate_vision, image_processor
    from hyper_parallel.models.qwen3_5.configuration import FLAVORS

    vision = FLAVORS[FLAVOR].vision_config
    tokenizer = HuggingFaceTokenizer.Config(path="pkg://tokenizer_vl").build()
    dataset = ImageTextDataset("pkg://vl_corpus/train.jsonl", tokenizer=tokenizer,
                               max_seq_len=128, processor=image_processor("pkg://vl_corpus"))
    count = min(settings["records"], len(dataset))
    rows = settings["rows"]
    images = 0
    start = time.perf_counter()
    for first in range(0, count - rows + 1, rows):
        batch = collate_vision([dataset[i] for i in range(first, first + rows)],
                               pad_id=tokenizer.pad_id, positions=vision.decoder_positions)
        images += int(batch["image_grid_thw"].shape[0]) if "image_grid_thw" in batch else 0
    elapsed = time.perf_counter() - start
    per_s = images / elapsed
    demand = step["entries"]["ours"]["images_per_s"]
    return {"records": count, "images": images, "seconds": round(elapsed, 3),
            "images_per_s": round(per_s, 1), "step_demand_images_per_s": demand,
            "pipeline_over_step_demand": round(per_s / demand, 2)}


def _long_row(vision, seq: int, side: int = 16, text: int = 512):
    """One row of ``seq`` tokens packed with records of ``text`` tokens and one image of ``side
    x side`` patches between its vision start and end tokens; the images' grids."""
    import torch

    tokens = vision.tokens_per_image(1, side, side)
    ids = torch.randint(0, 2000, (1, seq), generator=torch.Generator().manual_seed(2))
    at, images = 0, 0
    while at + tokens + 2 <= seq:
        ids[0, at] = vision.vision_start_token_id
        ids[0, at + 1:at + 1 + tokens] = vision.image_token_id
        ids[0, at + 1 + tokens] = vision.vision_end_token_id
        at += tokens + 2 + text
        images += 1
    return ids, torch.tensor([[1, side, side]] * images)


def bench_positions(settings: dict) -> dict:
    from hyper_parallel.models.qwen3_5.configuration import FLAVORS

    vision = FLAVORS[FLAVOR].vision_config
    ids, grid = _long_row(vision, settings["long_row"])
    times = []
    for r in range(settings["warmup"] + settings["rounds"]):
        start = time.perf_counter()
        vision.decoder_positions(ids, grid)
        if r >= settings["warmup"]:
            times.append(time.perf_counter() - start)
    return {"tokens": ids.shape[1], "images": grid.shape[0],
            "median_ms": _ms(statistics.median(times)), "min_ms": _ms(min(times))}


def _print_positions(positions: dict) -> None:
    print(f"positions: {positions['median_ms']:.2f} ms for a row of {positions['tokens']} "
          f"tokens with {positions['images']} images")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--quick", action="store_true", help="fewer rounds (~20 s)")
    modes.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    parser.add_argument("--positions", action="store_true",
                        help="only the decoder positions of a 128k-token row (seconds)")
    parser.add_argument("--out", default=None, help="result JSON (default "
                        "bench/results/vision.json, vision_positions.json with --positions; "
                        "none with --smoke)")
    opts = parser.parse_args()
    import torch

    if opts.threads:
        torch.set_num_threads(opts.threads)
    mode = "smoke" if opts.smoke else "quick" if opts.quick else "full"
    settings = SETTINGS[mode]
    results: dict = {"mode": mode, "threads": torch.get_num_threads(),
                     "torch": torch.__version__}
    if opts.positions:
        results["positions"] = bench_positions(settings)
        _print_positions(results["positions"])
        print(write_results(result_path(
            opts.out, REPO / "bench" / "results" / "vision_positions.json", opts.smoke), results))
        return exit_status(results, opts.smoke)
    step = results["train_step"] = bench_train_step(settings)
    for name, entry in step["entries"].items():
        print(f"{name:<13} {entry['median_step_ms']:8.1f} ms a step "
              f"({entry['images_per_s']:.1f} images/s)")
    print(f"ours / transformers {step['ours_over_transformers']:.3f} "
          f"(max |logits diff| {step['max_abs_logits_diff_vs_transformers']:.1e})")
    data = results["data"] = bench_data(settings, step)
    print(f"data pipeline: {data['images_per_s']:.1f} images/s on one process; the step "
          f"consumes {data['step_demand_images_per_s']:.1f}: pipeline / step demand "
          f"{data['pipeline_over_step_demand']:.2f}")
    results["positions"] = bench_positions(settings)
    _print_positions(results["positions"])
    print(write_results(result_path(opts.out, REPO / "bench" / "results" / "vision.json",
                                    opts.smoke), results))
    return exit_status(results, opts.smoke)


if __name__ == "__main__":
    raise SystemExit(main())
