"""The work of one rank role's optimizer step: FLOPs, memory-bound bytes, every collective.

Recorded from preflight's own simulated step when asked (``work=True``): the same operators
the rank's engine runs, on the same fake tensors, so a layout's work is the engine's, not a
formula of an imagined model. The types live here, below the planner (which re-exports them
from :mod:`hyper_parallel.plan.work`), because preflight builds them and must never import
the planner.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from hyper_parallel.preflight.fake_world import device_query
from hyper_parallel.preflight.lean_pytree import leaves

#: The collective kinds a step can issue (nccl-tests' names).
KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all", "send_recv", "broadcast")
#: The mesh dimensions FSDP's collectives run on (its shard axis under the names the mesh
#: gives it -- ``dp_shard_cp`` under context parallelism, ``dp_shard_ep`` for a MoE model's
#: dense parameters under expert parallelism -- and HSDP's replicate axis): the ones the engine
#: overlaps with compute. A collective FSDP issues on a group with none of these names (its
#: shard axis is the context- or expert-parallel ranks alone) is named :data:`FSDP_ISSUED`.
FSDP_AXES = ("dp_shard", "dp_shard_cp", "dp_shard_ep", "fsdp", "efsdp", "dp", "dp_cp",
             "dp_replicate", "dp_shard_mod_ep", "dp_shard_in_ep")
#: The axis of a collective FSDP issued on a group none of whose names is in
#: :data:`FSDP_AXES` (itself one of them, so the planner overlaps it as FSDP's).
FSDP_ISSUED = "fsdp"
#: The modules FSDP2 issues its collectives from (its all-gathers, reduce-scatters and HSDP's
#: all-reduces, in the forward and in its backward hooks).
_FSDP_MODULES = "torch.distributed.fsdp."
#: What a collective can overlap with: the phase of the step that issues it ("" = the step's
#: own bookkeeping, e.g. the token-count all-reduce, on the critical path).
PHASES = ("forward", "backward", "optimizer", "")


@dataclass(frozen=True)
class Collective:
    """One kind of collective call of a step on one process group, and how many of it."""

    kind: str
    """``all_gather`` | ``reduce_scatter`` | ``all_reduce`` | ``all_to_all`` | ``send_recv`` |
    ``broadcast``."""
    bytes: int
    """The full array size S as nccl-tests defines it, per call: an all-gather's output, a
    reduce-scatter's input, an all-reduce's buffer, an all-to-all's send buffer, a send's
    payload."""
    group_ranks: tuple[int, ...]
    """The global ranks of the process group it ran on (a send: this rank and its peer)."""
    count: int = 1
    """How many identical calls the step issues."""
    phase: str = ""
    """``forward`` | ``backward`` | ``optimizer`` | ``""`` -- what it can overlap with."""
    axis: str = ""
    """The mesh dimension the group is (``dp_shard_cp``, ``tp``, ``ep``, ``cp``, ``pp``,
    ``dp_replicate``, ...; ``""`` when it is none of the mesh's): who issued it, hence what the
    engine overlaps it with. One group can carry several names (under context parallelism
    FSDP's ``dp_shard_cp`` is the loss's group too; FSDP over ``cp`` alone shares its group
    with the context-parallel exchanges): a collective FSDP issued is named by the group's FSDP
    name (:data:`FSDP_AXES`, else :data:`FSDP_ISSUED`), any other by its first name, a base
    dimension before an alias."""

    @property
    def key(self) -> tuple:
        return (self.kind, self.bytes, self.group_ranks, self.phase, self.axis)


@dataclass
class RoleWork:
    """What one rank of a role does in one optimizer step (all micro-batches)."""

    flops: dict[str, float] = field(default_factory=dict)
    """By operator class (``matmul``, ``attention``, ``other``), as torch's FLOP counter
    counts them."""
    memory_bytes: float = 0.0
    """Bytes read and written by the memory-bound operators (everything but the matmuls and
    attention kernels, views excluded)."""
    collectives: list[Collective] = field(default_factory=list)
    """Every collective the step issues, one entry per :attr:`Collective.key`."""
    phase_flops: dict[str, float] = field(default_factory=dict)
    """The FLOPs again, by the phase of the step that runs them (:data:`PHASES`): what each
    phase's collectives can hide behind."""
    phase_memory_bytes: dict[str, float] = field(default_factory=dict)
    """The memory-bound bytes by phase."""
    micro_batches: int = 1
    """The micro-batches of the step (gradient accumulation, or a pipeline's)."""
    operators: float = 0.0
    """Operators the step dispatches on local tensors: each has a fixed host cost (the
    framework's dispatch, a kernel's launch) whatever its size."""
    dtensor_operators: float = 0.0
    """Operators dispatched on DTensors (tensor parallelism, FSDP's parameters outside its
    all-gathered units): each also pays DTensor's sharding propagation on the host."""

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops.values()))

    def combined(self, other: RoleWork, factor: float = 1.0) -> RoleWork:
        """``self + factor x other`` (a collective count that would not be whole or would
        fall below zero is an error: the two were not alike)."""
        counts: dict[tuple, float] = collections.OrderedDict(
            (c.key, float(c.count)) for c in self.collectives)
        for c in other.collectives:
            counts[c.key] = counts.get(c.key, 0.0) + factor * c.count
        collectives = []
        for key, n in counts.items():
            if n < -1e-9 or abs(n - round(n)) > 1e-9:
                raise ValueError(
                    f"{n:g} {key[0]} calls of {key[1]} bytes on {key[2]}: not a whole count "
                    "(the works combined were not alike)")
            if round(n):
                collectives.append(Collective(*key[:3], round(n), *key[3:]))
        return RoleWork(_plus(self.flops, other.flops, factor),
                        self.memory_bytes + factor * other.memory_bytes, collectives,
                        _plus(self.phase_flops, other.phase_flops, factor),
                        _plus(self.phase_memory_bytes, other.phase_memory_bytes, factor),
                        self.micro_batches, self.operators + factor * other.operators,
                        self.dtensor_operators + factor * other.dtensor_operators)

    def scaled(self, factor: float) -> RoleWork:
        """This work ``factor`` times (a micro-batch repeated)."""
        return RoleWork(micro_batches=self.micro_batches).combined(self, factor)

    def __add__(self, other: RoleWork) -> RoleWork:
        return self.combined(other)

    def __sub__(self, other: RoleWork) -> RoleWork:
        return self.combined(other, -1.0)


def _plus(a: dict[str, float], b: dict[str, float], factor: float) -> dict[str, float]:
    return {k: a.get(k, 0.0) + factor * b.get(k, 0.0) for k in {**a, **b}}


def merge(collectives: list[Collective]) -> list[Collective]:
    """Identical collectives (same :attr:`~Collective.key`) summed into one entry, in first
    appearance order."""
    return RoleWork().combined(RoleWork(collectives=list(collectives))).collectives


def extrapolate(one: RoleWork, two: RoleWork, periods: int) -> RoleWork:
    """The work of a model ``periods`` layer periods deep from its work one and two periods
    deep: ``one + (two - one) x (periods - 1)``, exact when every period does the same (the
    depth extrapolation of preflight's memory, :mod:`~.simulate`). A collective whose size
    grows with the depth (one call over every parameter: the gradient norm's all-reduce) is
    matched by its kind, group, phase and count and its bytes extrapolated the same way. A
    collective whose count would fall below zero means the periods were not alike: an error,
    not a guess."""
    one_keys = {c.key for c in one.collectives}
    two_keys = {c.key for c in two.collectives}
    only_one = [c for c in one.collectives if c.key not in two_keys]
    only_two = [c for c in two.collectives if c.key not in one_keys]
    grown = []
    for c in list(only_one):
        match = next((d for d in only_two if (d.kind, d.group_ranks, d.phase, d.axis, d.count)
                      == (c.kind, c.group_ranks, c.phase, c.axis, c.count)), None)
        if match is not None:
            only_one.remove(c)
            only_two.remove(match)
            nbytes = c.bytes + (match.bytes - c.bytes) * (periods - 1)
            grown.append(Collective(c.kind, nbytes, c.group_ranks, c.count, c.phase, c.axis))
    paired = {c.key for c in one.collectives + two.collectives} - {
        c.key for c in only_one + only_two} - one_keys.symmetric_difference(two_keys)
    one_rest = dataclasses.replace(
        one, collectives=[c for c in one.collectives if c.key in paired or c in only_one])
    two_rest = dataclasses.replace(
        two, collectives=[c for c in two.collectives if c.key in paired or c in only_two])
    try:
        out = one_rest.combined(two_rest.combined(one_rest, -1.0), periods - 1)
    except ValueError as exc:
        raise RuntimeError(f"preflight: the work does not repeat every layer period ({exc}); "
                           "this model's work needs a whole-depth step") from None
    out.collectives = merge(out.collectives + grown)
    return out


# ----------------------------------------------------------------------- recording
#: The collective operators a step can dispatch: ``(kind, where its bytes are)``: the first
#: positional argument, the second, or the result (an all-gather's array is its output).
_COLLECTIVES: dict[str, tuple[str, str]] = {
    # torch.distributed's (FSDP2, the engine's own reductions)
    "c10d::_allgather_base_": ("all_gather", "arg0"),
    "c10d::allgather_": ("all_gather", "arg0"),
    "c10d::allgather_into_tensor_coalesced_": ("all_gather", "arg0"),
    "c10d::_reduce_scatter_base_": ("reduce_scatter", "arg1"),
    "c10d::reduce_scatter_": ("reduce_scatter", "arg1"),
    "c10d::reduce_scatter_tensor_coalesced_": ("reduce_scatter", "arg1"),
    "c10d::allreduce_": ("all_reduce", "arg0"),
    "c10d::allreduce_coalesced_": ("all_reduce", "arg0"),
    "c10d::alltoall_base_": ("all_to_all", "arg1"),
    "c10d::alltoall_": ("all_to_all", "arg1"),
    "c10d::broadcast_": ("broadcast", "arg0"),
    "c10d::send": ("send_recv", "arg0"),
    # the functional ones (DTensor's redistributions: tensor and sequence parallelism)
    "_c10d_functional::all_gather_into_tensor": ("all_gather", "out"),
    "_c10d_functional::all_gather_into_tensor_out": ("all_gather", "out"),
    "_c10d_functional::all_gather_into_tensor_coalesced": ("all_gather", "out"),
    "_c10d_functional::reduce_scatter_tensor": ("reduce_scatter", "arg0"),
    "_c10d_functional::reduce_scatter_tensor_coalesced": ("reduce_scatter", "arg0"),
    "_c10d_functional::all_reduce": ("all_reduce", "arg0"),
    "_c10d_functional::all_reduce_": ("all_reduce", "arg0"),
    "_c10d_functional::all_reduce_coalesced": ("all_reduce", "arg0"),
    "_c10d_functional::all_reduce_coalesced_": ("all_reduce", "arg0"),
    "_c10d_functional::all_to_all_single": ("all_to_all", "arg0"),
    "_c10d_functional::broadcast": ("broadcast", "arg0"),
    "_c10d_functional::broadcast_": ("broadcast", "arg0"),
    "_c10d_functional_autograd::all_to_all_single": ("all_to_all", "arg0"),
    "_c10d_functional_autograd::reduce_scatter_tensor": ("reduce_scatter", "arg0"),
    "_c10d_functional_autograd::all_gather_into_tensor": ("all_gather", "out"),
}
#: Operators that move no data (allocation without a write, metadata, waits, host reads).
_NO_TRAFFIC = ("empty", "detach", "alias", "lift_fresh", "_local_scalar_dense", "item", "set_",
               "resize_", "sym_", "wait_tensor", "_unsafe_view", "as_strided", "device")
_ATTENTION = ("_scaled_dot_product", "_flash_attention", "_efficient_attention",
              "flex_attention", "_cudnn_attention")


def _bytes(tensors: Any) -> int:
    return sum(t.numel() * t.element_size() for t in leaves(tensors)
               if isinstance(t, torch.Tensor))


def _written(func: Any, args: tuple, kwargs: dict, out: Any) -> int:
    """The bytes an operator writes besides its arguments: its outputs (an in-place one
    returns what it updates), or, for one that returns nothing -- a multi-tensor or fused
    kernel updating its lists in place, as the clipping's ``_foreach_mul_`` and fused AdamW
    do -- the arguments it updates, read and then written. Not an ``out=`` argument, which is
    only written: it is counted once already, among the arguments (FSDP's
    ``split_with_sizes_copy``)."""
    if func._schema.returns:
        return _bytes(out)
    return sum(_bytes(_argument(func, args, kwargs, argument.name, None))
               for argument in func._schema.arguments
               if argument.alias_info is not None and argument.alias_info.is_write
               and not argument.is_out)


def _grouped_mm_flops(a: torch.Tensor, b: torch.Tensor) -> float:
    """``torch._grouped_mm``'s FLOPs: every row of ``a`` meets one group's matrix of ``b``
    (2-D x 3-D, the experts' forward and input gradient), or the groups split the contraction
    (2-D x 2-D, their weights' gradient): ``2 x rows x contraction x columns`` either way; a
    batch of matrices (3-D) multiplies each."""
    if a.dim() == 2:
        return 2.0 * a.shape[0] * a.shape[1] * b.shape[-1]
    return 2.0 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[-1]


def _argument(func: Any, args: tuple, kwargs: dict, name: str, default: Any) -> Any:
    """An operator's argument by its schema's name, passed by position or keyword."""
    if name in kwargs:
        return kwargs[name]
    for i, argument in enumerate(func._schema.arguments):
        if argument.name == name:
            return args[i] if i < len(args) and not argument.kwarg_only else default
    return default


def _flops(func: Any, args: tuple, kwargs: dict, out: Any) -> tuple[str, float] | None:
    """``(operator class, FLOPs)`` of a compute operator, or None for a memory-bound one.
    torch's FLOP counter's formulas (``torch.utils.flop_counter``), with the operators it has
    none for: the experts' ``_grouped_mm`` and the CPU flash attention a fake CPU rank runs
    where a GPU runs the CUDA one. Causal attention counts its unmasked half (the kernels skip
    the masked blocks)."""
    from torch.utils import flop_counter

    name = func._schema.name.split("::")[-1]
    packet = func._overloadpacket
    if name == "_grouped_mm":
        return "matmul", _grouped_mm_flops(args[0], args[1])
    if name.startswith("_scaled_dot_product_flash_attention_for_cpu"):
        if name.endswith("backward"):
            grad, q, k, v = args[:4]
            flops = flop_counter.sdpa_backward_flop_count(grad.shape, q.shape, k.shape, v.shape)
        else:
            q, k, v = args[:3]
            flops = flop_counter.sdpa_flop_count(q.shape, k.shape, v.shape)
        causal = _argument(func, args, kwargs, "is_causal", False)
        return "attention", flops / 2 if causal else flops
    if name in ("convolution", "convolution_backward"):
        # torch's formula for the backward ignores the groups: the Gated DeltaNet's depthwise
        # short convolution would count channels x its FLOPs. Per output element, the
        # forward multiplies and adds over one group's channels times the kernel; the backward
        # twice (the input's and the weight's gradients).
        weight = args[2] if name == "convolution_backward" else args[1]
        per_output = 2.0 * weight[0].numel()
        if name == "convolution":
            return "other", per_output * out.numel()
        return "other", 2 * per_output * args[0].numel()
    if packet in flop_counter.flop_registry:
        flops = flop_counter.flop_registry[packet](*args, **kwargs, out_val=out)
        if any(a in name for a in _ATTENTION):
            causal = _argument(func, args, kwargs, "is_causal", False)
            return "attention", flops / 2 if causal else flops
        if "conv" in name:  # the Gated DeltaNet's depthwise short convolution
            return "other", flops
        return "matmul", flops
    return None


class _Bucket:
    """The work recorded over one stretch of a step."""

    def __init__(self) -> None:
        self.work = RoleWork()
        self.collectives: list[Collective] = []

    def add(self, cls: str | None, flops: float, nbytes: float, phase: str) -> None:
        w = self.work
        if cls is not None:
            w.flops[cls] = w.flops.get(cls, 0.0) + flops
            w.phase_flops[phase] = w.phase_flops.get(phase, 0.0) + flops
        if nbytes:
            w.memory_bytes += nbytes
            w.phase_memory_bytes[phase] = w.phase_memory_bytes.get(phase, 0.0) + nbytes

    def result(self) -> RoleWork:
        self.work.collectives = merge(self.collectives)
        return self.work


class WorkRecorder(TorchDispatchMode):
    """Records the work of the operators a simulated step dispatches on ``fake_mode``'s
    tensors, in buckets: before the first micro-batch (the step's token count), each
    micro-batch (:meth:`next_micro_batch` closes one), and after the last (clipping, the
    optimizer, the loss's reduction). Inside a micro-batch an operator belongs to the backward
    while autograd runs one (recomputation included), else to the forward.

    A DTensor operator is left to DTensor (``NotImplemented``), whose local operators and
    redistributing collectives then come here; the operators DTensor runs on tensors of
    another fake mode only to infer its output's shape (and the tensors it makes there) are not
    the step's and are skipped.

    DTensor operators are counted by DTensor's own sharding-propagation cache, one lookup per
    operator (:func:`dtensor_operators_dispatched`): torch dispatches most of them in C++
    straight to their local operators, so a dispatch mode never sees the DTensor one (FSDP2's
    sharded parameters in the clipping and the optimizer, tensor parallelism's every
    operator)."""

    def __init__(self, fake_mode: Any, axes: dict[str, tuple[str, ...]] | None = None) -> None:
        super().__init__()
        self.fake_mode = fake_mode
        self.axes = axes or {}
        self.before = _Bucket()
        self.micro: list[_Bucket] = [_Bucket()]
        self.after: _Bucket | None = None
        self.started = False
        self._dtensor_seen = dtensor_operators_dispatched()

    def flush_dtensor_operators(self) -> None:
        """File the DTensor operators dispatched since the last call under the stretch of the
        step running now (each one's lookup comes just before its local operators)."""
        now = dtensor_operators_dispatched()
        self._bucket()[0].work.dtensor_operators += now - self._dtensor_seen
        self._dtensor_seen = now

    # -- stretches of the step
    def next_micro_batch(self) -> None:
        self.flush_dtensor_operators()
        self.micro.append(_Bucket())

    def finish_micro_batches(self) -> None:
        """The micro-batches are over: what follows is the optimizer's."""
        self.flush_dtensor_operators()
        if not self.micro[-1].work.phase_flops and not self.micro[-1].collectives:
            self.micro.pop()
        self.after = _Bucket()

    def _bucket(self) -> tuple[_Bucket, str]:
        if self.after is not None:
            return self.after, "optimizer"
        backward = torch._C._current_graph_task_id() != -1
        if not self.started and not backward:
            return self.before, ""
        return self.micro[-1], "backward" if backward else "forward"

    def mark_forward_started(self) -> None:
        self.started = True

    def add_analytic(self, flops: float, nbytes: float, backward: bool = False) -> None:
        """Work the simulation runs as one stand-in operator (preflight's middle chunks of the
        delta rule), counted as the operators it stands for would be."""
        bucket, phase = self._bucket()
        if backward:
            phase = "backward" if bucket is not self.after else phase
        bucket.add("matmul", flops, nbytes, phase)

    # -- the operators
    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        device = device_query(func, args)  # no operator: a fake tensor's device, read
        if device is not None:
            return device
        return self.dispatch(func, types, args, kwargs, _run)

    def dispatch(self, func: Any, types: Any, args: tuple, kwargs: dict | None,
                 run: Any) -> Any:
        """Record ``func`` run by ``run(func, types, args, kwargs)``: the operator itself when
        the recorder is a dispatch mode of its own, the memory tracker's dispatch when the
        tracker carries it (:func:`recording`)."""
        from torch._subclasses.fake_tensor import FakeTensor
        from torch.distributed.tensor import DTensor

        kwargs = kwargs or {}
        inputs = leaves((args, kwargs))
        self.flush_dtensor_operators()
        if any(isinstance(t, DTensor) for t in inputs):
            return NotImplemented  # DTensor's dispatch counts it (see the class docstring)
        out = run(func, types, args, kwargs)
        if any(isinstance(t, FakeTensor) and t.fake_mode is not self.fake_mode
               for t in (*inputs, *leaves(out))):
            return out  # DTensor's shape inference on tensors of its own (made ones too)
        self._record(func, args, kwargs, out)
        return out

    def _record(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        name = func._schema.name
        bucket, phase = self._bucket()
        bucket.work.operators += 1
        collective = _COLLECTIVES.get(name)
        if collective is not None:
            bucket.collectives.append(self._collective(func, collective, args, kwargs, out, phase))
            return
        if name.startswith(("c10d::", "_c10d_functional", "fsdp::")) and "copy" not in name:
            return  # waits, barriers, receives (a send is counted once, by its sender)
        if func.is_view or any(word in name.split("::")[-1] for word in _NO_TRAFFIC):
            return
        counted = _flops(func, args, kwargs, out)
        if counted is None:
            bucket.add(None, 0.0, _bytes(args) + _written(func, args, kwargs, out), phase)
        else:
            cls, flops = counted
            bucket.add(cls, flops, _bytes(args) + _bytes(out) if cls == "other" else 0.0, phase)

    def _collective(self, func: Any, spec: tuple[str, str], args: tuple, kwargs: dict,
                    out: Any, phase: str) -> Collective:
        import torch.distributed as dist

        kind, where = spec
        nbytes = _bytes(out if where == "out" else args[0] if where == "arg0" else args[1])
        group = _group_of(func, args, kwargs)
        ranks = tuple(dist.get_process_group_ranks(group))
        if kind == "send_recv":
            peer = dist.get_global_rank(group, args[2])
            ranks = (dist.get_rank(), peer)
        return Collective(kind, nbytes, ranks, 1, phase, self._axis(group.group_name))

    def _axis(self, group_name: str) -> str:
        """The :attr:`Collective.axis` of a collective on ``group_name`` issued now."""
        names = self.axes.get(group_name, ())
        if _issued_by_fsdp():
            return next((n for n in names if n in FSDP_AXES), FSDP_ISSUED)
        return names[0] if names else ""

    # -- the result
    def work(self, micro_batches: int, stepped_pattern: str = "repeat_last") -> RoleWork:
        """The whole optimizer step's work from what was recorded of its first micro-batches:
        ``repeat_last`` -- the last one recorded stands for every later micro-batch (each
        starts from the state the second did); ``repeat_middle`` -- the step holds FSDP's
        gradients unsharded, so the first, a middle and the last were recorded and the middle
        one stands for the others (:func:`~.simulate.micro_batches_to_step`)."""
        recorded = [b.result() for b in self.micro]
        total = self.before.result()
        k = len(recorded)
        if k == 0:
            raise RuntimeError("preflight recorded no micro-batch of the step")
        for w in recorded:
            total = total + w
        extra = micro_batches - k
        if extra < 0:
            raise RuntimeError(f"preflight recorded {k} micro-batches of a step of "
                               f"{micro_batches}")
        if extra:
            stands_for = recorded[-1] if stepped_pattern == "repeat_last" or k < 3 else recorded[1]
            total = total.combined(stands_for, extra)
        if self.after is not None:
            total = total + self.after.result()
        total.micro_batches = micro_batches
        return total

    def stages_work(self, counts: list[int]) -> RoleWork:
        """One pipeline micro-batch through a rank's stages, each recorded bucket (one per
        stage shape, :meth:`next_micro_batch` between them) standing for ``counts[i]`` alike
        stages."""
        recorded = [b.result() for b in self.micro]
        if len(recorded) != len(counts):
            raise RuntimeError(f"preflight recorded {len(recorded)} stage shapes of "
                               f"{len(counts)}")
        total = self.before.result()
        for w, count in zip(recorded, counts):
            total = total.combined(w, count)
        if self.after is not None:
            total = total + self.after.result()
        total.micro_batches = 1
        return total


def _run(func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
    return func(*args, **kwargs)


def dtensor_operators_dispatched() -> int:
    """DTensor operators dispatched so far in this process: every one looks its sharding up in
    the propagator's cache once (a hit or a miss)."""
    hits, misses = torch._C._get_DTensor_sharding_propagator_cache_stats()
    return hits + misses


def stage_sends(build: Any, stage_index: int, received: int | None, sent: int | None
                ) -> list[Collective]:
    """The sends of one pipeline stage per micro-batch, as the schedule issues them: its output
    (``sent`` bytes) to the next stage's rank in the forward, the gradient of its input
    (``received`` bytes) to the previous one's in the backward (each transfer counted once, by
    its sender; None: the stage has no such neighbour). Called outside :func:`recording`: the
    mesh lookups run tensor operators of their own, which are not the step's."""
    import torch.distributed as dist

    from hyper_parallel.models.pipelining import stages_of_rank

    pipeline = build.pipeline
    pp = build.parallel_dims.pp
    ranks = dist.get_process_group_ranks(build.parallel_dims.get_mesh("pp").get_group())
    owner = {s: r for r in range(pp) for s in stages_of_rank(r, pp, pipeline.num_stages)}
    me = dist.get_rank()
    out = []
    if sent is not None:
        out.append(Collective("send_recv", sent, (me, ranks[owner[stage_index + 1]]),
                              1, "forward", "pp"))
    if received is not None:
        out.append(Collective("send_recv", received,
                              (me, ranks[owner[stage_index - 1]]), 1, "backward", "pp"))
    return out


def pipeline_step_work(one: RoleWork, sends: list[Collective], optimizer: RoleWork,
                       micro_batches: int) -> RoleWork:
    """A pipeline rank's optimizer step from one micro-batch through its stages (``one``), the
    sends of one micro-batch and the optimizer's step: every micro-batch's compute, sends and
    all-gathers, but FSDP's gradient reduction once (the schedule holds a stage's gradients
    unsharded until its last backward, as torch's ``PipelineStage`` does under FSDP)."""
    once = [c for c in one.collectives
            if c.axis in FSDP_AXES and c.phase == "backward"
            and c.kind in ("reduce_scatter", "all_reduce")]
    repeated = dataclasses.replace(
        one, collectives=[c for c in one.collectives if c not in once] + list(sends))
    total = repeated.scaled(micro_batches) + RoleWork(collectives=once) + optimizer
    total.micro_batches = micro_batches
    return total


def _group_of(func: Any, args: tuple, kwargs: dict) -> Any:
    """The process group a collective's arguments name: a ``ProcessGroup`` script object
    (torch.distributed's operators) or a group name (the functional ones)."""
    from torch.distributed.distributed_c10d import _resolve_process_group

    group = _argument(func, args, kwargs, "process_group", None)
    if group is not None:
        return torch._C._distributed_c10d.ProcessGroup.unbox(group)
    name = _argument(func, args, kwargs, "group_name", None)
    if name is None:
        raise RuntimeError(f"preflight: {func} names no process group")
    return _resolve_process_group(name)


def _issued_by_fsdp() -> bool:
    """Whether the collective being dispatched was called by FSDP2 (a frame of its modules
    is on the stack: the dispatch runs under its Python caller). A step issues a few thousand
    collectives, so the walk costs nothing beside its operators."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith(_FSDP_MODULES):
            return True
        frame = frame.f_back
    return False


def mesh_axes(parallel_dims: Any) -> dict[str, tuple[str, ...]]:
    """``{process group name: its mesh dimensions}`` of a build's mesh: base dims first, then
    the flattened aliases of the same ranks (see :attr:`Collective.axis`)."""
    names, sizes = parallel_dims.mesh_dims()
    out: dict[str, tuple[str, ...]] = {}
    candidates = [n for n, s in zip(names, sizes) if s > 1] + list(parallel_dims.alias_dims())
    for name in candidates:
        try:
            group = parallel_dims.get_mesh(name).get_group()
        except (KeyError, RuntimeError, ValueError):
            continue
        out[group.group_name] = (*out.get(group.group_name, ()), name)
    return out


#: The recorder of the step being simulated now, if its work is being recorded.
_ACTIVE: list[WorkRecorder] = []


def active() -> WorkRecorder | None:
    return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def recording(build: Any, *, carried: bool = False) -> Iterator[WorkRecorder]:
    """Record the work of what a simulated role (``build``, a :class:`~.simulate.RoleBuild`)
    runs in the block, on the fake mode running now (see :class:`WorkRecorder`).

    ``carried``: the block runs every operator of the step under a memory tracker that
    carries the recorder (:func:`~.simulate.memory_tracker`'s ``recorder``), which records
    each operator in its own dispatch: one Python dispatch mode per operator instead of two
    (measured: 4 % of a one-rank simulation), and the recorder sees what the tracker answers
    itself (a ``wait_tensor``, which the GPU's host dispatches too). Operators outside a
    carrying tracker are then not recorded. Else the recorder is a dispatch mode of its
    own."""
    from torch._guards import detect_fake_mode

    from hyper_parallel.preflight import delta_rule
    from hyper_parallel.preflight.fake_world import Patches

    recorder = WorkRecorder(detect_fake_mode(), mesh_axes(build.parallel_dims))
    patches = Patches()
    patches.set(delta_rule._Chunks, "apply", _counted_chunks(delta_rule._Chunks.apply))
    # A global hook: it runs before every module's own (FSDP's root all-gather among them).
    hooks = [torch.nn.modules.module.register_module_forward_pre_hook(
        lambda *_: recorder.mark_forward_started())]
    _ACTIVE.append(recorder)
    try:
        with contextlib.nullcontext() if carried else recorder:
            yield recorder
            recorder.flush_dtensor_operators()
    finally:
        _ACTIVE.pop()
        for hook in hooks:
            hook.remove()
        patches.undo()


def chunk_step_work(c: int, dk: int, dv: int, size: int) -> tuple[float, float]:
    """``(FLOPs, bytes)`` of one forward ``chunk_step`` of the delta rule's chunk loop, for one
    batch row and head, on ``c`` tokens, ``dk`` key and ``dv`` value columns of ``size``-byte
    elements: its four matmuls (the state read, the query's read of the state, the
    intra-chunk product and the state's update; ``2 x c x Dk x Dv`` FLOPs each but the
    intra-chunk ``2 x c x c x Dv``) and its four elementwise operators. Its backward is twice
    both (every operand needs its gradient). Every term grows with the value columns: what
    context parallelism's state passing, which runs the loop on ``Dk`` more of them, adds."""
    flops = 2.0 * (3 * c * dk * dv + c * c * dv)
    nbytes = size * 3.0 * (2 * c * dv + 2 * dk * dv)
    return flops, nbytes


def _counted_chunks(apply: Any) -> Any:
    """Preflight's delta rule runs the middle chunks as one operator: each of them is counted
    as the :func:`chunk_step_work` of its batch rows and heads."""

    @functools.wraps(apply)
    def counted(state, state_read, q_decayed, intra, k_to_end, chunk_decay, middle, kept):
        recorder = active()
        outs = apply(state, state_read, q_decayed, intra, k_to_end, chunk_decay, middle, kept)
        if recorder is not None:
            batch, heads, _, c, dk = state_read.shape
            rows = batch * heads * middle
            flops, nbytes = chunk_step_work(c, dk, state.shape[-1], state.element_size())
            flops, nbytes = rows * flops, rows * nbytes
            recorder.add_analytic(flops, nbytes)
            span = outs[0]
            if span.requires_grad:
                span.register_hook(lambda grad: recorder.add_analytic(2 * flops, 2 * nbytes,
                                                                      backward=True))
        return outs

    return counted


__all__ = ["FSDP_AXES", "FSDP_ISSUED", "KINDS", "PHASES", "Collective", "RoleWork",
           "WorkRecorder", "active", "chunk_step_work", "dtensor_operators_dispatched",
           "extrapolate", "merge", "mesh_axes", "pipeline_step_work", "recording", "stage_sends"]
