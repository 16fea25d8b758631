"""Preflight steps the optimizer as the GPU it plans for does: fused AdamW when the config
chooses nothing, and the clipping's norms and scaling on torch's multi-tensor path; the work
recorder counts what such a kernel writes in place.

On the host torch would loop over the parameters one by one (a temporary and a dozen fake
operators each), because the fake tensors sit on the CPU and their type is not on torch's
multi-tensor list; a GPU run never does.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils._foreach_utils import _has_foreach_support

from hyper_parallel.preflight.fake_world import fake_world
from hyper_parallel.preflight.work import WorkRecorder
from hyper_parallel.runtime.optim import build_optimizer


def _optimizer(model: nn.Module, **choice) -> torch.optim.Optimizer:
    return build_optimizer(model, name="adamw", lr=1e-3, betas=(0.9, 0.95), eps=1e-8,
                           weight_decay=0.1, **choice)


def _implementations(optimizer: torch.optim.Optimizer) -> set[tuple]:
    return {(g["foreach"], g["fused"]) for g in optimizer.param_groups}


def test_the_simulated_optimizer_and_clipping_take_the_gpus_kernels():
    with fake_world():
        model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8))
        assert _implementations(_optimizer(model)) == {(None, True)}
        # what the config asks for is what the GPU run takes, and so the simulation
        assert _implementations(_optimizer(model, foreach=True)) == {(True, None)}
        assert _implementations(_optimizer(model, fused=False)) == {(None, False)}
        grads = [torch.ones(3), torch.ones(4)]
        assert _has_foreach_support(grads, grads[0].device)
        total = torch.nn.utils.get_total_norm(grads)
        assert type(total).__name__ == "FakeTensor"
    # and outside the simulation, the host's own choices again
    model = nn.Linear(8, 8)
    assert _implementations(_optimizer(model)) == {(None, None)}
    with fake_world() as mode:
        grads = [torch.ones(3)]
    with mode:
        assert not _has_foreach_support(grads, grads[0].device)


def test_a_step_fused_adamw_records_its_lists_read_and_written():
    """``_fused_adamw_`` and ``_foreach_mul_`` return nothing: what they write is the lists
    their schema marks as updated (the parameters, the moments; AdamW's schema marks the
    gradients too), not an output. An ``out=`` list (FSDP's ``split_with_sizes_copy``, which
    returns nothing either) is only written: counted once."""
    import torch.distributed.fsdp  # registers the fsdp:: operators

    with fake_world() as mode:
        model = nn.Linear(16, 16, bias=False)
        optimizer = _optimizer(model)
        model.weight.grad = torch.ones(16, 16)
        optimizer.step()  # the moments exist: the next step is the steady one
        recorder = WorkRecorder(mode)
        recorder.finish_micro_batches()
        with recorder:
            torch._foreach_mul_([model.weight.grad], 0.5)
            optimizer.step()
            gathered, shards = torch.ones(32), [torch.empty(16), torch.empty(16)]
            torch.ops.fsdp.split_with_sizes_copy(gathered, [16, 16], dim=0, out=shards)
    work = recorder.after.result()
    tensor = 16 * 16 * 4
    # _foreach_mul_: the gradient read and written; AdamW: parameter, gradient and both
    # moments read and written, and its step count (one float) read and advanced; the split:
    # 32 floats read, 32 written
    expected = 2 * tensor + 8 * tensor + 2 * 32 * 4
    assert expected <= work.memory_bytes <= expected + 64
