"""Pinned CPU numerics: the environment under which a golden loss file holds on any x86-64 CPU
with AVX2.

A float32 training step on the CPU is bit-reproducible on one machine, but not across CPUs:
ATen, MKL and oneDNN each pick their kernels by the instruction sets the CPU has (AVX-512,
AVX2, ...), and the kernels sum in different orders. The golden files recorded on one CPU
(commit 70f70f5) drifted by an ulp from step 3 on another -- the pre-refactor trainer drifted
with them, the code was not the cause. Runs that are compared with a file recorded elsewhere
therefore run on one fixed kernel path per library, chosen by these variables (read when each
library first dispatches, so they must be in the process's environment before its first tensor
operation):

* ``ATEN_CPU_CAPABILITY=default``: ATen's kernels compiled for the baseline ISA;
* ``MKL_CBWR=AVX2``: MKL's conditional numerical reproducibility on its AVX2 code path, the same
  results on every CPU that has AVX2 (the BLAS behind float32 matmuls; ``COMPATIBLE``, the
  SSE2 path of every x86 CPU, would make a step twice as slow again);
* ``DNNL_MAX_CPU_ISA=SSE41``: oneDNN's kernels capped at SSE4.1.

They make a step about 1.4x slower, so only the golden runs use them; every comparison made
within one machine (layouts, entries, resumes) runs at native speed.
"""

from __future__ import annotations

PORTABLE_NUMERICS: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "AVX2",
    "DNNL_MAX_CPU_ISA": "SSE41",
}

__all__ = ["PORTABLE_NUMERICS"]
