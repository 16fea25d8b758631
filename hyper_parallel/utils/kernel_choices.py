"""The kernel back ends a model can be asked to run on (``model.kernels``): one home, framework-free.

The legacy schema, the model configuration and the kernel dispatch of the Gated DeltaNet layers
(:mod:`hyper_parallel.models.qwen3_5.kernels`) read the values from here; the field table
states the same ``Literal`` for the generated ``ModelConfig`` (a test pins that they agree).

* ``auto``  -- fla-core's kernels when the layer's parameters are on a CUDA device and the
  package imports, the plain torch path otherwise;
* ``torch`` -- always the plain torch path (the reference implementation, any device);
* ``fla``   -- always fla-core's kernels; on a CPU, or without the package, a ``ConfigError``.
"""

from __future__ import annotations

from typing import Literal, get_args

KernelChoice = Literal["auto", "torch", "fla"]
KERNEL_CHOICES: tuple[str, ...] = get_args(KernelChoice)

#: The choice a model runs with when nothing is said.
DEFAULT_KERNELS = "auto"

__all__ = ["DEFAULT_KERNELS", "KERNEL_CHOICES", "KernelChoice"]
