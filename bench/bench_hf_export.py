"""Benchmark the Hugging Face export: every rank's host memory during an export against the
size of the model, for two shard sizes and two dtypes, streamed (``export_hf_weights``) and the
whole model gathered on one rank (the export as it was before it streamed).

    .venv/bin/python bench/bench_hf_export.py [--smoke] [--out bench/results/hf_export.json]

Each measurement builds a Qwen3.5 in fp32 on the CPU (on ``meta``, then materialized and
initialized as the trainer does; with 2 ranks FSDP2-sharded over gloo, every decoder layer and
the root) in a fresh process (``torchrun`` for 2 ranks), then on every rank:

* ``growth``: the peak resident set during the export above the resident set before it
  (``/proc/self/clear_refs`` resets the high-water mark ``VmHWM`` first), in MB -- rank 0's,
  and every rank's (``growth MB by rank``: the largest is what a host must have spare);
* against ``model`` (the exported bytes) and ``largest unit`` (the biggest pipeline unit: the
  embedding on these flavors, in fp32), rank 0's and the largest rank's;
* seconds and the number of files (``fp32``: the model's dtype; ``bf16``: written in bf16,
  ``DtypeRule(cast="BF16")``, as a run from a published checkpoint writes by default).

Layouts: the ``debug`` flavor (25 MB) on 1 and 2 ranks with 1 MB and 10 MB files; the ``0.8b``
flavor (3 GB) on 1 and 2 ranks with 100 MB and 1 GB files. One rank exports its live tensors
(no copy but the fused Gated DeltaNet projections, and the cast in bf16); two ranks gather
each tensor to the rank that writes its file (files alternate between the ranks), which holds
the unit it converts and the one its writer thread still writes. ``--smoke``: the debug flavor
on one rank, a few seconds (no result file unless ``--out`` names one). Figures, not
assertions (a smoke run fails on a measurement that failed).

**Measured** (2 ranks FSDP 2, the 0.8b: 3.0 GB, its embedding 1.0 GB; this 2-core CPU machine,
gloo; growth in MB, rank 0 / rank 1):

                                      100 MB fp32   1 GB fp32     1 GB bf16
  before (all-gather; rank 0 writes)  2034 / 2034   2034 / 2034   --
  now (to the writer; spread files)   1717 / 460    1716 / 268    1194 / 254

Rank 0 writes the file of the embedding (the largest unit): it holds that unit while its thread
writes it, and gloo stages the pieces it receives; rank 1 no longer holds any tensor it does
not write (what remains is the pieces it sends and the small units it writes). In bf16 a
writer holds and receives half.
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

#: (flavor, ranks, the streamed exports as "<shard size>/<dtype>", also the previous export)
#: per measurement.
PLANS = {
    "smoke": [("debugmodel", 1, ("1MB/fp32", "10MB/bf16"), False)],
    "full": [
        ("debugmodel", 1, ("1MB/fp32", "10MB/fp32", "10MB/bf16"), True),
        ("debugmodel", 2, ("1MB/fp32", "10MB/fp32", "10MB/bf16"), True),
        ("0.8b", 1, ("100MB/fp32", "1GB/fp32", "1GB/bf16"), True),
        ("0.8b", 2, ("100MB/fp32", "1GB/fp32", "1GB/bf16"), True),
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


def _streamed(model, adapter, config, path: str, shard: str, dtype: str) -> None:
    from hyper_parallel.runtime.checkpoint import export_hf_weights

    if dtype == "fp32":
        export_hf_weights(model, adapter, config, path, max_shard_size=shard)
        return
    from hyper_parallel.runtime.checkpoint.hf_plan import DtypeRule

    export_hf_weights(model, adapter, config, path, max_shard_size=shard,
                      dtypes=DtypeRule(cast="BF16"))


def _every_rank(value: float) -> list[float]:
    import torch.distributed as dist

    if not dist.is_initialized():
        return [value]
    values: list = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values


def worker(flavor: str, exports: list[str], previous: bool, workdir: str, out: str) -> None:
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
    runs = ([("streamed", *e.split("/")) for e in exports]
            + ([("previous", "one file", "fp32")] if previous else []))
    for how, shard, dtype in runs:
        path = os.path.join(workdir, f"{how}-{shard.replace(' ', '_')}-{dtype}")
        gc.collect()
        barrier()
        _reset_peak()
        base = _status_kib("VmRSS")
        start = time.perf_counter()
        if how == "streamed":
            _streamed(model, adapter, config, path, shard, dtype)
        else:
            _previous_export(model, adapter, config, path)
        seconds = time.perf_counter() - start
        growths = _every_rank((_status_kib("VmHWM") - base) * 1024)
        barrier()
        if rank == 0:
            files = len(list(Path(path).glob("*.safetensors")))
            growth, most = growths[0], max(growths)
            rows.append({"export": how, "shard": shard, "dtype": dtype, "files": files,
                         "seconds": round(seconds, 2), "growth_mb": round(growth / MB, 1),
                         "growth_mb_by_rank": [round(g / MB, 1) for g in growths],
                         "growth_over_model": round(growth / model_bytes, 3),
                         "growth_over_largest_unit": round(growth / unit_bytes, 3),
                         "largest_rank_over_largest_unit": round(most / unit_bytes, 3)})
            shutil.rmtree(path)
    if rank == 0:
        Path(out).write_text(json.dumps({
            "flavor": flavor, "ranks": world, "model_mb": round(model_bytes / MB, 1),
            "largest_unit_mb": round(unit_bytes / MB, 1), "rows": rows}, indent=2))
    if world > 1:
        dist.destroy_process_group()


# --------------------------------------------------------------------------- the driver
def measure(flavor: str, ranks: int, exports: tuple[str, ...], previous: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_hf_export_") as workdir:
        out = os.path.join(workdir, "result.json")
        args = [str(Path(__file__).resolve()), "--worker", flavor, ",".join(exports),
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
          f"{'unit MB':>9}{'growth MB by rank':>20}{'/model':>8}{'/unit':>7}{'max/unit':>9}"
          f"{'s':>7}{'dtype':>7}")
    for r in results:
        if "error" in r:
            print(f"{r['flavor']:<11}{r['ranks']:>6}  failed: {r['error']}")
            continue
        for row in r["rows"]:
            by_rank = " / ".join(str(g) for g in row["growth_mb_by_rank"])
            print(f"{r['flavor']:<11}{r['ranks']:>6}  {row['export']:<9}{row['shard']:>9}"
                  f"{row['files']:>6}{r['model_mb']:>10}{r['largest_unit_mb']:>9}"
                  f"{by_rank:>20}{row['growth_over_model']:>8}"
                  f"{row['growth_over_largest_unit']:>7}"
                  f"{row['largest_rank_over_largest_unit']:>9}{row['seconds']:>7}"
                  f"{row['dtype']:>7}")


def main() -> int:
    sys.path.insert(0, str(REPO))  # hyper_parallel: the worker's, and the exit's of both
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        flavor, exports, previous, workdir, out = sys.argv[2:7]
        worker(flavor, exports.split(","), previous == "1", workdir, out)
        return 0
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
    return exit_status(results, opts.smoke)


if __name__ == "__main__":
    code = main()
    from hyper_parallel.utils.process import exit_now

    # Finalization after a worker's destroy_process_group can abort ("terminate called without
    # an active exception", gloo) and fail a finished export; leave as the entry points do.
    exit_now(code)
