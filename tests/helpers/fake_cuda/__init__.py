"""One rank of a GPU job, simulated on a CPU-only machine: the check that NCCL would accept
every collective the trainer issues.

NCCL serves CUDA tensors only; a CPU tensor handed to a collective over an NCCL group fails
with "No backend type associated with device type cpu" -- on the first multi-GPU step, never
on a CPU test machine with gloo. :func:`fake_cuda_rank` runs the real trainer as rank ``r`` of
a ``world``-rank job whose process group is torch's fake backend registered for ``cuda``
alone (``init_process_group("cuda:fake")``): it refuses a CPU tensor exactly as NCCL does and
takes a CUDA tensor without moving data. The tensors are ``FakeTensorMode`` tensors on a
``cuda`` device that this CPU build is made to accept (``fake_cuda_device.cpp``: a fake device
guard and CUDA hooks reporting one device, compiled on first use), so the model, FSDP2, DTensor,
the pipeline schedule, the optimizer and autograd run their real code on shapes without data.

What it stands in for, and so cannot check (the rest of the path is the product's own code):

* values: a fake group moves no data and fake tensors hold none. A scalar read back on the
  host (``.item()``, ``.tolist()``, ``bool(t)``) is answered by :func:`hyper_parallel.preflight.fake_world.host_scalar`: a
  constant's own value, else 1.0 for floats, ``False`` for booleans, 0 for int32 (the stop
  flag: no signal), 1 for other integers (token counts: never zero); the integers that size
  the experts' tensors as balanced routing gives them (:func:`_patch_expert_sizes`). Any op
  inside the mode makes fake tensors, host ones too: host data whose values matter must be
  made outside it (``unset_fake_temporarily``), as the data loaders' batches are
  (:func:`_patch_data_loading`: the sampler's indices, the rows, a row's images); such a real
  host tensor copied to the device is lifted to a fake one first.
* object collectives (``all_gather_object`` ..., ``send_object_list``) and barriers: torch
  picks their device itself; here the simulated ranks, each a process, exchange the objects
  through files (:class:`Mailbox`), so what they carry is real.
* DCP's data path (``dcp.save`` / ``dcp.load``: its planning and writes): a save writes an
  empty DCP metadata file, which the checkpoint's own checks parse, and a load checks it.
  ``torch.save`` and the Hugging Face export's files hold zeros of the fake tensors' shapes.
* CUDA streams and events (``torch.cuda.Stream`` ...) are no-ops, the generator's state is
  16 zero bytes; the device is ``cuda:0``.
* Kernels that only exist on CUDA do not run: fla-core is never chosen (no Triton) and
  ``torch._grouped_mm`` runs its meta kernel's checks, not its arithmetic. Those are for
  ``bench/gpu_check.sh`` on a real GPU.

The device mesh is built outside the fake mode (its coordinates are real integer tensors).
Loading the device hooks is process-wide and cannot be undone: use this in a process of its
own (``tests/helpers/fake_cuda/worker.py``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import torch
import torch.distributed as dist
from torch._subclasses import fake_impls, fake_tensor
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

from hyper_parallel.preflight.cache_keys import patch_cache_keys
from hyper_parallel.preflight.cached_outputs import patch_cache_hits
from hyper_parallel.preflight.fake_world import (
    Patches,
    host_scalar,
    on_host,
    patch_device_mesh,
    patch_expert_sizes,
)

HERE = Path(__file__).resolve().parent
CUDA0 = torch.device("cuda", 0)

# The namespaces of torch's collective ops as the dispatcher sees them.
_COLLECTIVE_NAMESPACES = ("c10d", "_c10d_functional", "_c10d_functional_autograd")


def install_fake_cuda_device() -> None:
    """Compile (once, cached by torch) and load the fake CUDA device; fail loudly if this
    torch build does not take it."""
    import ctypes
    import hashlib

    from torch.utils.cpp_extension import load

    # torch's extension builder runs `ninja` from PATH; the venv's own comes with the dev extra.
    scripts = sysconfig.get_path("scripts")
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
    source = HERE / "fake_cuda_device.cpp"
    # One build folder per checkout (torch keeps them by name, under ~/.cache): two checkouts
    # sharing one would each rebuild it whenever the other had built it last.
    checkout = hashlib.sha256(str(source).encode()).hexdigest()[:10]
    library = load(
        name=f"hyper_parallel_fake_cuda_device_{checkout}",
        sources=[str(source)],
        extra_cflags=["-O0"],
        is_python_module=False,  # a plain C function, called through ctypes
        verbose=False,
    )
    install = ctypes.CDLL(library).install_fake_cuda_device
    install.restype = ctypes.c_bool
    if not install():
        raise RuntimeError(
            f"the fake CUDA device did not install on torch {torch.__version__}: "
            "at::hasCUDA() is still false (fake_cuda_device.cpp assumes the CPU build's hooks)"
        )


# ------------------------------------------------------------------------- the fake mode
@dataclass(frozen=True)
class Transfer:
    """One crossing between the host and the (fake) device, as the dispatcher sees it."""

    kind: str
    """``read``: the host waits for a device value (a scalar read back -- ``.item()``,
    ``.tolist()``, ``bool(t)`` --, an op whose output shape depends on device data, or a copy
    to the host); ``upload``: a host tensor copied to the device."""
    op: str
    """The aten op (``_local_scalar_dense``, ``_to_copy``, ``copy_`` ...)."""
    where: str
    """``path:line (function)`` of the innermost frame of this repository's code that made it
    (``hyper_parallel/...``; a test's own frame when no product frame is on the stack)."""
    non_blocking: bool
    """For a copy: ``non_blocking=True`` (a blocking one waits for the device's queue)."""
    scope: str | None
    """:attr:`CollectiveRecordingMode.scope` when it happened (set by the caller, e.g. while
    one module runs)."""


class CollectiveRecordingMode(FakeTensorMode):
    """FakeTensorMode that also records each collective op and the group it ran on, and, in
    :meth:`recording_transfers`, every host/device crossing (:class:`Transfer`).

    What it sees is what passes the dispatcher: a CUDA kernel's own synchronisation inside
    its C++ implementation (none is recorded) is for a profiler on a real GPU."""

    def __init__(self) -> None:
        super().__init__(allow_non_fake_inputs=True)
        self.collectives: list[tuple[str, str]] = []
        self.transfers: list[Transfer] | None = None
        self.scope: str | None = None

    @contextlib.contextmanager
    def recording_transfers(self) -> Iterator[list[Transfer]]:
        """Record the host/device crossings until the block ends, into the yielded list."""
        seen: list[Transfer] = []
        outer, self.transfers = self.transfers, seen
        try:
            yield seen
        finally:
            self.transfers = outer

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace in _COLLECTIVE_NAMESPACES:
            group = _group_name(func, args, kwargs or {})
            if group is not None:  # wait_tensor names no group
                self.collectives.append((func.__name__, group))
        if self.transfers is not None:
            kind = _transfer_kind(func, args, kwargs or {})
            if kind is not None:
                self.transfers.append(Transfer(
                    kind, func.__name__, _repo_frame(),
                    bool((kwargs or {}).get("non_blocking", False)
                         or (func is torch.ops.aten.copy_.default and len(args) > 2
                             and args[2])),
                    self.scope))
        if func is torch.ops.aten._to_copy.default and _host_data(args[0]):
            # A host tensor (the loader's batch) reaching the device: the fake mode would run
            # the real copy to a device this build lacks, so it is lifted as a fake host
            # tensor first (:func:`_patch_host_copies` does so for ``torch.tensor``).
            args = (self.from_tensor(args[0]), *args[1:])
        return super().__torch_dispatch__(func, types, args, kwargs)


_COPY_OPS = (torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default)
_HOST_WAITS = (torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape)


def _device_type(value: Any) -> str | None:
    return value.device.type if isinstance(value, torch.Tensor) else None


def _transfer_kind(func: Any, args: tuple, kwargs: dict) -> str | None:
    """``read``, ``upload`` or None (see :class:`Transfer`) for one dispatched op."""
    if func in _COPY_OPS:
        if func is torch.ops.aten._to_copy.default:
            source, target = _device_type(args[0]), kwargs.get("device")
            target = source if target is None else torch.device(target).type
        else:  # copy_(self=target, src)
            target, source = _device_type(args[0]), _device_type(args[1])
        if source == "cuda" and target == "cpu":
            return "read"
        if source == "cpu" and target == "cuda":
            return "upload"
        return None
    if any(tag in func.tags for tag in _HOST_WAITS):
        from torch.utils._pytree import tree_leaves

        if any(_device_type(leaf) == "cuda" for leaf in tree_leaves((args, kwargs))):
            return "read"
    return None


def _host_data(value: Any) -> bool:
    """A real (not fake) host tensor."""
    return (isinstance(value, torch.Tensor) and not isinstance(value, fake_tensor.FakeTensor)
            and value.device.type == "cpu")


def _repo_frame() -> str:
    """Where this repository's code made the current op: its innermost frame under
    ``hyper_parallel/`` (else under ``tests/``, this harness left out), as ``path:line
    (function)``."""
    repo = str(HERE.parents[2]) + os.sep
    fallback = "?"
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        rel = path[len(repo):] if path.startswith(repo) else ""
        spot = f"{rel}:{frame.f_lineno} ({frame.f_code.co_name})"
        if rel.startswith("hyper_parallel" + os.sep):
            return spot
        if (fallback == "?" and rel.startswith("tests" + os.sep)
                and not path.startswith(str(HERE) + os.sep)):
            fallback = spot
        frame = frame.f_back
    return fallback


def _group_name(func: Any, args: tuple, kwargs: dict) -> str | None:
    """The group a collective op runs on: its ``group_name`` argument (functional
    collectives) or the name of its ``process_group`` (c10d ops)."""
    for position, argument in enumerate(func._schema.arguments):
        if argument.name not in ("group_name", "process_group"):
            continue
        value = args[position] if position < len(args) else kwargs.get(argument.name)
        if isinstance(value, str):
            return value
        if value is not None:
            return dist.ProcessGroup.unbox(value).group_name
    return None


# ------------------------------------------------------------------------- stand-ins
class _Stream:
    """``torch.cuda.Stream`` without a device: every wait and record is immediate."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.device = CUDA0

    def wait_stream(self, stream: Any) -> None: ...
    def wait_event(self, event: Any) -> None: ...
    def synchronize(self) -> None: ...
    def query(self) -> bool:
        return True

    def record_event(self, event: Any = None) -> _Event:
        return _Event()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None: ...


class _Event:
    def __init__(self, *args: Any, **kwargs: Any) -> None: ...
    def record(self, stream: Any = None) -> None: ...
    def wait(self, stream: Any = None) -> None: ...
    def synchronize(self) -> None: ...
    def query(self) -> bool:
        return True


def _host_rng_state(device: Any = "cuda") -> torch.Tensor:
    with unset_fake_temporarily():
        return torch.zeros(16, dtype=torch.uint8)


def _patch_torch_cuda(patches: Patches) -> None:
    cuda = torch.cuda
    patches.set(cuda, "is_available", lambda: True)
    patches.set(cuda, "device_count", lambda: 1)
    patches.set(cuda, "current_device", lambda: 0)
    patches.set(cuda, "set_device", lambda device: None)
    patches.set(cuda, "synchronize", lambda *args: None)
    patches.set(cuda, "Stream", _Stream)
    patches.set(cuda, "Event", _Event)
    patches.set(cuda, "current_stream", lambda *args: _Stream())
    patches.set(cuda, "stream", lambda stream: contextlib.nullcontext())
    # The device's generator: a state of the real size (16 bytes: seed and offset) that
    # nothing draws from.
    patches.set(cuda, "_lazy_init", lambda: None)
    patches.set(cuda, "get_rng_state", _host_rng_state)
    patches.set(cuda, "get_rng_state_all", lambda: [_host_rng_state()])
    patches.set(cuda, "set_rng_state", lambda state, device="cuda": None)
    patches.set(cuda, "set_rng_state_all", lambda states: None)
    patches.set(cuda, "manual_seed", lambda seed: None)
    patches.set(cuda, "manual_seed_all", lambda seed: None)


def _patch_host_copies(patches: Patches, mode: FakeTensorMode) -> None:
    """A host tensor reaching the device: ``torch.tensor(data, device="cuda")`` builds its
    data in C++ below the fake mode, so it is built on the host and lifted."""
    original = torch.tensor

    def tensor(data: Any, *args: Any, device: Any = None, **kwargs: Any) -> torch.Tensor:
        if device is not None and torch.device(device).type == "cuda":
            with unset_fake_temporarily():
                host = original(data, *args, **kwargs)
            return torch.ops.aten._to_copy.default(mode.from_tensor(host), device=CUDA0)
        return original(data, *args, device=device, **kwargs)

    patches.set(torch, "tensor", tensor)


def _patch_data_loading(patches: Patches) -> None:
    """Every data loader makes its batches on the host, outside the fake mode, as a real job's
    loader does: the sampler's shuffled indices, the collated rows and the images' pixels are
    real host tensors, which the step then copies to the device (under the mode each of an
    epoch's thousands of indices would be a fake scalar read back alone, every one 1). So does
    the trainer's grouping of them into steps, with each rank's part of a batch it shares (the
    expert-parallel ranks' rows, the context-parallel ranks' positions)."""
    from torch.utils.data import dataloader

    from hyper_parallel.trainer.base import BaseTrainer

    iterator = dataloader._BaseDataLoaderIter  # torchdata's stateful iterators derive from it
    for name in ("__init__", "__next__"):  # its seed draw, then every batch
        patches.set(iterator, name, on_host(getattr(iterator, name)))
    groups = BaseTrainer._micro_batch_iterator

    def micro_batch_iterator(self: Any) -> Iterator[list]:
        steps = on_host(groups)(self)
        while True:
            with unset_fake_temporarily():
                group = next(steps, None)
            if group is None:
                return
            yield group

    patches.set(BaseTrainer, "_micro_batch_iterator", micro_batch_iterator)


def _patch_model_build(patches: Patches) -> None:
    """The engine builds the model on ``meta``: outside the fake mode those are plain meta
    tensors, which materialize to fake CUDA ones like a real job's do (a fake meta parameter
    would have to be swapped, and the fake mode's own weak references forbid the swap)."""
    from hyper_parallel.models import pipelining
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    patches.set(HyperTrainer, "_build_model", on_host(HyperTrainer._build_model))
    # A pipeline stage is a deep copy of the meta model's units: a meta copy too.
    patches.set(pipelining, "cut_stage", on_host(pipelining.cut_stage))


def _realize(obj: Any) -> Any:
    """``obj`` with every fake tensor replaced by host zeros of its shape and dtype."""
    from torch.utils._pytree import tree_map

    def one(value: Any) -> Any:
        if isinstance(value, fake_tensor.FakeTensor):
            with unset_fake_temporarily():
                return torch.zeros(value.shape, dtype=value.dtype)
        return value

    return tree_map(one, obj)


def _patch_storage(patches: Patches) -> None:
    import torch.distributed.checkpoint as dcp

    original_save = torch.save

    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        return original_save(_realize(obj), f, *args, **kwargs)

    def dcp_save(state_dict: Any, *, checkpoint_id: Any = None, **kwargs: Any) -> None:
        import pickle

        from torch.distributed.checkpoint.metadata import Metadata

        # A DCP folder that holds no tensor: what the checkpoint's own checks parse.
        os.makedirs(checkpoint_id, exist_ok=True)
        empty = Metadata(state_dict_metadata={}, storage_data={})
        Path(checkpoint_id, ".metadata").write_bytes(pickle.dumps(empty))

    def dcp_load(state_dict: Any, *, checkpoint_id: Any = None, **kwargs: Any) -> None:
        if not Path(checkpoint_id, ".metadata").is_file():
            raise FileNotFoundError(f"{checkpoint_id}/.metadata")

    patches.set(torch, "save", save)
    # What a checkpoint holds in small files (RNG states, positions) comes back as host data.
    patches.set(torch, "load", on_host(torch.load))
    patches.set(dcp, "save", dcp_save)
    patches.set(dcp, "load", dcp_load)
    # The Hugging Face export streams each gathered tensor's bytes into its file.
    from hyper_parallel.runtime.checkpoint.safetensors_stream import StreamedSafetensorsFile

    original_write = StreamedSafetensorsFile.write

    def write(self: Any, name: str, tensor: torch.Tensor) -> None:
        host = _realize(tensor)
        with unset_fake_temporarily():  # its byte views must stay host tensors
            return original_write(self, name, host)

    patches.set(StreamedSafetensorsFile, "write", write)


class Mailbox:
    """Objects between the simulated ranks of one job, each rank a process of its own: files
    in a folder they share. The fake group moves no data, but what torch exchanges as objects
    must arrive: the stages' shape metadata of a pipeline, the checkpoint's data positions and
    integrity verdicts, the barrier that lets rank 0 create a step folder before the others
    write into it. Every rank of a group issues a group's operations in the same order, so a
    per-group count names each message."""

    TIMEOUT_S = 120.0

    def __init__(self, folder: Path, rank: int) -> None:
        self.folder, self.rank = Path(folder), rank
        self.folder.mkdir(parents=True, exist_ok=True)
        self._counts: dict[tuple, int] = {}

    def _key(self, *parts: Any) -> str:
        count = self._counts.get(parts, 0)
        self._counts[parts] = count + 1
        return "-".join(str(p) for p in parts) + f"-{count}"

    def post(self, name: str, obj: Any) -> None:
        import pickle

        tmp = self.folder / f".{name}.{self.rank}.tmp"
        tmp.write_bytes(pickle.dumps(obj))
        os.replace(tmp, self.folder / name)

    def take(self, name: str) -> Any:
        import pickle
        import time

        path = self.folder / name
        deadline = time.monotonic() + self.TIMEOUT_S
        while not path.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"fake_cuda rank {self.rank}: no message {name} in "
                                   f"{self.TIMEOUT_S:.0f} s (a rank stopped or diverged)")
            time.sleep(0.01)
        return pickle.loads(path.read_bytes())

    # ---------------------------------------------------------------- collectives of objects
    def exchange(self, kind: str, group: Any, obj: Any) -> list[Any]:
        """Every rank of ``group`` posts ``obj``; returns theirs in group order."""
        ranks = dist.get_process_group_ranks(group or dist.group.WORLD)
        key = self._key(kind, *ranks)
        self.post(f"{key}-from{self.rank}", obj)
        return [self.take(f"{key}-from{r}") for r in ranks]


def _global_rank(group: Any, rank: int | None, group_rank: int | None) -> int:
    if group_rank is not None:
        return dist.get_global_rank(group or dist.group.WORLD, group_rank)
    return int(rank or 0)


def _patch_object_collectives(patches: Patches, mailbox: Mailbox) -> None:
    """Object collectives, object point-to-point and barriers through the mailbox (the tensor
    collectives stay on the fake group, which checks their devices)."""
    from torch.distributed import distributed_c10d as c10d

    def all_gather_object(object_list, obj, group=None):
        object_list[:] = mailbox.exchange("all_gather_object", group, obj)

    def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
        gathered = mailbox.exchange("gather_object", group, obj)
        if object_gather_list is not None:
            object_gather_list[:] = gathered

    def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
        source = _global_rank(group, src, group_src)
        sent = mailbox.exchange("broadcast_object_list", group,
                                list(object_list) if mailbox.rank == source else None)
        ranks = dist.get_process_group_ranks(group or dist.group.WORLD)
        object_list[:] = sent[ranks.index(source)]

    def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None,
                            src=None, group=None, group_src=None):
        source = _global_rank(group, src, group_src)
        sent = mailbox.exchange("scatter_object_list", group,
                                scatter_object_input_list if mailbox.rank == source else None)
        ranks = dist.get_process_group_ranks(group or dist.group.WORLD)
        scatter_object_output_list[0] = sent[ranks.index(source)][ranks.index(mailbox.rank)]

    def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None,
                         **_):
        target = _global_rank(group, dst, group_dst)
        mailbox.post(mailbox._key("p2p", mailbox.rank, target), list(object_list))

    def recv_object_list(object_list, src=None, group=None, device=None, group_src=None,
                         **_):
        source = _global_rank(group, src, group_src)
        object_list[:] = mailbox.take(mailbox._key("p2p", source, mailbox.rank))
        return source

    original_barrier = dist.barrier

    def barrier(group=None, async_op=False, device_ids=None):
        # The fake group's barrier first (what the product calls must be valid), then the
        # ranks really wait for each other.
        original_barrier(group=group, async_op=False, device_ids=device_ids)
        mailbox.exchange("barrier", group, None)

    for module in (dist, c10d):
        for fn in (all_gather_object, gather_object, broadcast_object_list, scatter_object_list,
                   send_object_list, recv_object_list, barrier):
            patches.set(module, fn.__name__, fn)


@contextlib.contextmanager
def fake_cuda_rank(
    rank: int, world_size: int, mailbox: Path | str
) -> Iterator[CollectiveRecordingMode]:
    """Be rank ``rank`` of a ``world_size``-rank CUDA job whose backend serves CUDA only, until
    the block ends (the process group is destroyed then). The job's other ranks run the same
    in processes of their own, sharing the folder ``mailbox`` (one per job). Yields the fake
    mode, whose ``collectives`` list records ``(op, group name)`` of every collective and whose
    ``recording_transfers()`` records the host/device crossings of a block."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    install_fake_cuda_device()
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK="0",
                      LOCAL_WORLD_SIZE="1")
    dist.init_process_group("cuda:fake", rank=rank, world_size=world_size, store=FakeStore())
    mode = CollectiveRecordingMode()
    patches = Patches()
    scalar_ops = (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default)
    saved_scalar = {op: fake_impls.op_implementations_dict[op] for op in scalar_ops}
    try:
        _patch_torch_cuda(patches)
        _patch_host_copies(patches, mode)
        patch_device_mesh(patches)
        _patch_storage(patches)
        _patch_object_collectives(patches, Mailbox(Path(mailbox), rank))
        patch_expert_sizes(patches, imbalance=1.0)  # balanced routing
        _patch_model_build(patches)
        _patch_data_loading(patches)
        # Preflight's short paths through the fake mode's dispatch cache: the same keys and
        # the same tensors in fewer Python steps (this mode has no shape environment either).
        patch_cache_keys(patches)
        patch_cache_hits(patches)
        for op in scalar_ops:
            fake_impls.op_implementations_dict[op] = host_scalar
        with mode:
            yield mode
    finally:
        fake_impls.op_implementations_dict.update(saved_scalar)
        patches.undo()
        if dist.is_initialized():
            dist.destroy_process_group()


__all__ = ["CollectiveRecordingMode", "Transfer", "fake_cuda_rank", "install_fake_cuda_device"]
