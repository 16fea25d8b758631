"""Preflight one configuration: its rank roles, each built and measured, judged against a GPU.

A *role* is a set of ranks that hold the same shapes. Data, FSDP, tensor, context and expert
parallel ranks differ only in which shard or which experts they hold, never in how much (the
representative is rank 0, whose FSDP shards are the largest when a dimension does not divide);
pipeline ranks hold different stages, so each pipeline rank is a role (its representative: the
rank at that pipeline position with every other coordinate 0, which is the pipeline position
itself, ``pp`` being the mesh's innermost axis).
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import copy
import functools
import gc
import logging
import os
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hyper_parallel.preflight import measurement_cache
from hyper_parallel.preflight.fake_world import fake_process_group, fake_world
from hyper_parallel.preflight.flops import flops_per_token
from hyper_parallel.preflight.gpus import Gpu, overhead_bytes, verdict
from hyper_parallel.preflight.simulate import (
    ACTIVATION_KINDS,
    BUFFER_KINDS,
    RoleBuild,
    RoleMemory,
    create_optimizer_state,
    deferred_gradient_bytes,
    layer_period,
    micro_batches_to_step,
    optimizer_bytes,
    parameter_bytes,
    process_groups,
    resolved_model_config,
    simulation_config,
    simulation_key,
    stage_peak,
    step_peak,
)
from hyper_parallel.preflight.work import RoleWork, pipeline_step_work, recording
from hyper_parallel.preflight.work import extrapolate as extrapolate_work

#: The busiest expert-parallel rank receives this many times its balanced share of routed
#: tokens (what the memory of a mixture-of-experts step must hold; ``--imbalance``).
DEFAULT_IMBALANCE = 1.25


@dataclass
class Role:
    """One role's figures and verdict."""

    ranks: list[int]
    rank: int
    """The representative rank that was built and stepped."""
    memory: RoleMemory
    overheads: dict[str, int]
    total_bytes: int
    verdict: str
    seconds: float
    work: RoleWork | None = None
    """The work of the role's optimizer step (:mod:`.work`), when the preflight was asked for
    it (``work=True``); None otherwise."""
    kept: bool = False
    """Read from a measurement another process kept (:mod:`.measurement_cache`), not
    simulated by this one."""


@dataclass
class Preflight:
    """A configuration's preflight."""

    world_size: int
    gpu: Gpu
    roles: list[Role] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    flops_per_token: float = 0.0
    tokens_per_step: int = 0
    imbalance: float = DEFAULT_IMBALANCE
    seconds: float = 0.0
    suggestions: list[str] = field(default_factory=list)
    suggestions_tried: bool = False

    @property
    def fits(self) -> bool:
        return not self.problems and all(r.verdict != "oom" for r in self.roles)


#: The world a recipe whose FSDP degree is ``-1`` ("every rank") is preflighted at without
#: ``--world``: one node of 8 GPUs times its other degrees.
GPUS_PER_NODE = 8


def world_size_of(config: Any, world: int | None = None) -> int:
    """The job's world size: ``world``, else the product of the recipe's degrees (expert
    parallelism is an axis of its own here); an FSDP degree of ``-1`` counts as
    :data:`GPUS_PER_NODE`."""
    if world is not None:
        return world
    p = config.parallelism
    size = GPUS_PER_NODE if p.data_parallel_shard_degree == -1 else 1
    for degree in (p.data_parallel_replicate_degree, p.data_parallel_shard_degree,
                   p.context_parallel_degree, p.tensor_parallel_degree,
                   p.pipeline_parallel_degree, p.expert_parallel_degree):
        size *= degree if degree and degree > 1 else 1
    return size


def role_ranks(config: Any, world: int) -> list[list[int]]:
    """The ranks of each role (see the module docstring)."""
    pp = max(1, config.parallelism.pipeline_parallel_degree)
    if pp == 1:
        return [list(range(world))]
    return [list(range(r, world, pp)) for r in range(pp)]


#: The name of the threads simulations run on (:func:`_at_the_bottom_of_a_stack`).
SIMULATION_THREAD = "preflight-simulation"


def _at_the_bottom_of_a_stack(fn: Any) -> Any:
    """``fn`` run on a thread of its own, its result or its exception handed back.

    CPython 3.11 keeps a thread's frames in 16 KiB chunks and frees a chunk as soon as the stack
    returns below it. A simulation dispatches some 100,000 operators a role, each tens of frames
    deep: when that depth straddles a chunk's edge, every operator maps and unmaps a chunk.
    Where the edges fall depends on how deep the caller's stack already is: called from a pytest
    worker, one preflight made 217,000 ``mmap``/``munmap`` pairs and took 12 % more CPU than the
    same call from a script. On a thread of its own a simulation starts at the bottom of a fresh
    stack, at the same depth whoever calls it. (A daemon: an interrupted caller does not wait
    for it at exit.) The process that simulates also leaves quickly (:func:`_leave_quickly`)."""

    @functools.wraps(fn)
    def on_its_own_thread(*args: Any, **kwargs: Any) -> Any:
        _leave_quickly()
        if threading.current_thread().name == SIMULATION_THREAD:
            return fn(*args, **kwargs)  # already at the bottom of a stack of its own
        outcome: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome["result"] = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller
                outcome["error"] = exc

        thread = threading.Thread(target=run, name=SIMULATION_THREAD, daemon=True)
        thread.start()
        thread.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["result"]

    return on_its_own_thread


@_at_the_bottom_of_a_stack
def measure_role(config: Any, rank: int, world: int, imbalance: float,
                 extrapolate_depth: bool = True, *, work: list | None = None
                 ) -> tuple[RoleMemory, float]:
    """Build ``rank`` of a ``world``-rank job of ``config`` and measure it (see
    :mod:`~hyper_parallel.preflight.simulate`; ``extrapolate_depth=False`` steps the whole
    depth always); also the model's training FLOPs per token. ``work``: a list the work of the
    role's optimizer step (:class:`~.work.RoleWork`) is appended to, recorded from the same
    simulated steps and extrapolated over the depth as the memory is."""
    asked = work is not None
    period = extrapolated_period(config) if extrapolate_depth else None
    if period is not None:
        # The deeper short build runs in a second process while this one builds the whole role
        # and the shallower one (the three are independent) when a core is spare: not in a
        # pool of preflights, whose processes take every core already.
        deeper = _spawn(_short_role, config, rank, world, imbalance, 2 * period, asked)
        frame = _whole_frame(config, rank, world)
        short = _short_role(config, rank, world, imbalance, period, asked)
        double = (deeper.result() if deeper is not None
                  else _short_role(config, rank, world, imbalance, 2 * period, asked))
        memory, flops, role_work = extrapolate_role(rank, period, frame, short, double)
        if asked:
            work.append(role_work)
        return memory, flops
    with fake_process_group(rank, world):
        build = RoleBuild(config)
        flops = flops_per_token(build.model, build.model_config, config.training.seq_len)
        with fake_world(imbalance):
            build.parallelize()
            groups = process_groups(build)
            flight = stepped = 1
            recorded: list | None = [] if asked else None
            if build.parallel_dims.pp_enabled:
                kinds, flight = stage_peak(build, work=recorded)
                with recording(build) if asked else contextlib.nullcontext() as recorder:
                    if recorder is not None:
                        recorder.finish_micro_batches()
                    create_optimizer_state(build)
                if asked:
                    work.append(pipeline_step_work(
                        recorded[0], recorded[1], recorder.after.result(),
                        build.pipeline.num_microbatches))
            else:
                stepped = micro_batches_to_step(build)
                kinds = step_peak(build, work=recorded)
                if asked:
                    work.append(recorded[0])
            params, grads = parameter_bytes(build)
            optimizer = optimizer_bytes(build)
        micro_batches, deferred = build.grad_accum, deferred_gradient_bytes(build)
        del build
    return _role_memory(kinds, params, grads, optimizer, groups, flight, "whole", stepped,
                        micro_batches, deferred), flops


def extrapolated_period(config: Any) -> int | None:
    """The layer period ``config``'s roles are stepped at, one and two periods deep, and
    extrapolated over to the whole depth; None: they are stepped whole (a pipeline, a
    checkpointing limited to the first layers, a pattern without a period, a model too shallow
    for two periods to be fewer layers)."""
    model_config = resolved_model_config(config)  # the depth the build will have
    period = layer_period(config, model_config)
    if period is None or model_config.num_hidden_layers <= 2 * period:
        return None
    return period


@dataclass(frozen=True)
class _Frame:
    """What an extrapolated role takes from its whole-depth build, on ``meta`` (built through
    the real parallelize code, never stepped)."""

    flops_per_token: float
    depth: int
    params_bytes: int
    grads_bytes: int
    process_groups: int
    micro_batches_stepped: int
    micro_batches: int
    deferred_grads_bytes: int


def _whole_frame(config: Any, rank: int, world: int) -> _Frame:
    with fake_process_group(rank, world):
        build = RoleBuild(config)
        flops = flops_per_token(build.model, build.model_config, config.training.seq_len)
        build.parallelize_on_meta()
        params, grads = parameter_bytes(build)
        return _Frame(flops, build.model_config.num_hidden_layers, params, grads,
                      process_groups(build), micro_batches_to_step(build), build.grad_accum,
                      deferred_gradient_bytes(build))


def extrapolate_role(rank: int, period: int, frame: _Frame, short: tuple, double: tuple
                     ) -> tuple[RoleMemory, float, RoleWork | None]:
    """A role's memory, FLOPs per token and work (None unless the short builds recorded it),
    extrapolated from its builds one and two periods deep (:func:`_short_role`) to the depth
    of its whole build (``frame``), whose parameters they must extrapolate to, to the byte."""
    periods = frame.depth // period

    def extrapolate(one: int, two: int) -> int:
        return one + (two - one) * (periods - 1)

    kinds = {k: extrapolate(short[1].get(k, 0), double[1].get(k, 0))
             for k in set(short[1]) | set(double[1])}
    # The premise, checked: the parameters the short builds extrapolate to are the whole
    # build's, to the byte (else a period is not what it seemed).
    if (extrapolate(short[0][0], double[0][0]), extrapolate(short[0][1], double[0][1])) != (
            frame.params_bytes, frame.grads_bytes):
        raise RuntimeError(
            f"preflight: the layers of rank {rank} do not repeat every {period} (the "
            "parameters of 1 and 2 periods do not extrapolate to the whole model's); "
            "this model needs a whole-depth step")
    role_work = (extrapolate_work(short[2], double[2], periods)
                 if short[2] is not None and double[2] is not None else None)
    memory = _role_memory(kinds, frame.params_bytes, frame.grads_bytes,
                          extrapolate(short[0][2], double[0][2]), frame.process_groups, 1,
                          f"{period} + {2 * period} layers -> {frame.depth}",
                          frame.micro_batches_stepped, frame.micro_batches,
                          frame.deferred_grads_bytes)
    return memory, frame.flops_per_token, role_work


def _role_memory(kinds: dict[str, int], params: int, grads: int, optimizer: int, groups: int,
                 flight: int, how: str, stepped: int, micro_batches: int, deferred: int
                 ) -> RoleMemory:
    """A role's memory from its step's peak kinds and its build's figures."""
    activations = sum(kinds.get(k, 0) for k in ACTIVATION_KINDS)
    # The tracker files what the optimizer's step allocates under its state: above the state
    # it keeps, that is the step's working memory (foreach AdamW's temporaries), a buffer.
    optimizer_step = max(0, kinds.get("OPT", 0) - optimizer)
    buffers = sum(kinds.get(k, 0) for k in BUFFER_KINDS) + optimizer_step
    return RoleMemory(
        params_bytes=params,
        grads_bytes=grads,
        optimizer_bytes=optimizer,
        buffers_bytes=buffers,
        activations_bytes=activations,
        process_groups=groups,
        in_flight=flight,
        depth=how,
        detail={k: v for k, v in sorted(kinds.items()) if v and k != "Total"},
        micro_batches=micro_batches,
        micro_batches_stepped=stepped,
        deferred_grads_bytes=deferred,
    )


def _leave_quickly() -> None:
    """Skip the interpreter's last collections when this process exits. A process that
    simulated holds a million objects (fake tensors, their caches, autograd graphs): walked
    at exit, they cost about a second, in each worker process (which its pool's shutdown
    waits for) and in the calling one: a plan's wall time. An exit handler freezes them
    (``gc.freeze``) instead, so the collections leave them to the process's end. Every exit
    handler still runs (this one before those registered earlier), and what the processes
    write is closed before they exit."""
    global _FREEZE_AT_EXIT
    if not _FREEZE_AT_EXIT:
        _FREEZE_AT_EXIT = True
        atexit.register(gc.freeze)


#: Whether this process freezes its objects at exit (:func:`_leave_quickly`).
_FREEZE_AT_EXIT = False


#: How many processes preflight may run side by side, when set (see :func:`processes`).
PROCESSES_ENV = "HYPER_PARALLEL_PREFLIGHT_PROCESSES"


def processes() -> int:
    """How many processes preflight runs side by side when its caller does not say (the
    planner's and a fleet's simulations, a lone simulation's two short builds):
    :data:`PROCESSES_ENV` when set (a machine shared with other work: a login node, a test
    session that already runs one test a core), else the cores this process may run on (its
    CPU affinity: ``taskset``, a container's cpuset), which ``os.cpu_count`` overstates."""
    from hyper_parallel.utils.errors import ConfigError

    value = os.environ.get(PROCESSES_ENV, "").strip()
    if value:
        count = int(value) if value.isdigit() else 0
        if count < 1:
            raise ConfigError(f"{value!r} is not a number of processes; give at least 1, or "
                              "unset it to use every core this process may run on",
                              path=PROCESSES_ENV)
        return count
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform (macOS)
        return os.cpu_count() or 1


#: Whether this process is one of :func:`~.many.preflight_many`'s workers, which already take
#: a core each: a second process per simulation would only compete for it (and pay its imports).
_POOL_WORKER = False


def mark_pool_worker() -> None:
    """The initializer of :func:`~.many.preflight_many`'s worker processes."""
    global _POOL_WORKER
    _POOL_WORKER = True


@contextlib.contextmanager
def as_pool_worker() -> Iterator[None]:
    """This process is one of :func:`~.many.preflight_many`'s workers until the block ends."""
    global _POOL_WORKER
    was, _POOL_WORKER = _POOL_WORKER, True
    try:
        yield
    finally:
        _POOL_WORKER = was


#: The process :func:`_spawn` runs in, started on its first use and kept for the next (a
#: preflight's suggestions, a planner's candidates): a fresh interpreter spends seconds
#: importing torch and the engine before its first simulation. Either this process's own
#: (:data:`_OWN_HELPER`) or :func:`~.many.preflight_many`'s pool (:func:`share_helper`).
_HELPER: Any = None
_OWN_HELPER: Any = None


def share_helper(executor: Any) -> None:
    """Run the deeper short builds in ``executor`` (:func:`~.many.preflight_many`'s kept
    workers, warm and idle while a round has fewer simulations than cores) instead of a
    helper of this process's own, which would spend seconds on its imports first (an own
    one is shut down: two idle interpreters are one too many); None: back to an own one."""
    global _HELPER, _OWN_HELPER
    if executor is not None and _OWN_HELPER is not None:
        _OWN_HELPER.shutdown(wait=False, cancel_futures=True)
        _OWN_HELPER = None
    _HELPER = executor


#: Whether this process is inside :func:`quiet`.
_QUIET = False


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Until the block ends, the engine's and torch's warnings are not printed, errors still
    are, here and in the short builds :func:`_spawn` hands another process: for a caller
    that reports each simulated configuration in its own terms (the planner: a candidate's
    "3 pipeline micro-batches for 4 stages" is its priced bubble, not the user's run's
    problem)."""
    global _QUIET
    loggers = [logging.getLogger(name) for name in ("hyper_parallel", "torch")]
    levels = [logger.level for logger in loggers]
    was = _QUIET
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        _QUIET = True
        try:
            yield
        finally:
            _QUIET = was
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)


def _quietly(fn: Any, *args: Any) -> Any:
    with quiet():
        return fn(*args)


def _spawn(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` in another process (its own fake process group and fake mode) when this
    machine has a core to spare (not in a pool that fills them already); else later, here.
    The process is this one's helper, kept for the next call (a dead one is replaced); under
    :func:`quiet`, ``fn`` runs quietly there too."""
    global _HELPER, _OWN_HELPER
    if _POOL_WORKER or processes() < 2:
        return None
    import multiprocessing
    from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor

    if _QUIET:
        fn, args = _quietly, (fn, *args)
    if _HELPER is not None:
        try:
            return _HELPER.submit(fn, *args)
        except (BrokenProcessPool, RuntimeError):
            pass  # it died (killed, out of memory) or was shut down: a new one
    _HELPER = _OWN_HELPER = ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    return _HELPER.submit(fn, *args)


@_at_the_bottom_of_a_stack
def _short_role(config: Any, rank: int, world: int, imbalance: float, layers: int,
                work: bool = False) -> tuple[tuple[int, int, int], dict[str, int],
                                             RoleWork | None]:
    """``((params, grads, optimizer) bytes, the step's peak kinds, its work or None)`` of the
    role built ``layers`` deep (``work``: record the step's work)."""
    with fake_process_group(rank, world):
        build = RoleBuild(config, layers=layers)
        with fake_world(imbalance):
            build.parallelize()
            recorded: list | None = [] if work else None
            kinds = step_peak(build, work=recorded)
            params, grads = parameter_bytes(build)
            return (params, grads, optimizer_bytes(build)), kinds, (
                recorded[0] if work else None)


#: How many role measurements :func:`_measured` keeps (a few KiB each).
MEASURED_KEPT = 256
#: The roles this process has measured, by what they simulate: the simulation key, the rank,
#: the world and the imbalance (oldest first).
_MEASURED: collections.OrderedDict[tuple, tuple[RoleMemory, float]] = collections.OrderedDict()
#: The work of the roles this process has measured with ``work=True``, by the same entries.
_WORK: dict[tuple, RoleWork] = {}
#: The entries read from :mod:`.measurement_cache` rather than simulated here.
_KEPT: set[tuple] = set()


def _measured(key: str, sim: Any, rank: int, world: int, imbalance: float, work: bool = False
              ) -> tuple[RoleMemory, float, RoleWork | None, bool]:
    """:func:`measure_role` of ``sim``, once per process for each simulation (``key``:
    :func:`~.simulate.simulation_key`): the figures are a function of what is simulated (the
    GPU only judges them), so the same run on another GPU, a suggestion tried again or a
    planner's repeated candidate is not simulated twice; nor what another process measured
    with this code (:mod:`.measurement_cache`; the last of the four it returns says so). Each
    caller gets its own copy.
    ``work``: also the step's work (a measurement without it is made again, with it)."""
    entry = (key, rank, world, imbalance)
    if not _have(entry, work) and not _recall(entry, work):
        _KEPT.discard(entry)
        recorded: list = []
        measured = (measure_role(sim, rank, world, imbalance, work=recorded) if work
                    else measure_role(sim, rank, world, imbalance))
        role_work = recorded[0] if work else None
        _keep(entry, measured, role_work)
        measurement_cache.store(entry, *measured, role_work)
    _MEASURED.move_to_end(entry)
    return _copies(entry, work)


def _have(entry: tuple, work: bool) -> bool:
    """Whether this process holds ``entry``'s measurement (with its work when ``work``)."""
    return entry in _MEASURED and (not work or entry in _WORK)


def _recall(entry: tuple, work: bool) -> bool:
    """Read ``entry``'s measurement from :mod:`.measurement_cache` into this process's, when
    another process kept it; whether it did."""
    kept = measurement_cache.load(entry, work)
    if kept is None:
        return False
    memory, flops, role_work = kept
    _keep(entry, (memory, flops), role_work)
    _KEPT.add(entry)
    return True


def _copies(entry: tuple, work: bool) -> tuple[RoleMemory, float, RoleWork | None, bool]:
    memory, flops = _MEASURED[entry]
    return (copy.deepcopy(memory), flops, copy.deepcopy(_WORK[entry]) if work else None,
            entry in _KEPT)


def already_measured(config: Any, world: int | None, imbalance: float, work: bool = False
                     ) -> bool:
    """Whether every role of ``config``'s preflight at ``world`` is measured already, in this
    process or kept on disk by another (:mod:`.measurement_cache`, read into this process's
    as it is found): its preflight then simulates nothing. False for a configuration
    preflight refuses (it reports why)."""
    from hyper_parallel.utils.errors import ConfigError

    try:
        resolved_model_config(config)
        key, size = simulation_key(config), world_size_of(config, world)
        entries = [(key, ranks[0], size, imbalance) for ranks in role_ranks(config, size)]
    except ConfigError:
        return False
    return all(_have(entry, work) or _recall(entry, work) for entry in entries)


def measure_one_role(config: Any, rank: int, world: int | None, imbalance: float,
                     work: bool = False
                     ) -> tuple[tuple[RoleMemory, float], RoleWork | None, bool]:
    """One role of :func:`preflight`'s (``rank``: its representative), measured as preflight
    measures it: ``((memory, FLOPs per token), work or None, whether it was read from
    :mod:`.measurement_cache`)``, for :func:`remember` in
    another process (:func:`~.many.preflight_many` measures a pipeline's roles side by side,
    each in a process of its own)."""
    resolved_model_config(config)
    key = simulation_key(config)
    memory, flops, role_work, kept = _measured(key, simulation_config(config), rank,
                                               world_size_of(config, world), imbalance, work)
    return (memory, flops), role_work, kept


def depth_parts(config: Any) -> tuple[int, ...]:
    """The parts a role of ``config`` is measured in when it is extrapolated over its depth
    (:func:`extrapolated_period`), by the layers each builds, dearest first: two periods and
    one, stepped, and 0, its whole build on ``meta``; none when it is stepped whole (or
    preflight refuses ``config``: its preflight reports why)."""
    from hyper_parallel.utils.errors import ConfigError

    try:
        resolved_model_config(config)  # the run's own checks, before the simulation's defaults
        period = extrapolated_period(simulation_config(config))
    except ConfigError:
        return ()
    return () if period is None else (2 * period, period, 0)


@_at_the_bottom_of_a_stack
def measure_part(config: Any, rank: int, world: int | None, imbalance: float, layers: int,
                 work: bool = False) -> Any:
    """One of :func:`depth_parts` of the role of ``config`` at ``rank``, measured in any
    process (a pool's worker): the role built ``layers`` deep and stepped, or for 0 its whole
    build on ``meta``; for :func:`remember_parts` in the process that puts it together."""
    sim, size = simulation_config(config), world_size_of(config, world)
    if layers == 0:
        return _whole_frame(sim, rank, size)
    return _short_role(sim, rank, size, imbalance, layers, work)


def remember_parts(config: Any, rank: int, world: int | None, imbalance: float,
                   parts: dict[int, Any]) -> None:
    """Keep the role of ``config`` at ``rank`` put together from its :func:`depth_parts`
    (``parts``: layers -> what :func:`measure_part` measured) as if measured here, and for
    other processes as :func:`_measured` keeps what it measures (:mod:`.measurement_cache`)."""
    period = min(layers for layers in parts if layers)  # the parts: 2 periods, 1, 0 deep
    memory, flops, role_work = extrapolate_role(rank, period, parts[0], parts[period],
                                                parts[2 * period])
    entry = (simulation_key(config), rank, world_size_of(config, world), imbalance)
    _keep(entry, (memory, flops), role_work)
    _KEPT.discard(entry)
    measurement_cache.store(entry, memory, flops, role_work)


def remember(config: Any, rank: int, world: int | None, imbalance: float,
             measured: tuple[RoleMemory, float], role_work: RoleWork | None,
             kept: bool = False) -> None:
    """Keep a role :func:`measure_one_role` measured in another process as if measured here:
    the next :func:`preflight` of ``config`` reads it instead of simulating it. (The entry is
    made here: a key of the process's own, :data:`~.simulate.PROCESS_LOCAL`, is the same only
    within one process.) ``kept``: it was read from :mod:`.measurement_cache` there."""
    entry = (simulation_key(config), rank, world_size_of(config, world), imbalance)
    _keep(entry, measured, role_work)
    if kept:
        _KEPT.add(entry)
    else:
        _KEPT.discard(entry)


def _keep(entry: tuple, measured: tuple[RoleMemory, float], role_work: RoleWork | None
          ) -> None:
    """Keep a role's measurement (and its work, when recorded) as the newest entry, the
    oldest dropped beyond :data:`MEASURED_KEPT`."""
    _MEASURED[entry] = measured
    _MEASURED.move_to_end(entry)
    if role_work is not None:
        _WORK[entry] = role_work
    while len(_MEASURED) > MEASURED_KEPT:
        oldest = _MEASURED.popitem(last=False)[0]
        _WORK.pop(oldest, None)
        _KEPT.discard(oldest)


def preflight(config: Any, gpu: Gpu, *, world: int | None = None,
              imbalance: float = DEFAULT_IMBALANCE, work: bool = False) -> Preflight:
    """Preflight ``config`` (a ``HyperTrainer.Config``) at its world size on ``gpu``.
    A ``ConfigError`` propagates (the caller names the fields in its entry's names).
    ``work``: each role also records its step's work (:attr:`Role.work`, for the planner)."""
    start = time.perf_counter()
    resolved_model_config(config)  # the run's own checks, before the simulation's defaults
    sim = simulation_config(config)
    size = world_size_of(config, world)
    report = Preflight(world_size=size, gpu=gpu, imbalance=imbalance,
                       tokens_per_step=config.training.global_batch_size
                       * config.training.seq_len)
    key = simulation_key(config)
    for ranks in role_ranks(config, size):
        t = time.perf_counter()
        memory, report.flops_per_token, role_work, kept = _measured(key, sim, ranks[0], size,
                                                                    imbalance, work)
        overheads = overhead_bytes(memory.allocated_bytes, memory.process_groups)
        total = memory.allocated_bytes + sum(overheads.values())
        report.roles.append(Role(ranks=ranks, rank=ranks[0], memory=memory, overheads=overheads,
                                 total_bytes=total, verdict=verdict(total, gpu),
                                 seconds=time.perf_counter() - t, work=role_work,
                                 kept=kept))
    report.seconds = time.perf_counter() - start
    return report


__all__ = [
    "DEFAULT_IMBALANCE",
    "GPUS_PER_NODE",
    "Preflight",
    "Role",
    "already_measured",
    "depth_parts",
    "extrapolated_period",
    "measure_one_role",
    "measure_part",
    "measure_role",
    "preflight",
    "quiet",
    "remember",
    "remember_parts",
    "role_ranks",
    "share_helper",
    "world_size_of",
]
