"""One rank of a job at its real world size, simulated in this process without its peers.

The process group is torch's fake backend (``FakeStore``: every collective returns at once and
moves nothing), so rank 57 of 128 builds its real mesh, process groups and DTensor placements on
one CPU. Tensors are ``FakeTensorMode`` tensors: shapes, dtypes and devices without storage, so
a 397B model's rank builds, steps and is measured with no memory of its own.

What the fake world answers, because nothing computes it:

* a scalar read back on the host (``.item()``, ``.tolist()``, ``bool(t)``): a constant's own
  value, else 1.0 for floats, ``False`` for booleans, 0 for int32 (the stop flag: no signal) and
  1 for other integers (token counts: never zero), except
* the row counts a mixture-of-experts layer sizes its tensors by (:func:`expert_sizes`): the
  rows each expert-parallel rank sends and receives and each local expert's rows, as balanced
  routing gives them, with this rank receiving ``imbalance`` times its share (the busiest rank:
  what a memory budget must hold).

The device mesh computes coordinates with real integer tensors and the engine builds its model on
``meta``: both run outside the fake mode (:func:`on_host`).
"""

from __future__ import annotations

import contextlib
import functools
import types
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch._subclasses import fake_impls
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily

#: Integer reads that size tensors, consumed in order (see :func:`expert_sizes`).
_SIZE_ANSWERS: list[int] = []


def host_scalar(fake_mode: FakeTensorMode, func: Any, arg: Any) -> Any:
    """The value a fake tensor reads back on the host (see the module docstring)."""
    if arg.constant is not None:
        return arg.constant.item()
    if _SIZE_ANSWERS and not arg.dtype.is_floating_point and arg.dtype != torch.bool:
        return _SIZE_ANSWERS.pop(0)
    if arg.dtype.is_floating_point:
        return 1.0
    if arg.dtype == torch.bool:
        return False
    return 0 if arg.dtype == torch.int32 else 1


_DEVICE = torch.ops.prim.device.default


def device_query(func: Any, args: tuple) -> torch.device | None:
    """A fake tensor's device, when ``func`` asks for it (``tensor.device``), else None: for a
    dispatch mode above the fake mode to answer at once. A fake tensor's device is its own
    (``fake_device``), so every read of it is dispatched to Python, and the autograd engine
    reads the device of every gradient it passes on: about two in three of the dispatches of
    a simulated step, which are no operator, allocate nothing, and passed through a mode and
    the fake mode cost a tenth of a role's simulation."""
    if func is _DEVICE and isinstance(args[0], FakeTensor):
        return args[0].fake_device
    return None


def balanced(total: int, parts: int) -> list[int]:
    """``total`` rows over ``parts`` as even as integers allow, the remainder to the first."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


@contextlib.contextmanager
def size_answers(values: list[int]) -> Iterator[None]:
    """The next integer host reads answer ``values``, in order; all must be read."""
    _SIZE_ANSWERS[:] = values
    try:
        yield
    finally:
        left = len(_SIZE_ANSWERS)
        _SIZE_ANSWERS.clear()
        if left:
            raise AssertionError(f"fake world: {left} expected size reads did not happen")


class Patches:
    """Attribute replacements, undone in reverse order. A class's own ``__dict__`` entry is
    what is saved (``getattr`` would unwrap a staticmethod and lose it)."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, bool, Any]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        if isinstance(owner, type):
            own = name in vars(owner)
            previous = vars(owner).get(name)
        else:
            own, previous = True, getattr(owner, name)
        self._saved.append((owner, name, own, previous))
        setattr(owner, name, value)

    def undo(self) -> None:
        while self._saved:
            owner, name, own, previous = self._saved.pop()
            if own:
                setattr(owner, name, previous)
            else:
                delattr(owner, name)


def on_host(fn):
    """``fn`` run outside any fake mode (its tensors are real, or on ``meta``)."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with unset_fake_temporarily():
            return fn(*args, **kwargs)

    return wrapped


def patch_device_mesh(patches: Patches) -> None:
    """DeviceMesh computes coordinates with real integer tensors: keep it off the fake mode."""
    from torch.distributed import device_mesh

    patches.set(device_mesh, "init_device_mesh", on_host(device_mesh.init_device_mesh))
    cls = device_mesh.DeviceMesh
    for name, attr in list(vars(cls).items()):
        if isinstance(attr, staticmethod):
            patches.set(cls, name, staticmethod(on_host(attr.__func__)))
        elif isinstance(attr, classmethod):
            patches.set(cls, name, classmethod(on_host(attr.__func__)))
        elif isinstance(attr, property):
            patches.set(cls, name, property(on_host(attr.fget), attr.fset and on_host(attr.fset)))
        elif isinstance(attr, types.FunctionType):
            patches.set(cls, name, on_host(attr))


def patch_stage_cut(patches: Patches) -> None:
    """A pipeline stage is a deep copy of the meta model's units: a meta copy too (a fake meta
    parameter could not be swapped for its materialized self)."""
    from hyper_parallel.models import pipelining

    patches.set(pipelining, "cut_stage", on_host(pipelining.cut_stage))


def patch_expert_sizes(patches: Patches, imbalance: float) -> None:
    """The mixture-of-experts sizes its tensors by routing: the rows each expert-parallel rank
    sends and receives (``AllToAllDispatcher.dispatch`` reads them once, as ``2 x ep``
    integers) and the rows of each local expert (the experts' loop reads ``counts``). This rank
    sends ``1/ep`` of its rows to each rank and receives ``imbalance`` times its own row count
    (from every rank alike); each local expert gets an even share of what it received."""
    from hyper_parallel.models.qwen3_5_moe.expert_parallel import AllToAllDispatcher
    from hyper_parallel.models.qwen3_5_moe.moe import GroupedExperts

    dispatch = AllToAllDispatcher.dispatch
    loop = GroupedExperts._loop

    @functools.wraps(dispatch)
    def hot_dispatch(self, tokens, counts):
        rows = tokens.shape[0]
        received = round(rows * imbalance)
        with size_answers(balanced(rows, self.ep) + balanced(received, self.ep)):
            return dispatch(self, tokens, counts)

    @functools.wraps(loop)
    def balanced_loop(x, counts, gate_up, down):
        with size_answers(balanced(x.shape[0], counts.numel())):
            return loop(x, counts, gate_up, down)

    patches.set(AllToAllDispatcher, "dispatch", hot_dispatch)
    patches.set(GroupedExperts, "_loop", staticmethod(balanced_loop))


def patch_experts_kernel(patches: Patches) -> None:
    """The routed experts choose their kernel as on a GPU: ``torch._grouped_mm`` in bf16,
    the loop otherwise (the fake tensors sit on the CPU, where ``_grouped_mm`` would also take
    fp32, which its meta kernel -- what a fake tensor runs -- refuses)."""
    from hyper_parallel.models.qwen3_5_moe.moe import GroupedExperts

    runs = GroupedExperts._grouped_mm_runs

    @functools.wraps(runs)
    def as_on_cuda(self, x):
        return x.dtype == torch.bfloat16 and runs(self, x)

    patches.set(GroupedExperts, "_grouped_mm_runs", as_on_cuda)


def patch_optimizer_kernels(patches: Patches) -> None:
    """The optimizer step and the gradient clipping choose their kernels as on a GPU. AdamW is
    fused when the config chooses nothing, the choice
    :func:`~hyper_parallel.runtime.optim.choose_implementation` makes for CUDA parameters (on
    the host torch would loop over the parameters one by one, with a temporary and a dozen
    fake operators each). The norms and the clipping take torch's multi-tensor path, which it
    takes for a GPU's tensors and DTensors but not for a fake tensor (its type is not on
    torch's list)."""
    from torch.utils import _foreach_utils

    from hyper_parallel.runtime import optim

    patches.set(optim, "choose_implementation",
                functools.partial(optim.choose_implementation, device_type="cuda"))
    patches.set(_foreach_utils, "_foreach_supported_types",
                [*_foreach_utils._foreach_supported_types, FakeTensor])


def patch_delta_rule(patches: Patches) -> None:
    """The Gated DeltaNet layers' torch path steps preflight's chunked delta rule
    (:mod:`hyper_parallel.preflight.delta_rule`): the model's memory, to the byte, in a fraction
    of the fake operators (the model's is most of a long sequence's preflight time)."""
    from hyper_parallel.models.qwen3_5 import kernels
    from hyper_parallel.preflight import delta_rule

    patches.set(kernels, "chunk_gated_delta_rule", delta_rule.chunk_gated_delta_rule)


def patch_sharding_propagation(patches: Patches) -> None:
    """DTensor's sharding propagation works out an operator's output shapes by running it on
    fake tensors, in the active fake mode when there is one (``detect_fake_mode``): here the
    simulation's own, whose tensors the memory tracker and the work recorder count as the
    step's. It runs only when its cache misses, so the first simulation of a process measured
    more than a second one of the same run (the debug model under TP 2: 1.1 MB). Run it in a
    fake mode of its own, as it runs on a GPU, where no fake mode is active."""
    from torch.distributed.tensor._sharding_prop import ShardingPropagator

    propagate = ShardingPropagator._propagate_tensor_meta_non_cached

    @functools.wraps(propagate)
    def in_its_own_mode(self, op_schema):
        with unset_fake_temporarily():
            return propagate(self, op_schema)

    patches.set(ShardingPropagator, "_propagate_tensor_meta_non_cached", in_its_own_mode)


def _frozen(value: Any) -> Any:
    """``value`` with its lists made tuples, so that it hashes."""
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    return value


def patch_mesh_expansion(patches: Patches) -> None:
    """DTensor expands an operator's one-mesh-dimension sharding rules over every dimension of
    the mesh (``expand_to_full_mesh_op_strategy``: every combination, each priced) -- for a
    multi-tensor or fused operator once per tensor of its list, anew each time: torch caches
    the function that expands, not what it returns. The clipping's norms and scaling and the
    fused optimizer take the whole parameter list, most of whose entries are alike (every
    layer's same weight, sharded the same way), and on a 2-D mesh this was a quarter of a role's
    simulation (the MoE debug model on EP 2 x TP 2: 392 expansions, 92 distinct). An expansion is
    a function of its arguments, so alike ones are expanded once, for the fake world's
    lifetime: the specs it returns name this simulation's mesh, which dies with its process
    group. (A GPU run expands them at its first step alone; preflight simulates one step.)"""
    from torch.distributed.tensor._ops import utils

    expand = utils.expand_to_full_mesh_op_strategy
    expanded: dict[tuple, Any] = {}

    @functools.wraps(expand)
    def expanded_once(mesh: Any, op_schema: Any, single_mesh_dim_strategies: list,
                      **options: Any) -> Any:
        if options.get("is_valid_strategy_cb") is not None:  # a closure: no key for it
            return expand(mesh, op_schema, single_mesh_dim_strategies, **options)
        key = (mesh, op_schema, _frozen(single_mesh_dim_strategies),
               *sorted((name, _frozen(value)) for name, value in options.items()))
        try:
            found = expanded.get(key)
        except TypeError:  # a symbolic size does not hash: expanded every time, as by torch
            return expand(mesh, op_schema, single_mesh_dim_strategies, **options)
        if found is None:
            found = expanded[key] = expand(mesh, op_schema, single_mesh_dim_strategies,
                                           **options)
        return found

    # Looked up on the module at every call (single_dim_strategy imports it in its function).
    patches.set(utils, "expand_to_full_mesh_op_strategy", expanded_once)


def patch_cache_keys(patches: Patches) -> None:
    """The fake mode's cache keys made by :mod:`~hyper_parallel.preflight.cache_keys`' short
    paths: the same keys, a tenth less of a simulation's time."""
    from hyper_parallel.preflight import cache_keys

    cache_keys.patch_cache_keys(patches)


def patch_cache_hits(patches: Patches) -> None:
    """The fake mode's cache hits answered by :mod:`~hyper_parallel.preflight.cached_outputs`'
    short path, and its dispatch without the wrappers a simulation never needs: the same
    tensors."""
    from hyper_parallel.preflight import cached_outputs

    cached_outputs.patch_cache_hits(patches)


def patch_tracker_walks(patches: Patches) -> None:
    """torch's memory trackers walk each operator's outputs by
    :mod:`~hyper_parallel.preflight.lean_pytree`: the same tensors, in the same order."""
    from hyper_parallel.preflight import lean_pytree

    lean_pytree.patch_trackers(patches)


@contextlib.contextmanager
def scalar_answers() -> Iterator[None]:
    """Host reads of fake tensors answered by :func:`host_scalar` until the block ends."""
    ops = (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default)
    saved = {op: fake_impls.op_implementations_dict[op] for op in ops}
    for op in ops:
        fake_impls.op_implementations_dict[op] = host_scalar
    try:
        yield
    finally:
        fake_impls.op_implementations_dict.update(saved)


@contextlib.contextmanager
def fake_process_group(rank: int, world_size: int) -> Iterator[None]:
    """Be ``rank`` of a ``world_size``-rank job on torch's fake backend until the block ends.

    DTensor's caches (sharding propagation, its C++ fast path, the redistribution planner)
    hand back the specs of earlier operators, meshes included, and a mesh compares equal to
    another of the same ranks and names: after the group is gone, a later build of another
    rank (a pipeline's next role) got a mesh whose process group no longer exists. They are
    emptied with the group: a simulated rank's DTensors are its own mesh's."""
    from torch.distributed.tensor._redistribute import clear_redistribute_planner_cache
    from torch.distributed.tensor.debug import _clear_sharding_prop_cache
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise RuntimeError("a process group exists already: preflight simulates its own")
    dist.init_process_group("fake", rank=rank, world_size=world_size, store=FakeStore())
    try:
        with warnings.catch_warnings():
            # The engine bounds its collectives; the fake backend has none to bound.
            warnings.filterwarnings("ignore", "Set timeout is now only supported")
            yield
    finally:
        dist.destroy_process_group()
        _clear_sharding_prop_cache()
        clear_redistribute_planner_cache()


@contextlib.contextmanager
def fake_world(imbalance: float = 1.0) -> Iterator[FakeTensorMode]:
    """The fake mode and the patches the simulated rank's engine code runs under (the process
    group comes from :func:`fake_process_group`)."""
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    patches = Patches()
    try:
        patch_device_mesh(patches)
        patch_stage_cut(patches)
        patch_expert_sizes(patches, imbalance)
        patch_experts_kernel(patches)
        patch_optimizer_kernels(patches)
        patch_delta_rule(patches)
        patch_cache_keys(patches)
        patch_cache_hits(patches)
        patch_tracker_walks(patches)
        patch_sharding_propagation(patches)
        patch_mesh_expansion(patches)
        with scalar_answers(), mode:
            yield mode
    finally:
        patches.undo()


__all__ = ["Patches", "balanced", "device_query", "fake_process_group", "fake_world", "host_scalar", "on_host",
           "size_answers"]
