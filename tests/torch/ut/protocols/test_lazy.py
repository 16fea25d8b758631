"""``LazyRef`` / ``LazyOwner``: code named by import path, imported on first use."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys
import textwrap

import pytest

from hyper_parallel.protocols import Configurable, ModelSpec
from hyper_parallel.protocols.lazy import LazyOwner, LazyRef, resolve_ref
from hyper_parallel.protocols.model_config import BaseModelConfig

PATH = "hyper_parallel.utils.suggest:did_you_mean"


def test_a_reference_calls_and_equals_its_target():
    from hyper_parallel.utils.suggest import did_you_mean

    ref = LazyRef(PATH)
    assert ref("lr", ["lr_min"]) == did_you_mean("lr", ["lr_min"])
    assert ref.resolve() is did_you_mean and resolve_ref(ref) is did_you_mean
    assert ref == did_you_mean and did_you_mean == ref and ref == LazyRef(PATH)
    assert ref != LazyRef("hyper_parallel.utils.suggest:closest") and ref != print
    assert ref.__name__ == "did_you_mean" and repr(ref) == f"LazyRef({PATH!r})"
    assert resolve_ref(print) is print


def test_copies_and_pickles_keep_the_path():
    ref = LazyRef(PATH)
    assert copy.copy(ref) is ref and copy.deepcopy(ref) is ref
    assert pickle.loads(pickle.dumps(ref)) == ref


def test_malformed_and_missing_paths():
    with pytest.raises(ValueError, match="'package.module:qualname'"):
        LazyRef("hyper_parallel.utils.suggest.did_you_mean")
    missing = LazyRef("hyper_parallel.utils.suggest:no_such_function")
    with pytest.raises(AttributeError, match="has no 'no_such_function'"):
        missing()
    with pytest.raises(ModuleNotFoundError):
        LazyRef("hyper_parallel.no_such_module:f").resolve()


def test_comparing_and_copying_import_nothing():
    """Equality, copies, ``to_dict`` of a spec holding references: no import of the targets."""
    code = textwrap.dedent(
        """\
        import copy, sys
        from hyper_parallel.protocols.lazy import LazyRef
        ref = LazyRef("hyper_parallel.runtime.optim:clip_grad_norm_")
        assert ref != print and ref == LazyRef(ref.path)
        copy.deepcopy([ref]); repr(ref); ref.__name__
        from hyper_parallel.models.qwen3_5.spec import qwen3_5_spec_factory
        spec = qwen3_5_spec_factory("debugmodel")
        spec.to_dict(); copy.deepcopy(spec); assert spec == qwen3_5_spec_factory("debugmodel")
        assert "torch" not in sys.modules and "hyper_parallel.runtime.optim" not in sys.modules
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_base_configs_name_their_owners_before_the_framework_is_imported():
    """``ModuleConfig`` / ``BaseModelConfig`` build through lazy owners until ``Module`` /
    ``BaseModel`` exist; the package names them (model_config.py, which their modules import,
    does not)."""
    code = textwrap.dedent(
        """\
        import sys
        from hyper_parallel.protocols.model_config import BaseModelConfig, ModuleConfig
        assert "torch" not in sys.modules
        assert repr(vars(ModuleConfig)["_owner"]) == (
            "LazyOwner('hyper_parallel.protocols.module:Module')")
        assert repr(vars(BaseModelConfig)["_owner"]) == (
            "LazyOwner('hyper_parallel.protocols.model:BaseModel')")
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_spec_resolved_swaps_the_references():
    def build(config):
        return None

    spec = ModelSpec(name="m", build_model_fn=LazyRef(PATH), clip_grad_fn=print)
    resolved = spec.resolved()
    assert resolved.build_model_fn is LazyRef(PATH).resolve() and resolved.clip_grad_fn is print
    assert resolved == spec and spec.build_model_fn == LazyRef(PATH)  # the spec is unchanged
    plain = ModelSpec(name="m", build_model_fn=build)
    assert plain.resolved() is plain


def test_lazy_owner_builds_the_class_it_names():
    @dataclasses.dataclass(kw_only=True, slots=True)
    class TinyConfig(Configurable.Config):
        size: int = 2

    TinyConfig._owner = LazyOwner("tests.torch.ut.protocols.test_lazy:_Tiny")
    built = TinyConfig(size=3).build()
    assert type(built) is _Tiny and built.config == TinyConfig(size=3)
    assert repr(TinyConfig.__dict__["_owner"]) == (
        "LazyOwner('tests.torch.ut.protocols.test_lazy:_Tiny')"
    )


class _Tiny:
    def __init__(self, config):
        self.config = config


def test_a_model_config_builds_its_model_through_its_lazy_owner():
    """``Qwen3_5Model.Config`` lives in the framework-free model_config; the model adopts it."""
    from hyper_parallel.models.qwen3_5.model_config import Qwen3_5ModelConfig, flavor_config
    from hyper_parallel.models.qwen3_5.protocol import Qwen3_5Model
    from hyper_parallel.protocols import BaseModel, Module

    assert Qwen3_5Model.Config is Qwen3_5ModelConfig and Qwen3_5ModelConfig._owner is Qwen3_5Model
    assert BaseModel.Config is BaseModelConfig and issubclass(BaseModelConfig, Module.Config)
    config = dataclasses.replace(flavor_config("debugmodel"), num_hidden_layers=2)
    import torch

    with torch.device("meta"):
        model = config.build()
    assert type(model) is Qwen3_5Model and model.config == config


def test_lazy_exports_import_a_name_on_first_access_and_keep_it():
    from hyper_parallel.protocols.lazy import lazy_exports

    namespace: dict = {}
    getattr_, dir_ = lazy_exports("pkg", namespace, {"dumps": "json"})
    assert "dumps" in dir_()
    import json

    assert getattr_("dumps") is json.dumps
    assert namespace["dumps"] is json.dumps  # later lookups find it without the hook
    with pytest.raises(AttributeError, match="module 'pkg' has no attribute 'loads'"):
        getattr_("loads")
