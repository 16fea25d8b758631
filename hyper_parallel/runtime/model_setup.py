"""Model lifecycle shared by every trainer: build, freeze, materialize + init, load weights, and
the check of the compile backend they are compiled with.

Models are built in fp32, so with mixed precision the stored parameters are the fp32 master
weights and FSDP2's MixedPrecisionPolicy casts them for compute. Frozen parameters stay in fp32
too: changing the storage dtype of some parameters inside an FSDP2 unit would break its
uniform-dtype all-gather.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    set_model_state_dict,
)

from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.suggest import did_you_mean

logger = logging.getLogger(__name__)


def build_model_on(init_device: str, build: Any, *args: Any) -> torch.nn.Module:
    """Call ``build(*args)`` with parameters created on ``init_device``.

    ``meta`` allocates nothing: the model is materialized after it has been sharded.
    """
    with torch.device(init_device):
        return build(*args)


def freeze_parameters(model: torch.nn.Module, patterns: Sequence[str] | None) -> list[str]:
    """``requires_grad=False`` for parameters whose name contains a pattern; returns their names.

    A pattern that matches nothing is an error (it is almost always a typo).
    """
    if not patterns:
        return []
    frozen, used = [], set()
    for name, param in model.named_parameters():
        hits = [p for p in patterns if p in name]
        if hits:
            param.requires_grad_(False)
            frozen.append(name)
            used.update(hits)
    unused = [p for p in patterns if p not in used]
    if unused:
        sample = ", ".join(n for n, _ in list(model.named_parameters())[:6])
        raise ConfigError(
            f"{unused} match no parameter name (names look like: {sample}, ...)",
            path="training.freeze_modules",
        )
    return frozen


@torch.no_grad()
def materialize_and_init(model: torch.nn.Module, device: torch.device) -> None:
    """Allocate a meta-built (possibly sharded) model on ``device`` and initialize it.

    ``init_weights`` draws every tensor at full shape from the (identically seeded) global RNG
    and keeps the local shard, so the initial weights do not depend on the parallel layout.
    """
    model.to_empty(device=device)
    init = getattr(model, "init_weights", None)
    if init is None:
        raise TypeError(f"{type(model).__name__} has no init_weights(); it cannot be built on meta")
    init(buffer_device=device)
    if hasattr(model, "tie_weights"):
        model.tie_weights()


def check_compile_backend(backend: str) -> None:
    """A ``ConfigError`` naming ``compile.backend`` unless ``torch.compile`` knows ``backend``
    (torch itself refuses it only once the first layer is compiled, as a ``RuntimeError``)."""
    from torch._dynamo import list_backends, lookup_backend
    from torch._dynamo.exc import InvalidBackend

    try:
        lookup_backend(backend)
    except InvalidBackend:
        # Every backend torch registers (``eager`` and ``aot_eager`` are debug-tagged), but
        # torch's own test fixtures.
        known = [b for b in list_backends(exclude_tags=()) if not b.endswith("_TESTING_ONLY")]
        raise ConfigError(
            f"{backend!r} is not a torch.compile backend{did_you_mean(str(backend), known)}; "
            f"choose one of: {', '.join(known)}",
            path="compile.backend",
        ) from None


def _is_hf_checkpoint(path: Path) -> bool:
    return (path / "model.safetensors").is_file() or (path / "model.safetensors.index.json").is_file()


def _is_dcp_checkpoint(path: Path) -> bool:
    return (path / ".metadata").is_file()


def load_pretrained_weights(
    model: torch.nn.Module | Sequence[torch.nn.Module],
    weights_path: str,
    *,
    adapter: Any = None,
    model_config: Any = None,
    stage: bool = False,
) -> None:
    """Overlay pretrained weights on a materialized (possibly sharded) model.

    ``weights_path`` is a Hugging Face checkpoint directory (converted with ``adapter``), a DCP
    directory written by our checkpointing, or a ``.pt`` / ``.pth`` full state dict. Every
    model parameter must be present: a partial load is an error, never a silent random init.

    ``model`` may be a list of model parts (pipeline stages): each takes its own names from the
    full state dict, and must find every one of them there.
    """
    if not isinstance(model, torch.nn.Module):
        parts = list(model)
        if len(parts) == 1:
            model = parts[0]
        else:
            for part in parts:
                load_pretrained_weights(
                    part, weights_path, adapter=adapter, model_config=model_config, stage=True
                )
            return
    path = Path(weights_path)
    if not path.exists():
        raise ConfigError(f"{weights_path!r} does not exist", path=WEIGHTS_FIELD)
    options = StateDictOptions(full_state_dict=True, strict=True)
    if path.is_dir() and _is_hf_checkpoint(path):
        if adapter is None:
            raise ConfigError(
                f"{weights_path!r} is a Hugging Face checkpoint, but the model spec has no "
                "state_dict_adapter to convert it; give a DCP directory or a state-dict file, or "
                "a spec with a state_dict_adapter",
                path=WEIGHTS_FIELD,
            )
        from hyper_parallel.models.qwen3_5.hf_io import load_hf_checkpoint

        try:
            state = adapter.from_hf(load_hf_checkpoint(path), model_config)
        except (KeyError, ValueError) as exc:
            # The adapter checks the checkpoint against the config: the user's file is wrong.
            detail = exc.args[0] if exc.args else str(exc)
            raise ConfigError(f"{weights_path!r} does not fit the model: {detail}",
                              path=WEIGHTS_FIELD) from None
        dtype = _param_dtype(model)
        state = {k: v.to(dtype) for k, v in _own_keys(model, state, stage).items()}
        check_weights_fit(model, _shapes(state), weights_path)
        set_model_state_dict(model, state, options=options)
    elif path.is_dir() and _is_dcp_checkpoint(path):
        # A step_<N> directory of our checkpointing: the model lives under the "model" key.
        import torch.distributed.checkpoint as dcp

        check_weights_fit(model, _dcp_model_shapes(path), weights_path)
        state = {"model": get_model_state_dict(model)}
        dcp.load(state, checkpoint_id=str(path))
        set_model_state_dict(model, state["model"], options=StateDictOptions(strict=True))
    elif path.is_file():
        state = _own_keys(model, _read_state_file(path, weights_path), stage)
        check_weights_fit(model, _shapes(state), weights_path)
        set_model_state_dict(model, state, options=options)
    else:
        raise ConfigError(
            f"{weights_path!r} is neither a Hugging Face checkpoint directory "
            "(model.safetensors / model.safetensors.index.json), a DCP checkpoint directory "
            "(.metadata) nor a state-dict file",
            path=WEIGHTS_FIELD,
        )
    logger.info("loaded weights from %s", os.fspath(path))


def _read_state_file(path: Path, weights_path: str) -> dict:
    """The state dict a ``.pt`` file holds; a file that is not one is bad input (a
    ``ConfigError`` naming ``model.weights_path``), whatever ``torch.load`` raised reading it."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - unpickling garbage raises anything
        raise ConfigError(f"{weights_path!r} is not a state-dict file torch.load can read: "
                          f"{type(exc).__name__}: {exc}", path=WEIGHTS_FIELD) from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConfigError(f"{weights_path!r} holds a {type(state).__name__}, not a state dict "
                          "(a mapping of parameter names to tensors)", path=WEIGHTS_FIELD)
    return state


def _own_keys(model: torch.nn.Module, state: dict, stage: bool) -> dict:
    """``state`` restricted to the names ``model`` holds (a pipeline stage holds some of the
    whole model's); a name it holds and ``state`` lacks stays, so the strict load reports it.
    Used for stages only: a whole model is loaded strictly, unexpected names included."""
    from hyper_parallel.utils.module_names import strip_wrapper_prefixes

    if not stage:
        return state
    held = {strip_wrapper_prefixes(k) for k in model.state_dict()}
    return {k: v for k, v in state.items() if k in held}


#: The field that names the weights, in errors (the legacy front door renames it).
WEIGHTS_FIELD = "model.weights_path"
#: How many names of each kind an error lists before it counts the rest.
SHOWN_NAMES = 5


def _shapes(state: dict) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in state.items()}


def _dcp_model_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """The model's tensors in a DCP checkpoint (its ``model.`` entries), by name and shape,
    read from the metadata alone."""
    from torch.distributed.checkpoint import FileSystemReader

    metadata = FileSystemReader(str(path)).read_metadata().state_dict_metadata
    return {k[len("model."):]: tuple(m.size) for k, m in metadata.items()
            if k.startswith("model.") and hasattr(m, "size")}


def check_weights_fit(model: torch.nn.Module, shapes: dict[str, tuple[int, ...]],
                      weights_path: str) -> None:
    """A ``ConfigError`` naming ``model.weights_path`` unless the file's tensors (``shapes``,
    by name) are exactly the model's (wrapper prefixes aside), each with the model's (global)
    shape: the names missing and unexpected (the first few and a count) and each shape that
    differs."""
    from hyper_parallel.utils.module_names import strip_wrapper_prefixes

    wanted = {strip_wrapper_prefixes(k): tuple(v.shape) for k, v in model.state_dict().items()}
    missing = sorted(set(wanted) - set(shapes))
    unexpected = sorted(set(shapes) - set(wanted))
    shapes = [f"{k}: the file has {list(shapes[k])}, the model {list(wanted[k])}"
              for k in sorted(set(wanted) & set(shapes)) if tuple(shapes[k]) != wanted[k]]
    problems = [f"{len(names)} {what}: {', '.join(names[:SHOWN_NAMES])}"
                + (f" (and {len(names) - SHOWN_NAMES} more)" if len(names) > SHOWN_NAMES else "")
                for what, names in (("missing", missing), ("unexpected", unexpected)) if names]
    problems += shapes[:SHOWN_NAMES]
    if len(shapes) > SHOWN_NAMES:
        problems.append(f"(and {len(shapes) - SHOWN_NAMES} more shapes that differ)")
    if problems:
        raise ConfigError(
            f"{weights_path!r} does not fit the model (are they the weights of this model and "
            "flavor?):\n" + "\n".join(f"  {p}" for p in problems), path=WEIGHTS_FIELD)


def _param_dtype(model: torch.nn.Module) -> torch.dtype:
    return next(model.parameters()).dtype


def cpu_rng_fork():
    """Context manager that restores the CPU RNG afterwards (for side work such as eval)."""
    return torch.random.fork_rng(devices=[])


__all__ = [
    "build_model_on",
    "check_compile_backend",
    "check_weights_fit",
    "cpu_rng_fork",
    "freeze_parameters",
    "load_pretrained_weights",
    "materialize_and_init",
]

