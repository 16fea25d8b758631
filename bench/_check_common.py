"""What every check of ``bench/_gpu_checks.py`` shares: the device it runs on, the error measure,
and the report it writes.

A check runs *parts* (say the torch path in bf16, or one trainer layout); a part either runs and
records its figures, each bound it is held to and whether it held, or is skipped with the
reason (no CUDA device, fla-core missing). The report's status follows:

* ``fail``: a bound did not hold or a part raised -- whatever else ran;
* ``skipped``: no part ran (the reasons say why);
* ``partial``: some parts passed, others were skipped (a dry run on CPU, or a GPU machine
  without fla-core: the GPU script treats this as incomplete);
* ``pass``: every part ran and held.
"""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass, field
from typing import Any

NO_CUDA = "no CUDA"


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def fla_missing() -> str | None:
    """Why fla-core's kernels cannot run here (None: they can)."""
    if not cuda_available():
        return NO_CUDA
    from hyper_parallel.models.qwen3_5 import kernels

    fla = kernels._load_fla()
    return f"fla-core does not import ({fla})" if isinstance(fla, str) else None


def error_ratio(ref, got) -> float:
    """``||got - ref||_2 / ||ref||_2``: fla-core's error ratio, the measure of the kernel parity
    tests (``tests/torch/ut/models/test_qwen3_5_kernels.py``), in float64."""
    ref, got = ref.detach().double(), got.detach().double()
    return ((ref - got).norm() / (ref.norm() + 1e-30)).item()


@dataclass
class Report:
    """The record of one check (see the module docstring)."""

    check: str
    device: str
    parts: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def part(self, name: str) -> dict[str, Any]:
        """The figures of part ``name`` (created empty)."""
        return self.parts.setdefault(name, {})

    def skip(self, name: str, reason: str) -> None:
        self.skipped[name] = reason

    def bound(self, part: str, what: str, value: float, limit: float) -> bool:
        """Record ``what`` = ``value`` in ``part`` with its upper bound ``limit``; a value above
        it (or not a number) is a problem. Returns whether it held."""
        held = math.isfinite(value) and value <= limit
        self.part(part).setdefault("bounds", {})[what] = {
            "value": value, "limit": limit, "held": held}
        if not held:
            self.problems.append(f"{part}: {what} = {value:.3e} > {limit:.1e}")
        return held

    def require(self, part: str, what: str, ok: bool, detail: str = "") -> bool:
        """A yes/no condition of ``part``; false is a problem."""
        self.part(part).setdefault("conditions", {})[what] = ok
        if not ok:
            self.problems.append(f"{part}: {what}" + (f" ({detail})" if detail else ""))
        return ok

    def failed(self, part: str, exc: BaseException) -> None:
        """``part`` raised: a problem, with the exception's last lines kept."""
        lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
        self.part(part)["error"] = f"{type(exc).__name__}: {exc}"
        self.part(part)["traceback_tail"] = "".join(lines)[-3000:]
        self.problems.append(f"{part}: raised {type(exc).__name__}: {exc}")

    @property
    def status(self) -> str:
        if self.problems:
            return "fail"
        if not self.parts:
            return "skipped"
        return "partial" if self.skipped else "pass"

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "status": self.status, "device": self.device,
                "problems": self.problems, "skipped": self.skipped, "notes": self.notes,
                "parts": self.parts}


__all__ = ["NO_CUDA", "Report", "cuda_available", "error_ratio", "fla_missing"]
