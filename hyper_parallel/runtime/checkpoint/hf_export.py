"""The Hugging Face export: the full model as safetensors plus the tokenizer assets.

``export_hf_weights`` writes ``<step_dir>/hf_ckpt`` (or any path) after a save, through the
model's state-dict adapter (``to_hf``) and the model package's safetensors writer.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from typing import Any

import torch

from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.module_names import strip_wrapper_prefixes

from .async_writer import wait_async_save
from .atomic import _replace_dir
from .dcp_io import _model_parts
from .errors import CheckpointError
from .ranks import _barrier, _rank

logger = logging.getLogger(__name__)

#: Files of a Hugging Face model directory that describe the tokenizer (copied by the export).
HF_TOKENIZER_ASSETS = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
)


def _hf_writer() -> Callable[[dict, str, Any], None]:
    """The HF safetensors writer (imported lazily: the model package is heavy and optional here)."""
    from hyper_parallel.models.qwen3_5.hf_io import save_hf_checkpoint

    return save_hf_checkpoint


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


def gather_stage_states(state: dict[str, torch.Tensor], group: Any) -> dict[str, torch.Tensor]:
    """The stages' full state dicts merged on the first rank of ``group`` (the pipeline ranks;
    empty elsewhere). Collective over ``group``."""
    import torch.distributed as dist

    local = {k: v.detach().cpu() for k, v in state.items()}
    first = dist.get_group_rank(group, dist.get_rank()) == 0
    gathered: list[Any] | None = [None] * dist.get_world_size(group) if first else None
    dist.gather_object(local, gathered, group=group, group_dst=0)
    merged: dict[str, torch.Tensor] = {}
    for stage_state in gathered or []:
        merged.update(stage_state)
    return merged


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


def export_hf_weights(
    model: torch.nn.Module | list[torch.nn.Module], adapter, model_config, path: str,
    *, pipeline_group: Any = None,
) -> str:
    """Gather the full model state dict and write it as an HF checkpoint into ``path`` (rank 0).

    ``model`` may be a list of model parts; their state dicts are merged by FQN. Wrapper infixes
    (activation checkpointing, ``torch.compile``, FSDP1) are removed from the names first.

    Collective (the gather). Rank 0 converts with ``adapter.to_hf(state_dict, model_config)`` and
    writes through ``hyper_parallel.models.qwen3_5.hf_io.save_hf_checkpoint`` into the hidden
    sibling ``.<name>.tmp`` which is then renamed to ``path`` - so an interrupted export never leaves
    a half-written ``hf_ckpt``. Under pipeline parallelism (``pipeline_group``: the ranks that
    hold the stages of one model) each rank gathers its stages and sends them to the first rank
    of its pipeline, so rank 0 writes the whole model. If an async save of the enclosing step is in flight, rank 0 waits
    for it first (the step directory must exist before ``hf_ckpt`` goes into it).
    """
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    full: dict[str, torch.Tensor] = {}
    for part in _model_parts(model):
        full.update(
            get_model_state_dict(
                part,
                # Under pipeline parallelism every rank keeps its stages' full tensors (not
                # just global rank 0) to send them on.
                options=StateDictOptions(
                    full_state_dict=True, cpu_offload=pipeline_group is None
                ),
            )
        )
    if pipeline_group is not None:
        full = gather_stage_states(full, pipeline_group)
    if _rank() == 0:
        to_hf = _adapter_to_hf(adapter)
        cleaned: dict[str, torch.Tensor] = {}
        for key, value in full.items():
            name = strip_wrapper_prefixes(key)
            if name in cleaned:
                raise CheckpointError(f"export_hf_weights: two parameters map to the name {name!r}")
            cleaned[name] = value
        hf_state = to_hf(cleaned, model_config)
        wait_async_save()
        parent, name = os.path.split(os.path.normpath(path))
        os.makedirs(parent or ".", exist_ok=True)
        tmp = os.path.join(parent, f".{name}.tmp")
        if os.path.exists(tmp):
            shutil.rmtree(tmp)
        _hf_writer()(hf_state, tmp, model_config)
        _copy_hf_assets(getattr(adapter, "hf_assets_path", None), tmp)
        _replace_dir(tmp, path)
        logger.info("Exported HF weights to %s", path)
    _barrier()
    return path
