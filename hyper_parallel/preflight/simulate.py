"""One rank role, built and stepped by the engine's own code in the fake world, and measured.

:class:`RoleBuild` is ``HyperTrainer`` without what reads or writes files: it resolves the spec,
joins the (fake) process group, builds the real ``ParallelDims`` and mesh, the model on ``meta``,
the loss, the real parallelize / pipelining / expert- and context-parallel code, and the real
optimizer, by the engine's own methods.

What one rank holds between steps is read off the real sharded shapes (exact): its parameters,
their gradients, and the optimizer's state after one real optimizer step. What a step adds on
top is measured on fake tensors of the real micro-batch shape by torch's memory tracker
(``torch.distributed._tools``), which files every live tensor under a kind: activations and
temporaries, and the communication buffers (FSDP's unsharded parameters and gradients, its
all-gather and reduce-scatter buffers at the prefetch depth). The role's figure is the
composition at the step's peak instant.

**Depth.** A decoder's layers repeat a period (Qwen3.5: three Gated DeltaNet layers and one
gated attention layer), and every period adds the same tensors to a step: what it saves for the
backward, and the same transients at the same point of the step. So a step's memory is affine in
the number of periods, and the peak of the whole depth is extrapolated from two steps of the
same role built one and two periods deep: exact for identical periods, and what makes a 60-layer
397B rank a few seconds of work. Roles this cannot hold for step at their whole depth: a
pipeline stage, activation checkpointing limited to the first layers (``num_layers``), a layer
pattern with no period.

**Pipeline stages** run their parts' forward and backward directly (the schedule's shape
inference would exchange metadata with peers that do not exist here) and hold as many
micro-batches' saved activations as their schedule keeps in flight (:func:`in_flight`). A rank's
stages that are alike (:func:`stage_shape`: neither the first nor the last, the same modules
and parameters: an interleaved schedule's middle stages) step once: each holds what the
stepped one holds, and its work is the stepped one's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import math
import re
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from hyper_parallel.trainer.base import TrainerState
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

#: The memory tracker's kinds, by what preflight reports them as.
ACTIVATION_KINDS = ("ACT", "TEMP", "INP", "OTH")
BUFFER_KINDS = ("BUFFER", "UNSHARDED_PARAM", "UNSHARDED_GRAD", "ALL_GATHER", "REDUCE_SCATTER")


class RoleBuild(HyperTrainer):
    """The engine's build steps for one simulated rank: everything but data, checkpoints,
    metrics and callbacks (see the module docstring). ``layers`` builds the model that many
    decoder layers deep (the depth extrapolation's short models)."""

    def __init__(self, config: HyperTrainer.Config, layers: int | None = None) -> None:
        from hyper_parallel.data import grad_accum_steps

        self.config = config
        self.state = TrainerState(max_steps=config.training.steps)
        self.last_global_tokens = 0
        self.eval_dataloader = None
        self._resolve_spec()
        if layers is not None:
            self.model_config = self.spec.model = truncated(self.model_config, layers)
        self._setup()
        self.parallel_dims.validate_training(config.training)
        self.grad_accum = grad_accum_steps(
            config.training.global_batch_size, config.training.local_batch_size,
            self.dist.dp_size)
        self._build_model()
        self.loss_fn = self._build_loss()

    def parallelize_on_meta(self) -> None:
        """The real parallelize code at the role's whole size, the model staying on ``meta``
        (call outside the fake mode): its sharded shapes without a tensor op on them, which is
        what a 397B rank's shapes cost in seconds. Not for pipeline stages, whose cut
        materializes them."""
        from hyper_parallel.preflight.fake_world import Patches
        from hyper_parallel.runtime import model_setup

        patches = Patches()
        patches.set(model_setup, "materialize_and_init", lambda model, device: None)
        try:
            self._parallelize_and_materialize()
        finally:
            patches.undo()

    def parallelize(self) -> None:
        """Parallelize, materialize (as fake tensors: call inside the fake mode) and build the
        optimizer and schedule, as the engine does. The parallelize code itself runs on the
        ``meta`` model outside the fake mode, as the engine runs it before it materializes
        (FSDP splitting a 397B rank's thousands of parameters into fake shards is seconds of
        fake operators; on ``meta`` none), but for a pipeline's stages, which are cut,
        parallelized and materialized one by one."""
        from hyper_parallel.preflight.fake_world import on_host
        from hyper_parallel.runtime.callbacks import CallbackHandler

        c = self.config
        spec = self.spec
        if not self.parallel_dims.pp_enabled:
            self.spec = dataclasses.replace(spec, parallelize_fn=on_host(spec.parallelize_fn))
        try:
            self._parallelize_and_materialize()
        finally:
            self.spec = spec
        self._build_optimizer()
        self.lr_scheduler = c.lr_scheduler.build(
            optimizers=self.optimizer, training_steps=c.training.steps)
        self.callbacks = CallbackHandler(self)
        self.model_fwd_context = self.model_bwd_context = contextlib.nullcontext


def resolved_model_config(config: HyperTrainer.Config) -> Any:
    """The run's model config as the engine resolves it before building anything (its spec,
    the cross-section checks, ``update_from_config``): milliseconds, no process group; a
    ``ConfigError`` is the one the run itself would raise."""
    probe = RoleBuild.__new__(RoleBuild)
    probe.config = config
    probe._resolve_spec()
    return probe.model_config


def truncated(model_config: Any, layers: int) -> Any:
    """``model_config`` with its first ``layers`` decoder layers."""
    types = list(model_config.layer_types)
    if getattr(model_config, "_layer_types_derived", False):
        return model_config.replace(num_hidden_layers=layers)
    return model_config.replace(num_hidden_layers=layers, layer_types=types[:layers])


def layer_period(config: HyperTrainer.Config, model_config: Any) -> int | None:
    """The number of layers after which the decoder repeats (see the module docstring), or
    ``None`` when a step of this run cannot be extrapolated from fewer layers."""
    if config.parallelism.pipeline_parallel_degree > 1:
        return None
    if config.activation_checkpoint.num_layers is not None:
        return None
    types = list(getattr(model_config, "layer_types", None) or [])
    n = len(types)
    for p in range(1, n // 2 + 1):
        if n % p == 0 and all(types[i] == types[i % p] for i in range(n)):
            return p
    return None


#: The sections of ``HyperTrainer.Config`` a :class:`RoleBuild` never reads (it builds no
#: tokenizer, data, checkpoints, metrics, profiler or evaluation and resolves no path): the
#: simulation runs with their defaults, so two runs that differ only there are one simulation.
NOT_SIMULATED = ("hf_assets_path", "dump_folder", "tokenizer", "dataloader", "checkpoint",
                 "metrics", "profiler", "validation")
#: Settings that scale values and move no tensor's shape, count or lifetime (the learning rate
#: and its schedule, the run's length, the seed): simulated at their defaults too, so a sweep
#: over them is one simulation.
VALUES_ONLY = {"optimizer": ("lr",), "lr_scheduler": None, "training": ("steps",),
               "debug": ("seed",)}
#: The data settings that do shape a micro-batch (kept from the run): the patch grid of an
#: image-text model's images (:func:`_images`).
SIMULATED_DATA = ("vl_grid_t", "vl_grid_h", "vl_grid_w")


def _defaults(section: Any, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The defaults of ``section``'s dataclass fields ``names`` (None: every field)."""
    return {f.name: (f.default_factory() if f.default_factory is not dataclasses.MISSING
                     else f.default)
            for f in dataclasses.fields(section) if f.init and (names is None or f.name in names)}


def simulation_config(config: HyperTrainer.Config) -> HyperTrainer.Config:
    """What the simulation runs of ``config``: the same run, built on ``meta``, without
    pretrained weights (they change no shape), uncompiled and on the torch kernels (fla-core's
    run on CUDA only; docs/preflight.md says what that leaves out), the sections it never reads
    (:data:`NOT_SIMULATED`, but the data's :data:`SIMULATED_DATA`) and the settings that move no
    tensor (:data:`VALUES_ONLY`) at their defaults."""
    model = config.model
    changes: dict[str, Any] = {}
    if getattr(model, "kernels", "auto") != "auto":
        changes["kernels"] = "auto"
    if getattr(model, "weights_path", None):
        changes["weights_path"] = None
    sections = {name: (type(getattr(config, name))(**_defaults(getattr(config, name)))
                       if names is None else
                       dataclasses.replace(getattr(config, name),
                                           **_defaults(getattr(config, name), names)))
                for name, names in VALUES_ONLY.items()}
    training = sections.pop("training")
    unread = _defaults(config, NOT_SIMULATED)
    data = config.dataloader
    unread["dataloader"] = type(data)(**{n: getattr(data, n) for n in SIMULATED_DATA
                                         if hasattr(data, n)})
    return dataclasses.replace(
        config,
        **unread,
        **sections,
        model=dataclasses.replace(model, **changes) if changes else model,
        training=dataclasses.replace(training, init_device="meta"),
        compile=dataclasses.replace(config.compile, enable=False),
    )


#: How a simulation key that holds a process's own object starts (:func:`simulation_key`):
#: the key is good within this process only, never kept on disk.
PROCESS_LOCAL = "process-local: "


class _ProcessLocal(Exception):
    """An object whose text names this process's own memory (``at 0x...``, a local
    function or class): another process could print another object the same way."""


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+|<locals>|<lambda>")


#: Packages whose code the measurement cache's fingerprint covers already: this package's
#: source and torch's version (and Python's: its standard library).
_COVERED = frozenset({"hyper_parallel", "torch"}) | frozenset(sys.stdlib_module_names)


@functools.cache
def _module_digest(module: str) -> str:
    import hashlib

    path = getattr(sys.modules.get(module), "__file__", None)
    if not path:
        raise _ProcessLocal(f"{module} has no source file")
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:16]


def _source_of(module: str) -> str:
    """``@<hash of its file>`` for a function or class of a module outside what the cache's
    fingerprint covers (a user's recipe module with its own ``parallelize_fn``): an edit of
    that file is another key. Read once per process: a process simulates one version of it."""
    if module.split(".")[0] in _COVERED:
        return ""
    return "@" + _module_digest(module)


def _stable_text(value: Any) -> str:
    """``value`` as text that is the same in every process for equal values, as its ``repr``
    reads but for functions and classes, named by where they are imported from; raises
    :class:`_ProcessLocal` for what has no such name."""
    if value is None or isinstance(value, (bool, int, float, str, bytes, torch.dtype)):
        return repr(value)
    if isinstance(value, enum.Enum):
        return f"{_stable_text(type(value))}.{value.name}"
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        name = f"{value.__module__}.{value.__qualname__}"
        if _ADDRESS.search(name):
            raise _ProcessLocal(name)
        return name + _source_of(value.__module__)
    if isinstance(value, functools.partial):
        return (f"partial({_stable_text(value.func)}, {_stable_text(value.args)}, "
                f"{_stable_text(value.keywords)})")
    if dataclasses.is_dataclass(value):
        fields = ", ".join(f"{f.name}={_stable_text(getattr(value, f.name))}"
                           for f in dataclasses.fields(value) if f.repr)
        return f"{_stable_text(type(value))}({fields})"
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__}[{', '.join(_stable_text(v) for v in value)}]"
    if isinstance(value, (set, frozenset)):
        return f"{type(value).__name__}{{{', '.join(sorted(_stable_text(v) for v in value))}}}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_stable_text(k)}: {_stable_text(v)}"
                               for k, v in value.items()) + "}"
    text = repr(value)
    if _ADDRESS.search(text):
        raise _ProcessLocal(text)
    return f"{_stable_text(type(value))}:{text}"


def simulation_key(config: HyperTrainer.Config) -> str:
    """Equal for two configurations whose simulations are the same. The spec is the one the
    build resolves, with the model Config it builds: a recipe on a spec and the legacy YAML
    naming it by ``model.name`` (``recipes/`` and ``examples/yaml``) are one simulation.

    The same in every process (a spec's functions named by their import path, not their
    address), so a measurement can be kept across processes
    (:mod:`~hyper_parallel.preflight.measurement_cache`); but for a configuration holding an
    object of the process's own (a lambda, a local function), whose key starts with
    :data:`PROCESS_LOCAL` and holds within this process only."""
    from hyper_parallel.utils.errors import ConfigError

    simulated = simulation_config(config)
    probe = RoleBuild.__new__(RoleBuild)
    probe.config = simulated
    try:
        probe._resolve_spec()
        whole = dataclasses.replace(simulated, model_spec=dataclasses.replace(
            probe.spec, model=probe.model_config))
    except ConfigError:
        whole = simulated  # the run's own error, which its preflight reports
    try:
        return _stable_text(whole)
    except _ProcessLocal:
        return PROCESS_LOCAL + repr(whole)


# ----------------------------------------------------------------------- held bytes
def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def _nbytes(t: torch.Tensor) -> int:
    local = _local(t)
    return local.numel() * local.element_size()


def _unique_parameters(parts: list[torch.nn.Module]) -> list[torch.nn.Parameter]:
    seen: set[int] = set()
    out = []
    for part in parts:
        for p in part.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                out.append(p)
    return out


def _inner_optimizers(optimizer: Any) -> list[torch.optim.Optimizer]:
    return list(getattr(optimizer, "optimizers", [optimizer]))


def parameter_bytes(build: RoleBuild) -> tuple[int, int]:
    """The bytes of the role's parameters and of their gradients (the trainable ones), from
    their local (sharded) shapes: exact, on ``meta`` as on fake tensors."""
    params = _unique_parameters(build.model_parts)
    return (sum(_nbytes(p) for p in params),
            sum(_nbytes(p) for p in params if p.requires_grad))


def optimizer_bytes(build: RoleBuild) -> int:
    """The bytes of the state the role's optimizer holds now (after a step has created it)."""
    return sum(
        _nbytes(v)
        for opt in _inner_optimizers(build.optimizer)
        for state in opt.state.values()
        for v in state.values()
        if isinstance(v, torch.Tensor)
    )


def create_optimizer_state(build: RoleBuild) -> None:
    """One real optimizer step on zero gradients: the state it keeps from then on exists."""
    for p in _unique_parameters(build.model_parts):
        if p.requires_grad:
            p.grad = torch.zeros_like(p)
    for opt in _inner_optimizers(build.optimizer):
        opt.step()
    build.optimizer.zero_grad(set_to_none=True)


def process_groups(build: RoleBuild) -> int:
    """The mesh's axes of size > 1, and its flattened aliases over two or more of them."""
    dims = build.parallel_dims
    names, sizes = dims.mesh_dims()
    wide = {n for n, s in zip(names, sizes) if s > 1}
    aliases = [a for a in dims.alias_dims().values() if len(wide.intersection(a)) > 1]
    return len(wide) + len(aliases)


# ----------------------------------------------------------------------- one step
#: Tokens of a warm-up row per unit of the run's sequence divisor (a chunk of the Gated
#: DeltaNet's chunked recurrence, 64, or more).
WARM_UP_TOKENS = 64


#: A packed run's simulated rows hold documents of this many tokens (:func:`_packed_positions`).
PACKED_DOCUMENT_TOKENS = 64


def _micro_batch(build: RoleBuild, warm_up: bool = False, rows: int | None = None) -> dict:
    """One micro-batch of the run's shape, as the data loader would give this rank (its rows
    and positions split the way the engine splits them); or one short row to warm up on.
    ``rows``: the loader's rows (default ``training.local_batch_size``). A model that keeps
    documents apart (``attn_mask_type: block_causal``) gets packed rows
    (:func:`_packed_positions`) and their documents, made on the host as the step makes them:
    the per-document attention, convolution and delta-rule work and the documents' tensors are
    then in the step measured."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from hyper_parallel.runtime.step import with_documents
    from hyper_parallel.utils.choices import BLOCK_CAUSAL

    c = build.config.training
    rows, seq = rows or c.local_batch_size, c.seq_len
    if warm_up:
        dims = build.parallel_dims
        rows, seq = dims.batch_split, min(seq, dims.seq_divisor * WARM_UP_TOKENS)
    ids = torch.zeros(rows, seq, dtype=torch.long)
    batch = {"input_ids": ids, "labels": ids.clone()}
    vision = getattr(build.model_config, "vision_config", None)
    data = build.config.dataloader
    packed = None
    if getattr(build.model_config, "attn_mask_type", None) == BLOCK_CAUSAL:
        span = 0 if vision is None else vision.tokens_per_image(
            data.vl_grid_t, data.vl_grid_h, data.vl_grid_w) + 2
        with unset_fake_temporarily():  # host data, as the loader makes it
            packed = batch["position_ids"] = _packed_positions(rows, seq, first=span + 1)
    if vision is not None:
        batch.update(_images(vision, data, rows, seq, packed))
    if packed is None and vision is None:
        return build._own_part(batch)
    # The host's tensors stay real through the engine's split of the batch (the images' rows
    # are dealt by their real counts), and a packed batch's documents are made from its real
    # positions (by the split itself under context parallelism).
    with unset_fake_temporarily():
        return with_documents(build.model, build._own_part(batch))


def _packed_positions(rows: int, seq: int, first: int = 0) -> torch.Tensor:
    """``position_ids`` ``(rows, seq)`` of rows packed with documents of
    :data:`PACKED_DOCUMENT_TOKENS` tokens, the first at least ``first`` long (it holds the
    row's image) and the last whatever the row has left. Short documents are the costly ones:
    the convolution's spaced rows grow by ``kernel - 1`` tokens a document, the host's offsets
    by one, and every chunk of the delta rule holds a boundary; fine-tuning records are mostly
    a few hundred tokens (docs/packing.md)."""
    from hyper_parallel.data.packing import sample_positions

    head = min(seq, max(first, PACKED_DOCUMENT_TOKENS))
    rest, tail = divmod(seq - head, PACKED_DOCUMENT_TOKENS)
    lengths = torch.tensor([head] + [PACKED_DOCUMENT_TOKENS] * rest + ([tail] if tail else []))
    return sample_positions(lengths).expand(rows, -1).clone()


def _images(vision: Any, data: Any, rows: int, seq: int,
            packed_positions: torch.Tensor | None = None) -> dict:
    """An image-text model's images of a micro-batch: one image per row, of the data's
    ``vl_grid_t x vl_grid_h x vl_grid_w`` patches (exactly ``vl_dummy``'s; for chat records the
    grid states the image size a run budgets for), as many as fit. The pixels are fake; the
    grids and the positions are the host data the loader makes (real tensors: the tower reads
    the grids back, and the model places the images by the positions' rows). Packed rows
    (``packed_positions``, a real host tensor): each document's positions restart."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    grid = (data.vl_grid_t, data.vl_grid_h, data.vl_grid_w)
    tokens = vision.tokens_per_image(*grid)
    if tokens + 2 > seq:
        return {}  # no image fits a row: the data loader refuses the run, not preflight
    from hyper_parallel.utils.data_types import IMAGES_PER_ROW

    with unset_fake_temporarily():
        ids = torch.zeros(rows, seq, dtype=torch.long)
        ids[:, 1:1 + tokens] = vision.image_token_id
        grids = torch.tensor([grid] * rows)
        positions = vision.decoder_positions(ids, grids, packed_positions)
        per_row = torch.ones(rows, dtype=torch.long)  # what an expert-parallel split deals by
    patches = rows * grid[0] * grid[1] * grid[2]
    return {"input_ids": ids, "pixel_values": torch.zeros(patches, vision.patch_dim),
            "image_grid_thw": grids, "position_ids": positions, IMAGES_PER_ROW: per_row}


def _kinds(snapshot: dict) -> dict[str, int]:
    """The tracker's per-device snapshot as ``{kind name: bytes}`` (every device summed)."""
    out: dict[str, int] = {}
    for per_device in snapshot.values():
        for kind, nbytes in per_device.items():
            name = getattr(kind, "name", str(kind))
            out[name] = out.get(name, 0) + int(nbytes)
    return out


@functools.cache
def _peak_only(tracker_class: type) -> type:
    """``tracker_class`` keeping the step's peak only. torch's trackers also keep every
    module's own peak, which walks all modules after every operator (most of a small model's
    preflight time); preflight reads the step's peak alone (the same instant, the same
    composition). A fake tensor's device is answered without the fake mode
    (:func:`~.fake_world.device_query`). Its ``recorder``, when set, records every operator
    the tracker runs (:func:`~.work.recording`'s ``carried``)."""
    from torch.distributed._tools.mem_tracker import _TOTAL_KEY

    from hyper_parallel.preflight.fake_world import device_query

    def _update_peak_stats(self, peak_state: Any) -> None:
        for device, snapshot in self._curr_mem_snap.items():
            if self._peak_mem.get(device, 0) < snapshot[_TOTAL_KEY]:
                self._peak_mem[device] = snapshot[_TOTAL_KEY]
                self._peak_mem_snap[device] = dict(snapshot)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        device = device_query(func, args)  # tracks nothing: answered here, at once
        if device is not None:
            return device
        if self.recorder is not None:
            return self.recorder.dispatch(func, types, args, kwargs, self._tracked)
        return tracker_class.__torch_dispatch__(self, func, types, args, kwargs)

    def _tracked(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        return tracker_class.__torch_dispatch__(self, func, types, args, kwargs)

    return type(f"PeakOnly{tracker_class.__name__}", (tracker_class,),
                {"_update_peak_stats": _update_peak_stats, "recorder": None,
                 "_tracked": _tracked, "__torch_dispatch__": __torch_dispatch__})


def memory_tracker(*parts: Any, recorder: Any = None) -> Any:
    """A tracker of ``parts`` (modules, optimizers) that keeps the peak only, carrying
    ``recorder`` (a :class:`~.work.WorkRecorder` of a ``carried`` :func:`~.work.recording`)
    when one is given."""
    from torch.distributed._tools.mem_tracker import MemTracker

    tracker = _peak_only(MemTracker)()
    tracker.recorder = recorder
    tracker.track_external(*parts)
    return tracker


def _fsdp_tracked(build: RoleBuild) -> bool:
    """Whether the role is one FSDP root with one optimizer, which torch's FSDP tracker files
    by FSDP's own kinds."""
    from torch.distributed.fsdp import FSDPModule

    parts = build.model_parts
    return (len(parts) == 1 and isinstance(parts[0], FSDPModule)
            and len(_inner_optimizers(build.optimizer)) == 1)


def _tracker(build: RoleBuild, recorder: Any = None):
    """The role's memory tracker (FSDP's when :func:`_fsdp_tracked`), carrying ``recorder``."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker

    parts = build.model_parts
    if _fsdp_tracked(build):
        # FSDP sets up its parameter groups at the first forward; the tracker hooks them on
        # entry, so they must exist by then (as after a warm-up step).
        parts[0]._get_fsdp_state()._lazy_init()
        tracker = _peak_only(FSDPMemTracker)(parts[0], _inner_optimizers(build.optimizer)[0])
        tracker.recorder = recorder
        return tracker
    return memory_tracker(*parts, *_inner_optimizers(build.optimizer), recorder=recorder)


def defers_gradient_sync(build: RoleBuild) -> bool:
    """Whether the run's steps hold FSDP's unsharded gradients across their micro-batches
    (``parallelism.fsdp_defer_gradient_sync``, as the step decides it)."""
    from hyper_parallel.runtime.step import defers_gradient_sync as step_defers

    return build.pipeline is None and step_defers(
        build.model, build.grad_accum, build.config.parallelism.fsdp_defer_gradient_sync)


def micro_batches_to_step(build: RoleBuild) -> int:
    """How many of the step's ``grad_accum`` micro-batches preflight steps: as many as it
    takes for every kind of micro-batch the run steps to run from the state the run's own
    would start from. Only what a micro-batch leaves for the next carries over -- the
    accumulated gradients; activations and temporaries die with it -- and that is the same
    from the first micro-batch on:

    * reduce-scattered every micro-batch (the default): the sharded gradients, whose bytes
      the first micro-batch's reduce-scatter creates and the later ones add into in place.
      The second micro-batch is every later one (same state, same operators, the same
      reduce-scatters): 2.
    * held unsharded (``parallelism.fsdp_defer_gradient_sync``): every FSDP unit's unsharded
      gradients, which the first backward creates and the later ones add into in place.
      From the second micro-batch on each starts from all of them; a middle one keeps each
      unit's after its backward, the last reduce-scatters and frees them unit by unit (its
      own transients), and neither's peak bounds the other's: first, one middle and the
      last, 3. A fourth would be a second middle from the same state.

    Fewer when the run has fewer. (``tests/torch/ut/preflight/test_accumulation.py``: one
    more micro-batch does not move the peak.)"""
    return min(build.grad_accum, 3 if defers_gradient_sync(build) else 2)


def warm_up_is_first_micro_batch(build: RoleBuild, recorded: bool = False) -> bool:
    """Whether the warm-up step, keeping its gradients, leaves what a step's first micro-batch
    leaves, so the second is stepped right after it: when the run steps two micro-batches
    and the first leaves only gradients of the parameters' own shapes and layouts, whatever
    its rows -- FSDP's sharded gradients (its reduce-scatter outputs, in the same buffers), or
    the ``.grad`` autograd accumulates (which its layout contract gives the parameter's
    strides, a plain tensor's or a DTensor's local shard). Activations and temporaries die
    with the micro-batch. The second starts from all of the gradients where the first started
    from none, and holds at every instant at least what the first did (where the first made a
    gradient, the second adds one of the same bytes into it), so the step's peak is the
    second's (or the optimizer's) either way, in the same composition: every figure the same
    to the byte (``tests/torch/ut/preflight/test_warm_up_first.py``, against stepping the
    first).

    Not when FSDP holds its gradients unsharded (the first micro-batch's state is then FSDP's
    accumulation buffers, which a step that syncs does not make), nor under expert
    parallelism, whose routed rows can change the layout of what a micro-batch leaves
    (measured: a mixture of experts' backward temporaries moved 0.4 MB under EP 2). Nor,
    ``recorded``, when the step's work is recorded and autograd accumulates the gradients:
    the first micro-batch's work is the second's without the addition of every gradient
    (4 % of a one-rank step's bytes), where under FSDP it is one addition of the sharded
    gradients.

    What the step holds for all its micro-batches at once, one 8-byte token count each, is
    then one fewer (it was already fewer than a run of more micro-batches holds)."""
    if (micro_batches_to_step(build) != 2 or defers_gradient_sync(build)
            or build.parallel_dims.ep_enabled):
        return False
    return not recorded or _fsdp_tracked(build)


@contextlib.contextmanager
def _gradients_kept(build: RoleBuild) -> Iterator[None]:
    """The step's closing ``zero_grad`` leaves the gradients where they are."""
    build.optimizer.zero_grad = lambda *args, **kwargs: None
    try:
        yield
    finally:
        del build.optimizer.zero_grad


@contextlib.contextmanager
def without_recomputation(build: RoleBuild) -> Iterator[None]:
    """Every checkpointed layer of the role runs its module directly: nothing is dropped in
    the forward and recomputed in the backward. For the warm-up step, which is stepped for what
    it leaves -- the optimizer's state, what FSDP allocates once, the gradients when it stands
    for the first micro-batch -- and not measured: checkpointing changes what a forward keeps
    for its backward, never the gradients it computes nor their layouts, and the layers end
    resharded either way. A checkpointed layer's recomputation is about a third of its
    operators in the warm-up (``tests/torch/ut/preflight/test_warm_up_first.py`` holds every
    figure the same, to the byte, against a warm-up that recomputes)."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

    wrappers = [module for part in build.model_parts for module in part.modules()
                if isinstance(module, CheckpointWrapper)]
    for wrapper in wrappers:  # the wrapper's own hooks (FSDP's) still run around it
        wrapper.forward = wrapper._checkpoint_wrapped_module.__call__
    try:
        yield
    finally:
        for wrapper in wrappers:
            del wrapper.forward


def _accumulation_dtype(policy: Any, stored: torch.dtype) -> torch.dtype:
    """The dtype FSDP2 holds an unsharded gradient in across micro-batches: its reduce dtype
    when that differs from the compute dtype (it upcasts the gradient to it,
    ``FSDPParam.to_accumulated_grad_if_needed``), else the compute dtype (the mixed-precision
    policy's ``param_dtype``, else the stored one). FSDP sets these at its lazy init, which a
    build on ``meta`` never reaches: read from the policy the same way."""
    compute = policy.param_dtype or stored
    reduce = policy.reduce_dtype if policy.reduce_dtype != policy.param_dtype else None
    return reduce or compute


def deferred_gradient_bytes(build: RoleBuild) -> int:
    """The unsharded gradients a deferring step holds across its micro-batches (0 when it
    does not defer): every trainable FSDP parameter at its size before FSDP splits it, in the
    dtype FSDP accumulates it in (:func:`_accumulation_dtype`); exact, from FSDP's own state,
    on ``meta`` as on fake tensors."""
    if not defers_gradient_sync(build):
        return 0
    return sum(math.prod(fsdp_param._orig_size)
               * _accumulation_dtype(group.mp_policy, fsdp_param.sharded_param.dtype).itemsize
               for group, fsdp_param in _fsdp_params(build)
               if fsdp_param.sharded_param.requires_grad)


def _fsdp_params(build: RoleBuild) -> Iterator[tuple[Any, Any]]:
    """``(param group, FSDPParam)`` of every FSDP parameter of the role, once each."""
    from torch.distributed.fsdp import FSDPModule

    seen: set[int] = set()
    for part in build.model_parts:
        for module in part.modules():
            if not isinstance(module, FSDPModule):
                continue
            for group in module._get_fsdp_state()._fsdp_param_groups:
                for fsdp_param in group.fsdp_params:
                    if id(fsdp_param) not in seen:
                        seen.add(id(fsdp_param))
                        yield group, fsdp_param


def _file_held_gradients(build: RoleBuild, tracker: Any) -> None:
    """File the unsharded gradients a deferring step holds after a micro-batch as FSDP's
    unsharded gradients (a buffer). FSDP's tracker files the unsharded parameters' own
    ``.grad`` so, but under mixed precision FSDP moves each into a new reduce-dtype tensor
    (``unsharded_accumulated_grad``), which it would count as a temporary, an activation."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker, _FSDPRefType

    if not isinstance(tracker, FSDPMemTracker):
        return
    for _, fsdp_param in _fsdp_params(build):
        unsharded = getattr(fsdp_param, "_unsharded_param", None)
        for held in (getattr(fsdp_param, "unsharded_accumulated_grad", None),
                     None if unsharded is None else unsharded.grad):
            if held is not None:
                tracker._update_and_maybe_create_winfos(held, _FSDPRefType.UNSHARDED_GRAD)


def step_peak(build: RoleBuild, work: list | None = None) -> dict[str, int]:
    """The kinds of live bytes at the peak instant of one steady-state training step, stepped
    with :func:`micro_batches_to_step` of its micro-batches. A warm-up step first, on one
    short row without recomputation (:func:`without_recomputation`): it makes the optimizer's
    state and what FSDP allocates once (its unsharded parameters' storage), at a fraction of a
    full step's time (one short row per rank that splits the rows); when it can, it is also
    the step's first micro-batch
    (:func:`warm_up_is_first_micro_batch`). ``work``: a list the whole optimizer step's
    :class:`~.work.RoleWork` is appended to, recorded from the micro-batches stepped after the
    warm-up (:mod:`.work`; the first stands for any not recorded); None records nothing."""
    from hyper_parallel.preflight.work import recording
    from hyper_parallel.runtime.callbacks import Callback

    class NextMicroBatch(Callback):
        """torch's trackers refuse a second forward of a root module unless its per-module
        statistics (which preflight does not read) are cleared; the step's peak stays. And
        the gradients a deferring step holds are filed as what they are."""

        def on_substep_end(self) -> None:
            tracker.reset_mod_stats()
            _file_held_gradients(build, tracker)
            if recorder is not None:
                self.done = getattr(self, "done", 0) + 1
                (recorder.finish_micro_batches if self.done == measured
                 else recorder.next_micro_batch)()

    stepped = micro_batches_to_step(build)
    first_is_warm_up = warm_up_is_first_micro_batch(build, recorded=work is not None)
    with (without_recomputation(build),
          _gradients_kept(build) if first_is_warm_up else contextlib.nullcontext()):
        build.train_step([_micro_batch(build, warm_up=True)])
    if not first_is_warm_up:
        build.optimizer.zero_grad(set_to_none=True)
    measured = stepped - 1 if first_is_warm_up else stepped
    micro_batch = _micro_batch(build)
    build.add_callback(NextMicroBatch(build))
    with (recording(build, carried=True) if work is not None
          else contextlib.nullcontext()) as recorder:
        tracker = _tracker(build, recorder)
        with tracker:
            # One batch object stepped again: its inputs are the host's, not the accelerator's.
            build.train_step([micro_batch] * measured)
    if recorder is not None:
        work.append(recorder.work(build.grad_accum, "repeat_middle"
                                  if defers_gradient_sync(build) else "repeat_last"))
    return _kinds(tracker.get_tracker_snapshot("peak"))


def _row_aligned_images(mb: dict, rows: int) -> dict:
    """The images of :func:`_images` (one per row) as a pipeline micro-batch of ``rows`` rows
    carries them (``runtime/pipeline_step.with_row_images``): every stage takes the positions,
    the first places the images. The grids and positions stay real host tensors."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    if "pixel_values" not in mb:
        return {}
    with unset_fake_temporarily():
        grids = mb["image_grid_thw"].view(-1, 1, 3)[:rows].clone()
        positions = mb["position_ids"].permute(1, 0, 2)[:rows].clone()
    every_row = mb["input_ids"].shape[0]
    pixels = mb["pixel_values"].view(every_row, -1, mb["pixel_values"].shape[-1])[:rows]
    return {"pixel_values": pixels, "image_grid_thw": grids, "position_ids": positions}


def _stage_documents(mb: dict, rows: int, images: dict) -> dict:
    """A packed run's documents as a pipeline micro-batch of ``rows`` rows carries them to
    every stage (``runtime/pipeline_step.py``: the step's documents cut with the rows, each
    micro-batch's rebuilt on the host from its rows' starts), with the rows' positions (an
    image-text micro-batch's come row-aligned with its images); nothing for a causal run."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from hyper_parallel.runtime.step import DOCUMENTS
    from hyper_parallel.utils.documents import Documents, DocumentShard

    if DOCUMENTS not in mb:
        return {}
    with unset_fake_temporarily():
        documents = mb[DOCUMENTS]
        if isinstance(documents, DocumentShard):  # context parallelism: the rows' shard
            whole = Documents.from_starts(documents.whole.starts[:rows])
            out = {DOCUMENTS: DocumentShard(whole, documents.rank, documents.parts)}
        else:
            out = {DOCUMENTS: Documents.from_starts(documents.starts[:rows])}
        if "position_ids" not in images:
            out["position_ids"] = mb["position_ids"][:rows].clone()
    return out


def in_flight(schedule: str, n_micro: int, pp: int, pp_rank: int, stages_per_rank: int) -> int:
    """Micro-batches (per stage of this rank) whose forward activations the schedule holds at
    once at its peak: GPipe and the breadth-first looped schedule run every forward before the
    first backward; 1F1B holds ``pp - rank`` in its warm-up; interleaved 1F1B holds its warm-up
    chunks (torch's ``(v - 1) * pp + 2 (pp - 1 - rank)``) plus one, over its ``v`` stages."""
    if schedule in ("GPipe", "LoopedBFS"):
        return n_micro
    if schedule == "1F1B":
        return min(n_micro, pp - pp_rank)
    v = stages_per_rank
    chunks = min(n_micro * v, (v - 1) * pp + 2 * (pp - 1 - pp_rank) + 1)
    return max(1, math.ceil(chunks / v))


def stage_shape(part: Any, stage_index: int, num_stages: int) -> tuple:
    """What a pipeline stage's step depends on: whether it is the first or the last stage
    (the embedding, the head and the loss), its modules' types in order (the layer kinds,
    checkpoint wrappers, FSDP units) and its parameters' and buffers' shapes, dtypes and
    placements. Two stages of a rank with the same shape step alike (the layers' indices name
    nothing they compute)."""
    def tensor(t: Any) -> tuple:
        return (type(t).__name__, tuple(t.shape), t.dtype, t.requires_grad,
                tuple(map(repr, getattr(t, "placements", ()))))

    return (stage_index == 0, stage_index == num_stages - 1,
            tuple(type(m).__qualname__ for m in part.modules()),
            tuple(map(tensor, part.parameters())), tuple(map(tensor, part.buffers())))


def _live_bytes(tracker) -> int:
    return sum(_kinds(tracker.get_tracker_snapshot("current")).get(k, 0)
               for k in ACTIVATION_KINDS)


def stage_peak(build: RoleBuild, work: list | None = None) -> tuple[dict[str, int], int]:
    """A pipeline rank's step: each of its stages' forward and backward on one micro-batch of
    the schedule's shape (the step's rows over its micro-batches), its saved activations
    counted once per micro-batch in flight. Returns
    the peak's kinds (activations as the schedule holds them) and the micro-batches in flight.
    ``work``: a list the work of one micro-batch through the rank's stages (a
    :class:`~.work.RoleWork`) and the sends between stages (their
    :class:`~.work.Collective` list, per micro-batch) are appended to; None records nothing."""
    from hyper_parallel.preflight.work import recording, stage_sends
    c = build.config
    pipeline = build.pipeline
    # The step's rows, every accumulation micro-batch's concatenated, split into the
    # schedule's micro-batches (runtime/pipeline_step.py).
    micro_rows = max(1, build._pipeline_rows_per_step() // pipeline.num_microbatches)
    mb = _micro_batch(build, rows=c.training.local_batch_size * build.grad_accum)
    ids = mb["input_ids"][:micro_rows]
    labels = mb["labels"][:micro_rows]
    images = _row_aligned_images(mb, micro_rows)
    images.update(_stage_documents(mb, micro_rows, images))
    pp = build.parallel_dims.pp
    pp_rank = build.parallel_dims.get_mesh("pp").get_local_rank()
    n_flight = in_flight(pipeline.schedule_name, pipeline.num_microbatches, pp, pp_rank,
                         len(pipeline.parts))
    hidden = build.model_config.hidden_size
    dtype = _compute_dtype(c)
    held_extra = 0
    peak_kinds: dict[str, int] = {}
    transfers: dict[int, tuple[int | None, int | None]] = {}  # stage -> bytes received, sent
    # The rank's stages by shape: each shape's first stage is stepped and stands for the rest.
    alike: dict[tuple, list[int]] = {}
    for part, stage_index in zip(pipeline.parts, pipeline.stage_indices):
        alike.setdefault(stage_shape(part, stage_index, pipeline.num_stages),
                         []).append(stage_index)
    parts = dict(zip(pipeline.stage_indices, pipeline.parts))
    with (recording(build, carried=True) if work is not None
          else contextlib.nullcontext()) as recorder:
        for stage_indices in alike.values():
            stage_index = stage_indices[0]
            first, last = stage_index == 0, stage_index == pipeline.num_stages - 1
            tracker = memory_tracker(parts[stage_index], recorder=recorder)
            with tracker:
                x = ids if first else torch.zeros(
                    ids.shape[0], ids.shape[1], hidden, dtype=dtype, requires_grad=True)
                out = parts[stage_index](x, **images)
                saved = _live_bytes(tracker)
                loss = build.loss_fn(out, labels) if last else out.float().sum()
                loss = loss if loss.dim() == 0 else loss.sum()
                loss.backward()
                kinds = _kinds(tracker.get_tracker_snapshot("peak"))
            if recorder is not None:
                recorder.next_micro_batch()  # each shape's work in a bucket of its own
            for index in stage_indices:  # an alike stage sends the same shapes
                transfers[index] = (None if first else x.numel() * x.element_size(),
                                    None if last else out.numel() * out.element_size())
            del out, loss, x
            held_extra += len(stage_indices) * (n_flight - 1) * saved
            if sum(kinds.values()) > sum(peak_kinds.values()):
                peak_kinds = kinds
        if recorder is not None:
            recorder.finish_micro_batches()
    if recorder is not None:
        work.append(recorder.stages_work([len(indices) for indices in alike.values()]))
        work.append([send for index in pipeline.stage_indices
                     for send in stage_sends(build, index, *transfers[index])])
    for p in _unique_parameters(pipeline.parts):
        p.grad = None
    peak_kinds["ACT"] = peak_kinds.get("ACT", 0) + held_extra
    return peak_kinds, n_flight


def _compute_dtype(config: HyperTrainer.Config) -> torch.dtype:
    name = getattr(config.training, "mixed_precision_param", "float32") or "float32"
    return getattr(torch, name)


# ----------------------------------------------------------------------- the role
@dataclass
class RoleMemory:
    """Bytes one rank of a role holds on its accelerator (see the module docstring)."""

    params_bytes: int
    """Its parameters between steps (sharded; in their storage dtype: fp32 masters under mixed
    precision, whose low-precision copies are FSDP's unsharded parameters, in the buffers)."""
    grads_bytes: int
    """Their gradients (sharded like the parameters), all of them: counted whole at the peak."""
    optimizer_bytes: int
    """The optimizer's state (AdamW: two moments per trainable parameter, and its step)."""
    buffers_bytes: int
    """At the step's peak: FSDP's unsharded (low-precision) parameters and gradients and its
    all-gather / reduce-scatter buffers at the prefetch depth, the optimizer step's working
    memory when the peak is in it, and the modules' buffers."""
    activations_bytes: int
    """At the step's peak: saved activations, temporaries and the micro-batch's inputs, times
    the micro-batches a pipeline schedule holds in flight."""
    process_groups: int = 0
    in_flight: int = 1
    """Micro-batches whose activations the role holds at its peak (1 without a pipeline)."""
    depth: str = ""
    """How the step was measured: ``"whole"``, or the extrapolation (``"4 + 8 layers -> 60"``)."""
    detail: dict[str, int] = field(default_factory=dict)
    """The peak's kinds as the tracker filed them (bytes, at the role's whole depth)."""
    micro_batches: int = 1
    """The step's gradient-accumulation micro-batches (the run's)."""
    micro_batches_stepped: int = 1
    """How many of them preflight stepped (:func:`micro_batches_to_step`)."""
    deferred_grads_bytes: int = 0
    """The unsharded gradients held across the micro-batches with
    ``parallelism.fsdp_defer_gradient_sync`` (:func:`deferred_gradient_bytes`; part of the
    buffers at the peak); 0 when the step reduce-scatters every micro-batch."""

    @property
    def allocated_bytes(self) -> int:
        return (self.params_bytes + self.grads_bytes + self.optimizer_bytes
                + self.buffers_bytes + self.activations_bytes)


#: Kinds a rank holds before a step begins (the optimizer's state aside, see below).
HELD_KINDS = ("PARAM", "SHARDED_PARAM", "BUFFER", "Total")


def step_added_bytes(memory: RoleMemory) -> int:
    """What the step adds at its peak instant to what the rank held before it: activations,
    temporaries, communication buffers, the gradients made so far and the optimizer step's
    working memory (what an allocator's peak during the step shows above its start)."""
    kinds = memory.detail
    added = sum(v for k, v in kinds.items() if k not in HELD_KINDS)
    return added - min(memory.optimizer_bytes, kinds.get("OPT", 0))


__all__ = [
    "ACTIVATION_KINDS",
    "BUFFER_KINDS",
    "PROCESS_LOCAL",
    "RoleBuild",
    "RoleMemory",
    "create_optimizer_state",
    "deferred_gradient_bytes",
    "defers_gradient_sync",
    "in_flight",
    "layer_period",
    "memory_tracker",
    "micro_batches_to_step",
    "optimizer_bytes",
    "parameter_bytes",
    "process_groups",
    "resolved_model_config",
    "simulation_config",
    "simulation_key",
    "stage_peak",
    "stage_shape",
    "step_added_bytes",
    "step_peak",
    "truncated",
]
