"""Measure this machine's rates and write the planner's hardware profile (``--hardware FILE``).

    .venv/bin/python bench/calibrate_hardware.py [--ranks 2 4] [--backend gloo|nccl]
                                                 [--out-dir bench/results] [--quick]

What it measures, per rank, with every rank of a group busy at once (on a CPU machine the ranks
share its cores, so a rank's rates depend on how many run: one profile per rank count,
``hardware_cpu-gloo-<n>.json``; on a GPU node one profile, ``hardware_<gpu>-nccl.json``):

* **matmul throughput by shape**: ``torch.mm`` in the training dtype (fp32 on the CPU, as the
  CPU runs train; bf16 on a GPU) at square and the debug model's projection shapes, each rank
  at once; the profile's ``bf16_flops`` is the best shape's rate and ``matmul_efficiency`` the
  rate at the shapes the small flavors run (their median) over it;
* **memory bandwidth**: an elementwise ``add`` over 64 MiB tensors (two reads, one write);
* **the process group's collectives by size and group size**: all-reduce and all-gather of 4 KiB
  to 16 MiB on all the ranks, timed and fitted to ``t = alpha + S x f / B`` with nccl-tests'
  bus factor ``f`` (least squares): ``intra_node_latency_s`` (alpha) and
  ``intra_node_bytes_per_s`` (B). Alpha is the larger of the fit's and what a 4 KiB
  all-reduce adds between stretches of compute: in a step the ranks meet after computing, each
  time-sliced with the others, and the last one's arrival is the wait. A single machine has no
  network: the inter-node figures are the same, stated in ``sources``;
* **the host's cost of an operator**: a chain of one-element operators forward and backward,
  per operator dispatched (counted as preflight counts a step's), and the extra of one on
  DTensors (their sharding propagation);
* **the other kinds' cost**: reduce-scatter and all-to-all timed the same way, each one's time
  over what the fit above prices it at (``collective_cost_factors``, the median at 1 MiB and
  more): gloo runs a reduce-scatter as a copy and an all-reduce of the whole input, about twice
  its price;
* **overlap**: on a GPU, a collective run asynchronously while the rank multiplies matrices:
  the share of the shorter of the two that running them at once saved (NCCL's own stream and
  SMs make it ~1). On a CPU, 0: FSDP2 overlaps its all-gathers and reduce-scatters with compute
  through the device's streams, and a CPU has none, so each one blocks its rank (the
  asynchronous figure is kept under ``_measured``);
* on a CPU, **the per-operator cost and the memory-bound bandwidth fitted to real steps**
  (:func:`fit_step_costs`): one-rank training steps of the debug model, as many at once as the
  profile has ranks, least squares over their recorded work; these replace the two
  microbenchmarks' figures (kept under ``_measured``).

Every timed figure is the fastest of its repeats: on a shared machine other jobs only ever add
time (the median over the fastest of each, the spread, is written under ``_measured``).

The GPU path (``--backend nccl``) runs the same measurements on CUDA tensors with NCCL, one
process per GPU of the node; it has not run on this (CPU-only) machine. Results are written
atomically with the umask's permissions (:func:`hyper_parallel.plan.hardware.save`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

#: (m, k, n) of the timed matmuls: square ones, and the debug / tiny flavors' projections
#: (a micro-batch's tokens by hidden by the projection's width).
SHAPES = ((1024, 1024, 1024), (512, 512, 512), (256, 256, 512), (256, 512, 256),
          (512, 256, 256), (256, 256, 256), (256, 256, 2048))
#: The shapes the small flavors run (the efficiency's median).
SMALL_SHAPES = SHAPES[2:]
SIZES = tuple(4096 << (2 * i) for i in range(6))  # 4 KiB .. 4 MiB ... 16 MiB
#: The collectives timed: the first two fit the profile's alpha and bandwidth; each other one's
#: cost over what that fit prices it at is its ``collective_cost_factors`` entry.
COLLECTIVE_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
#: The smallest size a kind's factor is read at: below it alpha, the same for every kind,
#: sets the time.
FACTOR_MIN_BYTES = 1 << 20
REPEATS = 5
#: The shortest timed block (see ``barrier_timed``).
MIN_BLOCK_S = 0.3
#: The one-rank training runs the host's per-operator cost and the memory-bound operators'
#: bandwidth are fitted from (:func:`fit_step_costs`): the debug model's step of ``rows`` rows
#: of ``FIT_SEQ_LEN`` tokens in ``micro-batches`` (gradient accumulation: the same tokens, as
#: many times the operators), ``FIT_STEPS`` steps (the first ``FIT_WARMUP`` untimed).
FIT_SHAPES = ((1, 1), (8, 1), (8, 4))
FIT_SEQ_LEN = 64
FIT_STEPS = 7
FIT_WARMUP = 2
FIT_ROUNDS = 2


def _timed(fn, repeats: int = REPEATS, spreads: list | None = None) -> float:
    """The fastest of ``repeats`` timed calls: other work on a shared machine only ever adds
    time, so the minimum is the machine's own rate (the median / minimum - 1 of each
    measurement is appended to ``spreads``)."""
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    if spreads is not None:
        spreads.append(statistics.median(times) / min(times) - 1)
    return min(times)


def _sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _worker(rank: int, world: int, backend: str, init: str, out: str, quick: bool) -> None:
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world)
    result: dict = {"matmul": {}, "collectives": {}, "spreads": []}
    repeats = 3 if quick else REPEATS

    def barrier_timed(fn):
        """Seconds of one ``fn()``, timed over blocks of at least :data:`MIN_BLOCK_S`: ranks
        that share cores are time-sliced, and a short block would catch one rank running
        alone."""
        def once():
            fn()
            _sync(device)
        once()
        start = time.perf_counter()
        once()
        reps = max(1, math.ceil(MIN_BLOCK_S / max(time.perf_counter() - start, 1e-6)))
        reps = torch.tensor([reps], device=device)
        dist.all_reduce(reps, op=dist.ReduceOp.MAX)  # every rank the same count of collectives
        reps = int(reps)

        def block():
            for _ in range(reps):
                fn()
            _sync(device)
        dist.barrier()
        return _timed(block, repeats, result["spreads"]) / reps

    for m, k, n in SHAPES:
        a = torch.randn(m, k, device=device, dtype=dtype)
        b = torch.randn(k, n, device=device, dtype=dtype)
        seconds = barrier_timed(lambda a=a, b=b: torch.mm(a, b))
        result["matmul"][f"{m}x{k}x{n}"] = 2 * m * k * n / seconds
    result["operator_overhead_s"], result["dtensor_operator_overhead_s"] = _overheads(
        device, world, barrier_timed)
    x = torch.randn(16 << 20, device=device)
    y = torch.randn(16 << 20, device=device)
    z = torch.empty_like(x)
    seconds = barrier_timed(lambda: torch.add(x, y, out=z))
    result["memory_bytes_per_s"] = 3 * x.numel() * x.element_size() / seconds
    x = y = z = None  # 192 MiB: gone before the collectives
    for kind in COLLECTIVE_KINDS:
        for size in SIZES[: 4 if quick else None]:
            t = torch.randn(size // 4, device=device)
            if kind == "all_reduce":
                seconds = barrier_timed(lambda t=t: dist.all_reduce(t))
            elif kind == "all_gather":
                out_t = torch.empty(world * t.numel(), device=device)
                # nccl-tests' S of an all-gather is its output.
                seconds = barrier_timed(
                    lambda out_t=out_t, t=t: dist.all_gather_single(out_t, t))
                size = world * size
            elif kind == "reduce_scatter":
                # S is its input (nccl-tests', and what preflight records).
                t = torch.randn(world * (size // 4), device=device)
                shard = torch.empty(size // 4, device=device)
                seconds = barrier_timed(
                    lambda shard=shard, t=t: dist.reduce_scatter_tensor(shard, t))
                size = world * size
            else:  # all_to_all: S is what a rank sends
                t = torch.randn(world * (size // 4), device=device)
                out_t = torch.empty_like(t)
                seconds = barrier_timed(
                    lambda out_t=out_t, t=t: dist.all_to_all_single(out_t, t))
                size = world * size
            result["collectives"].setdefault(kind, []).append((size, seconds))
    # Overlap: a 4 MiB all-reduce issued asynchronously under matmuls of the same duration.
    a = torch.randn(512, 512, device=device, dtype=dtype)
    t = torch.randn(1 << 20, device=device)
    comm = barrier_timed(lambda: dist.all_reduce(t))
    per_mm = barrier_timed(lambda: torch.mm(a, a))
    loops = max(1, round(comm / per_mm))
    compute = barrier_timed(lambda: [torch.mm(a, a) for _ in range(loops)])

    def both():
        work = dist.all_reduce(t, async_op=True)
        for _ in range(loops):
            torch.mm(a, a)
        work.wait()
    together = barrier_timed(both)
    saved = comm + compute - together
    result["overlap"] = max(0.0, min(1.0, saved / min(comm, compute)))
    # A collective inside a step: the ranks meet between stretches of compute, each of them
    # time-sliced with the others (and, on a shared machine, other work), so a small one
    # costs the wait for the last rank to arrive, not the idle loop's alpha.
    small = torch.zeros(1024, device=device)
    meetings = 8

    def stretches(collective: bool) -> None:
        for _ in range(meetings):
            torch.mm(a, a)
            if collective:
                dist.all_reduce(small)
    apart = barrier_timed(lambda: stretches(False))
    met = barrier_timed(lambda: stretches(True))
    result["latency_in_step_s"] = max(0.0, (met - apart) / meetings)
    gathered = [None] * world
    dist.all_gather_object(gathered, result)
    if rank == 0:
        Path(out).write_text(json.dumps(gathered))
    dist.destroy_process_group()


class _Count:
    """Operators dispatched in a block (and those on DTensors), as preflight counts them
    (``hyper_parallel.preflight.work.WorkRecorder``: local ones by a dispatch mode, DTensor
    ones by DTensor's sharding-propagation cache lookups)."""

    def __init__(self) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class Mode(TorchDispatchMode):
            def __enter__(self):
                counter._start = _dtensor_lookups()
                return super().__enter__()

            def __exit__(self, *exc):
                counter.dtensor = _dtensor_lookups() - counter._start
                return super().__exit__(*exc)

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                from torch.distributed.tensor import DTensor
                from torch.utils._pytree import tree_leaves

                if any(isinstance(t, DTensor) for t in tree_leaves((args, kwargs))):
                    return NotImplemented
                counter.local += 1
                return func(*args, **(kwargs or {}))

        self.mode = Mode()
        self.local = self.dtensor = self._start = 0


def _dtensor_lookups() -> int:
    from hyper_parallel.preflight.work import dtensor_operators_dispatched

    return dtensor_operators_dispatched()


def _overheads(device, world: int, barrier_timed) -> tuple[float, float]:
    """The host's fixed cost of one operator, forward and backward (a chain of elementwise
    operators on one-element tensors, its operators counted as preflight counts a step's), and
    the extra cost of one on DTensors (the same chain on replicated DTensors of a 1-D mesh)."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate

    chain = 200

    def step(x):
        y = x
        for _ in range(chain):
            y = y * 1.0001 + 0.5
        y.sum().backward()

    local = torch.ones(1, device=device, requires_grad=True)
    mesh = init_device_mesh(device.type, (world,))
    dt = DTensor.from_local(torch.ones(1, device=device), mesh, [Replicate()]).requires_grad_()
    counts = []
    for x in (local, dt):
        count = _Count()
        with count.mode:
            step(x)
        counts.append(count)
    t_local = barrier_timed(lambda: step(local))
    t_dtensor = barrier_timed(lambda: step(dt))
    per_op = t_local / counts[0].local
    extra = max(0.0, t_dtensor - per_op * counts[1].local) / max(1, counts[1].dtensor)
    return per_op, extra


def _fit(points: list[tuple[int, float]], factor: float) -> tuple[float, float]:
    """Least-squares ``t = alpha + S x factor / B``: ``(alpha, B)`` (alpha clipped at 0)."""
    xs = [s * factor for s, _ in points]
    ts = [t for _, t in points]
    mx, mt = statistics.fmean(xs), statistics.fmean(ts)
    slope = sum((x - mx) * (t - mt) for x, t in zip(xs, ts)) / sum((x - mx) ** 2 for x in xs)
    alpha = max(0.0, mt - slope * mx)
    return alpha, 1.0 / slope


def _fit_run(shape: tuple[int, int], steps: int) -> tuple[list[str], float | None, str | None]:
    """One one-rank training run of the debug model of ``shape`` (rows, micro-batches):
    ``(its arguments, its fastest step past the warm-up, or None and the reason it
    failed)``."""
    from _launch import run_trainer
    from bench_plan_accuracy import DENSE

    rows, micro_batches = shape
    argv = [*DENSE, f"--training.global_batch_size={rows}",
            f"--training.local_batch_size={rows // micro_batches}",
            f"--training.seq_len={FIT_SEQ_LEN}",
            f"--training.steps={steps}"]
    with tempfile.TemporaryDirectory(prefix="calibrate-fit-") as out:
        run = run_trainer([*argv, "--checkpoint.folder", out, "--dump_folder", out], 1,
                          Path(out) / "metrics.jsonl")
    if "error" in run:
        return argv, None, run["error"]
    return argv, min(r["step_time"] for r in run["rows"] if r["step"] > FIT_WARMUP), None


def fit_step_costs(world: int, hardware, quick: bool) -> dict:
    """The host's cost of an operator and the memory-bound operators' bandwidth, fitted to
    real training steps: ``world`` one-rank runs of the debug model at once (every core as
    busy as under a ``world``-rank job) of each of :data:`FIT_SHAPES`, :data:`FIT_ROUNDS`
    times, each shape's work recorded by preflight (``work=True``) and its fastest steady
    step of all its runs the measurement. With
    the matmuls and attention priced at the measured matmul rate, the rest of each step is
    ``operators x c + memory-bound bytes / B``: least squares over the runs, each
    coefficient at least 0.

    Why not the microbenchmarks alone: a small flavor's CPU step is mostly the operators'
    fixed host cost (autograd's bookkeeping, the dispatcher, an allocation per output) and
    elementwise operators on tensors the caches hold, which a chain of one-element operators
    and an add over 64 MiB (DRAM) misjudge in opposite directions."""
    from concurrent.futures import ThreadPoolExecutor

    from hyper_parallel.config.manager import ConfigManager
    from hyper_parallel.preflight.gpus import GPUS
    from hyper_parallel.preflight.run import preflight
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    sys.path.insert(0, str(REPO / "bench"))
    steps = FIT_WARMUP + (2 if quick else FIT_STEPS - FIT_WARMUP)
    shapes = FIT_SHAPES
    fastest: dict[tuple[int, int], float] = {}
    argvs: dict[tuple[int, int], list[str]] = {}
    # The shapes' runs interleaved, round after round: a stretch of other jobs' load falls on
    # every shape alike, and each shape's fastest step of all its rounds is kept.
    for _ in range(1 if quick else FIT_ROUNDS):
        for shape in shapes:
            with ThreadPoolExecutor(world) as pool:
                runs = list(pool.map(_fit_run, [shape] * world, [steps] * world))
            failed = [why for _, t, why in runs if t is None]
            if failed:
                raise RuntimeError(f"the calibration's training run of {shape[0]} rows in "
                                   f"{shape[1]} micro-batches failed: {failed[0]}")
            argvs[shape] = runs[0][0]
            fastest[shape] = min([fastest.get(shape, math.inf), *(t for _, t, _ in runs)])
    points = []
    for shape in shapes:
        config = ConfigManager(root_type=HyperTrainer.Config).parse_args(argvs[shape])
        work = preflight(config, GPUS["h100-80gb"], world=1, work=True).roles[0].work
        flops = work.flops
        rest = fastest[shape] - ((flops.get("matmul", 0.0) + flops.get("other", 0.0))
                                / hardware.matmul_flops
                                + flops.get("attention", 0.0) / hardware.attention_flops)
        points.append({"rows": shape[0], "micro_batches": shape[1],
                       "step_s": fastest[shape], "rest_s": rest,
                       "operators": work.operators, "memory_bytes": work.memory_bytes,
                       "flops": work.total_flops})
    per_op, per_byte = _nonnegative_fit([(p["operators"], p["memory_bytes"], p["rest_s"])
                                         for p in points])
    return {"operator_overhead_s": per_op,
            "memory_bytes_per_s": 1.0 / per_byte if per_byte > 0 else math.inf,
            "runs": points}


def _nonnegative_fit(points: list[tuple[float, float, float]]) -> tuple[float, float]:
    """Least squares ``y = a x1 + b x2`` (no intercept) with ``a, b >= 0``: the
    unconstrained solution, else the better of the two one-variable fits."""
    sxx = sum(x1 * x1 for x1, _, _ in points)
    syy = sum(x2 * x2 for _, x2, _ in points)
    sxy = sum(x1 * x2 for x1, x2, _ in points)
    sx = sum(x1 * y for x1, _, y in points)
    sy = sum(x2 * y for _, x2, y in points)
    det = sxx * syy - sxy * sxy
    if det > 0:
        a, b = (sx * syy - sy * sxy) / det, (sy * sxx - sx * sxy) / det
        if a >= 0 and b >= 0:
            return a, b

    def loss(a: float, b: float) -> float:
        return sum((y - a * x1 - b * x2) ** 2 for x1, x2, y in points)
    only_a = (max(0.0, sx / sxx) if sxx else 0.0, 0.0)
    only_b = (0.0, max(0.0, sy / syy) if syy else 0.0)
    return min(only_a, only_b, key=lambda ab: loss(*ab))


def measure(world: int, backend: str, quick: bool) -> list[dict]:
    """Every rank's figures, ``world`` ranks at once."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="calibrate-") as tmp:
        out = os.path.join(tmp, "result.json")
        init = "file://" + os.path.join(tmp, "store")
        mp.start_processes(_worker, args=(world, backend, init, out, quick), nprocs=world,
                           join=True, start_method="spawn")
        return json.loads(Path(out).read_text())


def profile(world: int, backend: str, name: str, ranks: list[dict], fit: bool = False,
            quick: bool = False) -> dict:
    """The profile of one group size from its ranks' figures (each rate: the ranks' median);
    ``fit``: the per-operator cost and the memory-bound bandwidth fitted to real training
    steps (:func:`fit_step_costs`) instead of the microbenchmarks'."""
    import dataclasses

    from hyper_parallel.plan.hardware import Hardware, to_dict
    from hyper_parallel.plan.timing import BUS_FACTORS

    def timed(kind: str) -> list[tuple[int, float]]:
        """``(size, the ranks' median seconds)`` of each size ``kind`` was timed at."""
        return [(s, statistics.median(r["collectives"][kind][i][1] for r in ranks))
                for i, (s, _) in enumerate(ranks[0]["collectives"].get(kind, ()))]

    shapes = {s: statistics.median(r["matmul"][s] for r in ranks) for s in ranks[0]["matmul"]}
    best = max(shapes.values())
    small = statistics.median(shapes[f"{m}x{k}x{n}"] for m, k, n in SMALL_SHAPES)
    fits = {kind: _fit(timed(kind), BUS_FACTORS[kind](world)) for kind in COLLECTIVE_KINDS[:2]}
    idle_alpha = statistics.fmean(a for a, _ in fits.values())
    in_step = statistics.median(r["latency_in_step_s"] for r in ranks)
    alpha = max(idle_alpha, in_step)
    bandwidth = statistics.fmean(b for _, b in fits.values())
    factors = {}
    for kind in COLLECTIVE_KINDS[2:]:
        ratios = [seconds / (idle_alpha + size * BUS_FACTORS[kind](world) / bandwidth)
                  for size, seconds in timed(kind) if size >= FACTOR_MIN_BYTES]
        if ratios:
            factors[kind] = statistics.median(ratios)
    memory = statistics.median(r["memory_bytes_per_s"] for r in ranks)
    async_overlap = statistics.median(r["overlap"] for r in ranks)
    # FSDP2 overlaps its all-gathers and reduce-scatters with compute through the device's
    # streams (fully_shard's get_all_gather_streams); a CPU has none, so each one blocks its
    # rank whatever gloo could overlap when asked to (async_overlap, kept under _measured).
    overlap = async_overlap if backend == "nccl" else 0.0
    op_overhead = statistics.median(r["operator_overhead_s"] for r in ranks)
    dtensor_overhead = statistics.median(r["dtensor_operator_overhead_s"] for r in ranks)
    hw = Hardware(
        name=name, bf16_flops=best, hbm_bytes_per_s=memory,
        intra_node_bytes_per_s=bandwidth, intra_node_latency_s=alpha,
        inter_node_bytes_per_s=bandwidth, inter_node_latency_s=alpha,
        matmul_efficiency=min(1.0, small / best), memory_efficiency=1.0, overlap=overlap,
        collective_cost_factors=factors,
        operator_overhead_s=op_overhead, dtensor_operator_overhead_s=dtensor_overhead,
        sources=(
            f"measured by bench/calibrate_hardware.py, {world} {backend} ranks at once on "
            f"{os.cpu_count()} CPUs" + ("" if backend == "nccl" else
                                         " (fp32 matmuls: the CPU runs' dtype)"),
            ("bf16_flops: the best matmul shape's rate; matmul_efficiency: the small flavors' "
             "shapes' median rate over it"),
            "hbm_bytes_per_s: elementwise add of 64 MiB tensors (2 reads + 1 write)",
            ("operator_overhead_s and hbm_bytes_per_s: least squares over one-rank training "
             f"steps of the debug model of {FIT_SHAPES} (rows, micro-batches), {world} at once "
             "(fitted: see "
             "_measured.step_fit)" if fit else
             "operator overhead: a chain of one-element elementwise operators forward and "
             "backward, per operator dispatched"),
            ("dtensor_operator_overhead_s: the same chain on replicated DTensors, the extra "
             "per DTensor operator"),
            "every figure: the fastest of its repeats (other work on the machine only adds)",
            ("collectives: all_reduce and all_gather of 4 KiB-16 MiB, least squares of "
             "t = alpha + S f / B (nccl-tests bus factors); alpha: the larger of the fit's and "
             "a 4 KiB all_reduce's cost between stretches of compute (the ranks' meeting)"),
            ("collective_cost_factors: reduce_scatter and all_to_all of 1-16 MiB timed the same "
             "way, the median of each one's time over its price by that fit (idle alpha)"),
            ("overlap: " + ("an all_reduce run asynchronously under matmuls" if backend == "nccl"
                            else "0: FSDP2 overlaps through the device's streams, and a CPU "
                            "has none (each of its collectives blocks the rank); an "
                            "asynchronous all_reduce under matmuls: _measured.async_overlap")),
            "inter-node figures: the intra-node ones (one machine, no network)" if backend ==
            "gloo" else "inter-node figures: the intra-node ones until measured across nodes",
        ))
    spreads = sorted(x for r in ranks for x in r["spreads"])
    measured: dict = {
        "matmul_flops_by_shape": shapes,
        "collective_fits": {k: {"latency_s": a, "bytes_per_s": b} for k, (a, b) in fits.items()},
        "idle_latency_s": idle_alpha, "latency_in_step_s": in_step,
        "async_overlap": async_overlap,
        "microbenchmark_memory_bytes_per_s": memory,
        "microbenchmark_operator_overhead_s": op_overhead,
        "spread_median_over_min": {"median": statistics.median(spreads), "max": spreads[-1]}}
    if fit:
        step_fit = fit_step_costs(world, hw, quick)
        measured["step_fit"] = step_fit
        hw = dataclasses.replace(
            hw, operator_overhead_s=step_fit["operator_overhead_s"],
            # no memory-bound term fitted: the elementwise operators' time is their host cost
            hbm_bytes_per_s=min(step_fit["memory_bytes_per_s"], 1e15))
    out = to_dict(hw)
    out["_measured"] = measured
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    parser.add_argument("--out-dir", default=str(REPO / "bench" / "results"))
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # one thread a rank, as the bench runs
    from hyper_parallel.plan.hardware import from_dict, save

    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    for world in args.ranks:
        if args.backend == "nccl":
            import torch

            name = torch.cuda.get_device_name(0).lower().replace(" ", "-") + "-nccl"
        else:
            name = f"cpu-gloo-{world}"
        data = profile(world, args.backend, name, measure(world, args.backend, args.quick),
                       fit=args.backend == "gloo", quick=args.quick)
        path = Path(args.out_dir) / f"hardware_{name}.json"
        save(from_dict({k: v for k, v in data.items() if not k.startswith("_")}), str(path))
        # The per-shape and per-kind figures behind the profile, beside its fields.
        written = json.loads(path.read_text())
        written["_measured"] = data["_measured"]
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(written, indent=2, sort_keys=True) + "\n")
        os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
        print(f"{name}: matmul {data['bf16_flops'] / 1e9:.1f} GFLOP/s (x{data['matmul_efficiency']:.2f}"
              f" at the small shapes), memory {data['hbm_bytes_per_s'] / 1e9:.1f} GB/s, "
              f"collectives {data['intra_node_latency_s'] * 1e6:.0f} us + "
              f"{data['intra_node_bytes_per_s'] / 1e9:.2f} GB/s "
              + "".join(f"({kind} x{factor:.2f}) "
                        for kind, factor in data["collective_cost_factors"].items())
              + f"overlap {data['overlap']:.2f}, "
              f"{data['operator_overhead_s'] * 1e6:.0f} us an operator "
              f"(+{data['dtensor_operator_overhead_s'] * 1e6:.0f} on DTensors)"
              f" -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
