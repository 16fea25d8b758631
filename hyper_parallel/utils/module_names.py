"""Parameter names without the infixes that module wrappers insert (framework-free).

Wrapping a submodule renames every parameter below it: activation checkpointing
(``checkpoint_wrapper``) adds ``_checkpoint_wrapped_module``, ``torch.compile`` adds
``_orig_mod`` and FSDP1 adds ``_fsdp_wrapped_module`` (FSDP2 and tensor parallelism add none).
Checkpoints, Hugging Face exports and tests that compare gradients across layouts all need the
names of the unwrapped model, and they must agree on which infixes exist: this is their one list.
"""

from __future__ import annotations

#: Dotted-name components that wrappers insert; a real submodule is never called like this.
WRAPPER_PREFIXES: tuple[str, ...] = (
    "_checkpoint_wrapped_module",
    "_orig_mod",
    "_fsdp_wrapped_module",
)


def strip_wrapper_prefixes(name: str) -> str:
    """``name`` without the wrapper components of :data:`WRAPPER_PREFIXES`.

    ``model.layers.0._checkpoint_wrapped_module.mlp.up_proj.weight`` ->
    ``model.layers.0.mlp.up_proj.weight``. Whole components are removed, never substrings, so a
    parameter called ``my_orig_mod`` keeps its name.
    """
    return ".".join(part for part in name.split(".") if part not in WRAPPER_PREFIXES)


__all__ = ["WRAPPER_PREFIXES", "strip_wrapper_prefixes"]
