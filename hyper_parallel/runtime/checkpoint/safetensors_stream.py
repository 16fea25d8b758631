"""A safetensors file written one tensor at a time, so a file never has to sit in memory.

``safetensors.torch.save_file`` takes the whole file as one dict of tensors: exporting a shard of
a few GB that way means holding the shard. The format allows better: an 8-byte little-endian
header length, a JSON header naming every tensor's dtype, shape and byte range (padded with
spaces to a multiple of 8), then the tensors' bytes back to back. With the header written from
the plan (:mod:`.hf_plan`: the names, dtypes and shapes are known before any tensor is
gathered), each tensor is appended as it arrives and dropped; the writer holds one unit, never
a file. Files open with the process's umask, like any other checkpoint file, and are flushed and
fsynced when closed (the export then renames their directory into place).

``safetensors.safe_open`` / ``load_file`` and transformers read these files like their own: the
byte ranges are contiguous and in header order, which their validation requires.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from collections.abc import Sequence

import torch

from .errors import CheckpointError
from .hf_plan import TensorSpec

__all__ = ["DTYPE_CODES", "StreamedSafetensorsFile", "dtype_code"]

#: torch dtype -> safetensors dtype code (the subset of safetensors' table a checkpoint holds).
DTYPE_CODES: dict[torch.dtype, str] = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
    torch.float8_e4m3fn: "F8_E4M3",
    torch.float8_e5m2: "F8_E5M2",
}
#: safetensors' own metadata of a PyTorch checkpoint (what ``save_pretrained`` writes).
METADATA = {"format": "pt"}


def dtype_code(dtype: torch.dtype) -> str:
    """The safetensors code of ``dtype`` (a ``CheckpointError`` for one it cannot hold)."""
    try:
        return DTYPE_CODES[dtype]
    except KeyError:
        raise CheckpointError(
            f"HF export: safetensors has no code for {dtype} here; export "
            f"{', '.join(str(d) for d in DTYPE_CODES)} tensors"
        ) from None


def _header(tensors: Sequence[TensorSpec], metadata: dict[str, str]) -> bytes:
    entries: dict[str, object] = {"__metadata__": dict(metadata)}
    offset = 0
    for spec in tensors:
        end = offset + spec.nbytes
        entries[spec.name] = {"dtype": spec.dtype, "shape": list(spec.shape),
                              "data_offsets": [offset, end]}
        offset = end
    raw = json.dumps(entries, separators=(",", ":")).encode("utf-8")
    return raw + b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as safetensors writes


class StreamedSafetensorsFile:
    """One safetensors file: the header of ``tensors`` is written on open, then :meth:`write`
    appends each tensor in that order; :meth:`close` checks that all came, flushes and
    fsyncs."""

    def __init__(self, path: str, tensors: Sequence[TensorSpec],
                 metadata: dict[str, str] | None = None) -> None:
        if sys.byteorder != "little":  # safetensors is little-endian; tensors are written raw
            raise CheckpointError("HF export: safetensors files are written on little-endian hosts only")
        self.path = path
        self._tensors = list(tensors)
        self._next = 0
        header = _header(self._tensors, METADATA if metadata is None else metadata)
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close(); mode from the umask
        self._file.write(struct.pack("<Q", len(header)))
        self._file.write(header)

    @property
    def complete(self) -> bool:
        return self._next == len(self._tensors)

    @property
    def expected(self) -> TensorSpec | None:
        """The tensor the file takes next (None once complete)."""
        return None if self.complete else self._tensors[self._next]

    def write(self, name: str, tensor: torch.Tensor) -> None:
        """Append ``tensor`` as ``name``, which must be the next tensor of the header, with its
        dtype and shape (a ``CheckpointError`` otherwise: the plan and the conversion disagree)."""
        spec = self.expected
        if spec is None or spec.name != name:
            raise CheckpointError(
                f"HF export: {self.path} expects {spec.name if spec else 'no more tensors'!r} "
                f"next, got {name!r}"
            )
        got = (dtype_code(tensor.dtype), tuple(tensor.shape))
        if got != (spec.dtype, spec.shape):
            raise CheckpointError(
                f"HF export: {name!r} is {got[0]} {list(got[1])}, but the plan made from the "
                f"shapes says {spec.dtype} {list(spec.shape)}"
            )
        data = tensor.detach()
        if data.device.type != "cpu":
            data = data.to("cpu")
        if data.numel():
            # Raw bytes in memory order: the tensor's own buffer when it is contiguous, else
            # one contiguous copy of it (views from the adapter's splits and slices).
            flat = data.contiguous().reshape(-1).view(torch.uint8)
            assert flat.numel() == spec.nbytes, (name, flat.numel(), spec.nbytes)
            self._file.write(memoryview(flat.numpy()))
        self._next += 1

    def close(self) -> None:
        """Flush and fsync the file (a ``CheckpointError`` when tensors are missing)."""
        if self._file.closed:
            return
        try:
            if not self.complete:
                missing = [t.name for t in self._tensors[self._next:]]
                raise CheckpointError(
                    f"HF export: {self.path} is missing {len(missing)} tensors "
                    f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''})"
                )
            self._file.flush()
            os.fsync(self._file.fileno())
        finally:
            self._file.close()

    def abort(self) -> None:
        """Close without checks (an export that failed; its directory is never published)."""
        self._file.close()

