"""The platform layer: lazy resolution, dtype names, the torch and mindspore backends."""

import importlib.util
import subprocess
import sys

import pytest

from hyper_parallel import platform as hp_platform
from hyper_parallel.platform import UnknownPlatformError, get_platform
from hyper_parallel.platform.dtypes import canonical_dtype_name

HAS_MINDSPORE = importlib.util.find_spec("mindspore") is not None


def test_importing_the_package_imports_no_framework():
    code = (
        "import sys, hyper_parallel, hyper_parallel.platform, hyper_parallel.trainer.config;"
        "bad = [m for m in ('torch', 'mindspore', 'tyro') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_default_platform_is_torch(monkeypatch):
    monkeypatch.delenv(hp_platform.ENV_VAR, raising=False)
    import torch

    plat = get_platform()
    assert plat.name == "torch"
    assert plat.module_base is torch.nn.Module
    assert plat.device_type() in ("cpu", "cuda", "npu")
    assert get_platform() is plat  # cached


def test_env_var_selects_platform(monkeypatch):
    monkeypatch.setenv(hp_platform.ENV_VAR, "TORCH")
    assert get_platform().name == "torch"


def test_unknown_platform_lists_valid_ones(monkeypatch):
    monkeypatch.setenv(hp_platform.ENV_VAR, "jax")
    with pytest.raises(UnknownPlatformError, match="'jax'.*valid platforms: mindspore, torch"):
        get_platform()
    with pytest.raises(ValueError, match="from argument"):
        get_platform("tensorflow")


@pytest.mark.parametrize(
    "name, expected",
    [("bfloat16", "bfloat16"), ("bf16", "bfloat16"), ("float16", "float16"), ("fp16", "float16"),
     ("float32", "float32"), ("fp32", "float32"), ("BF16", "bfloat16")],
)
def test_torch_dtype_map(name, expected):
    import torch

    plat = get_platform("torch")
    assert plat.dtype(name) is getattr(torch, expected)
    assert canonical_dtype_name(name) == expected


def test_unknown_dtype_is_clear():
    with pytest.raises(ValueError, match="unknown dtype 'int7'.*bfloat16, bf16"):
        get_platform("torch").dtype("int7")


def test_torch_seed_rank_and_rng_state():
    import torch

    plat = get_platform("torch")
    assert plat.get_world_size() == 1 and plat.get_rank() == 0
    plat.manual_seed(7)
    a = torch.rand(3)
    plat.manual_seed(7)
    assert torch.equal(a, torch.rand(3))
    state = plat.get_rng_state()
    b = torch.rand(2)
    plat.set_rng_state(state)
    assert torch.equal(b, torch.rand(2))


@pytest.mark.skipif(not HAS_MINDSPORE, reason="mindspore is not installed (pip install .[mindspore]; run `make test-mindspore`)")
def test_mindspore_platform_really_works():
    import mindspore as ms
    import numpy as np

    plat = get_platform("mindspore")
    assert plat.module_base is ms.nn.Cell
    assert plat.dtype("bf16") == ms.bfloat16 and plat.dtype("fp32") == ms.float32
    assert plat.device_type() in ("cpu", "cuda", "npu")
    assert plat.get_world_size() == 1 and plat.get_rank() == 0

    class Affine(plat.module_base):
        def __init__(self):
            super().__init__()
            self.weight = ms.Parameter(ms.Tensor(np.ones((2, 2), np.float32)))

        def construct(self, x):
            return ms.ops.matmul(x, self.weight)

    out = Affine()(ms.Tensor(np.eye(2, dtype=np.float32)))
    assert out.asnumpy().tolist() == [[1.0, 1.0], [1.0, 1.0]]
    plat.manual_seed(3)
    first = ms.ops.uniform((3,), ms.Tensor(0.0), ms.Tensor(1.0)).asnumpy()
    plat.manual_seed(3)
    second = ms.ops.uniform((3,), ms.Tensor(0.0), ms.Tensor(1.0)).asnumpy()
    assert (first == second).all()
