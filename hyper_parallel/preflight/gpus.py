"""The accelerators preflight judges a rank against, and what a rank needs beyond its tensors.

A GPU's memory is the total its driver reports (``nvidia-smi``'s ``memory.total``); the bf16
figure is the dense tensor-core peak of its datasheet, used only for the step-time range.

The allowances are memory a CUDA rank uses that no tensor of the step accounts for. They are
stated, not measured (nothing here has a GPU), and every figure preflight prints names them:

* **CUDA context**: the driver's per-process state, the loaded kernel images and cuBLAS's
  workspaces (torch's own context is 0.5-1 GiB on Hopper with lazy module loading);
* **NCCL**: each communicator a rank joins keeps its channel buffers (``NCCL_BUFFSIZE``, 4 MiB,
  per channel and peer, and its proxy and NVLS state): an allowance per process group;
* **fragmentation**: torch's caching allocator reserves more than it hands out; torchtitan's
  published runs reserve 5-15 % above their allocated peak.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20
GIB = 1 << 30

#: The driver, kernel images and library workspaces of one CUDA process.
CUDA_CONTEXT_BYTES = 1 * GIB
#: Buffers of one NCCL communicator (one per process group of size > 1 the rank joins).
NCCL_BYTES_PER_GROUP = 256 * MIB
#: The caching allocator's reserve above the allocated peak, as a fraction of that peak.
FRAGMENTATION = 0.10
#: A rank whose need is within this fraction of the GPU below its size is "tight": it fits as
#: estimated, but an allowance that is off, a longer sequence or a hotter expert would not.
TIGHT_MARGIN = 0.05


@dataclass(frozen=True)
class Gpu:
    """One accelerator model."""

    name: str
    memory_bytes: int
    """What the driver reports as the device's total memory."""
    bf16_tflops: float
    """Dense bf16 tensor-core peak (datasheet), for the step-time range only."""
    description: str


GPUS: dict[str, Gpu] = {
    gpu.name: gpu
    for gpu in (
        Gpu("a100-80gb", 81920 * MIB, 312.0, "NVIDIA A100 80GB (SXM4)"),
        Gpu("h100-80gb", 81559 * MIB, 989.0, "NVIDIA H100 80GB HBM3 (SXM5)"),
        Gpu("h100-96gb", 95 * GIB, 989.0, "NVIDIA H100 96GB HBM2e (95 GiB visible)"),
        Gpu("h200", 143771 * MIB, 989.0, "NVIDIA H200 141GB HBM3e (SXM)"),
        Gpu("b200", 183359 * MIB, 2250.0, "NVIDIA B200 180GB HBM3e (HGX)"),
    )
}

#: What preflight judges against when neither ``--gpu`` nor ``--gpu-memory`` is given.
DEFAULT_GPU = "h100-80gb"


def gpu_of_size(gib: float) -> Gpu:
    """An accelerator known only by its memory (``--gpu-memory``), with no FLOP figure."""
    return Gpu(f"{gib:g}GiB", int(gib * GIB), 0.0, f"a {gib:g} GiB accelerator")


def overhead_bytes(allocated_peak: int, process_groups: int) -> dict[str, int]:
    """The stated allowances for a rank whose allocated peak is ``allocated_peak`` and that
    joins ``process_groups`` communicators."""
    return {
        "cuda_context": CUDA_CONTEXT_BYTES,
        "nccl": NCCL_BYTES_PER_GROUP * process_groups,
        "fragmentation": int(FRAGMENTATION * allocated_peak),
    }


def verdict(need: int, gpu: Gpu) -> str:
    """``fits``, ``tight`` (within :data:`TIGHT_MARGIN` of the GPU) or ``oom``."""
    if need > gpu.memory_bytes:
        return "oom"
    return "tight" if need > (1 - TIGHT_MARGIN) * gpu.memory_bytes else "fits"


__all__ = [
    "CUDA_CONTEXT_BYTES",
    "DEFAULT_GPU",
    "FRAGMENTATION",
    "GIB",
    "GPUS",
    "MIB",
    "NCCL_BYTES_PER_GROUP",
    "TIGHT_MARGIN",
    "Gpu",
    "gpu_of_size",
    "overhead_bytes",
    "verdict",
]
