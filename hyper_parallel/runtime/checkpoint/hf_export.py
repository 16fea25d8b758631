"""The Hugging Face export: the model as (sharded) safetensors plus its ``config.json`` and
tokenizer files, streamed one unit at a time so that no rank ever holds the whole model.

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
   same files from them. The safetensors headers and the ``-of-0000N`` names are known before
   any weight moves.
3. Rounds: in round ``j`` every rank gathers its ``j``-th unit tensor by tensor (a DTensor's
   ``full_tensor()``: collective over its mesh, called in the same order by every rank that
   holds the unit); the writer moves each to the host, converts the unit with ``to_hf`` and
   appends the result to its open file (:mod:`.safetensors_stream`: a file is never held in
   memory); the other ranks drop what they gathered. Under pipeline parallelism a barrier over
   the pipeline ends each round.
4. Carried weights (:mod:`.carried`): the source checkpoint's tensors the model does not hold
   (the MTP head; the vision tower of a text-only run) are one more unit, written last by
   pipeline rank 0's writer, read from the source file one tensor at a time.
5. Rank 0 writes the index, ``config.json`` (through the model package,
   ``hf_io.write_hf_config``) and the tokenizer files of the adapter's ``hf_assets_path``, then
   renames the hidden ``.<name>.tmp`` it all went into to ``path``: an interrupted export never
   leaves a half-written ``hf_ckpt``.

**Who writes.** Without pipeline parallelism every rank holds every unit and global rank 0
writes. Under pipeline parallelism each stage's first data-parallel rank (the ranks of the
pipeline that holds global rank 0) writes the files of that stage's units, rather than routing
every weight to rank 0: the stages write in parallel (an export takes the time of the largest
stage, not of the model), no weight crosses between stages (only the DTensor gathers inside a
stage that training runs there anyway), and every writer's memory stays one unit. The price: a
file never spans two stages, so a pipeline-parallel export has at least one file per stage
(and an index) where one rank would write a single ``model.safetensors``.

**Memory.** A writer's host holds one unit: its gathered tensors plus what ``to_hf`` makes of
them (concatenations are new tensors, splits are views) -- a decoder layer, at most twice over,
whatever the shard size and the model size (for 397B-A17B in fp32 a layer is 26 GB, nearly all
of it the 512 experts; the model is 1.6 TB). A device holds one gathered tensor at a time. On
gloo the all-gather stages its output through a buffer of its own, so a CPU rank peaks at twice
the largest tensor: ``bench/bench_hf_export.py`` measures rank 0 of a 2-rank FSDP 0.8b (3.0 GB,
its embedding 1.0 GB) at +2.0 GB with 100 MB files and +1.9 GB with 1 GB files, where gathering
the whole model first (the export before this one) took +4.9 GB.

**Waits.** No rank waits in a collective while another writes more than one unit. Without
pipeline parallelism every rank takes part in every gather, so a rank waits in its next gather
at most for the writer to convert and write one unit; the peers' next training collective
waits for the last unit and rank 0's few final files (index, config, rename). Under pipeline
parallelism the barrier that ends each round bounds every wait to one round: the slowest
stage's gather, conversion and write of one unit. There is no barrier at the end: the writers
closed their files before the last round's barrier, and nothing else needs the export done.
Every rank first waits for an asynchronous save in flight (its directory must exist; that wait
is in no collective of the training group).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections import deque
from collections.abc import Callable, Sequence
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
from .hf_plan import INDEX_FILE, ExportPlan, ShardFile, TensorSpec, UnitSpec, plan_export
from .ranks import _distributed, _rank
from .safetensors_stream import StreamedSafetensorsFile, dtype_code

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


def _hf_specs(to_hf: Callable, unit: _Unit, config: Any) -> tuple[TensorSpec, ...]:
    """What ``to_hf`` makes of ``unit``, from shapes alone (run on ``meta`` tensors)."""
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
    return tuple(TensorSpec(name, dtype_code(t.dtype), tuple(t.shape))
                 for name, t in converted.items())


# ----------------------------------------------------------------------------- the ranks
@dataclass(frozen=True)
class _Position:
    """This rank in the export: its pipeline rank (which stages' files) and whether it writes."""

    pipeline_rank: int
    writes: bool


def _position(pipeline_group: Any) -> _Position:
    if not _distributed():
        return _Position(0, True)
    import torch.distributed as dist

    if pipeline_group is None:
        return _Position(0, dist.get_rank() == 0)
    # The pipeline holding global rank 0 holds every stage's first data-parallel rank.
    return _Position(dist.get_group_rank(pipeline_group, dist.get_rank()),
                     0 in dist.get_process_group_ranks(pipeline_group))


def _pipeline_spans(pipeline_group: Any) -> bool:
    if pipeline_group is None or not _distributed():
        return False
    import torch.distributed as dist

    return dist.get_world_size(pipeline_group) > 1


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
    """A writer rank's files, in plan order: each opened at its first tensor, closed (fsynced)
    at its last."""

    def __init__(self, folder: str, files: Sequence[ShardFile]) -> None:
        self._folder = folder
        self._pending: deque[ShardFile] = deque(files)
        self._open: StreamedSafetensorsFile | None = None

    def write(self, name: str, tensor: torch.Tensor) -> None:
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

    def close(self) -> None:
        """Close the last file; every file of the plan must have been written (idempotent)."""
        if self._open is not None:
            self._open.close()
            self._open = None
        if self._pending:
            raise CheckpointError(f"HF export: {self._pending[0].name} was never written")

    def abort(self) -> None:
        if self._open is not None:
            self._open.abort()


def _gathered(tensor: torch.Tensor, keep: bool) -> torch.Tensor | None:
    """The full ``tensor`` on the host when ``keep``; None otherwise. Collective for a DTensor
    (every rank of its mesh calls it, in the same order): the non-writers take part and drop."""
    from torch.distributed.tensor import DTensor

    if isinstance(tensor, DTensor):
        if tensor.device.type != tensor.device_mesh.device_type:
            # A CPU-offloaded shard gathers on the device its mesh's backend serves (NCCL: CUDA).
            tensor = tensor.to(tensor.device_mesh.device_type)
        tensor = tensor.full_tensor()
    if not keep:
        return None
    return tensor.detach().to("cpu")


def _export_unit(unit: _Unit, spec: UnitSpec, to_hf: Callable, config: Any,
                 files: _ShardWriter | None) -> None:
    if not spec.tensors:
        return  # nothing of it is exported (a tied head): no rank gathers it
    writes = files is not None
    full = {name: _gathered(t, writes) for name, t in unit.tensors.items()}
    if not writes:
        return
    converted = to_hf(full, config)
    names = [t.name for t in spec.tensors]
    if set(converted) != set(names):
        raise CheckpointError(
            f"HF export: {unit.name!r} converts to {sorted(converted)[:4]}..., but to "
            f"{names[:4]}... from its shapes; to_hf must depend on names and shapes only"
        )
    for name in names:
        files.write(name, converted.pop(name))


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
    logger.info("Exported HF weights to %s (%d file%s, %.1f MB)", path, len(plan.files),
                "" if len(plan.files) == 1 else "s", plan.total_size / 1e6)


def _write_carried(carry: CarriedWeights, files: _ShardWriter) -> None:
    for name, tensor in carry.tensors():
        files.write(name, tensor)


def export_hf_weights(
    model: torch.nn.Module | list[torch.nn.Module], adapter, model_config, path: str,
    *, pipeline_group: Any = None, max_shard_size: int | str = HF_DEFAULT_MAX_SHARD_SIZE,
    carry: CarriedWeights | None = None,
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
    unchanged after the model's.

    Bound: no rank waits in a collective for more than one unit (a decoder layer) to be
    gathered, converted and written by another; the writer's host memory is one unit.
    """
    to_hf = _adapter_to_hf(adapter)
    max_shard_bytes = _shard_bytes(max_shard_size)
    # Every rank, outside any collective of the training group: the step directory the export
    # goes into appears when the background save finishes.
    wait_async_save()
    units, order = _local_units(_model_parts(model))
    me = _position(pipeline_group)
    mine = [UnitSpec(u.name, me.pipeline_rank, _hf_specs(to_hf, u, model_config)) for u in units]

    parent, name = os.path.split(os.path.normpath(path))
    tmp = os.path.join(parent, f".{name}.tmp")
    if _rank() == 0:
        # Before the plan's exchange, which the other stages' writers pass only after this.
        os.makedirs(parent or ".", exist_ok=True)
        if os.path.exists(tmp):
            shutil.rmtree(tmp)
        os.makedirs(tmp)

    every_unit = _all_units(mine, order, pipeline_group)
    if carry is not None:  # the same on every rank: read from the source's headers
        every_unit.append(UnitSpec(CARRIED_UNIT, 0, carry.specs))
    plan = plan_export(every_unit, max_shard_bytes)
    if not plan.files:
        raise CheckpointError("HF export: the adapter converts the model to no tensor at all")
    # Every pipeline rank runs as many rounds as the rank with the most units.
    per_writer: dict[int, int] = {}
    for spec in plan.units:
        per_writer[spec.writer] = per_writer.get(spec.writer, 0) + 1
    rounds = max(per_writer.values())
    spans = _pipeline_spans(pipeline_group)

    files = _ShardWriter(tmp, plan.files_of(me.pipeline_rank)) if me.writes else None
    carries = carry is not None and me.pipeline_rank == 0
    work = len(units) + carries
    try:
        for j in range(rounds):
            if j < len(units):
                _export_unit(units[j], mine[j], to_hf, model_config, files)
            elif carries and j == len(units) and files is not None:
                _write_carried(carry, files)  # no collective: the writer reads the source
            if files is not None and j + 1 >= work:
                # Closed (fsynced) before the round's barrier: rank 0 publishes after the last
                # one, when every stage's writer is done.
                files.close()
            if spans:
                barrier(pipeline_group)
    except BaseException:
        if files is not None:
            files.abort()
        raise
    if _rank() == 0:
        _publish(tmp, path, plan, adapter, model_config, carry)
    return path
