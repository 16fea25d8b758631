"""The state that is not model or optimizer: RNG states and the data loader's position.

Both are per rank (``rng_rank<r>.pt``, ``dataloader_rank<r>.pt``); the LR scheduler's state is
rank 0's ``scheduler.pt`` and the step counters are ``extra_state.json`` (see ``save.py``).
"""

from __future__ import annotations

import random
from typing import Any

import torch

from .errors import CheckpointError


def _accelerator_module():
    """``torch.cuda`` or ``torch.npu`` when that device is usable, else None."""
    if torch.cuda.is_available():
        return torch.cuda
    npu = getattr(torch, "npu", None)
    if npu is not None and npu.is_available():
        return npu
    return None


def get_rng_state() -> dict[str, Any]:
    """All RNG states of this process, in a form ``torch.load(weights_only=True)`` accepts."""
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    try:
        import numpy as np
    except ImportError:  # numpy is optional
        np = None
    if np is not None:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        state["numpy"] = (
            kind,
            torch.from_numpy(keys.astype("int64")),
            int(pos),
            int(has_gauss),
            float(cached),
        )
    acc = _accelerator_module()
    if acc is not None:
        state["accelerator"] = acc.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Inverse of :func:`get_rng_state`."""
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "numpy" in state:
        import numpy as np

        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, keys.numpy().astype("uint32"), pos, has_gauss, cached))
    acc = _accelerator_module()
    if "accelerator" in state:
        if acc is None:
            raise CheckpointError(
                "the checkpoint holds accelerator (CUDA/NPU) RNG states but no accelerator is available "
                "in this process; resume on the same kind of device."
            )
        acc.set_rng_state_all(state["accelerator"])


def _dataloader_state(dataloader) -> Any:
    if not callable(getattr(dataloader, "state_dict", None)):
        raise TypeError(
            f"cannot checkpoint the data loader position: {type(dataloader).__name__} has no state_dict(); "
            "use torchdata.stateful_dataloader.StatefulDataLoader (or pass dataloader=None)."
        )
    return dataloader.state_dict()
