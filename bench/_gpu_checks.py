"""The numerical and memory checks of ``bench/gpu_check.sh``, one per step.

    python bench/_gpu_checks.py CHECK [--cpu] [--out FILE] [--layout NAME]

=====================  =========================================================================
CHECK                  what it holds (the module that runs it)
=====================  =========================================================================
``state_passing``      context parallelism's state-passing Gated DeltaNet, torch and fla
                       kernels, fp32 and bf16, against the one-rank torch path in fp32; the
                       bf16 read matrix's error shown apart (``_check_state_passing.py``)
``grouped_mm``         ``torch._grouped_mm`` experts in bf16 against the per-expert loop and an
                       fp32 reference, and that the grouped kernel really ran
                       (``_check_grouped_mm.py``)
``compile_fla``        ``torch.compile`` (the trainer's per-layer ``apply_compile``, inductor) of
                       the debug model on the fla kernels, one forward + backward against eager
                       (``_check_compile.py``)
``deterministic``      ``debug.deterministic: true``: two runs of the trainer, losses and
                       gradient norms bit-identical (``_check_determinism.py``)
``fake_pg``            one real trainer step of an 8-rank layout (``--layout``) on this one
                       device, the other ranks a fake process group: the rank's real memory
                       (``_check_fake_pg.py``)
``packing``            ``block_causal`` packed rows on torch's varlen flash attention and fla's
                       ``cu_seqlens`` kernels (and on the torch delta rule) against their
                       documents run alone on the torch path (``_check_packing.py``)
=====================  =========================================================================

On CUDA every check runs at the size written in its module; ``--cpu`` (or no CUDA device) runs
each in its cheapest form on the CPU, the parts that need CUDA or fla-core skipped with the
reason -- the dry run of the script, which proves the code path. Prints a line per part and
the status; writes the report (``_check_common.Report``) to ``--out``. Exit status: 1 when the
check failed, else 0 (``skipped`` and ``partial`` are for the script to judge).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _check_common import Report, cuda_available  # this directory (sys.path[0])

#: check -> (module, function): imported when run, so one check's imports cost no other.
CHECKS = {
    "state_passing": ("_check_state_passing", "check_state_passing"),
    "grouped_mm": ("_check_grouped_mm", "check_grouped_mm"),
    "compile_fla": ("_check_compile", "check_compile_fla"),
    "deterministic": ("_check_determinism", "check_deterministic"),
    "fake_pg": ("_check_fake_pg", "check_fake_pg"),
    "packing": ("_check_packing", "check_packing"),
}


def run_check(name: str, device: str, **options) -> Report:
    """Run check ``name`` on ``device`` (``cuda`` or ``cpu``); anything it raises is a failure
    of the check, recorded in the report."""
    module, function = CHECKS[name]
    report = Report(name, device)
    try:
        getattr(importlib.import_module(module), function)(report, device, **options)
    except Exception as exc:  # noqa: BLE001 - the report says what failed, the step fails
        report.failed("(check)", exc)
    return report


def print_report(report: Report) -> None:
    print(f"\n{report.check} on {report.device}: {report.status.upper()}")
    for note in report.notes:
        print(f"  note: {note}")
    for part, figures in report.parts.items():
        held = figures.get("bounds", {})
        shown = ", ".join(
            f"{what} {b['value']:.2e} (<= {b['limit']:.1e}{'' if b['held'] else ' FAILED'})"
            for what, b in held.items())
        extra = ", ".join(f"{k} {_short(v)}" for k, v in figures.items()
                          if k not in ("bounds", "conditions", "traceback_tail")
                          and not isinstance(v, (dict, list)))
        print(f"  {part}: {shown or extra or 'ran'}" + (f"; {extra}" if shown and extra else ""))
    for part, reason in report.skipped.items():
        print(f"  {part}: skipped ({reason})")
    for problem in report.problems:
        print(f"  PROBLEM {problem}")


def _short(value) -> str:
    return f"{value:.3e}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("check", choices=sorted(CHECKS))
    parser.add_argument("--cpu", action="store_true",
                        help="the cheapest form on the CPU even where CUDA is present (dry run)")
    parser.add_argument("--out", help="where to write the report (JSON)")
    parser.add_argument("--layout", help="fake_pg: the layout (see _check_fake_pg.LAYOUTS)")
    parser.add_argument("--flavor", help="compile_fla: the flavor (default debugmodel)")
    opts = parser.parse_args(argv)
    os.environ.setdefault("HYPER_PARALLEL_DISABLE_TQDM", "1")
    if opts.cpu:
        # Before torch is imported: the trainers built here or started from here (fake_pg,
        # deterministic) would otherwise choose a GPU where there is one.
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    device = "cpu" if opts.cpu or not cuda_available() else "cuda"
    options = {key: value for key, value in (("layout", opts.layout), ("flavor", opts.flavor))
               if value is not None}
    report = run_check(opts.check, device, **options)
    if device == "cpu" and not opts.cpu:  # a real run where there is no GPU: not the check
        report.skip("(its CUDA form)", "no CUDA device: only the CPU form ran")
    print_report(report)
    if opts.out:
        Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
        Path(opts.out).write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return 1 if report.status == "fail" else 0


if __name__ == "__main__":
    raise SystemExit(main())
