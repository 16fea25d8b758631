"""Benchmark the Hugging Face export: rank 0's host memory during an export against the size of
the model, for two shard sizes, streamed (``export_hf_weights``) and the whole model gathered
on one rank (the export as it was before it streamed).

    .venv/bin/python bench/bench_hf_export.py [--smoke] [--out bench/results/hf_export.json]

Each measurement builds a Qwen3.5 in fp32 on the CPU (on ``meta``, then materialized and
initialized as the trainer does; with 2 ranks FSDP2-sharded over gloo, every decoder layer and
the root) in a fresh process (``torchrun`` for 2 ranks), then on rank 0:

* ``growth``: the peak resident set during the export above the resident set before it
  (``/proc/self/clear_refs`` resets the high-water mark ``VmHWM`` first), in MB;
* against ``model`` (the exported bytes) and ``largest unit`` (the biggest pipeline unit: the
  embedding on these flavors): the streamed export keeps one unit, the previous one the model;
* seconds and the number of files.

Layouts: the ``debug`` flavor (25 MB) on 1 and 2 ranks with 1 MB and 10 MB files; the ``0.8b``
flavor (3 GB) on 1 and 2 ranks with 100 MB and 1 GB files. One rank exports its live tensors
(no copy but the fused Gated DeltaNet projections); two ranks gather every tensor
(``full_tensor()``), so rank 0 holds what it gathered until the unit is written. ``--smoke``:
the debug flavor on one rank, a few seconds (no result file unless ``--out`` names one).
Figures, not assertions (a smoke run fails on a measurement that failed).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _launch import launch_env, torchrun_command  # this directory (sys.path[0])
from _smoke import SMOKE_HELP, exit_status, result_path, write_results

REPO = Path(__file__).resolve().parents[1]
MB = 1e6

#: (flavor, ranks, shard sizes, also the previous export) per measurement.
PLANS = {
    "smoke": [("debugmodel", 1, ("1MB", "10MB"), False)],
    "full": [
        ("debugmodel", 1, ("1MB", "10MB"), True),
        ("debugmodel", 2, ("1MB", "10MB"), True),
        ("0.8b", 1, ("100MB", "1GB"), True),
        ("0.8b", 2, ("100MB", "1GB"), True),
    ],
}


# --------------------------------------------------------------------------- the worker
def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    """VmHWM := VmRSS (Linux >= 4.0): the next peak is this section's alone."""
    Path("/proc/self/clear_refs").write_text("5")


def _build(flavor: str, world: int):
    import torch

    from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM
    from hyper_parallel.models.qwen3_5.state_dict_adapter import Qwen3_5StateDictAdapter
    from hyper_parallel.runtime.model_setup import materialize_and_init

    config = FLAVORS[flavor]
    torch.manual_seed(0)
    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(config)
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (world,))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    materialize_and_init(model, torch.device("cpu"))
    return model, Qwen3_5StateDictAdapter, config


def _sizes(model) -> tuple[int, int]:
    """(exported bytes, largest unit's bytes) at full shape (tied head counted once)."""
    from hyper_parallel.runtime.checkpoint.hf_export import _unit_of

    units: dict[str, int] = {}
    seen: set[int] = set()
    for name, p in model.named_parameters():  # named_parameters: a tied weight once
        if id(p) in seen:
            continue
        seen.add(id(p))
        unit = _unit_of(name, model.pipeline_units())
        units[unit] = units.get(unit, 0) + p.numel() * p.element_size()
    return sum(units.values()), max(units.values())


def _previous_export(model, adapter, config, path: str) -> None:
    """The export before it streamed (no pipeline): the whole model gathered on rank 0 in
    fp32, converted, written as one ``model.safetensors``."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    from hyper_parallel.models.qwen3_5.hf_io import save_hf_checkpoint

    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True,
                                                                cpu_offload=True))
    if not dist.is_initialized() or dist.get_rank() == 0:
        save_hf_checkpoint(adapter.to_hf(full, config), path, config)
    del full


def worker(flavor: str, shards: list[str], previous: bool, workdir: str, out: str) -> None:
    import torch.distributed as dist

    from hyper_parallel.platform.collectives import barrier
    from hyper_parallel.runtime.checkpoint import export_hf_weights

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if world > 1 else 0
    # Warm-up: the first export imports and allocates what every later one reuses (a tiny
    # unsharded model, written by rank 0), so it is not counted as the export's growth.
    tiny, adapter, tiny_config = _build("tiny", 1)
    export_hf_weights(tiny, adapter, tiny_config, os.path.join(workdir, "warm-up"))
    del tiny
    model, adapter, config = _build(flavor, world)
    model_bytes, unit_bytes = _sizes(model)
    rows = []
    runs = [("streamed", s) for s in shards] + ([("previous", "one file")] if previous else [])
    for how, shard in runs:
        path = os.path.join(workdir, f"{how}-{shard.replace(' ', '_')}")
        gc.collect()
        barrier()
        _reset_peak()
        base = _status_kib("VmRSS")
        start = time.perf_counter()
        if how == "streamed":
            export_hf_weights(model, adapter, config, path, max_shard_size=shard)
        else:
            _previous_export(model, adapter, config, path)
        seconds = time.perf_counter() - start
        growth = (_status_kib("VmHWM") - base) * 1024
        barrier()
        if rank == 0:
            files = len(list(Path(path).glob("*.safetensors")))
            rows.append({"export": how, "shard": shard, "files": files,
                         "seconds": round(seconds, 2), "growth_mb": round(growth / MB, 1),
                         "growth_over_model": round(growth / model_bytes, 3),
                         "growth_over_largest_unit": round(growth / unit_bytes, 3)})
            shutil.rmtree(path)
    if rank == 0:
        Path(out).write_text(json.dumps({
            "flavor": flavor, "ranks": world, "model_mb": round(model_bytes / MB, 1),
            "largest_unit_mb": round(unit_bytes / MB, 1), "rows": rows}, indent=2))
    if world > 1:
        dist.destroy_process_group()


# --------------------------------------------------------------------------- the driver
def measure(flavor: str, ranks: int, shards: tuple[str, ...], previous: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_hf_export_") as workdir:
        out = os.path.join(workdir, "result.json")
        args = [str(Path(__file__).resolve()), "--worker", flavor, ",".join(shards),
                "1" if previous else "0", workdir, out]
        cmd = [sys.executable, *args] if ranks == 1 else [*torchrun_command(ranks), *args]
        proc = subprocess.run(cmd, cwd=REPO, env=launch_env(threads=1), capture_output=True,
                              text=True, timeout=1800, check=False)
        if proc.returncode != 0 or not os.path.exists(out):
            tail = (proc.stderr + proc.stdout).strip().splitlines()[-5:]
            return {"flavor": flavor, "ranks": ranks, "error": "\n".join(tail)}
        return json.loads(Path(out).read_text())


def _print(results: list[dict]) -> None:
    print(f"{'flavor':<11}{'ranks':>6}  {'export':<9}{'shard':>9}{'files':>6}{'model MB':>10}"
          f"{'unit MB':>9}{'growth MB':>11}{'/model':>8}{'/unit':>7}{'s':>7}")
    for r in results:
        if "error" in r:
            print(f"{r['flavor']:<11}{r['ranks']:>6}  failed: {r['error']}")
            continue
        for row in r["rows"]:
            print(f"{r['flavor']:<11}{r['ranks']:>6}  {row['export']:<9}{row['shard']:>9}"
                  f"{row['files']:>6}{r['model_mb']:>10}{r['largest_unit_mb']:>9}"
                  f"{row['growth_mb']:>11}{row['growth_over_model']:>8}"
                  f"{row['growth_over_largest_unit']:>7}{row['seconds']:>7}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        flavor, shards, previous, workdir, out = sys.argv[2:7]
        sys.path.insert(0, str(REPO))
        worker(flavor, shards.split(","), previous == "1", workdir, out)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help=SMOKE_HELP + "; here: the debug flavor on one rank")
    parser.add_argument("--out", default=None,
                        help="the JSON results (default bench/results/hf_export.json)")
    opts = parser.parse_args()
    plan = PLANS["smoke" if opts.smoke else "full"]
    results = {"smoke": opts.smoke, "results": [measure(*entry) for entry in plan]}
    _print(results["results"])
    print(write_results(
        result_path(opts.out, REPO / "bench" / "results" / "hf_export.json", opts.smoke),
        results))
    sys.exit(exit_status(results, opts.smoke))


if __name__ == "__main__":
    main()
