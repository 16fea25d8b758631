"""Parity of the CUDA kernel path with the torch path (``model.kernels: fla`` vs ``torch``).

Runs where a CUDA device and fla-core (the ``gpu`` extra) are present; elsewhere every test is
skipped with the reason (``pytest -rs`` shows it). The CPU side of the dispatch is
``test_qwen3_5_kernel_dispatch.py``.

What is compared: one Gated DeltaNet layer (the debug model's GQA geometry, Hk=2 < Hv=4, and
the 0.8B flavor's, Hk=Hv=16, head dims 128) and the whole debug model (6 Gated DeltaNet and 2
full-attention layers), forward and backward, with identical weights and inputs: the outputs,
the input gradients (the layer's hidden states; the model's embedding rows) and every
parameter's gradient. Sequence lengths 256 (four chunks of 64) and 200 (a partial last chunk).

The tolerance is fla-core's own measure, the relative RMS error
``||fla - torch||_2 / ||torch||_2`` (its tests call it the error ratio), with a floor on the
largest absolute difference for tensors that are ~0:

* fp32: outputs <= 5e-3, gradients <= 1e-2 -- fla-core's fp32 gated-delta-rule tests use 5e-3
  and 1e-2 (Triton's fp32 dots are TF32 inside its kernels, the torch path is true fp32);
* bf16: outputs <= 2e-2, gradients <= 5e-2 -- both paths round to bf16 between operations, at
  different points (fla L2-normalises q/k to bf16 before its bf16 dots; the torch path runs the
  recurrence in fp32).

Set ``HYPER_PARALLEL_KERNEL_REPORT=<file.json>`` to write every measured ratio (for the GPU
check script).
"""

from __future__ import annotations

import copy
import json
import os

import pytest
import torch
import torch.nn.functional as F

from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM
from hyper_parallel.models.qwen3_5 import kernels as K
from hyper_parallel.models.qwen3_5.attention import Qwen3_5Attention
from hyper_parallel.models.qwen3_5.gated_deltanet import Qwen3_5GatedDeltaNet
from hyper_parallel.models.qwen3_5.rope import Qwen3_5RotaryEmbedding


def _skip_reason() -> str | None:
    if not torch.cuda.is_available():
        return "needs a CUDA device (the fla kernel path runs on CUDA only)"
    fla = K._load_fla()
    if isinstance(fla, str):
        return f"needs fla-core, which does not import here ({fla}); pip install '.[gpu]'"
    return None


SKIP = _skip_reason()
pytestmark = pytest.mark.skipif(SKIP is not None, reason=SKIP or "")

TOLERANCES = {  # dtype -> (outputs, gradients): relative RMS error
    torch.float32: (5e-3, 1e-2),
    torch.bfloat16: (2e-2, 5e-2),
}
ABS_FLOOR = {torch.float32: 1e-6, torch.bfloat16: 1e-4}
REPORT: list[dict] = []


@pytest.fixture(scope="module", autouse=True)
def _write_report():
    yield
    path = os.environ.get("HYPER_PARALLEL_KERNEL_REPORT")
    if path and REPORT:
        with open(path, "w") as f:
            json.dump(REPORT, f, indent=1)


def error_ratio(ref: torch.Tensor, got: torch.Tensor) -> float:
    ref, got = ref.detach().float(), got.detach().float()
    return ((ref - got).square().mean().sqrt() / (ref.square().mean().sqrt() + 1e-8)).item()


def check(case: str, name: str, ref: torch.Tensor, got: torch.Tensor, tol: float) -> str | None:
    """The problem with ``got`` (None: within ``tol``); every measurement goes to the report."""
    assert ref.shape == got.shape, (name, ref.shape, got.shape)
    ratio = error_ratio(ref, got)
    max_abs = (ref.detach().float() - got.detach().float()).abs().max().item()
    REPORT.append({"case": case, "tensor": name, "ratio": ratio, "max_abs": max_abs, "tol": tol})
    if max_abs <= ABS_FLOOR[ref.dtype] or ratio <= tol:
        return None
    return f"{name}: error ratio {ratio:.2e} > {tol:.0e} (max |diff| {max_abs:.2e})"


def with_kernels(module: torch.nn.Module, kernels: str) -> torch.nn.Module:
    """A copy of ``module`` (same weights) whose Gated DeltaNet layers use ``kernels``."""
    module = copy.deepcopy(module)
    for m in module.modules():
        if isinstance(m, Qwen3_5GatedDeltaNet):
            m.kernels, m._selected = kernels, None
    return module


def compare(case: str, dtype: torch.dtype, outputs: dict, grads: dict) -> None:
    out_tol, grad_tol = TOLERANCES[dtype]
    problems = [check(case, "output", outputs["torch"], outputs["fla"], out_tol)]
    problems += [check(case, name, ref, grads["fla"][name], grad_tol)
                 for name, ref in grads["torch"].items()]
    problems = [p for p in problems if p]
    assert not problems, f"{case}:\n" + "\n".join(problems)


# ------------------------------------------------------------------ one layer
LAYER_GEOMETRIES = {
    "debug_gqa": FLAVORS["debugmodel"],  # Hk=2, Hv=4, Dk=Dv=64, hidden 256
    "0.8b": FLAVORS["0.8b"],  # Hk=Hv=16, Dk=Dv=128, hidden 1024
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("seq", [256, 200])
@pytest.mark.parametrize("geometry", list(LAYER_GEOMETRIES))
def test_gated_deltanet_layer_forward_and_backward(geometry, seq, dtype):
    config = LAYER_GEOMETRIES[geometry]
    torch.manual_seed(0)
    base = Qwen3_5GatedDeltaNet(config).to("cuda", dtype)
    for p in base.parameters():  # the Linears' torch init is too small to exercise the rule
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=0.05)
    x = torch.randn(2, seq, config.hidden_size, device="cuda", dtype=dtype)
    dout = torch.randn(2, seq, config.hidden_size, device="cuda", dtype=dtype)
    outputs, grads = {}, {}
    for kernels in ("torch", "fla"):
        layer = with_kernels(base, kernels)
        inp = x.clone().requires_grad_(True)
        out = layer(inp)
        assert layer.select_kernels().name == kernels
        (out.float() * dout.float()).sum().backward()
        outputs[kernels] = out
        grads[kernels] = {"input": inp.grad, **{n: p.grad for n, p in layer.named_parameters()}}
    compare(f"layer:{geometry}:seq{seq}:{str(dtype)[6:]}", dtype, outputs, grads)


# ------------------------------------------------------------------ the whole debug model
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_debug_model_forward_and_backward(dtype):
    torch.manual_seed(0)
    base = Qwen3_5ForCausalLM(FLAVORS["debugmodel"])
    base.init_weights()
    base = base.to("cuda", dtype)
    ids = torch.randint(0, 2048, (2, 257), device="cuda")
    outputs, grads = {}, {}
    for kernels in ("torch", "fla"):
        model = with_kernels(base, kernels)
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        outputs[kernels] = logits
        grads[kernels] = {n: p.grad for n, p in model.named_parameters()}
        # The embedding rows of the tokens seen are the model's input gradients.
        grads[kernels]["input:embedding_rows"] = model.model.embed_tokens.weight.grad[ids[:, :-1]]
    compare(f"model:debugmodel:{str(dtype)[6:]}", dtype, outputs, grads)


# ------------------------------------------------------------------ attention: the flash path
def test_full_attention_takes_sdpas_flash_path_in_bf16():
    """bf16 on CUDA, no mask, ``is_causal``, GQA: the default SDPA dispatch runs flash
    attention forward and backward (the profiler names the aten op that ran)."""
    config = FLAVORS["0.8b"]  # head_dim 256, 8 query / 2 kv heads
    attn = Qwen3_5Attention(config).to("cuda", torch.bfloat16)
    rope = Qwen3_5RotaryEmbedding(config).to("cuda")
    x = torch.randn(2, 512, config.hidden_size, device="cuda", dtype=torch.bfloat16,
                    requires_grad=True)
    positions = torch.arange(512, device="cuda").expand(2, -1)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        attn(x, rope(positions, dtype=torch.bfloat16)).float().sum().backward()
    ops = {e.name for e in prof.events() if "scaled_dot_product" in e.name or "flash" in e.name}
    assert "aten::_scaled_dot_product_flash_attention" in ops, sorted(ops)
    assert "aten::_scaled_dot_product_flash_attention_backward" in ops, sorted(ops)
