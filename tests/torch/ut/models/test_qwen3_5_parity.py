"""Parity of our Qwen3.5 model with transformers' reference ``Qwen3_5ForCausalLM`` (torch path),
and HF checkpoint round trips through the state-dict adapter and safetensors I/O."""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")
hf_qwen = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")

from hyper_parallel.models.qwen3_5 import (
    Qwen3_5Config,
    Qwen3_5ForCausalLM,
    Qwen3_5StateDictAdapter,
    hf_io,
)

SEQ, BATCH = 150, 2  # 150 > one 64-token delta-rule chunk, and not a multiple of it
TOL = 1e-4


def _hf_config(tie: bool = False):
    # 2 GDN key heads serving 4 value heads, partial rotary (8 of 32 channels), layer pattern
    # [lin, lin, full, lin, lin, full]; eager attention so the reference is plain math.
    return transformers.Qwen3_5TextConfig(
        vocab_size=320,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=6,
        full_attention_interval=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=24,
        linear_conv_kernel_dim=4,
        tie_word_embeddings=tie,
        initializer_range=0.07,  # large enough that every branch moves the logits
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.25,
            "mrope_section": [2, 1, 1],
        },
        attn_implementation="eager",
    )


def _build_hf(tie: bool = False, seed: int = 0):
    torch.manual_seed(seed)
    model = transformers.Qwen3_5ForCausalLM(_hf_config(tie)).eval()
    with torch.no_grad():  # HF inits norms to identities; perturb them so their layout matters
        for name, p in model.named_parameters():
            if name.endswith(("norm.weight", "dt_bias")):
                p.add_(torch.randn_like(p) * 0.1)
    return model


@pytest.fixture(autouse=True)
def _hf_torch_fallback(monkeypatch):
    """Force (and prove) the HF torch reference path: no fla / causal-conv1d kernels."""
    calls = {"conv": 0, "chunk": 0}

    def wrap(name, counter):
        fn = getattr(hf_qwen, name)
        raw = getattr(fn, "__wrapped__", fn)  # the undecorated torch implementation

        def counted(*args, **kwargs):
            calls[counter] += 1
            kwargs.pop("cu_seqlens", None)
            return raw(*args, **kwargs)

        monkeypatch.setattr(hf_qwen, name, counted)

    wrap("causal_conv1d_fn", "conv")
    wrap("torch_chunk_gated_delta_rule", "chunk")
    return calls


def _ours_from_hf(hf_model) -> tuple[Qwen3_5ForCausalLM, Qwen3_5Config]:
    config = Qwen3_5Config.from_hf_dict(hf_model.config.to_dict())
    ours = Qwen3_5ForCausalLM(config).eval()
    ours.load_state_dict(Qwen3_5StateDictAdapter.from_hf(hf_model.state_dict(), config))
    return ours, config


def _tokens(vocab: int = 320, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (BATCH, SEQ), generator=g)


def test_config_translation_matches_hf():
    hf = _build_hf()
    cfg = Qwen3_5Config.from_hf_dict(hf.config.to_dict())
    assert cfg.layer_types == list(hf.config.layer_types)
    assert cfg.layer_types.count("full_attention") == 2
    assert cfg.rotary_dim == 8 and cfg.mrope_section == [2, 1, 1]
    back = transformers.Qwen3_5TextConfig(**{k: v for k, v in cfg.to_hf_dict().items()})
    assert back.rope_parameters["partial_rotary_factor"] == 0.25
    assert back.layer_types == hf.config.layer_types


def test_logits_match_hf_fp32(_hf_torch_fallback):
    hf = _build_hf()
    ours, _ = _ours_from_hf(hf)
    ids = _tokens()
    with torch.no_grad():
        ref = hf(ids, use_cache=False).logits
        got = ours(ids)
    diff = (ref - got).abs().max().item()
    print(f"\nqwen3_5 HF parity: max|logits diff| = {diff:.3e} (logit std {ref.std():.3f})")
    assert _hf_torch_fallback["conv"] == 4 and _hf_torch_fallback["chunk"] == 4
    assert got.shape == (BATCH, SEQ, 320) and got.dtype == torch.float32
    assert diff <= TOL


def test_gradients_match_hf_fp32():
    hf = _build_hf(seed=3)
    ours, config = _ours_from_hf(hf)
    ids = _tokens(seed=4)
    targets = torch.roll(ids, -1, dims=1)
    for model, logits_fn in (
        (hf, lambda m: m(ids, use_cache=False).logits),
        (ours, lambda m: m(ids)),
    ):
        loss = torch.nn.functional.cross_entropy(logits_fn(model).flatten(0, 1), targets.flatten())
        loss.backward()
    ours_grads = {n: p.grad for n, p in ours.named_parameters()}
    ours_grads_hf = Qwen3_5StateDictAdapter.to_hf(ours_grads, config)
    worst = 0.0
    for name, p in hf.named_parameters():
        key = name.replace("model.", "model.language_model.", 1)
        worst = max(worst, (ours_grads_hf[key] - p.grad).abs().max().item())
    print(f"\nqwen3_5 HF gradient parity: max|grad diff| = {worst:.3e}")
    assert worst <= TOL


def test_adapter_round_trip_is_exact():
    hf = _build_hf()
    config = Qwen3_5Config.from_hf_dict(hf.config.to_dict())
    hf_sd = hf.state_dict()
    ours = Qwen3_5StateDictAdapter.from_hf(hf_sd, config)
    assert "model.layers.0.linear_attn.in_proj_q.weight" in ours
    assert ours["model.layers.0.linear_attn.conv_v_weight"].shape == (4 * 24, 1, 4)
    back = Qwen3_5StateDictAdapter.to_hf(ours, config)
    expected = {k.replace("model.", "model.language_model.", 1): v for k, v in hf_sd.items()}
    assert set(back) == set(expected)
    for key, value in expected.items():
        assert torch.equal(back[key], value), key


def test_from_hf_prefixes_drops_and_truncation():
    hf = _build_hf(tie=True)
    config = Qwen3_5Config.from_hf_dict(hf.config.to_dict())
    plain = {k: v for k, v in hf.state_dict().items() if k != "lm_head.weight"}
    vlm = {k.replace("model.", "model.language_model.", 1): v for k, v in plain.items()}
    vlm["model.visual.blocks.0.attn.qkv.weight"] = torch.zeros(3)
    vlm["mtp.fc.weight"] = torch.zeros(3)
    vlm["model.mtp.layers.0.x"] = torch.zeros(3)
    a = Qwen3_5StateDictAdapter.from_hf(plain, config)
    b = Qwen3_5StateDictAdapter.from_hf(vlm, config)
    assert a.keys() == b.keys()
    assert a["lm_head.weight"] is a["model.embed_tokens.weight"]  # synthesised when tied
    # Truncation: a 4-layer config takes the first 4 layers of the 6-layer checkpoint.
    short = config.replace(num_hidden_layers=4)
    c = Qwen3_5StateDictAdapter.from_hf(vlm, short)
    assert not any(k.startswith(("model.layers.4.", "model.layers.5.")) for k in c)
    assert torch.equal(
        c["model.layers.3.mlp.up_proj.weight"], plain["model.layers.3.mlp.up_proj.weight"]
    )
    untied = config.replace(tie_word_embeddings=False)
    with pytest.raises(KeyError, match="lm_head.weight"):
        Qwen3_5StateDictAdapter.from_hf(plain, untied)
    wrong = config.replace(linear_num_value_heads=2)
    with pytest.raises(ValueError, match=r"(in_proj_qkv|conv1d)\.weight has 160 rows"):
        Qwen3_5StateDictAdapter.from_hf(plain, wrong)


@pytest.mark.parametrize("max_shard_bytes", [None, 60_000], ids=["single", "sharded"])
def test_save_load_round_trip_identical_logits(tmp_path, monkeypatch, max_shard_bytes):
    hf = _build_hf()
    ours, config = _ours_from_hf(hf)
    written = hf_io.save_hf_checkpoint(
        Qwen3_5StateDictAdapter.to_hf(ours.state_dict(), config), tmp_path, config, max_shard_bytes
    )
    if max_shard_bytes is None:
        assert [p.name for p in written] == ["model.safetensors"]
    else:
        assert len(written) > 2
        index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
        assert set(index["weight_map"].values()) == {p.name for p in written}
        assert not (tmp_path / "model.safetensors").exists()

    import safetensors

    opened: list[str] = []
    real_open = safetensors.safe_open

    def counting_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(safetensors, "safe_open", counting_open)
    loaded = hf_io.load_hf_checkpoint(tmp_path)
    if max_shard_bytes is not None:
        assert sorted(opened) == sorted(str(p) for p in written)  # each shard opened once
    assert hf_io.load_hf_config(tmp_path) == config

    again = Qwen3_5ForCausalLM(config).eval()
    again.load_state_dict(Qwen3_5StateDictAdapter.from_hf(loaded, config))
    ids = _tokens()
    with torch.no_grad():
        assert torch.equal(again(ids), ours(ids))


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_hf_from_pretrained_loads_our_export(tmp_path, tie):
    hf = _build_hf(tie=tie, seed=5)
    ours, config = _ours_from_hf(hf)
    hf_sd = Qwen3_5StateDictAdapter.to_hf(ours.state_dict(), config)
    assert ("lm_head.weight" in hf_sd) is (not tie)
    assert all(k.startswith("model.language_model.") or k == "lm_head.weight" for k in hf_sd)
    hf_io.save_hf_checkpoint(hf_sd, tmp_path, config, max_shard_bytes=100_000)
    saved_cfg = json.loads((tmp_path / "config.json").read_text())
    assert saved_cfg["model_type"] == "qwen3_5_text"
    reloaded = transformers.Qwen3_5ForCausalLM.from_pretrained(
        tmp_path, attn_implementation="eager"
    ).eval()
    auto = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager")
    assert type(auto).__name__ == "Qwen3_5ForCausalLM"
    ids = _tokens(seed=6)
    with torch.no_grad():
        ref = ours(ids)
        diff = (reloaded(ids, use_cache=False).logits - ref).abs().max().item()
    print(
        f"\nHF from_pretrained on our export ({'tied' if tie else 'untied'}): max diff {diff:.3e}"
    )
    assert diff <= TOL


def test_save_rejects_unconverted_state_dict(tmp_path):
    hf = _build_hf()
    ours, config = _ours_from_hf(hf)
    with pytest.raises(ValueError, match="to_hf"):
        hf_io.save_hf_checkpoint(ours.state_dict(), tmp_path, config)


def test_load_missing_checkpoint_names_files(tmp_path):
    (tmp_path / "other.bin").write_text("x")
    with pytest.raises(FileNotFoundError, match="other.bin"):
        hf_io.load_hf_checkpoint(tmp_path)


def test_interleaved_mrope_matches_hf_for_distinct_axes():
    """Text positions make the three mRoPE rows equal; distinct rows exercise the interleave."""
    from hyper_parallel.models.qwen3_5.rope import Qwen3_5RotaryEmbedding

    hf_cfg = _hf_config()
    hf_cfg.rope_parameters["partial_rotary_factor"] = 1.0
    hf_cfg.rope_parameters["mrope_section"] = [6, 5, 5]
    hf_rope = hf_qwen.Qwen3_5TextRotaryEmbedding(hf_cfg)
    ours = Qwen3_5RotaryEmbedding(Qwen3_5Config.from_hf_dict(hf_cfg.to_dict()))
    pos = torch.stack([torch.arange(40), torch.arange(40) // 3, torch.arange(40) % 7])
    pos = pos.unsqueeze(1).expand(3, 2, 40)
    ref_cos, ref_sin = hf_rope(torch.zeros(1, dtype=torch.float32), pos)
    cos, sin = ours(pos)
    assert torch.equal(cos, ref_cos) and torch.equal(sin, ref_sin)
    flat_cos, _ = ours(pos[0])
    assert not torch.equal(flat_cos, cos)
