"""Golden loss files: a run's losses pinned bit for bit, recorded on pinned kernels for every
CPU, and on a CPU's own kernels where that CPU has a recording of its own.

The pinned kernel paths (:mod:`tests.helpers.numerics`) make a float32 run the same on the
Intel Xeons and AMD EPYCs the goldens were recorded and checked on, but not on every x86-64
CPU: on an Intel Xeon with AVX-512 and AMX (a 2-vCPU VM, 2026-12-07) the legacy goldens'
reported losses differ by one ulp at isolated steps (the debug YAML's steps 6 and 7, the TP 2
YAML's 3, 4, 5 and 7), every other step bit for bit -- so the parameters trained the same and
what differs is how the reported loss was summed. A golden ``golden/<name>.json`` therefore
has these recordings:

* ``golden/<name>.json``: the losses as first pinned (the legacy ones by the pre-refactor
  trainer, pinned by hash in ``tests/torch/ut/trainer/test_base_trainer_unchanged.py``);
* ``golden/other_cpus/<cpu>/<name>.json``: the same pinned run recorded on each CPU found to
  differ, by the same recorder (the legacy ones again by the pre-refactor trainer, 70f70f5's
  own test, on the pinned paths; that docstring says how), with where it was recorded;
* ``golden/native/<cpu key>/<name>.json``: the run on the native kernels of one exact machine
  (:func:`cpu_key`: the CPU's identity, instruction sets and caches, and torch's build), by the
  same recorder on that machine, with the fingerprint it was recorded under.

The pinned paths cost a step about 2x (MKL's SSE2 path, ATen's baseline kernels, oneDNN off).
Where this machine has a native recording of a golden, its golden run trains on the native
kernels and must equal that recording (:func:`golden_numerics`); elsewhere it trains on the
pinned paths and must equal one pinned recording. Either way the run is held bit for bit to
what the same recorder made under the same numerics, and a change to the numerics fails. A CPU
that matches no pinned recording fails until its recording is added the same way -- never by
the code under test recording itself. ``HYPER_PARALLEL_GOLDEN_NUMERICS=pinned`` runs the pinned
paths even where a native recording exists (to check those recordings on this CPU), ``native``
the native kernels even where none does (to make one).

The same choice serves runs held to a tight bound rather than to recorded losses (context
parallelism against one rank): they run on the pinned paths, where the differences measure the
same on every CPU, except on a machine where they were measured on its native kernels, under
the same bound, by the test itself (``golden/native/<cpu key>/<name>.json``: the figures, the
fingerprint; :func:`record_native_figures`). There the test holds the native runs to the same
bound, run after run the same figures (one machine's kernels are deterministic).

``python -m tests.helpers.golden`` prints this machine's key, and with ``--record-native SRC``
copies the recorder's fresh files from ``SRC`` (the recorder's ``golden/`` folder, recorded with
``HYPER_PARALLEL_UPDATE_GOLDEN=1`` and only ``OMP_NUM_THREADS=1`` exported) into this machine's
native folder, each with the fingerprint.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import sys
from pathlib import Path

from tests.helpers.numerics import PORTABLE_NUMERICS

OTHER_CPUS = "other_cpus"
NATIVE = "native"
#: ``pinned``: golden runs on the pinned paths even where a native recording exists;
#: ``native``: on the native kernels even where none does.
FORCE_NUMERICS = "HYPER_PARALLEL_GOLDEN_NUMERICS"
#: A golden run's job environment on each kind of numerics: one thread either way (a reduction
#: split over threads sums in an order set by their count).
PINNED_ENV = tuple(PORTABLE_NUMERICS.items())
NATIVE_ENV = (("OMP_NUM_THREADS", "1"),)
_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
#: The instruction-set flags kernels dispatch on (a CPU's other flags -- its mitigations, what
#: the hypervisor exposes of its power management -- move with the kernel and the host, and
#: pick no kernel).
_ISA_FLAGS = ("sse", "ssse", "avx", "fma", "f16c", "amx")


@functools.cache
def cpu_fingerprint() -> dict:
    """What picks a native CPU kernel and so its order of summation: the CPU's vendor, family,
    model and stepping and the instruction sets it reports (ATen, MKL and oneDNN dispatch on
    them), its cache sizes (oneDNN and MKL block by them), and torch's build (its version, MKL
    and oneDNN versions and the CPU capability ATen chose)."""
    import torch

    first: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for line in text.split("\n\n", 1)[0].splitlines():
        name, _, value = line.partition(":")
        first[name.strip()] = value.strip()
    caches = []
    for index in sorted(_CACHES.glob("index*")):
        try:
            caches.append(" ".join((index / part).read_text().strip()
                                   for part in ("level", "type", "size")))
        except OSError:
            continue
    return {"vendor": first.get("vendor_id", "unknown"), "family": first.get("cpu family", "?"),
            "model": first.get("model", "?"), "stepping": first.get("stepping", "?"),
            "model_name": first.get("model name", "?"),
            "flags": sorted(flag for flag in first.get("flags", "").split()
                            if flag.startswith(_ISA_FLAGS)),
            "caches": caches,
            "torch": torch.__version__,
            "torch_config_sha256": hashlib.sha256(torch.__config__.show().encode()).hexdigest()}


def cpu_key(fingerprint: dict | None = None) -> str:
    """This machine's native folder name: ``<vendor>-<family>-<model>-<digest>``, the digest
    over the whole :func:`cpu_fingerprint`."""
    fingerprint = cpu_fingerprint() if fingerprint is None else fingerprint
    digest = hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:12]
    return f"{fingerprint['vendor']}-{fingerprint['family']}-{fingerprint['model']}-{digest}"


def native_recording(golden: Path) -> Path | None:
    """This machine's native recording of ``golden``, if it has one and the pinned paths are
    not forced."""
    if os.environ.get(FORCE_NUMERICS) == "pinned" or not (golden.parent / NATIVE).is_dir():
        return None  # (no fingerprint to take: it imports torch)
    path = golden.parent / NATIVE / cpu_key() / golden.name
    return path if path.is_file() else None


def golden_numerics(golden: Path) -> tuple[tuple[str, str], ...]:
    """The environment ``golden``'s run trains under here: the native kernels where this
    machine has a native recording of it (or they are forced), else the pinned paths."""
    if os.environ.get(FORCE_NUMERICS) == "native":
        return NATIVE_ENV
    return NATIVE_ENV if native_recording(golden) is not None else PINNED_ENV


def record_native_figures(golden: Path, figures: dict, recorded_by: str) -> Path:
    """Write ``figures`` (what a bounded comparison measured on this machine's native kernels)
    as this machine's native record of ``golden``, with the fingerprint: from then on its runs
    train natively here (:func:`golden_numerics`)."""
    target = golden.parent / NATIVE / cpu_key() / golden.name
    _write_record(target, recorded_by, {"figures": figures})
    return target


def _write_record(target: Path, recorded_by: str, data: dict) -> None:
    """``data`` as a native record at ``target``, with the fingerprint, written atomically."""
    fingerprint = cpu_fingerprint()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.tmp")
    partial.write_text(json.dumps({"cpu": fingerprint["model_name"], "fingerprint": fingerprint,
                                   "recorded_by": recorded_by, **data}, indent=1) + "\n")
    os.replace(partial, target)


def recordings(golden: Path) -> dict[str, list[float]]:
    """The recordings a run of ``golden`` on this machine is held to, by where each was made:
    this machine's native one alone, where it has one; else the pinned ones (``"first"`` for
    the file itself, and every CPU's under ``other_cpus/``)."""
    native = native_recording(golden)
    if native is not None:
        return {f"{NATIVE}/{native.parent.name}": json.loads(native.read_text())["losses"]}
    found = {"first": json.loads(golden.read_text())["losses"]}
    for path in sorted(golden.parent.glob(f"{OTHER_CPUS}/*/{golden.name}")):
        found[path.parent.name] = json.loads(path.read_text())["losses"]
    return found


def assert_matches_a_recording(losses: list[float], golden: Path) -> None:
    """``losses`` equal, bit for bit, one of :func:`recordings`."""
    found = recordings(golden)
    if any(losses == recorded for recorded in found.values()):
        return
    lines = [f"{golden.name}: the losses match none of its {len(found)} recordings"]
    for where, recorded in found.items():
        steps = [i + 1 for i, (a, b) in enumerate(zip(losses, recorded)) if a != b]
        if len(losses) != len(recorded):
            steps.append(f"{len(losses)} steps against {len(recorded)}")
        lines.append(f"  {where}: differs at steps {steps}")
    lines.append(f"  this run: {losses}")
    lines.append("A numerics change fails here on every CPU. On a CPU none was recorded on, record "
                 f"it under golden/{OTHER_CPUS}/<cpu>/ as tests/helpers/golden.py says.")
    if any(where.startswith(NATIVE) for where in found):
        lines.append(f"This ran on the native kernels; {FORCE_NUMERICS}=pinned checks the pinned "
                     "recordings instead.")
    raise AssertionError("\n".join(lines))


def record_native(source: Path, golden_dir: Path, recorded_by: str) -> list[Path]:
    """Copy the recorder's files ``source/<name>.json`` of the goldens in ``golden_dir`` into
    this machine's native folder, each with the fingerprint and ``recorded_by``."""
    written = []
    for golden in sorted(golden_dir.glob("*.json")):
        recorded = source / golden.name
        if recorded.is_file():
            target = golden_dir / NATIVE / cpu_key() / golden.name
            _write_record(target, recorded_by, json.loads(recorded.read_text()))
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.helpers.golden",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--record-native", type=Path, metavar="SRC",
                        help="the recorder's golden folder, recorded on the native kernels")
    parser.add_argument("--golden-dir", type=Path,
                        default=Path(__file__).resolve().parents[1] / "torch" / "st" / "qwen3_5"
                        / "golden")
    parser.add_argument("--recorded-by", default="",
                        help="the recorder and how it ran, stored in each file")
    args = parser.parse_args(argv)
    print(cpu_key())
    if args.record_native is not None:
        if not args.recorded_by:
            parser.error("--record-native needs --recorded-by")
        for path in record_native(args.record_native, args.golden_dir, args.recorded_by):
            print(f"wrote {path}")
    return 0


__all__ = ["FORCE_NUMERICS", "NATIVE", "NATIVE_ENV", "OTHER_CPUS", "PINNED_ENV",
           "assert_matches_a_recording", "cpu_fingerprint", "cpu_key", "golden_numerics",
           "native_recording", "record_native", "record_native_figures", "recordings"]


if __name__ == "__main__":
    sys.exit(main())

