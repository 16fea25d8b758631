"""The layout harness: train one configuration on several parallel layouts and compare each
with the single-rank run.

    runs = layouts.run(["examples/yaml/train_qwen3_5_debug.yaml"],
                       [ONE_RANK, Layout(dp_shard=2), Layout(tp=2)])
    assert_same_run(runs[Layout(dp_shard=2)], runs[ONE_RANK], rtol=1e-6)

* A :class:`Layout` is a set of parallel degrees (``dp_shard``, ``dp_replicate``, ``ep``,
  ``cp``, ``tp``, ``pp``; a new axis is one entry of :data:`DEGREES`). Its world size is their product; it is applied to the
  command line as overrides in that command line's own names (``--train.accelerator.tp=2`` for a
  legacy YAML, ``--parallelism.tensor_parallel_degree=2`` for a recipe), every degree written
  out, so a YAML's own layout never leaks into another.
* The command line is either world's (a YAML and its overrides, or ``--module M --config F
  ...``); the harness adds only the output folder.
* :meth:`LayoutHarness.run` returns a :class:`LayoutRun` per layout: the loss and gradient norm
  of every step, the final parameters gathered to full tensors, the checkpoint folder.
* Cases of one world size run in one job (:mod:`tests.helpers.case_worker`; its ranks are
  started as torchrun would start them, without the launcher process; :attr:`Case.job` splits
  a long plan into jobs two xdist workers make side by side), and every
  case is made once per test session and shared by its xdist workers (keyed by command line and
  layout): a test that asks for a run another test made reads it. :meth:`LayoutHarness.run_cases`
  takes the cases of several configurations at once, so a module's whole plan costs one job per
  world size.
* :func:`assert_same_run` is the comparison: bit-identical (``rtol=0``) where the math is the
  same, else within a stated relative bound, on losses, gradient norms and (``params_rtol``)
  every final parameter.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.session_cache import SessionCache, session_cache
from tests.helpers.torchrun import run_python, spawn_ranks

WORKER = Path(__file__).with_name("case_worker.py")
#: A layout's degrees, in the order of the mesh (``ParallelDims``' names).
DEGREES = ("dp_replicate", "dp_shard", "ep", "cp", "tp", "pp")


@dataclass(frozen=True)
class Layout:
    """Parallel degrees of a run (1: the axis is absent)."""

    dp_replicate: int = 1
    dp_shard: int = 1
    ep: int = 1
    cp: int = 1
    tp: int = 1
    pp: int = 1

    @property
    def world_size(self) -> int:
        return math.prod(getattr(self, name) for name in DEGREES)

    def overrides(self, argv: Sequence[str]) -> list[str]:
        """Every degree as an override of ``argv``'s own command line."""
        from hyper_parallel.config.manager import is_recipe_command_line
        from hyper_parallel.runtime.parallel_dims import PARALLELISM_FIELDS
        from hyper_parallel.trainer.llm_trainer import legacy_path

        recipe = is_recipe_command_line(list(argv))
        out = []
        for name in DEGREES:
            field = PARALLELISM_FIELDS[name]
            out.append(f"--{field if recipe else legacy_path(field)}={getattr(self, name)}")
        return out

    def __str__(self) -> str:
        parts = [f"{name}={getattr(self, name)}" for name in DEGREES if getattr(self, name) > 1]
        return " x ".join(parts) or "1 rank"


ONE_RANK = Layout()


@dataclass
class LayoutRun:
    """One training run of the harness."""

    layout: Layout
    steps: list[int]
    losses: list[float]
    grad_norms: list[float | None]
    checkpoint_folder: Path | None
    """The run's output folder: its ``metrics.jsonl`` and ``step_N/`` checkpoints."""
    params_file: Path | None
    error: str | None
    """The refusal (``ConfigError`` / ``RecipeError``) of a case that did not build; None."""

    def params(self) -> dict[str, Any]:
        """The final parameters (and buffers), full tensors by checkpoint name."""
        from safetensors.torch import load_file

        assert self.params_file is not None, f"{self.layout}: no parameters were gathered"
        return load_file(str(self.params_file))


@dataclass(frozen=True)
class Case:
    """One run: a command line of either world on a layout.

    ``argv_sets_layout``: the command line states its own degrees (an example YAML as it is
    shipped, say ``dp_shard: -1``), and the layout only says how many ranks it takes; the
    harness writes no degree, and checks that the run ran on ``layout``. ``pythonpath``: folders
    the case's recipe module is imported from. ``env``: environment variables of the case's job
    (cases with other variables run in a job of their own), as ``(name, value)`` pairs.
    ``job``: a label; cases with another label run in another job, which another xdist worker
    can make at the same time (a plan's long cases split in two shortens the suite's wall
    time, not its CPU time)."""

    argv: tuple[str, ...]
    layout: Layout = ONE_RANK
    argv_sets_layout: bool = False
    pythonpath: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    job: str = ""

    def command_line(self, output_folder: Path) -> list[str]:
        from hyper_parallel.config.manager import is_recipe_command_line

        argv = list(self.argv)
        recipe = is_recipe_command_line(argv)
        output = "checkpoint.folder" if recipe else "train.checkpoint.output_dir"
        degrees = [] if self.argv_sets_layout else self.layout.overrides(argv)
        return [*argv, *degrees, f"--{output}={output_folder}"]


def _case(value: Case | tuple) -> Case:
    if isinstance(value, Case):
        return value
    argv, layout = value
    return Case(tuple(map(str, argv)), layout)


class LayoutHarness:
    """``run(argv, layouts)`` / ``run_cases({name: Case | (argv, layout)})``; see the module
    doc."""

    def __init__(self, cache: SessionCache) -> None:
        self.cache = cache

    def run(self, argv: Sequence[str], layouts: Sequence[Layout], *,
            params: bool = True) -> dict[Layout, LayoutRun]:
        return self.run_cases({layout: (argv, layout) for layout in layouts}, params=params)

    def run_cases(self, cases: Mapping[Any, Case | tuple], *,
                  params: bool | Collection = True) -> dict[Any, LayoutRun]:
        """Every case ``name -> Case`` (or ``(argv, layout)``): one job per world size (and
        environment and :attr:`Case.job`) for the cases this session has not made yet.
        ``params``: whether the cases gather their final parameters (:meth:`LayoutRun.params`),
        or the names of the cases that do (the gathering costs every rank of the job)."""
        resolved = {name: _case(value) for name, value in cases.items()}
        gather = {name: params if isinstance(params, bool) else name in params
                  for name in resolved}
        by_job: dict[tuple[int, tuple, str], list[Any]] = {}
        for name, case in resolved.items():
            by_job.setdefault((case.layout.world_size, case.env, case.job), []).append(name)
        out: dict[Any, LayoutRun] = {}
        records: dict[tuple[int, tuple, str], list[dict]] = {}
        # First every job no other worker is making, then wait for the rest: two workers that
        # ask for the same plan make its jobs side by side, not one after the other.
        for wait in (False, True):
            for job, group in sorted(by_job.items()):
                if job in records:
                    continue
                keys = [("layout case", resolved[name], gather[name]) for name in group]

                def make(indices: list[int], folders: list[Path], group=group, job=job):
                    names = [group[i] for i in indices]
                    return self._launch([resolved[name] for name in names], folders, *job[:2],
                                        [gather[name] for name in names])

                found = self.cache.get_many(keys, make, wait=wait)
                if found is not None:
                    records[job] = found
        for job, group in sorted(by_job.items()):
            for name, record in zip(group, records[job]):
                case = resolved[name]
                if record["error"] is None:
                    expected = {d: getattr(case.layout, d) for d in DEGREES}
                    assert record["degrees"] == expected, (
                        f"{name}: ran on {record['degrees']}, not on {case.layout}")
                out[name] = LayoutRun(
                    layout=case.layout, steps=record["steps"], losses=record["losses"],
                    grad_norms=record["grad_norms"],
                    checkpoint_folder=(Path(record["checkpoint_folder"])
                                       if record["checkpoint_folder"] else None),
                    params_file=Path(record["params_file"]) if record["params_file"] else None,
                    error=record["error"])
        return out

    @staticmethod
    def _launch(cases: list[Case], folders: list[Path], world: int,
                env: tuple[tuple[str, str], ...], params: list[bool]) -> list[dict]:
        plan = [{"argv": case.command_line(folder / "run"), "out": str(folder),
                 "params": gather, "degrees": list(DEGREES),
                 "pythonpath": list(case.pythonpath)}
                for case, folder, gather in zip(cases, folders, params)]
        plan_file = folders[0].with_suffix(".plan.json")
        plan_file.write_text(json.dumps({"cases": plan}, indent=1))
        timeout = 120 + 90 * len(cases)
        if world == 1:
            # One rank needs no rendezvous (the engine forms a private 1-rank group), and no
            # job here needs torchrun's launcher: the ranks start seconds sooner without it.
            run_python(WORKER, [str(plan_file)], timeout=timeout, env=dict(env))
        else:
            spawn_ranks(WORKER, [str(plan_file)], nproc=world, timeout=timeout, env=dict(env))
        results = []
        for folder in folders:
            record = json.loads((folder / "case.json").read_text())
            params_file = folder / "params.safetensors"
            record["params_file"] = str(params_file) if params_file.is_file() else None
            results.append(record)
        return results


@pytest.fixture(scope="session")
def layouts(request, tmp_path_factory) -> LayoutHarness:
    """The session's :class:`LayoutHarness` (its runs shared by the xdist workers)."""
    return LayoutHarness(session_cache(request.config, tmp_path_factory, "layouts"))


def _relative(a: float, b: float) -> float:
    return 0.0 if a == b else abs(a - b) / max(abs(b), 1e-30)


def assert_same_run(run: LayoutRun, reference: LayoutRun, *, rtol: float = 0.0,
                    grad_norm_rtol: float | None = None,
                    params_rtol: float | None = None) -> dict[str, float]:
    """``run`` is ``reference`` on another layout: the same steps, each step's loss equal
    (``rtol=0``: bit for bit) or within ``rtol`` relative, each gradient norm within
    ``grad_norm_rtol`` (default ``rtol``; a sharded norm sums its squares in another order), and
    with ``params_rtol`` every final parameter within that relative L2 distance (0: bit for
    bit). Returns the worst relative differences, for a test to print."""
    grad_norm_rtol = rtol if grad_norm_rtol is None else grad_norm_rtol
    label = f"{run.layout} vs {reference.layout}"
    for r in (run, reference):
        assert r.error is None, f"{r.layout}: {r.error}"
    assert run.steps == reference.steps and run.steps, (label, run.steps, reference.steps)
    worst = {"loss": max(map(_relative, run.losses, reference.losses)),
             "grad_norm": max((_relative(a, b) for a, b in zip(run.grad_norms,
                                                               reference.grad_norms)
                               if a is not None and b is not None), default=0.0)}
    assert (run.grad_norms.count(None), len(run.grad_norms)) == (
        reference.grad_norms.count(None), len(reference.grad_norms)), label
    if rtol == 0:
        assert run.losses == reference.losses, (label, run.losses, reference.losses)
    assert worst["loss"] <= rtol, (label, worst, run.losses, reference.losses)
    if grad_norm_rtol == 0:
        assert run.grad_norms == reference.grad_norms, (label, run.grad_norms,
                                                        reference.grad_norms)
    assert worst["grad_norm"] <= grad_norm_rtol, (label, worst, run.grad_norms,
                                                  reference.grad_norms)
    if params_rtol is not None:
        import torch

        mine, theirs = run.params(), reference.params()
        assert sorted(mine) == sorted(theirs), (label, sorted(set(mine) ^ set(theirs)))
        worst["params"] = 0.0
        for name, ref in theirs.items():
            got = mine[name]
            assert got.shape == ref.shape and got.dtype == ref.dtype, (label, name)
            if params_rtol == 0:
                assert torch.equal(got, ref), (label, name)
                continue
            diff = ((got.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30))
            worst["params"] = max(worst["params"], diff.item())
            assert diff.item() <= params_rtol, (label, name, diff.item())
    return worst


__all__ = [
    "DEGREES",
    "ONE_RANK",
    "Case",
    "Layout",
    "LayoutHarness",
    "LayoutRun",
    "assert_same_run",
    "layouts",
]
