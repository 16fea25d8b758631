"""From a training command line and the cluster's shape to a :class:`~.job.Job`.

:func:`plan_job` reads the command line as the training entry does (a recipe, or a legacy YAML,
which is first converted to a proven recipe by ``--from-yaml``'s converter: a requeued job must
run the configuration it started with, not a YAML edited since), fits its degrees to the nodes
(:mod:`.world`), preflights it at that world size, and writes down the job: the command each
node runs, its environment, where its checkpoints go, and the header that says all of it.
"""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hyper_parallel.launch.job import RESUME_FLAG, TORCHRUN_PORT, Job, environment
from hyper_parallel.launch.world import Cluster, degrees, describe, fit
from hyper_parallel.utils.errors import ConfigError

#: The file a job is written to when ``-o`` is not given, per scheduler.
EXTENSIONS = {"torchrun": "sh", "slurm": "sbatch", "kubernetes": "yaml"}


@dataclass
class Request:
    """The launch command's own options (``python -m hyper_parallel.launch --help``)."""

    scheduler: str
    gpus_per_node: int
    nodes: int | None = None
    name: str | None = None
    workdir: str | None = None
    preflight: bool = True
    gpu: str | None = None
    gpu_memory: float | None = None
    resume: bool = True
    max_restarts: int = 3
    stop_grace: int = 300
    rdzv_port: int | None = None
    omp_threads: int = 8
    env: list[str] = field(default_factory=list)
    setup: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    recipe_output: str | None = None
    force: bool = False
    command: str = ""
    """The command that writes the job, as typed (the last line of its header)."""


@dataclass
class Plan:
    job: Job
    config: Any
    """The run's ``HyperTrainer.Config`` (the converted recipe's for a YAML)."""
    origin: str
    report: Any = None
    """The preflight (None with ``--no-preflight``)."""
    recipe: tuple[Path, str] | None = None
    """A legacy YAML's recipe (its file and text), for :func:`write_recipe` once the job is
    to be written: nothing is written for a job that is refused."""


def job_name(text: str) -> str:
    """``text`` as a name every scheduler takes (a Kubernetes object name: lower-case letters,
    digits and ``-``, at most 63 characters, starting and ending alphanumeric)."""
    name = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:63].rstrip("-")
    return name or "hyper-parallel"


def _env_pairs(items: list[str]) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ConfigError(f"{item!r} is not KEY=VALUE", path="--env")
        pairs[key] = value
    return pairs


def _without(args: list[str], field_name: str) -> list[str]:
    """``args`` without the override of ``field_name`` (``--f=v`` or ``--f v``)."""
    flag, kept, skip = f"--{field_name}", [], False
    for index, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg.startswith(flag + "="):
            continue
        if arg == flag:
            skip = index + 1 < len(args)
            continue
        kept.append(arg)
    return kept


def _sets(args: list[str], field_name: str) -> bool:
    return any(a == f"--{field_name}" or a.startswith(f"--{field_name}=") for a in args)


def _legacy_recipe(argv: list[str], request: Request, workdir: Path
                   ) -> tuple[list[str], Any, str, tuple[Path, str]]:
    """A legacy command line (``old.yaml [--a.b=c ...]``) converted to a recipe module (proven
    by the converter); its training arguments, config, origin, and the file and text to write.
    A different file already in its place is refused here, before anything is written."""
    from hyper_parallel.codegen.migration import from_yaml

    yaml_path = Path(argv[0])
    output = Path(request.recipe_output).resolve() if request.recipe_output else None
    recipe, path = from_yaml.convert(yaml_path, output=output, base=workdir,
                                     overrides=tuple(argv[1:]))
    path = path if path.is_absolute() else workdir / path
    refuse_other(path, recipe.text, request.force, "recipe", "--recipe-output")
    shown = os.path.relpath(path, workdir)
    return (["--module", shown, "--config", recipe.name], recipe.target,
            f"YAML {argv[0]} as recipe {shown}:{recipe.name}", (path, recipe.text))


def refuse_other(path: Path, text: str, force: bool, what: str, option: str) -> None:
    """A ``ConfigError`` naming ``option`` when ``path`` holds another ``what`` than ``text``
    and ``force`` is not set (the same text again is no conflict). Checked before anything is
    written, so that a refused launch leaves nothing behind."""
    if path.is_file() and not force and path.read_text() != text:
        raise ConfigError(f"{path} exists and holds another {what}; pass --force to replace it, "
                          f"or {option} to choose another file", path=option)


def write_job(path: Path, text: str) -> None:
    """Write a job file atomically with the umask's mode, a script also executable."""
    from hyper_parallel.codegen.rendering.writing import atomic_write, current_umask

    atomic_write(path, text)
    if path.suffix in (".sh", ".sbatch"):
        os.chmod(path, 0o777 & ~current_umask())


def write_recipe(plan: Plan) -> str | None:
    """Write a legacy YAML's recipe (atomically, with the umask's mode); its path, or None for a
    recipe command line."""
    from hyper_parallel.codegen.rendering.writing import atomic_write

    if plan.recipe is None:
        return None
    path, text = plan.recipe
    atomic_write(path, text)
    return str(path)


def _recipe(argv: list[str]) -> tuple[list[str], Any, str]:
    from hyper_parallel.train import parse_run

    source = parse_run(argv)
    return list(argv), source.config, source.origin


def _translated(error: ConfigError, legacy: bool) -> ConfigError:
    if not legacy:
        return error
    from hyper_parallel.trainer.llm_trainer import legacy_config_error

    return legacy_config_error(error)


def _checkpoint_folder(config: Any, workdir: Path) -> str:
    from hyper_parallel.trainer.hyper_trainer import resolve_output_folder

    folder = resolve_output_folder(config.dump_folder, config.checkpoint.folder)
    return os.path.normpath(folder if os.path.isabs(folder) else workdir / folder)


def _kubernetes_outputs(args: list[str], config: Any, options: dict[str, str]
                        ) -> tuple[list[str], str]:
    """A pod's files vanish with it: the run's outputs go to the checkpoint volume. A relative
    ``dump_folder`` moves under its mount (``--dump_folder``); an absolute checkpoint folder
    must already be on it."""
    if not options.get("volume_claim"):
        raise ConfigError("a Kubernetes job's checkpoints must outlive its pods to resume: give "
                          "the PersistentVolumeClaim to keep them on", path="--volume-claim")
    if not options.get("image"):
        raise ConfigError("a Kubernetes job runs in a container: give the image that holds "
                          "hyper_parallel, the recipe and the data", path="--image")
    from hyper_parallel.trainer.hyper_trainer import resolve_output_folder

    mount = options["volume_mount"]
    if not os.path.isabs(mount):
        raise ConfigError(f"{mount!r} is not a path in the container; give an absolute one "
                          "(/checkpoints)", path="--volume-mount")
    if os.path.isabs(config.dump_folder):
        dump = config.dump_folder
    else:
        dump = os.path.normpath(os.path.join(mount, config.dump_folder))
        args = _without(args, "dump_folder") + [f"--dump_folder={dump}"]
    folder = resolve_output_folder(dump, config.checkpoint.folder)
    if os.path.commonpath([folder, mount]) != mount:
        raise ConfigError(f"{folder} is not on the checkpoint volume mounted at {mount}: a "
                          "restarted pod would not find its checkpoints; make the folder "
                          f"relative, or mount the volume above it (--volume-mount)",
                          path="checkpoint.folder")
    return args, folder


def _preflight(config: Any, cluster: Cluster, request: Request) -> Any:
    from hyper_parallel.preflight.check import choose_gpu, preflight_config

    gpu = choose_gpu(request.gpu, request.gpu_memory)
    return preflight_config(config, gpu, world=cluster.world)


def plan_job(argv: list[str], request: Request, report: Any = None) -> Plan:
    """The job that runs the training command line ``argv`` as ``request`` asks (see the module
    docstring). Bad input is a ``ConfigError`` in the command line's own names. ``report``: a
    preflight already made at the job's world size (a fleet's), used instead of running one."""
    from hyper_parallel.config.manager import extract_module_and_config, is_recipe_command_line
    from hyper_parallel.runtime.checkpoint.resume import RESUME_RULE

    if not argv:
        raise ConfigError("nothing to launch: give --module M --config C [overrides], or a "
                          "legacy YAML [overrides]", path="command line")
    workdir = Path(request.workdir or os.getcwd()).resolve()
    legacy = not is_recipe_command_line(argv)
    recipe = None
    if legacy:
        args, config, origin, recipe = _legacy_recipe(argv, request, workdir)
        name_hint = args[3]
    else:
        args, config, origin = _recipe(argv)
        name_hint = extract_module_and_config(argv)[1]
    try:
        cluster, resolved_shard = fit(config.parallelism, request.nodes, request.gpus_per_node)
    except ConfigError as exc:
        raise _translated(exc, legacy) from None
    if request.resume and not _sets(args, "checkpoint.resume_latest"):
        args.append(RESUME_FLAG)
    options = dict(request.options)
    if request.scheduler == "kubernetes":
        try:
            args, folder = _kubernetes_outputs(args, config, options)
        except ConfigError as exc:
            raise _translated(exc, legacy) from None
    else:
        folder = _checkpoint_folder(config, workdir)
    if request.scheduler == "torchrun" and cluster.nodes > 1 and not options.get("rdzv_host"):
        raise ConfigError(f"{cluster.nodes} nodes meet at a rendezvous on one of them: give its "
                          "address (the same on every node)", path="--rdzv-host")
    if report is None and request.preflight:
        try:
            report = _preflight(config, cluster, request)
        except ConfigError as exc:
            raise _translated(exc, legacy) from None

    layout = describe(degrees(config.parallelism))
    if resolved_shard is not None:
        layout += f" (parallelism.data_parallel_shard_degree -1 = {resolved_shard})"
    header = [
        f"hyper_parallel job {job_name(request.name or name_hint)}: {origin}",
        f"{cluster.nodes} node(s) x {cluster.gpus_per_node} GPU(s) = {cluster.world} rank(s): "
        f"{layout}",
        ("preflight: not run" if report is None else
         _verdict(report)),
        (f"resume: {RESUME_RULE}" if _resumes(args) else
         "resume: off (checkpoint.resume_latest is false): a restart starts from load_path "
         "or from scratch"),
        f"checkpoints: {folder}",
    ]
    # Comment lines of a readable width; the command stays one line, to be copied.
    header = [part for line in header
              for part in textwrap.wrap(line, 96, subsequent_indent="  ",
                                        break_long_words=False, break_on_hyphens=False)]
    # One comment line whatever the command holds (a line break would end the comment).
    header.append("written by: " + re.sub(r"[\x00-\x1f\x7f]",
                                           lambda m: repr(m.group())[1:-1], request.command))
    if request.scheduler == "slurm" and options.get("cpus_per_gpu") is None:
        # A rank's cores: its intra-op threads and its loader's worker processes.
        options["cpus_per_gpu"] = request.omp_threads + _loader_workers(config)
    env = environment(request.omp_threads, folder)
    env.update(_env_pairs(request.env))
    job = Job(
        name=job_name(request.name or name_hint),
        scheduler=request.scheduler,
        cluster=cluster,
        train_args=tuple(args),
        workdir=str(workdir),
        checkpoint_folder=folder,
        env=env,
        max_restarts=request.max_restarts,
        stop_grace=request.stop_grace,
        rdzv_port=(TORCHRUN_PORT if request.rdzv_port is None and request.scheduler == "torchrun"
                   else request.rdzv_port),
        setup=tuple(request.setup),
        header=tuple(header),
        options=options,
    )
    return Plan(job, config, origin, report, recipe)


def _loader_workers(config: Any) -> int:
    """The data loader's worker processes of each rank (``dataloader.num_workers``)."""
    return int(getattr(getattr(config, "dataloader", None), "num_workers", 0) or 0)


def _verdict(report: Any) -> str:
    from hyper_parallel.preflight.report import verdict_line

    return verdict_line(report)


def _resumes(args: list[str]) -> bool:
    """Whether the command line ends up with ``resume_latest`` on (its last setting wins)."""
    value = None
    for index, arg in enumerate(args):
        if arg.startswith("--checkpoint.resume_latest="):
            value = arg.split("=", 1)[1]
        elif arg == "--checkpoint.resume_latest" and index + 1 < len(args):
            value = args[index + 1]
    return value is not None and value.lower() in ("true", "1", "yes")


def render(job: Job) -> str:
    """The job's file for its scheduler."""
    from hyper_parallel.launch import kubernetes, shell

    if job.scheduler == "slurm":
        return shell.slurm_script(job)
    if job.scheduler == "kubernetes":
        return kubernetes.manifest_text(job)
    return shell.torchrun_script(job)


def submit_command(job: Job, path: str) -> list[str]:
    """What submits the written job: ``sbatch``, ``kubectl apply -f``, or ``bash`` (here)."""
    if job.scheduler == "slurm":
        return ["sbatch", path]
    if job.scheduler == "kubernetes":
        return ["kubectl", "apply", "-f", path]
    return ["bash", path]


__all__ = ["EXTENSIONS", "Plan", "Request", "job_name", "plan_job", "refuse_other", "render",
           "submit_command", "write_job", "write_recipe"]
