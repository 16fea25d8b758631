"""Preflight's chunked delta rule (:mod:`hyper_parallel.preflight.delta_rule`) holds the model's
memory to the byte.

Under the memory tracker preflight measures with, on fake tensors, one layer-like module calls
the delta rule between a few operators of its own and is stepped forward and backward; the live
bytes at every boundary of the rule's forward, its recomputation and its backward, and the peak
inside each, must be the model's own (:func:`~hyper_parallel.models.qwen3_5.delta_rule.chunk_gated_delta_rule`),
in each activation checkpointing mode the engine applies. Equal boundaries and equal peaks
inside are what makes any step around the rule peak at the same bytes.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import _TOTAL_KEY, MemTracker

from hyper_parallel.models.qwen3_5 import delta_rule as model_module
from hyper_parallel.models.qwen3_5 import kernels
from hyper_parallel.models.qwen3_5.delta_rule import chunk_gated_delta_rule as model_rule
from hyper_parallel.preflight import delta_rule as preflight_rule
from hyper_parallel.preflight.fake_world import fake_world


class _Timeline(MemTracker):
    """The tracker, recording the live bytes after every operator under the current phase."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "step"
        self.points: list[tuple[str, int]] = []
        self.marks: dict[str, list[int]] = {}

    def live(self) -> int:
        return sum(snapshot[_TOTAL_KEY] for snapshot in self._curr_mem_snap.values())

    def mark(self, name: str) -> None:
        self.marks.setdefault(name, []).append(self.live())

    def _update_peak_stats(self, peak_state) -> None:
        self.points.append((self.phase, self.live()))


class _Layer(nn.Module):
    """A few operators, the delta rule, a few more; marks the rule's phases on the tracker."""

    def __init__(self, rule, tracker: _Timeline, chunk: int) -> None:
        super().__init__()
        self.rule, self.tracker, self.chunk = rule, tracker, chunk
        self.w = nn.Parameter(torch.ones(()))

    def forward(self, q, k, v, g, beta, initial):
        t = self.tracker
        q, k, v, g, beta = q * self.w.to(q.dtype), k * 1, v * 1, g * 1, beta * 1
        phase = "forward" if "forward.start" not in t.marks else "recompute"
        outer, t.phase = t.phase, phase
        t.mark(f"{phase}.start")
        try:  # a checkpoint's recomputation stops with an exception once it has what it needs
            out, final = self.rule(q, k, v, g, beta, chunk_size=self.chunk,
                                   initial_state=initial, output_final_state=initial is not None)
        finally:
            t.mark(f"{phase}.end")
            t.phase = outer
        if phase == "forward":
            inputs = [q, k, v, g, beta] + ([initial] if initial is not None else [])
            waiting = [len(inputs)]

            def begin(grad):
                t.phase = "backward"
                t.mark("backward.start")

            def end(grad):
                waiting[0] -= 1
                if not waiting[0]:
                    t.mark("backward.end")
                    t.phase = "step"

            out.register_hook(begin)
            for x in inputs:
                x.register_hook(end)
        return out.float() * 2 + (final.sum() if final is not None else 0)


def _timeline(rule, ac: str, batch: int, seq: int, hk: int, hv: int, dk: int, dv: int,
              chunk: int, initial: bool) -> tuple[dict, int]:
    """The delta rule's boundaries and peaks in one step (and the operators it took)."""
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

    from hyper_parallel.models.qwen3_5.activation_checkpoint import _sac_context_fn

    with FakeTensorMode():
        # q, k and v as the model makes them: views of one convolution output, in bf16.
        mixed = torch.randn(batch, seq, 2 * hk * dk + hv * dv, dtype=torch.bfloat16,
                            requires_grad=True)
        q, k, v = mixed.split([hk * dk, hk * dk, hv * dv], dim=-1)
        q, k, v = q.reshape(batch, seq, hk, dk), k.reshape(batch, seq, hk, dk), v.reshape(
            batch, seq, hv, dv)
        g = torch.randn(batch, seq, hv, requires_grad=True)
        beta = torch.rand(batch, seq, hv, dtype=torch.bfloat16, requires_grad=True)
        h0 = torch.randn(batch, hv, dk, dv, requires_grad=True) if initial else None
        tracker = _Timeline()
        layer = _Layer(rule, tracker, chunk)
        if ac == "full":
            layer = checkpoint_wrapper(layer)
        elif ac == "selective":
            layer = checkpoint_wrapper(layer, context_fn=_sac_context_fn)
        tracker.track_external(layer)
        with tracker:
            layer(q, k, v, g, beta, h0).sum().backward()
    figures = {name: tuple(values) for name, values in tracker.marks.items()}
    for phase in ("forward", "recompute", "backward", "step"):
        figures[f"{phase}.peak"] = max((b for p, b in tracker.points if p == phase), default=0)
    return figures, len(tracker.points)


#: (batch, seq, key heads, value heads, Dk, Dv, chunk, initial state)
SHAPES = {
    # As many key as value heads and two rows: each chunk's matmuls copy its q_decayed and
    # k_to_end slices (and save the copies).
    "copied-slices": (2, 640, 4, 4, 16, 32, 64, False),
    # Grouped heads, a padded last chunk, and context parallelism's initial and final state.
    "padded-with-state": (2, 600, 2, 4, 16, 32, 64, True),
    # A state much larger than a chunk: the saved states dwarf the rest.
    "large-state": (1, 256, 2, 2, 128, 16, 16, False),
}


@pytest.mark.parametrize("ac", ["off", "full", "selective"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_simulated_delta_rule_holds_the_models_bytes(ac, shape):
    model, model_ops = _timeline(model_rule, ac, *SHAPES[shape])
    simulated, simulated_ops = _timeline(preflight_rule.chunk_gated_delta_rule, ac,
                                         *SHAPES[shape])
    assert simulated == model
    assert simulated_ops < model_ops * 3 // 4  # the middle chunks are one operator


def test_a_simulation_that_keeps_what_a_checkpoint_drops_is_caught(monkeypatch):
    """The comparison has teeth: saved tensors made in a checkpoint's forward (which keeps
    none) raise that forward's peak."""
    monkeypatch.setattr(preflight_rule, "_saved_tensors_kept", lambda: True)
    model, _ = _timeline(model_rule, "full", *SHAPES["large-state"])
    simulated, _ = _timeline(preflight_rule.chunk_gated_delta_rule, "full",
                             *SHAPES["large-state"])
    assert simulated["forward.peak"] > model["forward.peak"]


@pytest.mark.parametrize("chunks", [4, 5, 10])
def test_the_simulation_steps_the_models_own_chunks(monkeypatch, chunks):
    """One definition of the rule: preflight's path is the model's function, and every chunk it
    does not stand one operator for is stepped by the model's chunk step (patched here: a copy
    of the math in preflight's module would step none of them)."""
    stepped: list[int] = []
    entered: list[object] = []
    step, rule = model_module.chunk_step, model_module.chunk_gated_delta_rule

    def spy_step(operands, i, carry):
        stepped.append(i)
        step(operands, i, carry)

    def spy_rule(*args, **kwargs):
        entered.append(kwargs.get("loop"))
        return rule(*args, **kwargs)

    monkeypatch.setattr(model_module, "chunk_step", spy_step)
    monkeypatch.setattr(model_module, "chunk_gated_delta_rule", spy_rule)
    with FakeTensorMode():
        q, k = torch.randn(2, chunks * 16 - 3, 2, 8), torch.randn(2, chunks * 16 - 3, 2, 8)
        v = torch.randn(2, chunks * 16 - 3, 4, 8, requires_grad=True)
        g, beta = -torch.rand(2, chunks * 16 - 3, 4), torch.rand(2, chunks * 16 - 3, 4)
        out, final = preflight_rule.chunk_gated_delta_rule(
            q, k, v, g, beta, chunk_size=16, output_final_state=True)
        out.sum().backward()
    assert entered == [preflight_rule.middle_as_one]
    last = preflight_rule.LAST_CHUNKS
    middle = chunks - 1 - last
    assert stepped == ([0, *range(1 + middle, chunks)] if middle > 0 else list(range(chunks)))
    assert out.shape == v.shape and final.shape == (2, 4, 8, 8)
    assert v.grad.shape == v.shape
    stepped.clear()
    model_rule(*(torch.randn(1, chunks * 16, 1, 4),) * 2, torch.randn(1, chunks * 16, 1, 4),
               -torch.rand(1, chunks * 16, 1), torch.rand(1, chunks * 16, 1), chunk_size=16)
    assert stepped == list(range(chunks))  # the model's loop steps every chunk by the same step


def test_the_fake_world_steps_the_simulated_rule_and_puts_the_models_back():
    assert kernels.chunk_gated_delta_rule is model_rule
    with fake_world():
        assert kernels.chunk_gated_delta_rule is preflight_rule.chunk_gated_delta_rule
    assert kernels.chunk_gated_delta_rule is model_rule


def test_the_simulated_rule_makes_no_values_for_real_tensors():
    q = torch.randn(1, 512, 1, 8)
    with pytest.raises(TypeError, match="fake tensors only"):
        preflight_rule.chunk_gated_delta_rule(q, q, torch.randn(1, 512, 1, 8),
                                              -torch.rand(1, 512, 1), torch.rand(1, 512, 1))
