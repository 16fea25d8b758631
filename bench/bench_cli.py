"""Benchmark ``ConfigManager.parse_args`` against torchtitan's, side by side in one run.

    .venv/bin/python bench/bench_cli.py [--runs 5] [--warm-iters 50] [--out bench/results/cli.json]
    .venv/bin/python bench/bench_cli.py --setup      # only build bench/.titan-env, then exit
    .venv/bin/python bench/bench_cli.py --smoke      # ours alone, once: does the bench still run

Both sides parse a registry recipe plus the same three overrides (training length, learning
rate, tensor-parallel degree):

* ours: ``hyper_parallel.config.manager.ConfigManager().parse_args(["--module", M, "--config",
  F, "--training.steps", "20", "--optimizer.lr", "3e-4", "--parallelism.tensor_parallel_degree",
  "1"])`` with ``--module qwen3_5_v2 --config qwen3_5_v2_debugmodel`` when the project ships that
  recipe, else the stand-in ``--module bench._recipes --config debug_recipe``
  (bench/_recipes/config_registry.py, the same shape as torchtitan's debug recipe);
* torchtitan 0.3.0: ``torchtitan.config.manager.ConfigManager().parse_args(["--module",
  "llama3", "--config", "llama3_debugmodel", ...])``; its learning rate lives at
  ``--optimizer.param-groups.0.optimizer-kwargs.lr``.

Two figures per side, printed with ours/torchtitan ratios and written to JSON:

1. whole process: a fresh ``python -c`` that imports the manager and parses once, ``--runs``
   times, interleaved ours/torchtitan (the order alternates each run); the median time from
   launching the process to the parsed config (the child stamps ``time.monotonic()``, which is
   system-wide on Linux), and, for reference, to the process's exit. One untimed run per side
   first, so both start from a warm page cache and compiled bytecode.
2. warm in-process: one long-lived worker per side parses ``--warmup`` times untimed, then the
   two workers take turns in blocks of 5 until each has parsed ``--warm-iters`` times; the
   median of the per-parse times.

Targets: whole process <= 0.15x torchtitan's (the configuration tree, the registries and the
recipes import no torch; torchtitan's parse does), warm in-process <= 1.0x. These are figures,
not assertions: a miss is reported, the exit status stays 0. ``bench/bench_codegen.py`` prints
the whole-process ratio next to the code generator's figures (it runs the measurement here).

torchtitan's environment (``bench/.titan-env``, gitignored) is built on first use, or by
``--setup``, with ``pip install --no-deps --target`` and the interpreter running this script:
its children run that same interpreter (the project's torch 2.13.0 CPU, tyro, numpy, ...) with
``PYTHONPATH=bench/.titan-env``, so nothing in ``.venv`` changes and pip can never pull a torch
build. The set is the minimum for the parse above (every package in it is imported by it):

* ``torchtitan==0.3.0`` -- the subject;
* ``spmd_types==0.2.3`` -- torchtitan pins it; ``torchtitan.distributed`` imports it;
* ``triton==3.9.0`` -- ``torchtitan.distributed.minimal_async_ep.kernels`` does ``import
  triton`` at module level and the llama3 recipe reaches it (about 1 GB unpacked; the CPU torch
  does not ship it, and a stub would make torchtitan's import cheaper than a real install's);
* ``datasets==4.7.0`` -- ``torchtitan.hf_datasets.text_datasets`` imports it (torchtitan pins
  ``<4.8``); and what ``import datasets`` needs that ``.venv`` lacks: ``pyarrow``, ``pandas``,
  ``dill``, ``multiprocess``, ``xxhash``, ``httpx``;
* ``huggingface_hub==1.33.0`` and ``fsspec==2026.2.0`` -- ``.venv`` has huggingface_hub 2.x and a
  newer fsspec, outside datasets 4.7's pins (``<2.0``, ``<=2026.2.0``); the pinned ones shadow
  them here so torchtitan imports what a real install would resolve; ``httpcore`` is what
  huggingface_hub 1.x imports on top of httpx.

torchtitan's other declared dependencies are either in ``.venv`` already (torchdata, tokenizers,
safetensors, tyro, tensorboard, pillow) or never imported by this parse (wandb, einops,
torch_checkpointing), so they are left out. A changed package list rebuilds the directory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from _smoke import result_path, write_results  # this directory (sys.path[0])

REPO = Path(__file__).resolve().parents[1]
TITAN_ENV = REPO / "bench" / ".titan-env"
STAMP_NAME = ".bench-cli-stamp.json"
DEFAULT_OUT = REPO / "bench" / "results" / "cli.json"

TITAN_PACKAGES = (
    "torchtitan==0.3.0",
    "spmd_types==0.2.3",
    "triton==3.9.0",
    "datasets==4.7.0",
    "pyarrow==26.0.1",
    "pandas==3.1.1",
    "dill==0.4.0",
    "multiprocess==0.70.18",
    "xxhash==4.1.0",
    "httpx==0.28.1",
    "httpcore==1.0.9",
    "huggingface_hub==1.33.0",
    "fsspec==2026.2.0",
)

TARGET_WHOLE = 0.15
TARGET_WARM = 1.0
WARM_BLOCK = 5
MARK = "@@bench@@"  # protocol lines on a worker's stdout; anything else it prints is ignored

# (flag, value, expression reading the parsed value back from `config`, expected value)
OURS_OVERRIDES = (
    ("--training.steps", "20", "config.training.steps", 20),
    ("--optimizer.lr", "3e-4", "config.optimizer.lr", 3e-4),
    ("--parallelism.tensor_parallel_degree", "1", "config.parallelism.tensor_parallel_degree", 1),
)
TITAN_OVERRIDES = (
    ("--training.steps", "20", "config.training.steps", 20),
    (
        "--optimizer.param-groups.0.optimizer-kwargs.lr",
        "3e-4",
        "config.optimizer.param_groups[0].optimizer_kwargs['lr']",
        3e-4,
    ),
    ("--parallelism.tensor_parallel_degree", "1", "config.parallelism.tensor_parallel_degree", 1),
)


@dataclass
class Side:
    """One ``ConfigManager`` under test: how to import it, what to parse, where it lives."""

    name: str
    manager_module: str
    module: str
    config: str
    overrides: tuple
    pythonpath: Path
    notes: list[str] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        args = ["--module", self.module, "--config", self.config]
        for flag, value, _, _ in self.overrides:
            args += [flag, value]
        return args

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["PYTHONPATH"] = str(self.pythonpath)
        return env

    def check_code(self) -> str:
        """Source that fails the child when an override did not land (run after the stamp)."""
        lines = []
        for flag, _, expr, expected in self.overrides:
            lines.append(
                f"assert {expr} == {expected!r}, "
                f"'{self.name}: {flag} did not land: ' + repr({expr})"
            )
        return "\n".join(lines)


# A fresh process: import the manager, parse once, stamp, check, exit normally.
WHOLE_CHILD = """\
import time
from {manager} import ConfigManager
config = ConfigManager().parse_args({argv!r})
stamp = time.monotonic()
{check}
print("{mark}", repr(stamp), flush=True)
"""

# A long-lived worker: warm up, then parse N times per request line "N" on stdin.
WARM_CHILD = """\
import json, sys, time
from {manager} import ConfigManager
argv = {argv!r}
for _ in range({warmup}):
    config = ConfigManager().parse_args(argv)
{check}
print("{mark} ready", flush=True)
for line in sys.stdin:
    times = []
    for _ in range(int(line)):
        start = time.perf_counter()
        ConfigManager().parse_args(argv)
        times.append(time.perf_counter() - start)
    print("{mark}", json.dumps(times), flush=True)
"""


# --------------------------------------------------------------------------- environment


def _stamp() -> dict:
    return {
        "packages": list(TITAN_PACKAGES),
        "python": f"{sys.version_info[0]}.{sys.version_info[1]}",
    }


def titan_env_ready() -> bool:
    stamp = TITAN_ENV / STAMP_NAME
    try:
        return json.loads(stamp.read_text()) == _stamp()
    except (OSError, ValueError):
        return False


def setup_titan_env(force: bool = False) -> None:
    """Build ``bench/.titan-env`` unless its stamp matches ``TITAN_PACKAGES`` (idempotent).

    Installs into a temporary sibling and renames it into place, so an interrupted install never
    leaves a half-built environment that looks ready.
    """
    if titan_env_ready() and not force:
        return
    tmp = TITAN_ENV.with_name(f".titan-env.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--no-warn-script-location",
        "--target",
        str(tmp),
        *TITAN_PACKAGES,
    ]
    print(
        f"bench_cli: installing torchtitan's environment into {TITAN_ENV.relative_to(REPO)} "
        f"(--no-deps, {len(TITAN_PACKAGES)} packages, about 1.3 GB)",
        flush=True,
    )
    result = subprocess.run(cmd, check=False)
    if result.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SystemExit(
            f"bench_cli: pip failed (exit {result.returncode}) installing "
            f"{' '.join(TITAN_PACKAGES)}; this needs the package registry. "
            "Retry with: python bench/bench_cli.py --setup"
        )
    if (tmp / "torch").exists():  # --no-deps makes this impossible; keep the guarantee explicit
        shutil.rmtree(tmp, ignore_errors=True)
        raise SystemExit(
            "bench_cli: a torch package landed in the torchtitan environment; refusing to use it"
        )
    shutil.rmtree(TITAN_ENV, ignore_errors=True)
    tmp.rename(TITAN_ENV)
    (TITAN_ENV / STAMP_NAME).write_text(json.dumps(_stamp(), indent=1) + "\n")


# --------------------------------------------------------------------------- sides


def _project_recipe_present() -> bool:
    path = REPO / "hyper_parallel" / "models" / "qwen3_5_v2" / "config_registry.py"
    try:
        return "def qwen3_5_v2_debugmodel(" in path.read_text()
    except OSError:
        return False


def make_sides() -> tuple[Side, Side]:
    ours = Side(
        name="hyper_parallel",
        manager_module="hyper_parallel.config.manager",
        module="qwen3_5_v2" if _project_recipe_present() else "bench._recipes",
        config="qwen3_5_v2_debugmodel" if _project_recipe_present() else "debug_recipe",
        overrides=OURS_OVERRIDES,
        pythonpath=REPO,
    )
    titan = Side(
        name="torchtitan",
        manager_module="torchtitan.config.manager",
        module="llama3",
        config="llama3_debugmodel",
        overrides=TITAN_OVERRIDES,
        pythonpath=TITAN_ENV,
    )
    return ours, titan


def _fallback_to_bench_recipe(side: Side, why: str) -> None:
    note = f"--module {side.module} --config {side.config} failed ({why}); using bench/_recipes"
    print(f"bench_cli: note: {note}", flush=True)
    side.notes.append(note)
    side.module, side.config = "bench._recipes", "debug_recipe"


# --------------------------------------------------------------------------- whole process


def whole_process_once(side: Side, workdir: str) -> dict:
    """Launch a fresh interpreter that parses once; seconds to the parsed config and to exit."""
    code = WHOLE_CHILD.format(
        manager=side.manager_module, argv=side.argv, check=side.check_code(), mark=MARK
    )
    with tempfile.TemporaryFile("w+") as err:
        start = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", code],
            cwd=workdir,
            env=side.env(),
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            check=False,
        )
        end = time.monotonic()
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(
                f"{side.name}: whole-process parse failed (exit {proc.returncode}):\n"
                f"{err.read()[-4000:]}"
            )
    stamps = [line.split(None, 1)[1] for line in proc.stdout.splitlines() if line.startswith(MARK)]
    if len(stamps) != 1:
        raise RuntimeError(
            f"{side.name}: child printed no timestamp; stdout was:\n{proc.stdout[-2000:]}"
        )
    return {"to_parsed_s": float(stamps[0]) - start, "to_exit_s": end - start}


def bench_whole_process(sides: tuple[Side, Side], runs: int, workdir: str) -> dict:
    samples = {side.name: [] for side in sides}
    for i in range(runs):
        order = sides if i % 2 == 0 else sides[::-1]
        for side in order:
            samples[side.name].append(whole_process_once(side, workdir))
    out = {}
    for side in sides:
        parsed = [s["to_parsed_s"] for s in samples[side.name]]
        exited = [s["to_exit_s"] for s in samples[side.name]]
        out[side.name] = {
            "median_to_parsed_s": statistics.median(parsed),
            "median_to_exit_s": statistics.median(exited),
            "to_parsed_s": parsed,
            "to_exit_s": exited,
        }
    return out


# --------------------------------------------------------------------------- warm in-process


class Worker:
    """A long-lived child that parses on request and answers with its per-parse times."""

    def __init__(self, side: Side, warmup: int, workdir: str) -> None:
        self.side = side
        # Lives as long as the worker; close() releases it.
        self.err = tempfile.TemporaryFile("w+")  # noqa: SIM115
        code = WARM_CHILD.format(
            manager=side.manager_module,
            argv=side.argv,
            warmup=max(1, warmup),
            check=side.check_code(),
            mark=MARK,
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=workdir,
            env=side.env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
            bufsize=1,
        )

    def _reply(self) -> str:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                self.err.seek(0)
                raise RuntimeError(
                    f"{self.side.name}: warm worker exited (code {self.proc.returncode}):\n"
                    f"{self.err.read()[-4000:]}"
                )
            if line.startswith(MARK):
                return line[len(MARK) :].strip()

    def wait_ready(self) -> None:
        if self._reply() != "ready":
            raise RuntimeError(f"{self.side.name}: warm worker did not report ready")

    def parse(self, n: int) -> list[float]:
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return json.loads(self._reply())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err.close()


def bench_warm(sides: tuple[Side, Side], iters: int, warmup: int, workdir: str) -> dict:
    workers = [Worker(side, warmup, workdir) for side in sides]
    try:
        for worker in workers:
            worker.wait_ready()
        times = {side.name: [] for side in sides}
        block = 0
        while any(len(t) < iters for t in times.values()):
            order = workers if block % 2 == 0 else workers[::-1]
            for worker in order:
                need = iters - len(times[worker.side.name])
                if need > 0:
                    times[worker.side.name] += worker.parse(min(WARM_BLOCK, need))
            block += 1
    finally:
        for worker in workers:
            worker.close()
    return {
        name: {
            "median_s": statistics.median(t),
            "min_s": min(t),
            "max_s": max(t),
            "iters": len(t),
            "warmup": warmup,
        }
        for name, t in times.items()
    }


# --------------------------------------------------------------------------- main


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:9.1f} ms"


def _versions() -> dict:
    versions = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    for dist in ("torch", "tyro"):
        try:
            versions[dist] = version(dist)
        except PackageNotFoundError:  # context only, never a reason to fail the bench
            versions[dist] = None
    return versions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per side (median)")
    parser.add_argument(
        "--warm-iters", type=int, default=50, help="timed in-process parses per side"
    )
    parser.add_argument(
        "--warmup", type=int, default=3, help="untimed in-process parses per side first"
    )
    parser.add_argument("--out", type=Path, help="JSON results path (default "
                        f"{DEFAULT_OUT.relative_to(REPO)}; none with --smoke)")
    parser.add_argument(
        "--setup", action="store_true", help="only build bench/.titan-env, then exit"
    )
    parser.add_argument("--force-setup", action="store_true", help="rebuild bench/.titan-env first")
    parser.add_argument(
        "--smoke", action="store_true",
        help="ours alone (torchtitan's environment is neither built nor used), one timed run of "
        "each figure: proves in a second or two that the bench runs; no file unless --out",
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warm_iters < 1 or args.warmup < 0:
        parser.error("--runs and --warm-iters must be >= 1, --warmup >= 0")
    if args.smoke:
        args.runs, args.warm_iters, args.warmup = 1, 1, 1

    if not args.smoke:  # a smoke run never installs anything (the environment is 1.3 GB)
        setup_titan_env(force=args.force_setup)
    if args.setup:
        print(f"bench_cli: {TITAN_ENV.relative_to(REPO)} is ready")
        return 0

    ours, titan = make_sides()
    sides = (ours,) if args.smoke else (ours, titan)
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as workdir:
        # Untimed first run per side: page cache, .pyc files, and a clear failure up front.
        try:
            whole_process_once(ours, workdir)
        except RuntimeError as exc:
            if ours.module == "bench._recipes":
                raise
            _fallback_to_bench_recipe(ours, str(exc).splitlines()[-1])
            whole_process_once(ours, workdir)
        if titan in sides:
            whole_process_once(titan, workdir)

        whole = bench_whole_process(sides, args.runs, workdir)
        warm = bench_warm(sides, args.warm_iters, args.warmup, workdir)

    a, b = ours.name, titan.name
    ratio = (lambda x, y: x / y) if titan in sides else (lambda x, y: None)
    theirs = (lambda table, key: table[b][key]) if titan in sides else (lambda table, key: None)
    whole_ratio = ratio(whole[a]["median_to_parsed_s"], theirs(whole, "median_to_parsed_s"))
    exit_ratio = ratio(whole[a]["median_to_exit_s"], theirs(whole, "median_to_exit_s"))
    warm_ratio = ratio(warm[a]["median_s"], theirs(warm, "median_s"))

    print(f"\nConfigManager.parse_args, registry recipe + 3 overrides ({os.cpu_count()} CPUs)")
    print(f"  ours:       {' '.join(ours.argv)}")
    print(f"  torchtitan: {' '.join(titan.argv) if titan in sides else '(not run: --smoke)'}")
    print(f"\n  {'':<40}{'ours':>12}{'torchtitan':>12}{'ratio':>8}  target")
    rows = (
        (
            f"whole process, to parsed (median of {args.runs})",
            whole[a]["median_to_parsed_s"],
            theirs(whole, "median_to_parsed_s"),
            whole_ratio,
            TARGET_WHOLE,
        ),
        (
            "whole process, to exit (median)",
            whole[a]["median_to_exit_s"],
            theirs(whole, "median_to_exit_s"),
            exit_ratio,
            None,
        ),
        (
            f"warm in-process (median of {args.warm_iters})",
            warm[a]["median_s"],
            theirs(warm, "median_s"),
            warm_ratio,
            TARGET_WARM,
        ),
    )
    for label, x, y, r, target in rows:
        if r is None:
            print(f"  {label:<40}{_ms(x)}{'-':>12}{'-':>8}")
            continue
        verdict = "" if target is None else f"<={target:g} {'met' if r <= target else 'MISSED'}"
        print(f"  {label:<40}{_ms(x)}{_ms(y)}{r:7.2f}x  {verdict}")

    def target(max_ratio: float, r: float | None) -> dict:
        return {"max_ratio": max_ratio, "met": None if r is None else r <= max_ratio}

    result = {
        "benchmark": "ConfigManager.parse_args, registry recipe + three overrides",
        "mode": "smoke" if args.smoke else "full",
        "machine": _versions(),
        "sides": {
            side.name: {"argv": side.argv, "manager": side.manager_module, "notes": side.notes}
            for side in sides
        },
        "titan_env": {"path": str(TITAN_ENV.relative_to(REPO)), "packages": list(TITAN_PACKAGES)},
        "whole_process": whole,
        "warm_in_process": warm,
        "ratios": {
            "whole_process_to_parsed": whole_ratio,
            "whole_process_to_exit": exit_ratio,
            "warm_in_process": warm_ratio,
        },
        "targets": {
            "whole_process_to_parsed": target(TARGET_WHOLE, whole_ratio),
            "warm_in_process": target(TARGET_WARM, warm_ratio),
        },
    }
    print("\n" + write_results(result_path(args.out, DEFAULT_OUT, args.smoke), result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
