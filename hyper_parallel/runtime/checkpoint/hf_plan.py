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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from hyper_parallel.utils.hf_layout import INDEX_FILE, cut_files, file_names

from .errors import CheckpointError

#: Bytes per element of every safetensors dtype code this export writes.
DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
}

__all__ = [
    "DTYPE_BYTES",
    "INDEX_FILE",
    "ExportPlan",
    "ShardFile",
    "TensorSpec",
    "UnitSpec",
    "plan_export",
]


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
    """One safetensors file of the export: its name, its writer and its tensors in file order."""

    name: str
    writer: int
    tensors: list[TensorSpec] = field(default_factory=list)

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
        """The files ``writer`` writes, in order."""
        return [f for f in self.files if f.writer == writer]

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
