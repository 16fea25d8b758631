"""The MindSpore backend.

Only the platform surface lives here (module base, dtypes, device, seeding, ranks); the trainer
itself runs on torch and says so when asked for mindspore.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

import mindspore as ms

from hyper_parallel.platform.base import Platform
from hyper_parallel.platform.dtypes import DTYPE_ALIASES


class MindSporePlatform(Platform):
    name = "mindspore"

    def __init__(self) -> None:
        by_canonical = {
            "bfloat16": ms.bfloat16,
            "float16": ms.float16,
            "float32": ms.float32,
        }
        self._dtype_map = {alias: by_canonical[c] for alias, c in DTYPE_ALIASES.items()}

    @property
    def module_base(self) -> type:
        return ms.nn.Cell

    @property
    def dtype_map(self) -> Mapping[str, Any]:
        return self._dtype_map

    def device_type(self) -> str:
        # MindSpore names its targets "CPU", "GPU", "Ascend"; we use the torch-style lower-case
        # names so that callers can compare across platforms.
        target = ms.get_context("device_target")
        return {"Ascend": "npu", "GPU": "cuda", "CPU": "cpu"}.get(target, target.lower())

    def manual_seed(self, seed: int) -> None:
        ms.set_seed(seed)

    def _communication_ready(self) -> bool:
        # get_group_size raises until mindspore.communication.init() has run.
        try:
            from mindspore.communication import get_group_size

            get_group_size()
            return True
        except Exception:
            return False

    def get_world_size(self) -> int:
        if self._communication_ready():
            from mindspore.communication import get_group_size

            return int(get_group_size())
        return int(os.environ.get("WORLD_SIZE", "1")) if "MS_WORKER_NUM" in os.environ else 1

    def get_rank(self) -> int:
        if self._communication_ready():
            from mindspore.communication import get_rank

            return int(get_rank())
        return 0
