"""The Hugging Face export: the model as (sharded) safetensors plus its ``config.json`` and
tokenizer files, streamed one unit at a time so that no rank ever holds the whole model, each
file written by a rank of its own.

``export_hf_weights`` writes ``<step_dir>/hf_ckpt`` (or any path) after a save, in the layout of
transformers' ``save_pretrained``: ``model.safetensors`` when everything fits in one file of
``max_shard_size``, else ``model-00001-of-0000N.safetensors`` ... and
``model.safetensors.index.json``.

**How it streams.**

1. Every rank reads its model parts' sharded state dict (references, no copy) and groups the
   weights by *unit*: the model's pipeline units (``pipeline_units()``: the embedding, each
   decoder layer, the final norm, the head; a model without them is one unit). The adapter's
   conversions stay inside a unit -- the Gated DeltaNet's fused q/k/v, a layer's fused experts
   written out per expert, the tied head dropped -- so a unit converts on its own.
2. The plan (:mod:`.hf_plan`): each rank runs the adapter's ``to_hf`` on ``meta`` copies of its
   units (shapes only, free), the pipeline ranks exchange the results (names, dtypes, shapes;
   one ``all_gather_object`` of a few bytes per tensor, never a weight), and every rank cuts the
   same files from them -- the same files whatever the number of ranks -- and gives each file
   the rank that writes it (:func:`.hf_plan.assign_ranks`: the files are spread over the ranks
   that hold their units, one per rank, as far apart as the ranks go). The safetensors headers
   and the ``-of-0000N`` names are known before any weight moves. Which dtype each tensor is
   written in is the plan's too (:class:`.hf_plan.DtypeRule`: the tensor's own, one asked
   dtype, or the source checkpoint's).
3. Rounds: in round ``j`` every rank exports its ``j``-th unit. Each tensor of the unit is
   gathered to the rank that writes it alone (:func:`.hf_gather.gather_to`: the shards go
   there in pieces, cast to the written dtype on the way, over the mesh's own groups; no other
   rank receives a byte), a unit split between two files of two ranks going to both. The
   writer converts the unit with ``to_hf`` on the host and appends the result to its open file
   (:mod:`.safetensors_stream`: a file is never held in memory), in a background thread when
   there are other ranks, so its disk writes overlap the next gathers, its own and the other
   writers'. Under pipeline parallelism a barrier over the pipeline ends each round.
4. Carried weights (:mod:`.carried`): the source checkpoint's tensors the model does not hold
   (the MTP head; the vision tower of a text-only run) are one more unit of pipeline rank 0,
   written last by the ranks whose files hold them, read from the source file one tensor at a
   time.
5. Every rank closes (fsyncs) its files, then a barrier; rank 0 writes the index,
   ``config.json`` (through the model package, ``hf_io.write_hf_config``) and the tokenizer
   files of the adapter's ``hf_assets_path``, then renames the hidden ``.<name>.tmp`` it all
   went into to ``path``. ``path`` appears whole or not at all: :func:`export_complete` tells
   a finished export from a missing or damaged one (the checkpoint manager redoes the final
   export of a run that crashed during it).

**Who writes.** The files of the units a pipeline stage holds are spread over the ranks holding
that stage -- every rank without pipeline parallelism: with the default 50 GB files the 1.6 TB
of 397B-A17B in fp32 (0.8 TB in bf16) are some 16 to 32 files, each written by another rank,
on another host as long as there are hosts left. A file never spans two stages, so a
pipeline-parallel export has at least one file per stage (and an index) where one rank would
write a single ``model.safetensors``; without pipeline parallelism the files are the ones one
rank writes, bit for bit.

**Memory.** A device holds one piece of a gather (at most :data:`.hf_gather.PIECE_BYTES` over all
ranks' shards, on the writer; its own shard's part elsewhere); no rank but the writer ever holds
a full tensor. A writer's host holds the unit it converts (its gathered tensors plus what
``to_hf`` makes of them: concatenations are new tensors, splits views) and, while its thread
writes, the unit before it: for 397B-A17B a decoder layer is 13 GB in bf16 (26 GB in fp32),
nearly all of it the 512 experts. ``bench/bench_hf_export.py`` measures every rank's growth.

**Waits.** No rank waits in a collective for another rank's disk writes beyond one unit: a
writer's thread takes one unit at a time, and the writer hands it the next (outside any
collective) only when it is done with the last, so the ranks waiting in the writer's next
gather wait at most for the writing of one unit -- the same bound as the conversion. Under
pipeline parallelism the barrier that ends each round bounds every wait to one round. The
barrier before rank 0 publishes waits for the writers' last units; the peers' next collective
waits for rank 0's few final files (index, config, rename). Every rank first waits for an
asynchronous save in flight (its directory must exist; that wait is in no collective of the
training group).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from hyper_parallel.platform.collectives import barrier
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.module_names import strip_wrapper_prefixes
from hyper_parallel.utils.sizes import HF_DEFAULT_MAX_SHARD_SIZE, parse_byte_size

from .async_writer import wait_async_save
from .atomic import _fsync_dir, _replace_dir, _write_json
from .carried import CARRIED_UNIT, CarriedWeights
from .dcp_io import _model_parts
from .errors import CheckpointError
from .hf_gather import gather_to
from .hf_plan import (
    FLOAT_CODES,
    INDEX_FILE,
    DtypeRule,
    ExportPlan,
    ShardFile,
    TensorSpec,
    UnitSpec,
    assign_ranks,
    plan_export,
)
from .ranks import _distributed, _rank, _world_size
from .safetensors_stream import DTYPE_CODES, StreamedSafetensorsFile, dtype_code

logger = logging.getLogger(__name__)

#: Files of a Hugging Face model directory that describe the tokenizer (copied by the export).
HF_TOKENIZER_ASSETS = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)
#: ``config.json``'s ``dtype`` for a safetensors dtype code.
_DTYPE_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16"}
#: The unit of a model without ``pipeline_units()``: all of it.
_WHOLE_MODEL = ""


def _hf_config_writer() -> Callable[[str, Any, str | None], None]:
    """``config.json``'s writer (imported lazily: the model package is heavy and optional here)."""
    from hyper_parallel.models.qwen3_5.hf_io import write_hf_config

    return write_hf_config


def _adapter_to_hf(adapter) -> Callable[[dict, Any], dict]:
    """``to_hf`` of an adapter given as an instance, or as a class with a static/class method."""
    import inspect

    if adapter is None:
        raise ValueError(
            "export_hf_weights: the model spec has no state_dict_adapter; HF export needs one"
        )
    if isinstance(adapter, type):
        raw = inspect.getattr_static(adapter, "to_hf", None)
        if raw is None:
            raise TypeError(
                f"state_dict_adapter {adapter.__name__} has no to_hf(state_dict, config)"
            )
        if not isinstance(raw, (staticmethod, classmethod)):
            adapter = adapter()  # instance method on a class: build a default instance
    return adapter.to_hf


def require_hf_assets_dir(assets_dir: str | None) -> None:
    """``hf_assets_path`` is unset or a directory (a ``ConfigError`` naming it otherwise)."""
    if assets_dir is not None and not os.path.isdir(assets_dir):
        raise ConfigError(
            f"{assets_dir!r} is not a directory; point it at the model's Hugging Face assets "
            "(config.json, tokenizer.json) or leave it unset",
            path="hf_assets_path",
        )


def _copy_hf_assets(assets_dir: str | None, target: str) -> list[str]:
    """Copy the tokenizer assets found in ``assets_dir`` (``hf_assets_path``) into ``target``,
    so the exported directory is a complete Hugging Face model; returns the copied names."""
    if not assets_dir:
        return []
    require_hf_assets_dir(assets_dir)
    copied = []
    for name in HF_TOKENIZER_ASSETS:
        src = os.path.join(assets_dir, name)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(target, name))
            copied.append(name)
    return copied


# ----------------------------------------------------------------------------- the units
@dataclass
class _Unit:
    """One unit this rank holds: its weights by name, as the parts hold them (DTensor shards
    or plain tensors), in state-dict order (the same on every rank that holds the unit)."""

    name: str
    tensors: dict[str, torch.Tensor]


def _unit_names(part: torch.nn.Module) -> list[str]:
    units = getattr(part, "pipeline_units", None)
    return list(units()) if callable(units) else [_WHOLE_MODEL]


def _unit_of(name: str, units: Sequence[str]) -> str:
    """The unit ``name`` belongs to (the longest unit that prefixes it)."""
    best = None
    for unit in units:
        if (unit == _WHOLE_MODEL or name.startswith(unit + ".")) and (
            best is None or len(unit) > len(best)
        ):
            best = unit
    if best is None:
        raise CheckpointError(
            f"HF export: {name!r} belongs to none of the model's pipeline units "
            f"({units[0]}, ..., {units[-1]}); pipeline_units() must cover every weight"
        )
    return best


def _local_units(parts: Sequence[torch.nn.Module]) -> tuple[list[_Unit], list[str]]:
    """This rank's units in model order, and the model's unit names (all of them, in order)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    order = _unit_names(parts[0])
    found: dict[str, dict[str, torch.Tensor]] = {}
    seen: set[str] = set()
    for part in parts:
        # The sharded state dict (DTensors stay sharded: nothing is gathered or copied here).
        for key, value in get_model_state_dict(part).items():
            name = strip_wrapper_prefixes(key)
            if name in seen:
                raise CheckpointError(f"export_hf_weights: two parameters map to the name {name!r}")
            seen.add(name)
            found.setdefault(_unit_of(name, order), {})[name] = value
    return [_Unit(u, found[u]) for u in order if u in found], order


def _hf_specs(to_hf: Callable, unit: _Unit, config: Any,
              dtypes: DtypeRule) -> tuple[TensorSpec, ...]:
    """What ``to_hf`` makes of ``unit``, from shapes alone (run on ``meta`` tensors), in the
    dtypes ``dtypes`` writes them in."""
    meta = {name: torch.empty(tuple(t.shape), dtype=t.dtype, device="meta")
            for name, t in unit.tensors.items()}
    try:
        converted = to_hf(meta, config)
    except Exception as exc:
        raise CheckpointError(
            f"HF export: the state-dict adapter failed to convert {unit.name or 'the model'!r} "
            f"on the meta device ({type(exc).__name__}: {exc}); the export plans its files from "
            "shapes, so to_hf must accept meta tensors (and not read their values)"
        ) from exc
    return tuple(dtypes.apply(TensorSpec(name, dtype_code(t.dtype), tuple(t.shape)))
                 for name, t in converted.items())


# ----------------------------------------------------------------------------- the ranks
#: safetensors dtype code -> torch dtype.
_TORCH_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}


def _pipeline_rank(pipeline_group: Any) -> int:
    if not _pipeline_spans(pipeline_group):
        return 0
    import torch.distributed as dist

    return dist.get_group_rank(pipeline_group, dist.get_rank())


def _pipeline_spans(pipeline_group: Any) -> bool:
    if pipeline_group is None or not _distributed():
        return False
    import torch.distributed as dist

    return dist.get_world_size(pipeline_group) > 1


def _holders(pipeline_rank: int, pipeline_group: Any) -> dict[int, list[int]]:
    """The global ranks that hold each pipeline rank's units: every rank without pipeline
    parallelism, else one ``all_gather_object`` of each rank's pipeline rank (an integer).
    Collective over the world: rank 0 has made the temporary directory before it joins, so no
    writer opens a file before the directory exists."""
    if not _distributed():
        return {0: [0]}
    world = _world_size()
    if not _pipeline_spans(pipeline_group):
        barrier()
        return {0: list(range(world))}
    import torch.distributed as dist

    stages: list[Any] = [None] * world
    dist.all_gather_object(stages, pipeline_rank)
    holders: dict[int, list[int]] = {}
    for rank, stage in enumerate(stages):
        holders.setdefault(int(stage), []).append(rank)
    return holders


def _all_units(mine: list[UnitSpec], order: list[str], pipeline_group: Any) -> list[UnitSpec]:
    """Every unit's spec in model order: this rank's, and under pipeline parallelism the other
    stages' (one ``all_gather_object`` of names and shapes over the pipeline)."""
    if not _pipeline_spans(pipeline_group):
        return mine
    import torch.distributed as dist

    gathered: list[Any] = [None] * dist.get_world_size(pipeline_group)
    dist.all_gather_object(gathered, mine, group=pipeline_group)
    merged: dict[str, UnitSpec] = {}
    for specs in gathered:
        for spec in specs:
            if spec.unit in merged:
                raise CheckpointError(
                    f"HF export: pipeline ranks {merged[spec.unit].writer} and {spec.writer} "
                    f"both hold {spec.unit!r}"
                )
            merged[spec.unit] = spec
    return [merged[u] for u in order if u in merged]


# ----------------------------------------------------------------------------- the writing
class _ShardWriter:
    """A rank's files, in plan order: each opened at its first tensor, closed (fsynced) at its
    last. With ``background`` the files are written by a thread, one unit at a time:
    :meth:`submit` hands it a unit once it is done with the one before, so the host holds at
    most two units (the one written, the one the caller gathers next) and the collectives the
    caller goes back to wait for at most one unit's writing. An error of the thread is raised
    by the next :meth:`submit` or :meth:`close`."""

    def __init__(self, folder: str, files: Sequence[ShardFile], *, background: bool) -> None:
        self._folder = folder
        self._pending: deque[ShardFile] = deque(files)
        self.names = frozenset(t.name for f in files for t in f.tensors)
        self._open: StreamedSafetensorsFile | None = None
        self._background = background
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._idle = threading.Event()
        self._idle.set()
        self._stop = threading.Event()

    # ---- the files (the thread's, or the caller's without one)
    def _write(self, name: str, tensor: torch.Tensor) -> None:
        if self._open is not None and self._open.complete:
            self._open.close()
            self._open = None
        if self._open is None:
            if not self._pending:
                raise CheckpointError(f"HF export: {name!r} is in no file of the plan")
            shard = self._pending.popleft()
            self._open = StreamedSafetensorsFile(os.path.join(self._folder, shard.name),
                                                 shard.tensors)
        self._open.write(name, tensor)

    def _finish(self) -> None:
        if self._open is not None:
            self._open.close()
            self._open = None
        if self._pending:
            raise CheckpointError(f"HF export: {self._pending[0].name} was never written")

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                unit = self._queue.get()
                if unit is None:
                    return
                for name, tensor in unit:
                    if self._stop.is_set():
                        return
                    self._write(name, tensor)
                unit = tensor = None  # dropped before the caller hands over the next one
                self._idle.set()
        except BaseException as exc:  # noqa: BLE001 - handed to the exporting thread
            self._error = exc
            self._idle.set()

    def _wait_idle(self) -> None:
        """Until the thread is done with its unit (outside any collective); its error, if it
        failed."""
        while not self._idle.wait(timeout=0.5):
            if not self._thread.is_alive():
                break
        if self._error is not None:
            raise self._error

    # ---- the caller's side
    def submit(self, tensors: list[tuple[str, torch.Tensor]]) -> None:
        """Write one unit's ``(name, tensor)`` of this rank's files, in file order."""
        if not self._background:
            for name, tensor in tensors:
                self._write(name, tensor)
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="hf-export-writer",
                                            daemon=True)
            self._thread.start()
        self._wait_idle()
        self._idle.clear()
        self._queue.put(tensors)

    def close(self) -> None:
        """Write what was submitted and close the last file; every file of the plan must have
        been written."""
        if self._thread is not None:
            self._wait_idle()
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        self._finish()

    def abort(self) -> None:
        """Stop the thread after the tensor it writes, and close without checks (an export
        that failed; its directory is never published)."""
        self._stop.set()
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._open is not None:
            self._open.abort()


@dataclass(frozen=True)
class _To:
    """Where :func:`_gathered` takes a tensor: the rank that writes it, in which dtype."""

    rank: int
    dtype: torch.dtype | None = None


def _gathered(tensor: torch.Tensor, to: _To) -> torch.Tensor | None:
    """The full ``tensor`` on the host of ``to.rank``, None on the other ranks. Collective for a
    DTensor (every rank of its mesh calls it, in the same order); see :mod:`.hf_gather`."""
    return gather_to(tensor, to.rank, to.dtype)


def _gather_dtypes(unit: _Unit, spec: UnitSpec) -> dict[str, torch.dtype]:
    """The dtype each sharded weight of ``unit`` is gathered in: the one every floating tensor
    of the unit is written in, when they agree (the adapters' ``to_hf`` only moves values --
    renames, splits, concatenations -- so casting before it is casting after, and a bf16
    export then moves half the bytes of fp32 weights). Otherwise the weights' own dtypes, cast
    after the conversion. Plain tensors are not gathered; they are cast after too."""
    from torch.distributed.tensor import DTensor

    written = {t.dtype for t in spec.tensors if t.dtype in FLOAT_CODES}
    if len(written) != 1:
        return {}
    dtype = _TORCH_DTYPES[written.pop()]
    return {name: dtype for name, t in unit.tensors.items()
            if isinstance(t, DTensor) and t.dtype.is_floating_point}


def _export_unit(unit: _Unit, spec: UnitSpec, plan: ExportPlan, to_hf: Callable, config: Any,
                 files: _ShardWriter | None) -> None:
    """Gather ``unit`` to each rank that writes some of it; those convert it and hand their
    tensors to their files."""
    if not spec.tensors:
        return  # nothing of it is exported (a tied head): no rank gathers it
    me = _rank()
    casts = _gather_dtypes(unit, spec)
    written = {t.name: t.dtype for t in spec.tensors}
    for rank in plan.ranks_of(spec):
        full = {name: _gathered(t, _To(rank, casts.get(name)))
                for name, t in unit.tensors.items()}
        if rank != me:
            continue
        converted = to_hf(full, config)
        del full
        if set(converted) != set(written):
            raise CheckpointError(
                f"HF export: {unit.name!r} converts to {sorted(converted)[:4]}..., but to "
                f"{sorted(written)[:4]}... from its shapes; to_hf must depend on names and "
                "shapes only"
            )
        files.submit([(name, converted.pop(name).to(_TORCH_DTYPES[written[name]]))
                      for name in written if name in files.names])
        del converted


def _write_carried(carry: CarriedWeights, spec: UnitSpec, files: _ShardWriter) -> None:
    """This rank's share of the carried tensors, read one at a time, in the plan's dtypes."""
    written = {t.name: t.dtype for t in spec.tensors if t.name in files.names}
    files.submit([(name, tensor.to(_TORCH_DTYPES[written[name]]))
                  for name, tensor in carry.tensors(written)])


def _shard_bytes(max_shard_size: int | str) -> int:
    if isinstance(max_shard_size, bool) or not isinstance(max_shard_size, (int, str)):
        raise TypeError(f"max_shard_size must be bytes or a size such as '5GB', got {max_shard_size!r}")
    if isinstance(max_shard_size, int):
        if max_shard_size < 1:
            raise ValueError(f"max_shard_size must be at least 1 byte, got {max_shard_size}")
        return max_shard_size
    return parse_byte_size(max_shard_size)


def _publish(tmp: str, path: str, plan: ExportPlan, adapter: Any, model_config: Any,
             carry: CarriedWeights | None) -> None:
    """Rank 0, after every file is written: the index, config.json (over the source's, when
    weights were carried from it), the tokenizer files, the rename that makes ``path``
    appear."""
    if plan.sharded:
        _write_json(plan.index(), os.path.join(tmp, INDEX_FILE))
    dtype = plan.dtype()
    # Only an export that carries weights writes over its source's config.json.
    over = {} if carry is None else {"base": carry.source_config()}
    _hf_config_writer()(tmp, model_config, _DTYPE_NAMES.get(dtype) if dtype else None, **over)
    _copy_hf_assets(getattr(adapter, "hf_assets_path", None), tmp)
    _fsync_dir(tmp)
    _replace_dir(tmp, path)
    writers = sorted({f.rank for f in plan.files})
    logger.info("Exported HF weights to %s (%d file%s by %d rank%s, %.1f MB, %s)", path,
                len(plan.files), "" if len(plan.files) == 1 else "s", len(writers),
                "" if len(writers) == 1 else "s", plan.total_size / 1e6,
                _DTYPE_NAMES.get(dtype, dtype))


def export_hf_weights(
    model: torch.nn.Module | list[torch.nn.Module], adapter, model_config, path: str,
    *, pipeline_group: Any = None, max_shard_size: int | str = HF_DEFAULT_MAX_SHARD_SIZE,
    carry: CarriedWeights | None = None, dtypes: DtypeRule | None = None,
) -> str:
    """Write ``model`` as a Hugging Face checkpoint into ``path``, streamed (see the module
    docstring); returns ``path``. Collective: every rank calls it.

    ``model`` may be a list of model parts (this rank's pipeline stages); wrapper infixes
    (activation checkpointing, ``torch.compile``, FSDP1) are removed from the names.
    ``adapter.to_hf(state_dict, model_config)`` converts one unit at a time and must accept
    ``meta`` tensors (the plan is made from shapes). ``pipeline_group``: the ranks that hold the
    stages of one model, under pipeline parallelism. ``max_shard_size``: the largest file, in
    bytes or as transformers writes it (``"5GB"``; default transformers' ``save_pretrained``
    default); a tensor larger than that gets a file of its own. ``carry``: the source
    checkpoint's tensors the model does not hold (:func:`.carried.carried_weights`), written
    after the model's. ``dtypes``: which dtype each tensor is written in
    (:class:`.hf_plan.DtypeRule`; default: the tensors' own).

    Bound: no rank waits in a collective for more than one unit (a decoder layer) to be
    gathered, converted and written by another; no rank but a tensor's writer holds it whole.
    """
    to_hf = _adapter_to_hf(adapter)
    max_shard_bytes = _shard_bytes(max_shard_size)
    dtypes = DtypeRule() if dtypes is None else dtypes
    # Every rank, outside any collective of the training group: the step directory the export
    # goes into appears when the background save finishes.
    wait_async_save()
    units, order = _local_units(_model_parts(model))
    stage = _pipeline_rank(pipeline_group)
    mine = [UnitSpec(u.name, stage, _hf_specs(to_hf, u, model_config, dtypes)) for u in units]

    parent, name = os.path.split(os.path.normpath(path))
    tmp = os.path.join(parent, f".{name}.tmp")
    if _rank() == 0:
        # Before the ranks' exchange, which the other writers pass only after this.
        os.makedirs(parent or ".", exist_ok=True)
        if os.path.exists(tmp):
            shutil.rmtree(tmp)
        os.makedirs(tmp)
    holders = _holders(stage, pipeline_group)

    every_unit = _all_units(mine, order, pipeline_group)
    carried = None
    if carry is not None:  # the same on every rank: read from the source's headers
        carried = UnitSpec(CARRIED_UNIT, 0, tuple(dtypes.apply(s) for s in carry.specs))
        every_unit.append(carried)
    plan = plan_export(every_unit, max_shard_bytes)
    if not plan.files:
        raise CheckpointError("HF export: the adapter converts the model to no tensor at all")
    assign_ranks(plan, holders)
    # Every pipeline rank runs as many rounds as the rank with the most units.
    per_writer: dict[int, int] = {}
    for spec in plan.units:
        per_writer[spec.writer] = per_writer.get(spec.writer, 0) + 1
    rounds = max(per_writer.values())
    spans = _pipeline_spans(pipeline_group)

    me = _rank()
    own = plan.files_of_rank(me)
    # A thread lets the other ranks' gathers go on while this one writes; alone, nobody waits.
    files = _ShardWriter(tmp, own, background=_world_size() > 1) if own else None
    work: list[tuple[_Unit | None, UnitSpec]] = list(zip(units, mine))
    if carried is not None and stage == 0:
        work.append((None, carried))
    try:
        for j in range(rounds):
            if j < len(work):
                unit, spec = work[j]
                if unit is not None:
                    _export_unit(unit, spec, plan, to_hf, model_config, files)
                elif me in plan.ranks_of(spec):
                    _write_carried(carry, spec, files)  # no collective: read from the source
            if spans:
                barrier(pipeline_group)
        if files is not None:
            files.close()  # fsynced before the barrier: rank 0 publishes after it
    except BaseException:
        if files is not None:
            files.abort()
        raise
    barrier()
    if me == 0:
        _publish(tmp, path, plan, adapter, model_config, carry)
    return path


# ----------------------------------------------------------------------------- completeness
def _safetensors_whole(file: str) -> bool:
    """``file`` is a safetensors file as long as its header says (not cut short)."""
    try:
        with open(file, "rb") as f:
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
    except (OSError, ValueError):
        return False
    header.pop("__metadata__", None)
    end = max((entry["data_offsets"][1] for entry in header.values()), default=0)
    return os.path.getsize(file) == 8 + size + end


def export_complete(path: str) -> bool:
    """Whether ``path`` holds a finished export: ``config.json``, and every safetensors file
    the index names (or ``model.safetensors``) as long as its header says. An export that
    crashed never leaves ``path`` (it is renamed into place last); this also refuses one
    damaged since (a file missing or cut short), which the checkpoint manager then redoes."""
    if not os.path.isfile(os.path.join(path, "config.json")):
        return False
    index = os.path.join(path, INDEX_FILE)
    if os.path.isfile(index):
        try:
            with open(index, encoding="utf-8") as f:
                files: Iterable[str] = set(json.load(f)["weight_map"].values())
        except (OSError, ValueError, KeyError):
            return False
    else:
        files = ["model.safetensors"]
    return all(_safetensors_whole(os.path.join(path, name)) for name in files)
