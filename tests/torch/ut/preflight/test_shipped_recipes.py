"""Every recipe the project ships passes preflight on the GPUs its docstring names, at the world
its launch needs, and a docstring that states a preflight figure states the one preflight gives.

Both registries, ``recipes/`` and the example YAMLs; the GPU is the one the docstring names
(``H100 80GB``), else the default (the CPU recipes: they must still build at their world size).
The world is the product of the degrees, or, for a degree of -1, the ``--nproc_per_node`` of the
docstring's launch line or the GPU count it names (``on 8 H100 80GB``). One preflight per distinct simulation (``recipes/`` and the YAMLs they
were converted from are the same runs), all of them side by side
(:func:`hyper_parallel.preflight.many.preflight_many`), once for the module.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from hyper_parallel.preflight.gpus import DEFAULT_GPU, GIB, GPUS
from hyper_parallel.preflight.report import peak_role

REPO = Path(__file__).resolve().parents[4]
REGISTRIES = ("hyper_parallel.models.qwen3_5_v2.config_registry",
              "hyper_parallel.models.qwen3_5_moe.config_registry")
#: How a docstring names a GPU -> preflight's name for it.
GPU_NAMES = {"H100 80GB": "h100-80gb", "H100 96GB": "h100-96gb", "H200": "h200",
             "B200": "b200", "A100 80GB": "a100-80gb"}
#: ``Preflight ...: 50.8 GiB a rank`` (the registries' docstrings).
STATED = re.compile(r"Preflight[^:]*:\s+([\d.]+)\s+GiB\s+a\s+rank")


def _shipped() -> dict[str, tuple[object, str]]:
    """name -> (the config it builds, its docstring or the YAML's text)."""
    import sys

    from hyper_parallel.train import parse_run

    found = {}
    for module_name in REGISTRIES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            fn = getattr(module, name)
            found[name] = (fn(), fn.__doc__ or "")
    sys.path.insert(0, str(REPO))
    try:
        for path in sorted((REPO / "recipes").glob("*.py")):
            module = importlib.import_module(f"recipes.{path.stem}")
            for name in module.__all__:
                fn = getattr(module, name)
                found[f"recipes/{name}"] = (fn(), module.__doc__ or "")
    finally:
        sys.path.remove(str(REPO))
    for path in sorted((REPO / "examples" / "yaml").glob("*.yaml")):
        found[f"examples/{path.name}"] = (parse_run([str(path)]).config, path.read_text())
    return found


def _gpu(doc: str) -> str:
    named = {GPU_NAMES[k] for k in GPU_NAMES if k in doc}
    assert len(named) <= 1, f"the docstring names several GPUs: {named}"
    return named.pop() if named else DEFAULT_GPU


def _world(config, doc: str) -> int | None:
    if config.parallelism.data_parallel_shard_degree != -1:
        return None
    launch = (re.search(r"--nproc_per_node[= ](\d+)", doc)
              or re.search(r"on (\d+) (?:" + "|".join(GPU_NAMES) + ")", doc))
    assert launch, "a degree of -1, and the docstring names no world (a launch line, 'on 8 H100')"
    return int(launch.group(1))


def _preflights() -> dict[str, tuple[object, str, str]]:
    """name -> (its preflight, its GPU's name, its docstring), every recipe at once."""
    from hyper_parallel.preflight.many import preflight_many

    shipped = _shipped()
    by_gpu: dict[str, list[str]] = {}
    for name, (_, doc) in shipped.items():
        by_gpu.setdefault(_gpu(doc), []).append(name)
    out = {}
    for gpu, names in by_gpu.items():
        results = preflight_many([shipped[n][0] for n in names], GPUS[gpu],
                                 worlds=[_world(*shipped[n]) for n in names], suggest=False)
        out.update({n: (r, gpu, shipped[n][1]) for n, r in zip(names, results)})
    return out


@pytest.mark.slow
def test_every_shipped_recipe_fits_the_gpu_it_names_and_states_its_figure():
    """One test (the preflights are minutes of CPU: two tests on two xdist workers would each
    make them): every recipe fits; every registry recipe laid out for GPUs states its figure,
    and it is preflight's."""
    preflights = _preflights()
    assert len(preflights) >= 20, sorted(preflights)
    failures = []
    for name, (report, gpu, _) in sorted(preflights.items()):
        if isinstance(report, Exception):
            failures.append(f"{name}: {report}")
        elif not report.fits:
            role = peak_role(report)
            failures.append(f"{name} on {gpu}: {report.problems or role.verdict} "
                            f"({role.total_bytes / GIB:.1f} GiB)" if role else name)
    assert not failures, "\n".join(failures)
    assert {gpu for _, gpu, _ in preflights.values()} >= {"h100-80gb"}

    stated = {name: float(m.group(1)) for name, (_, _, doc) in preflights.items()
              if (m := STATED.search(doc))}
    for_gpus = {name for name, (_, _, doc) in preflights.items()
                if "/" not in name and any(gpu in doc for gpu in GPU_NAMES)}
    assert for_gpus and set(stated) >= for_gpus, sorted(for_gpus - set(stated))
    wrong = {name: (figure, round(peak_role(preflights[name][0]).total_bytes / GIB, 1))
             for name, figure in stated.items()
             if abs(peak_role(preflights[name][0]).total_bytes / GIB - figure) > 0.05}
    assert not wrong, f"docstring figure, preflight's: {wrong}"
