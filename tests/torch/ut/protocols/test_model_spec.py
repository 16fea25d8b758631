"""ModelSpec v2 and its registry; MeshAxisName."""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field

import pytest

from hyper_parallel.protocols import (
    BASE_MESH_AXES,
    FLATTENED_MESH_AXES,
    Configurable,
    MeshAxisName,
    ModelSpec,
    get_spec,
    register_spec,
    registered_names,
    registered_specs,
    unregister_spec,
)
from hyper_parallel.protocols import model_spec as model_spec_module


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch):
    """Each test sees an empty registry; whatever was registered before comes back after."""
    monkeypatch.setattr(model_spec_module, "_REGISTRY", {})


def _build(args):
    return args


def _parallelize(model, mesh, args):
    return model


def _model_classes():
    """A two-layer model, defined on first use so that importing this file needs no torch."""
    global _CLASSES
    if _CLASSES is None:
        import torch
        from torch import nn

        from hyper_parallel.protocols import BaseModel, Module

        class FeedForward(Module):
            @dataclass(kw_only=True, slots=True)
            class Config(Module.Config):
                dim: int = 8
                hidden_dim: int = 12

            def __init__(self, config):
                super().__init__(config=config)
                self.w = nn.Linear(config.dim, config.hidden_dim)

        class TinyLM(BaseModel):
            @dataclass(kw_only=True, slots=True)
            class Config(BaseModel.Config):
                layers: list[FeedForward.Config] = field(
                    default_factory=lambda: [FeedForward.Config(), FeedForward.Config()]
                )

            def __init__(self, config):
                super().__init__(config)
                self.layers = nn.ModuleList(c.build() for c in config.layers)
                self.scale = nn.Parameter(torch.ones(1))

        _CLASSES = FeedForward, TinyLM
    return _CLASSES


_CLASSES = None


def _tiny_model_config():
    return _model_classes()[1].Config()


# ---------------------------------------------------------------------- ModelSpec


def test_fields_of_the_v2_spec():
    assert [f.name for f in dataclasses.fields(ModelSpec)] == [
        "name",
        "flavor",
        "model",
        "build_model_fn",
        "parallelize_fn",
        "pipelining_fn",
        "post_optimizer_build_fn",
        "state_dict_adapter",
        "clip_grad_fn",
        "model_config_fn",
    ]


def test_legacy_spec_fields_are_a_subset():
    """The legacy registration moves over by passing the same keyword arguments."""
    from hyper_parallel.models.spec import ModelSpec as LegacyModelSpec

    legacy = LegacyModelSpec(
        name="legacy_model", build_model_fn=_build, parallelize_fn=_parallelize
    )
    values = {f.name: getattr(legacy, f.name) for f in dataclasses.fields(LegacyModelSpec)}
    v2 = ModelSpec(**values)
    for name, value in values.items():
        assert getattr(v2, name) is value


def test_spec_validation_messages():
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        ModelSpec(name="", build_model_fn=_build)
    with pytest.raises(ValueError, match=r"ModelSpec\(name='m'\) cannot build a model: set model="):
        ModelSpec(name="m")
    with pytest.raises(TypeError, match=r"ModelSpec\(name='m'\)\.parallelize_fn must be callable"):
        ModelSpec(name="m", build_model_fn=_build, parallelize_fn="parallelize")
    with pytest.raises(TypeError, match=r"\.flavor must be a string"):
        ModelSpec(name="m", build_model_fn=_build, flavor=8)


def test_spec_model_must_be_a_base_model_config():
    FeedForward, _ = _model_classes()

    with pytest.raises(TypeError, match=r"\.model must be a BaseModel\.Config.*got .*FeedForward\.Config"):
        ModelSpec(name="m", model=FeedForward.Config(dim=2, hidden_dim=2))
    spec = ModelSpec(name="tiny", flavor="debug", model=_tiny_model_config())
    model = spec.model.build()
    assert type(model) is _model_classes()[1]


def test_spec_model_check_needs_no_torch(monkeypatch):
    """Without the model module loaded nothing can be a BaseModel.Config: rejected, no import."""

    class NotAModel(Configurable):
        @dataclass(kw_only=True, slots=True)
        class Config(Configurable.Config):
            size: int = 1

    monkeypatch.delitem(sys.modules, "hyper_parallel.protocols.model", raising=False)
    with pytest.raises(TypeError, match=r"\.model must be a BaseModel\.Config"):
        ModelSpec(name="m", model=NotAModel.Config())
    assert "hyper_parallel.protocols.model" not in sys.modules


def test_spec_traverse_bridges_into_the_model():
    FeedForward, TinyLM = _model_classes()

    spec = ModelSpec(name="tiny", model=_tiny_model_config())
    assert [f for f, *_ in spec.traverse(FeedForward.Config)] == ["model.layers.0", "model.layers.1"]
    ((fqn, cfg, parent, attr),) = spec.traverse(TinyLM.Config)
    assert (fqn, cfg, parent, attr) == ("model", spec.model, spec, "model")

    class Root(Configurable):
        @dataclass(kw_only=True, slots=True)
        class Config(Configurable.Config):
            model_spec: ModelSpec | None = None

    root = Root.Config(model_spec=spec)
    found = list(root.traverse(FeedForward.Config))
    assert [f for f, *_ in found] == ["model_spec.model.layers.0", "model_spec.model.layers.1"]
    _, _, parent, index = found[1]
    parent[index] = FeedForward.Config(dim=8, hidden_dim=99)  # in-place replacement through the bridge
    assert spec.model.layers[1].hidden_dim == 99
    assert list(ModelSpec(name="fn_only", build_model_fn=_build).traverse(FeedForward.Config)) == []


def test_spec_to_dict():
    spec = ModelSpec(name="tiny", flavor="debug", model=_tiny_model_config(), parallelize_fn=_parallelize)
    out = spec.to_dict()
    assert out["name"] == "tiny" and out["flavor"] == "debug"
    assert out["model"]["layers"][0] == {"dim": 8, "hidden_dim": 12}
    assert out["parallelize_fn"] == repr(_parallelize)
    assert out["clip_grad_fn"] is None


# ---------------------------------------------------------------------- registry


def test_register_and_get():
    spec = ModelSpec(name="tiny", model=_tiny_model_config())
    register_spec(spec)
    assert registered_names() == ["tiny"]
    got = get_spec("tiny")
    assert got == spec
    # A copy: a recipe may edit the model tree without touching the registered spec.
    assert got is not spec and got.model is not spec.model
    got.model.layers[0].hidden_dim = 1000
    assert get_spec("tiny").model.layers[0].hidden_dim == 12


def test_registry_lists_known_names_and_suggests():
    register_spec(ModelSpec(name="qwen3_5", build_model_fn=_build))
    register_spec(ModelSpec(name="llama3", build_model_fn=_build))
    with pytest.raises(ValueError) as info:
        get_spec("qwen35")
    message = str(info.value)
    assert "unknown model spec 'qwen35'" in message
    assert "(did you mean 'qwen3_5'?)" in message
    assert "registered: llama3, qwen3_5" in message
    assert list(registered_specs()) == ["llama3", "qwen3_5"]


def test_empty_registry_says_so():
    with pytest.raises(ValueError, match=r"unknown model spec 'x'; registered: \(none registered\)"):
        get_spec("x")


def test_duplicate_and_wrong_type_registrations():
    register_spec(ModelSpec(name="m", build_model_fn=_build))
    with pytest.raises(ValueError, match=r"'m' is already registered.*unregister_spec\('m'\)"):
        register_spec(ModelSpec(name="m", build_model_fn=_build))
    with pytest.raises(TypeError, match="register_spec expects a hyper_parallel.protocols.ModelSpec"):
        register_spec({"name": "m"})  # type: ignore[arg-type]


def test_unregister():
    spec = ModelSpec(name="m", build_model_fn=_build)
    register_spec(spec)
    assert unregister_spec("m") is spec
    assert registered_names() == []
    with pytest.raises(ValueError, match="unknown model spec 'm'"):
        unregister_spec("m")


# ---------------------------------------------------------------------- MeshAxisName


def test_mesh_axis_names_equal_parallel_dims_names():
    from hyper_parallel.runtime.parallel_dims import BASE_DIM_ORDER, ParallelDims

    assert tuple(BASE_MESH_AXES) == BASE_DIM_ORDER
    every_alias = ParallelDims(dp_replicate=2, dp_shard=2, ep=2, cp=2,
                               world_size=16).alias_dims()
    assert set(FLATTENED_MESH_AXES) == set(every_alias)
    assert set(MeshAxisName) == set(BASE_MESH_AXES) | set(FLATTENED_MESH_AXES)


def test_mesh_axis_name_is_a_string():
    assert MeshAxisName.TP == "tp"
    assert str(MeshAxisName.DP_SHARD) == "dp_shard"
    assert f"{MeshAxisName.LOSS}" == "loss"
    assert {"fsdp": 1}[MeshAxisName.FSDP] == 1
    assert MeshAxisName("ep") is MeshAxisName.EP
