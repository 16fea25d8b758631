"""The PyTorch backend."""

from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.distributed as dist

from hyper_parallel.platform.base import Platform
from hyper_parallel.platform.dtypes import DTYPE_ALIASES


class TorchPlatform(Platform):
    name = "torch"

    def __init__(self) -> None:
        by_canonical = {
            "bfloat16": torch.bfloat16,
            "float16": torch.float16,
            "float32": torch.float32,
        }
        self._dtype_map = {alias: by_canonical[c] for alias, c in DTYPE_ALIASES.items()}

    @property
    def module_base(self) -> type:
        return torch.nn.Module

    @property
    def dtype_map(self) -> Mapping[str, Any]:
        return self._dtype_map

    def device_type(self) -> str:
        if torch.cuda.is_available():
            return "cuda"
        npu = getattr(torch, "npu", None)
        if npu is not None and npu.is_available():
            return "npu"
        return "cpu"

    def device(self, local_rank: int | None = None) -> torch.device:
        """The device this process computes on (``cpu`` or ``<accel>:<local_rank>``)."""
        kind = self.device_type()
        if kind == "cpu":
            return torch.device("cpu")
        return torch.device(kind, self.get_local_rank() if local_rank is None else local_rank)

    def default_comm_backend(self) -> str:
        return {"cuda": "nccl", "npu": "hccl"}.get(self.device_type(), "gloo")

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)  # also seeds every CUDA device

    def get_world_size(self) -> int:
        return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1

    def get_rank(self) -> int:
        return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0

    def get_rng_state(self) -> dict[str, Any]:
        state = {"cpu": torch.get_rng_state()}
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def set_rng_state(self, state: Mapping[str, Any]) -> None:
        torch.set_rng_state(state["cpu"])
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])
