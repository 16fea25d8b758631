"""Pinned CPU numerics: the environment under which a golden loss file holds across x86-64 CPUs.

A float32 training step on the CPU is bit-reproducible on one machine, but not across CPUs:
ATen, MKL and oneDNN each pick their kernels by the instruction sets the CPU has (AVX-512,
AVX2, ...), by its vendor and by its cache sizes, and the kernels sum in different orders. The
golden files recorded on one CPU drifted by an ulp from step 3 on another -- the pre-refactor
trainer drifted with them, the code was not the cause. Runs that are compared with a file
recorded elsewhere therefore run on one fixed kernel path per library, chosen by these variables
(read when each library first dispatches, so they must be in the process's environment before
its first tensor operation):

* ``ATEN_CPU_CAPABILITY=default``: ATen's kernels compiled for the baseline ISA;
* ``MKL_CBWR=COMPATIBLE``: MKL's conditional numerical reproducibility on its SSE2 path, the
  one mode MKL honours on every x86-64 CPU. (``AVX2`` was tried: it is twice as fast, but MKL
  keeps it for Intel CPUs; on an AMD EPYC it silently runs ``AUTO`` -- ``MKL_VERBOSE=1`` prints
  ``CNR:AUTO`` -- and the goldens recorded on an Intel Xeon drifted there from step 3.)
* ``DNNL_MAX_CPU_ISA=SSE41`` and oneDNN off in the process
  (:data:`ONEDNN_OFF`, honoured by :func:`apply_in_process`): the Gated DeltaNet's depthwise
  conv1d runs on oneDNN, whose weight gradient is a ``gemm:jit`` blocked by the cache sizes of
  the CPU even at a capped ISA; with oneDNN off ATen's own convolution runs it through MKL.
* ``OMP_NUM_THREADS=1``: a reduction split over threads sums in an order set by their count,
  so a machine with more cores would sum differently.

They make a step about 2x slower, so only the golden runs use them, and only where the machine
has no native recording of the golden (:mod:`tests.helpers.golden`); every comparison made
within one machine (layouts, entries, resumes) runs at native speed.

They held on every Intel Xeon and AMD EPYC the suite ran on until an Intel Xeon with AVX-512
and AMX (2026-12-07), where the reported losses of isolated steps differ by an ulp (the
parameters train the same): a CPU like that has its own recording of each golden, made by the
golden's own recorder (:mod:`tests.helpers.golden`).
"""

from __future__ import annotations

import os

#: Set in a golden run's environment; :func:`apply_in_process` turns oneDNN off (torch has no
#: environment variable for it).
ONEDNN_OFF = "HYPER_PARALLEL_TEST_ONEDNN_OFF"

PORTABLE_NUMERICS: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "DNNL_MAX_CPU_ISA": "SSE41",
    ONEDNN_OFF: "1",
    "OMP_NUM_THREADS": "1",
}


def apply_in_process() -> None:
    """The part of :data:`PORTABLE_NUMERICS` that is not read by a library itself: a test worker
    calls this first, before any tensor operation."""
    if os.environ.get(ONEDNN_OFF) == "1":
        import torch

        torch.backends.mkldnn.enabled = False


__all__ = ["ONEDNN_OFF", "PORTABLE_NUMERICS", "apply_in_process"]
