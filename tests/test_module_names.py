"""The one list of module-wrapper infixes in parameter names (hyper_parallel.utils.module_names)."""

from __future__ import annotations

import pytest

from hyper_parallel.utils.module_names import WRAPPER_PREFIXES, strip_wrapper_prefixes


@pytest.mark.parametrize(
    ("name", "plain"),
    [
        ("model.layers.0._checkpoint_wrapped_module.mlp.up_proj.weight",
         "model.layers.0.mlp.up_proj.weight"),
        ("_orig_mod.lm_head.weight", "lm_head.weight"),
        ("layers.3._fsdp_wrapped_module.attn.q.weight", "layers.3.attn.q.weight"),
        # Nested wrappers: torch.compile around an AC-wrapped layer inside FSDP1.
        ("_orig_mod.layers.1._fsdp_wrapped_module._checkpoint_wrapped_module.w", "layers.1.w"),
        # A wrapper as the last component (a name of the wrapper module itself).
        ("layers.1._checkpoint_wrapped_module", "layers.1"),
        ("model.norm.weight", "model.norm.weight"),
    ],
)
def test_wrapper_components_are_removed(name, plain):
    assert strip_wrapper_prefixes(name) == plain


def test_only_whole_components_are_removed():
    # A substring match (the checkpoint export's old str.replace) would rename these.
    assert strip_wrapper_prefixes("blocks.my_orig_mod.weight") == "blocks.my_orig_mod.weight"
    assert strip_wrapper_prefixes("x_checkpoint_wrapped_module.w") == "x_checkpoint_wrapped_module.w"


def test_the_list_covers_activation_checkpointing_compile_and_fsdp1():
    assert set(WRAPPER_PREFIXES) == {
        "_checkpoint_wrapped_module", "_orig_mod", "_fsdp_wrapped_module"
    }
