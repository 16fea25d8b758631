"""A command line preflighted: parsed as the training entry parses it, judged, explained."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hyper_parallel.preflight.gpus import DEFAULT_GPU, GPUS, Gpu, gpu_of_size
from hyper_parallel.preflight.report import to_json, to_text
from hyper_parallel.preflight.run import DEFAULT_IMBALANCE, Preflight, preflight, world_size_of
from hyper_parallel.preflight.suggest import suggest as suggestions_for
from hyper_parallel.utils.errors import ConfigError
from hyper_parallel.utils.suggest import did_you_mean


@dataclass
class Result:
    report: Preflight
    text: str
    json: dict[str, Any]
    exit_code: int


def choose_gpu(name: str | None = None, memory_gib: float | None = None) -> Gpu:
    """``--gpu NAME`` or ``--gpu-memory GiB`` (default :data:`DEFAULT_GPU`)."""
    if memory_gib is not None:
        if memory_gib <= 0:
            raise ConfigError(f"{memory_gib:g} is not a memory size; give the GPU's GiB",
                              path="--gpu-memory")
        return gpu_of_size(memory_gib)
    name = name or DEFAULT_GPU
    if name not in GPUS:
        raise ConfigError(f"{name!r} is not a GPU preflight knows{did_you_mean(name, GPUS)}; "
                          f"choose one of {', '.join(GPUS)}, or give --gpu-memory GiB",
                          path="--gpu")
    return GPUS[name]


def preflight_config(config: Any, gpu: Gpu, *, world: int | None = None,
                     imbalance: float | None = None, suggest: bool = True,
                     work: bool = False) -> Preflight:
    """Preflight a ``HyperTrainer.Config``; a role that fails to build at this size (not a
    configuration error: a fault the cluster would meet) becomes a problem of the report.
    ``work``: each role also records its step's work (``Role.work``, for the planner)."""
    imbalance = DEFAULT_IMBALANCE if imbalance is None else imbalance
    if imbalance < 1:
        raise ConfigError(f"{imbalance:g}: the busiest rank gets at least its balanced share; "
                          "give a factor >= 1", path="--imbalance")
    try:
        report = preflight(config, gpu, world=world, imbalance=imbalance, work=work)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - what the cluster would hit, reported
        report = Preflight(world_size=world_size_of(config, world), gpu=gpu,
                           imbalance=imbalance)
        report.problems.append(f"{type(exc).__name__}: {exc}")
        return report
    if suggest and not report.fits:
        report.suggestions_tried = True
        report.suggestions = suggestions_for(
            config, lambda changed: preflight(changed, gpu, world=world, imbalance=imbalance))
    return report


def run_preflight(argv: Sequence[str], *, gpu: str | None = None,
                  gpu_memory: float | None = None, world: int | None = None,
                  imbalance: float | None = None, suggest: bool = True) -> Result:
    """Preflight the run a training command line (recipe or legacy YAML) describes."""
    from hyper_parallel.train import parse_run

    chosen = choose_gpu(gpu, gpu_memory)
    source = parse_run(argv)
    try:
        report = preflight_config(source.config, chosen, world=world, imbalance=imbalance,
                                  suggest=suggest)
    except ConfigError as exc:
        from hyper_parallel.train import in_entry_terms

        # As --from-yaml --preflight reports it: the YAML's keys, each at its file:line.
        located = in_entry_terms(exc, argv)
        if located is exc:
            raise
        raise located from None
    code = 0 if report.fits else 1
    return Result(report, to_text(report, source.origin), to_json(report, source.origin), code)


__all__ = ["Result", "choose_gpu", "preflight_config", "run_preflight"]
