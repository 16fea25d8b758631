"""The kernel choice of the Gated DeltaNet layers (``model.kernels``), on the CPU.

Which implementation ``auto`` / ``torch`` / ``fla`` resolve to with and without a CUDA device
and fla-core, the errors of a forced ``fla`` that cannot run, the one log line per model, the
field's path from both config worlds to the layers, and the adapters onto fla-core's API --
checked against stand-ins that follow fla-core's documented contract (``[B, T, H, D]`` inputs,
``scale``, ``use_qk_l2norm_in_kernel``, a ``[D, W]`` conv weight), so the argument mapping is
tested here and the real kernels' numerics on a GPU (``test_qwen3_5_kernels.py``).
"""

from __future__ import annotations

import copy
import logging
import typing
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5Config, Qwen3_5ForCausalLM
from hyper_parallel.models.qwen3_5 import kernels as K
from hyper_parallel.models.qwen3_5.gated_deltanet import Qwen3_5GatedDeltaNet
from hyper_parallel.models.qwen3_5.model_section import apply_model_section
from hyper_parallel.runtime.optim import build_optimizer, choose_implementation
from hyper_parallel.utils.choices import KERNEL_CHOICES
from hyper_parallel.utils.errors import ConfigError

NO_FLA = "ModuleNotFoundError: No module named 'fla'"


@pytest.fixture
def fla_absent(monkeypatch):
    monkeypatch.setattr(K, "_load_fla", lambda: NO_FLA)


@pytest.fixture
def fla_must_not_load(monkeypatch):
    def fail():
        raise AssertionError("fla-core was imported for a choice that does not need it")

    monkeypatch.setattr(K, "_load_fla", fail)


# ------------------------------------------------------------------ fla-core stand-ins
def naive_fla_chunk(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                    use_qk_l2norm_in_kernel=False, **kwargs):
    """fla-core's documented semantics, token by token: ``[B, T, H, *]``, one key head per
    value head (the adapter repeats), ``scale`` applied to q, optional in-kernel L2 norm."""
    assert not kwargs, kwargs
    assert q.shape == k.shape and q.shape[2] == v.shape[2], "fla < 0.5 needs Hk == Hv"
    assert initial_state is None and output_final_state is False
    q, k, v, g, beta = (t.float() for t in (q, k, v, g, beta))
    if use_qk_l2norm_in_kernel:
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    q = q * (q.shape[-1] ** -0.5 if scale is None else scale)
    batch, seq, heads, dk = k.shape
    state = q.new_zeros(batch, heads, dk, v.shape[-1])
    outs = []
    for t in range(seq):
        state = state * g[:, t].exp()[..., None, None]
        err = v[:, t] - torch.einsum("bhkv,bhk->bhv", state, k[:, t])
        state = state + torch.einsum("bhk,bhv->bhkv", k[:, t], err * beta[:, t, :, None])
        outs.append(torch.einsum("bhkv,bhk->bhv", state, q[:, t]))
    return torch.stack(outs, 1).to(v.dtype), None


def naive_conv(x, weight, silu=True):
    """Causal depthwise conv written out: ``y[t] = sum_j w[:, j] * x[t - W + 1 + j]``; x (B,T,D)."""
    width = weight.shape[-1]
    padded = F.pad(x, (0, 0, width - 1, 0))
    y = sum(weight[:, j] * padded[:, j:j + x.shape[1]] for j in range(width))
    return F.silu(y) if silu else y


def fla_causal_conv1d(x, weight=None, bias=None, activation=None, **kwargs):
    assert bias is None and weight.dim() == 2 and activation == "silu"
    return naive_conv(x, weight), None  # fla-core >= 0.4: (y, final_state)


def causal_conv1d_fn(x, weight, bias=None, activation=None):
    assert x.shape[1] == weight.shape[0], "causal-conv1d takes x as (B, C, T)"
    return naive_conv(x.transpose(1, 2), weight).transpose(1, 2)


def gdn_inputs(batch=2, seq=70, hk=2, hv=4, dk=8, dv=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, seq, hk, dk, generator=gen)
    k = torch.randn(batch, seq, hk, dk, generator=gen)
    v = torch.randn(batch, seq, hv, dv, generator=gen)
    g = -torch.rand(batch, seq, hv, generator=gen)
    beta = torch.rand(batch, seq, hv, generator=gen)
    return q, k, v, g, beta


# ------------------------------------------------------------------ the choice
def test_auto_on_cpu_is_the_torch_path_without_importing_fla(fla_must_not_load):
    chosen = K.select_gdn_kernels("auto", "cpu")
    assert (chosen.name, chosen.conv_name, chosen.device_type) == ("torch", "torch", "cpu")
    assert chosen.delta_rule is K.TORCH_KERNELS.delta_rule
    assert "cpu" in chosen.reason


def test_torch_is_the_torch_path_even_on_cuda(fla_must_not_load):
    chosen = K.select_gdn_kernels("torch", "cuda")
    assert (chosen.name, chosen.reason) == ("torch", "")


def test_forced_fla_on_cpu_is_a_config_error_with_the_fix(fla_must_not_load):
    with pytest.raises(ConfigError) as err:
        K.select_gdn_kernels("fla", "cpu")
    assert err.value.path == "model.kernels"
    assert "CUDA" in str(err.value) and "on cpu" in str(err.value)
    assert "'auto'" in str(err.value) and "'torch'" in str(err.value)


def test_without_fla_auto_falls_back_and_forced_fla_says_how_to_install(fla_absent):
    chosen = K.select_gdn_kernels("auto", "cuda")
    assert chosen.name == "torch" and NO_FLA in chosen.reason
    with pytest.raises(ConfigError) as err:
        K.select_gdn_kernels("fla", "cuda")
    assert err.value.path == "model.kernels"
    assert NO_FLA in str(err.value) and "pip install 'hyper_parallel[gpu]'" in str(err.value)


def test_an_unknown_choice_is_refused():
    with pytest.raises(ConfigError, match="choose one of: auto, torch, fla"):
        K.select_gdn_kernels("triton", "cuda")


@pytest.mark.parametrize("conv_package", [False, True], ids=["fla_conv", "causal_conv1d"])
def test_auto_on_cuda_with_fla_picks_its_kernels(monkeypatch, conv_package):
    monkeypatch.setattr(K, "_load_fla", lambda: (naive_fla_chunk, fla_causal_conv1d))
    monkeypatch.setattr(K, "_load_causal_conv1d", lambda: causal_conv1d_fn if conv_package else None)
    chosen = K.select_gdn_kernels("auto", "cuda")
    assert chosen.name == "fla" and chosen.device_type == "cuda"
    assert chosen.conv_name == ("causal-conv1d" if conv_package else "fla")
    assert chosen.conv_name.split("-")[0] in chosen.describe()


def test_every_layer_shares_one_choice_object(monkeypatch):
    """A compiled layer guards on the functions it calls: layers sharing a graph must share them."""
    assert K.select_gdn_kernels("auto", "cpu") is K.select_gdn_kernels("auto", "cpu")
    monkeypatch.setattr(K, "_load_fla", lambda: (naive_fla_chunk, fla_causal_conv1d))
    monkeypatch.setattr(K, "_load_causal_conv1d", lambda: None)
    assert K.select_gdn_kernels("fla", "cuda") is K.select_gdn_kernels("fla", "cuda")
    model = debug_model("auto")
    model(torch.zeros(1, 3, dtype=torch.long))
    chosen = {id(m._selected) for m in model.modules() if isinstance(m, Qwen3_5GatedDeltaNet)}
    assert len(chosen) == 1


# ------------------------------------------------------------------ the adapters' mapping
@pytest.mark.parametrize("hk,hv", [(2, 4), (3, 3)], ids=["gqa", "same_heads"])
@pytest.mark.parametrize("seq", [1, 64, 70])
def test_fla_delta_rule_adapter_computes_what_the_torch_path_does(hk, hv, seq):
    q, k, v, g, beta = gdn_inputs(seq=seq, hk=hk, hv=hv)
    fla = K._fla_delta_rule(naive_fla_chunk)(q, k, v, g, beta)
    ref = K.TORCH_KERNELS.delta_rule(q, k, v, g, beta)
    assert fla.shape == ref.shape == (2, seq, hv, 6)
    torch.testing.assert_close(fla, ref, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("make", [K._fla_conv, K._causal_conv1d_conv], ids=["fla", "causal_conv1d"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_conv_adapters_compute_what_the_torch_path_does(make, dtype):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 37, 12, generator=gen).to(dtype)
    weight = torch.randn(12, 1, 4, generator=gen)  # an fp32 weight: x is cast to it, as in torch
    fake = fla_causal_conv1d if make is K._fla_conv else causal_conv1d_fn
    got = make(fake)(x, weight)
    assert got.dtype == dtype and got.shape == x.shape
    torch.testing.assert_close(got, K.causal_depthwise_conv_silu(x, weight), atol=1e-5, rtol=1e-5)


def test_the_torch_conv_is_the_written_out_causal_convolution():
    x, weight = torch.randn(2, 9, 5), torch.randn(5, 1, 3)
    torch.testing.assert_close(K.causal_depthwise_conv_silu(x, weight), naive_conv(x, weight[:, 0]))


# ------------------------------------------------------------------ in the model
def debug_model(kernels: str, seed: int = 0) -> Qwen3_5ForCausalLM:
    torch.manual_seed(seed)
    model = Qwen3_5ForCausalLM(FLAVORS["debugmodel"].replace(num_hidden_layers=4, kernels=kernels))
    model.init_weights()
    return model


def test_auto_on_cpu_trains_bit_identically_to_torch():
    ids = torch.randint(0, 2048, (2, 33), generator=torch.Generator().manual_seed(0))
    out = {}
    for kernels in ("auto", "torch"):
        model = debug_model(kernels)
        logits = model(ids)
        logits.float().square().mean().backward()
        out[kernels] = (logits, [p.grad for p in model.parameters()])
    assert torch.equal(out["auto"][0], out["torch"][0])
    assert all(torch.equal(a, b) for a, b in zip(out["auto"][1], out["torch"][1]))


def test_forced_fla_on_cpu_fails_at_the_first_forward_with_the_config_error(fla_must_not_load):
    model = debug_model("fla")  # building on the CPU is fine: the model may still move to CUDA
    with pytest.raises(ConfigError, match=r"model\.kernels: 'fla' runs fla-core's CUDA kernels"):
        model(torch.zeros(1, 4, dtype=torch.long))


def test_the_choice_is_logged_once_per_model(caplog):
    model = debug_model("auto")
    ids = torch.zeros(1, 8, dtype=torch.long)
    with caplog.at_level(logging.INFO, logger=K.__name__):
        for _ in range(3):
            model(ids)
        debug_model("auto")(ids)  # another model logs its own choice
    lines = [r.getMessage() for r in caplog.records if r.name == K.__name__]
    expected = (
        "Gated DeltaNet kernels: torch (chunked gated delta rule and depthwise conv1d in plain "
        "torch) [model.kernels='auto': the parameters are on cpu]"
    )
    assert lines == [expected, expected]


def test_a_layer_chooses_again_after_its_parameters_moved():
    config = FLAVORS["debugmodel"]
    with torch.device("meta"):
        layer = Qwen3_5GatedDeltaNet(config)
    assert layer.select_kernels().device_type == "meta"
    layer.to_empty(device="cpu")
    assert layer.select_kernels().device_type == "cpu"
    assert layer.select_kernels() is layer.select_kernels()  # cached while nothing moves


def test_a_deep_copy_keeps_working():
    model = debug_model("torch")
    ids = torch.zeros(1, 5, dtype=torch.long)
    torch.testing.assert_close(copy.deepcopy(model)(ids), model(ids))


# ------------------------------------------------------------------ the field, both worlds
def test_the_config_validates_the_choice_and_keeps_it_out_of_config_json():
    with pytest.raises(ValueError, match=r"kernels='fal' is invalid \(did you mean 'fla'\?\)"):
        Qwen3_5Config(kernels="fal")
    config = FLAVORS["debugmodel"].replace(kernels="torch")
    hf = config.to_hf_dict()
    assert "kernels" not in hf
    assert Qwen3_5Config.from_hf_dict({**hf, "kernels": "fla"}).kernels == "auto"


def test_the_model_section_sets_it_and_config_overrides_win():
    base = FLAVORS["debugmodel"]
    assert apply_model_section(base, SimpleNamespace(kernels="torch")).kernels == "torch"
    section = SimpleNamespace(kernels="torch", config_overrides={"kernels": "fla"})
    assert apply_model_section(base, section).kernels == "fla"
    assert apply_model_section(base, SimpleNamespace()).kernels == "auto"  # section without it
    with pytest.raises(ConfigError) as err:
        apply_model_section(base, SimpleNamespace(kernels="cuda"))
    assert err.value.path == "model.kernels"


def test_every_world_offers_the_same_choices():
    from hyper_parallel.config.configs import ModelConfig
    from hyper_parallel.trainer.config import ModelConfig as LegacyModelConfig

    assert KERNEL_CHOICES == ("auto", "torch", "fla")
    hints = typing.get_type_hints(ModelConfig)
    assert typing.get_args(hints["kernels"]) == KERNEL_CHOICES
    assert ModelConfig().kernels == LegacyModelConfig().kernels == Qwen3_5Config().kernels
    with pytest.raises(ValueError, match="did you mean 'torch'"):
        LegacyModelConfig(kernels="torhc")


def test_the_legacy_yaml_and_the_recipe_reach_the_layers(tmp_path):
    from hyper_parallel.config.legacy_adapter import legacy_to_trainer_config
    from hyper_parallel.models.qwen3_5 import flavor_config
    from hyper_parallel.trainer.config import HyperTrainerConfig, parse_args

    path = tmp_path / "old.yaml"
    path.write_text("model: {name: qwen3_5, kernels: torch, config_overrides: {flavor: debugmodel}}\n")
    config = legacy_to_trainer_config(parse_args(HyperTrainerConfig, [str(path)]))
    assert config.model.kernels == "torch"
    model_config = flavor_config("0.8b")
    model_config.update_from_config(trainer_config=config)
    assert model_config.kernels == "torch" and model_config.num_hidden_layers == 8
    with torch.device("meta"):
        model = model_config.build()
    assert {m.kernels for m in model.modules() if isinstance(m, Qwen3_5GatedDeltaNet)} == {"torch"}


# ------------------------------------------------------------------ AdamW: fused on CUDA
def fake_param(device: str, floating: bool = True):
    return SimpleNamespace(device=torch.device(device), is_floating_point=lambda: floating)


def test_adamw_is_fused_when_every_parameter_is_on_cuda_and_nothing_was_asked():
    cuda = [{"params": [fake_param("cuda"), fake_param("cuda")]}, {"params": [fake_param("cuda")]}]
    assert choose_implementation(cuda, foreach=None, fused=None) == (None, True)
    assert choose_implementation(cuda, foreach=True, fused=None) == (True, None)  # asked: kept
    assert choose_implementation(cuda, foreach=None, fused=False) == (None, False)
    mixed = [{"params": [fake_param("cuda")]}, {"params": [fake_param("cpu")]}]
    assert choose_implementation(mixed, foreach=None, fused=None) == (None, None)
    ints = [{"params": [fake_param("cuda", floating=False)]}]
    assert choose_implementation(ints, foreach=None, fused=None) == (None, None)
    assert choose_implementation([{"params": []}], foreach=None, fused=None) == (None, None)


def test_adamw_on_cpu_keeps_torchs_own_choice():
    opt = build_optimizer(debug_model("torch"), name="adamw", lr=1e-3, betas=(0.9, 0.95),
                          eps=1e-8, weight_decay=0.1)
    assert {(g["foreach"], g["fused"]) for g in opt.param_groups} == {(None, None)}
