"""What a GPU script runs on, for its ``env.txt``: the devices, torch and CUDA, the libraries
the kernels need, and whether fla-core's kernels import (the summary reads the line
``fla-core kernels: importable``).

    python bench/_gpu_env.py
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                              "--format=csv"], capture_output=True, text=True, check=False)
        print((smi.stdout or smi.stderr).strip())
    else:
        print("nvidia-smi: not found")
    import torch

    print("torch", torch.__version__, "cuda", torch.version.cuda, "available",
          torch.cuda.is_available(), "devices", torch.cuda.device_count())
    for name in ("triton", "fla", "causal_conv1d", "torchdata", "einops"):
        try:
            module = importlib.import_module(name)
            print(name, getattr(module, "__version__", "?"))
        except Exception as exc:  # noqa: BLE001 - a missing or broken library is the report
            print(name, "MISSING:", type(exc).__name__, exc)
    from hyper_parallel.models.qwen3_5 import kernels

    fla = kernels._load_fla()
    print("fla-core kernels:", "MISSING: " + fla if isinstance(fla, str) else "importable")
    print("causal-conv1d:", "importable" if kernels._load_causal_conv1d()
          else "not installed (fla-core's conv is used)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
