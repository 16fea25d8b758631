"""The plan of a streamed Hugging Face export: every tensor's file, known before any is gathered.

The export (:mod:`.hf_export`) converts the model one unit at a time (a pipeline unit: the
embedding, one decoder layer, the final norm, the head), so no rank ever holds the whole model.
A safetensors file's header lists every tensor of the file with its offsets before any data, and
``-of-0000N`` in every file name needs the number of files: both are fixed here, from the
tensors' names, dtypes and shapes alone (the adapter run on ``meta`` tensors), before the first
weight is gathered. Pure data, no torch, no process group.

Files are cut and named as the models' HF writer cuts them (``utils.hf_layout``, after
``huggingface_hub.split_torch_state_dict_into_shards``, what transformers' ``save_pretrained``
calls) -- greedily in tensor order, a new file when the next tensor would take the current one
past ``max_shard_bytes``, a tensor larger than that alone in its own file -- with two
differences from the hub that streaming needs: the order of the tensors is kept (the hub keeps
an open file open past an oversized tensor, which puts that tensor's file first), and a new
file starts where the writer changes (under pipeline parallelism each stage's first
data-parallel rank writes that stage's files; see :mod:`.hf_export`). One file is
``model.safetensors`` with no index, as ``save_pretrained`` writes it.

**Who writes which file** (:func:`assign_ranks`): the files of a stage are spread over the
ranks that hold the stage (every rank without pipeline parallelism) -- one file per rank, as far
apart as the ranks go (``file i of n`` to the ``i * len // n``-th holder, so on hosts of 8 ranks
each file goes to another host while there are hosts left), round-robin when there are more
files than ranks. The cut does not depend on the number of ranks: one rank and 512 write the
same files.

**In which dtype** (:class:`DtypeRule`): the tensors' own (the trained model's), every floating
tensor in one asked dtype, or each tensor in its dtype in the run's source checkpoint.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from hyper_parallel.utils.hf_layout import INDEX_FILE, cut_files, file_names

from .errors import CheckpointError

#: Bytes per element of every safetensors dtype code this export writes.
DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
}
#: The codes of floating-point tensors: the ones a :class:`DtypeRule` may write in another dtype
#: (an integer or boolean tensor is written as it is).
FLOAT_CODES = ("F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2")

__all__ = [
    "DTYPE_BYTES",
    "FLOAT_CODES",
    "INDEX_FILE",
    "DtypeRule",
    "ExportPlan",
    "ShardFile",
    "TensorSpec",
    "UnitSpec",
    "assign_ranks",
    "plan_export",
]


@dataclass(frozen=True)
class DtypeRule:
    """The dtype code each floating tensor of an export is written in.

    ``cast``: every floating tensor in this code (``checkpoint.export_hf_dtype`` set to a
    dtype). Else ``source``, the source checkpoint's code of every tensor by its Hugging Face
    name (read from its headers): a tensor it holds is written in its dtype there, one it does
    not hold in the dtype most of its floating tensors have -- so a run started from a
    published bf16 checkpoint exports bf16 (a drop-in replacement), whatever it trained in.
    Neither: the tensor's own dtype (what the model holds; the export before this rule).
    """

    cast: str | None = None
    source: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if self.cast is not None and self.cast not in FLOAT_CODES:
            raise ValueError(f"DtypeRule.cast must be one of {', '.join(FLOAT_CODES)}, "
                             f"got {self.cast!r}")

    def code(self, name: str, code: str) -> str:
        """The code the tensor ``name``, held as ``code``, is written in."""
        if code not in FLOAT_CODES:
            return code
        if self.cast is not None:
            return self.cast
        if self.source:
            theirs = self.source.get(name)
            if theirs is None:
                theirs = self._source_default
            if theirs in FLOAT_CODES:
                return theirs
        return code

    @property
    def _source_default(self) -> str | None:
        floats = Counter(c for c in (self.source or {}).values() if c in FLOAT_CODES)
        return floats.most_common(1)[0][0] if floats else None

    def apply(self, spec: TensorSpec) -> TensorSpec:
        return replace(spec, dtype=self.code(spec.name, spec.dtype))


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of the export: its Hugging Face name, safetensors dtype code and shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class UnitSpec:
    """What one unit of the model becomes: its Hugging Face tensors, in the adapter's order,
    and the writer that writes them (the pipeline rank that holds the unit; 0 without one)."""

    unit: str
    writer: int
    tensors: tuple[TensorSpec, ...]


@dataclass
class ShardFile:
    """One safetensors file of the export: its name, its writer (the pipeline rank whose units
    it holds), its tensors in file order and the rank that writes it."""

    name: str
    writer: int
    tensors: list[TensorSpec] = field(default_factory=list)
    rank: int = 0
    """The global rank that writes it (:func:`assign_ranks`; 0 until assigned)."""

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)


@dataclass
class ExportPlan:
    """The files of an export and the index that maps every tensor to its file."""

    files: list[ShardFile]
    units: list[UnitSpec]

    @property
    def sharded(self) -> bool:
        """More than one file: the files are ``model-0000i-of-0000N.safetensors`` and an index
        goes with them."""
        return len(self.files) > 1

    @property
    def total_size(self) -> int:
        return sum(f.nbytes for f in self.files)

    @property
    def total_parameters(self) -> int:
        return sum(t.numel for f in self.files for t in f.tensors)

    def weight_map(self) -> dict[str, str]:
        return {t.name: f.name for f in self.files for t in f.tensors}

    def index(self) -> dict:
        """``model.safetensors.index.json`` as transformers writes it (``save_pretrained``:
        ``total_parameters`` and ``total_size`` under ``metadata``, then ``weight_map``)."""
        return {
            "metadata": {"total_parameters": self.total_parameters, "total_size": self.total_size},
            "weight_map": self.weight_map(),
        }

    def files_of(self, writer: int) -> list[ShardFile]:
        """The files of pipeline rank ``writer``'s units, in order."""
        return [f for f in self.files if f.writer == writer]

    def files_of_rank(self, rank: int) -> list[ShardFile]:
        """The files the global rank ``rank`` writes, in order."""
        return [f for f in self.files if f.rank == rank]

    def ranks_of(self, unit: UnitSpec) -> list[int]:
        """The ranks that write ``unit``'s tensors, in order: one, or more where files of
        different ranks split the unit."""
        where = self._rank_of_tensor
        return sorted({where[t.name] for t in unit.tensors})

    @cached_property
    def _rank_of_tensor(self) -> dict[str, int]:
        # Read after assign_ranks, which runs once, before any unit is exported.
        return {t.name: f.rank for f in self.files for t in f.tensors}

    def dtype(self) -> str | None:
        """The dtype code most tensors have (``config.json``'s ``dtype``), or None."""
        codes = [t.dtype for f in self.files for t in f.tensors]
        return max(set(codes), key=codes.count) if codes else None


def plan_export(units: Sequence[UnitSpec], max_shard_bytes: int) -> ExportPlan:
    """The files of ``units`` (in model order) at most ``max_shard_bytes`` each (see the module
    docstring). A name that two tensors share is a ``CheckpointError``."""
    if max_shard_bytes < 1:
        raise ValueError(f"max_shard_bytes must be at least 1, got {max_shard_bytes}")
    seen: dict[str, str] = {}
    specs: dict[int, tuple[TensorSpec, int]] = {}  # position -> (tensor, writer)
    for unit in units:
        for tensor in unit.tensors:
            if tensor.name in seen:
                raise CheckpointError(
                    f"HF export: {seen[tensor.name]!r} and {unit.unit!r} both convert to "
                    f"{tensor.name!r}; the state-dict adapter must give every weight one name"
                )
            seen[tensor.name] = unit.unit
            specs[len(specs)] = (tensor, unit.writer)
    cut = cut_files(((i, t.nbytes, writer) for i, (t, writer) in specs.items()),
                    max_shard_bytes)
    files = [
        ShardFile(name=name, writer=specs[positions[0]][1],
                  tensors=[specs[i][0] for i in positions])
        for name, positions in zip(file_names(len(cut)), cut)
    ]
    return ExportPlan(files=files, units=list(units))


def assign_ranks(plan: ExportPlan, holders: Mapping[int, Sequence[int]]) -> ExportPlan:
    """Give every file of ``plan`` the global rank that writes it, among ``holders[writer]``
    (the ranks that hold pipeline rank ``writer``'s units, every rank without pipeline
    parallelism), spread as the module docstring says. Returns ``plan``."""
    by_writer: dict[int, list[ShardFile]] = {}
    for f in plan.files:
        by_writer.setdefault(f.writer, []).append(f)
    for writer, files in by_writer.items():
        ranks = sorted(holders.get(writer, ()))
        if not ranks:
            raise CheckpointError(f"HF export: no rank holds pipeline rank {writer}'s units")
        n = len(files)
        for i, f in enumerate(files):
            f.rank = ranks[i * len(ranks) // n] if n <= len(ranks) else ranks[i % len(ranks)]
    return plan
