"""The launch's own command-line options, and the request they make.

Everything else on a launch command line is the training command line, read as
``python -m hyper_parallel.train`` reads it. Shared by ``python -m hyper_parallel.launch`` and
``python -m hyper_parallel.codegen --from-yaml ... --jobs "LAUNCH OPTIONS"``.
"""

from __future__ import annotations

import argparse
import re

from hyper_parallel.launch.job import SCHEDULERS
from hyper_parallel.launch.kubernetes import DEFAULT_RUNTIME
from hyper_parallel.launch.plan import Request
from hyper_parallel.utils.errors import ConfigError


def options() -> argparse.ArgumentParser:
    """The launch's own options; everything else is the training command line."""
    parser = argparse.ArgumentParser(prog="python -m hyper_parallel.launch", add_help=False,
                                     allow_abbrev=False)
    job = parser.add_argument_group("the job")
    job.add_argument("--scheduler", choices=SCHEDULERS, required=True)
    job.add_argument("--gpus-per-node", type=int, required=True, metavar="G",
                     help="ranks started on each node (its GPUs)")
    job.add_argument("--nodes", type=int, default=None, metavar="N",
                     help="default: the recipe's world size over --gpus-per-node")
    job.add_argument("-o", "--output", default=None, metavar="FILE", help="the job file")
    job.add_argument("--dry-run", action="store_true", help="write or print; do not submit")
    job.add_argument("--force", action="store_true", help="replace an existing, different file")
    job.add_argument("--name", default=None, help="job name (default: the recipe's)")
    job.add_argument("--workdir", default=None,
                     help="where the job runs, on a file system every node shares (default: here)")
    job.add_argument("--recipe-output", default=None,
                     help="a legacy YAML's recipe file (default: recipes/<name>.py)")
    checks = parser.add_argument_group("preflight and resume")
    checks.add_argument("--no-preflight", action="store_true")
    checks.add_argument("--gpu", default=None, metavar="NAME",
                        help="the GPU preflight judges against (default h100-80gb)")
    checks.add_argument("--gpu-memory", type=float, default=None, metavar="GIB",
                        help="or its memory in GiB")
    checks.add_argument("--no-resume", action="store_true",
                        help="do not add --checkpoint.resume_latest=true")
    run = parser.add_argument_group("the run on each node")
    run.add_argument("--max-restarts", type=int, default=3, metavar="N",
                     help="torchrun restarts the workers after a failure (default 3)")
    run.add_argument("--stop-grace", type=int, default=300, metavar="SECONDS",
                     help="a stopped job's time for its step and checkpoint (default 300)")
    run.add_argument("--rdzv-host", default=None, metavar="HOST",
                     help="torchrun on several nodes: the first node's address")
    run.add_argument("--rdzv-port", type=int, default=None, metavar="PORT",
                     help="the rendezvous port (default: 29500 for torchrun; a Slurm job takes "
                          "one from its job id, so that jobs sharing a first node do not collide)")
    run.add_argument("--omp-threads", type=int, default=8, metavar="N",
                     help="OMP_NUM_THREADS of every rank (default 8)")
    run.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                     help="another variable of the job (NCCL_SOCKET_IFNAME=ib0)")
    run.add_argument("--setup", action="append", default=[], metavar="LINE",
                     help="shell line run before torchrun (module load, source a venv)")
    slurm = parser.add_argument_group("slurm")
    slurm.add_argument("--time", default=None, help="the time limit (#SBATCH --time)")
    slurm.add_argument("--partition", default=None)
    slurm.add_argument("--account", default=None)
    slurm.add_argument("--cpus-per-gpu", type=int, default=None, metavar="N",
                       help="cores each rank is given (#SBATCH --cpus-per-task is this times "
                            "--gpus-per-node; default: --omp-threads plus the recipe's "
                            "dataloader.num_workers)")
    slurm.add_argument("--mem-per-gpu", default=None, metavar="SIZE",
                       help="host memory each rank is given, in Slurm's units (64G); default: "
                            "all of each node's (#SBATCH --mem=0), for jobs on whole nodes")
    slurm.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                       help="another #SBATCH line, e.g. --sbatch=--exclusive")
    k8s = parser.add_argument_group("kubernetes")
    k8s.add_argument("--image", default=None,
                     help="the container image holding the project at its working directory")
    k8s.add_argument("--namespace", default=None)
    k8s.add_argument("--volume-claim", default=None, help="the checkpoints' PersistentVolumeClaim")
    k8s.add_argument("--volume-mount", default="/checkpoints", metavar="PATH",
                     help="where the volume is mounted; the run's outputs go under it")
    k8s.add_argument("--runtime", default=DEFAULT_RUNTIME,
                     help="the Kubeflow Trainer training runtime")
    return parser


#: Options that only one kind of job reads -> the schedulers that read them (an option the
#: chosen scheduler would ignore is refused, not dropped).
SCHEDULER_OPTIONS = {
    "time": ("slurm",), "partition": ("slurm",), "account": ("slurm",), "sbatch": ("slurm",),
    "cpus_per_gpu": ("slurm",), "mem_per_gpu": ("slurm",),
    "rdzv_host": ("torchrun",), "rdzv_port": ("torchrun", "slurm"),
    "setup": ("torchrun", "slurm"),
    "image": ("kubernetes",), "namespace": ("kubernetes",), "volume_claim": ("kubernetes",),
    "volume_mount": ("kubernetes",), "runtime": ("kubernetes",),
}


def _unread_options(args: argparse.Namespace) -> list[str]:
    """The scheduler-specific options given that ``args.scheduler`` does not read."""
    parser = options()
    return [f"--{name.replace('_', '-')}" for name, readers in SCHEDULER_OPTIONS.items()
            if args.scheduler not in readers and getattr(args, name) != parser.get_default(name)]


#: Slurm's time limit formats (sbatch --time): minutes, minutes:seconds, hours:minutes:seconds,
#: days-hours, days-hours:minutes, days-hours:minutes:seconds.
_TIME = re.compile(r"(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
                   r"|(?P<a>\d+)(?::(?P<b>\d+)(?::(?P<c>\d+))?)?)")

#: Slurm may send a --signal up to this many seconds before the time it was asked for (its
#: event loop's resolution, sbatch(1)).
SIGNAL_RESOLUTION_SECONDS = 60


def slurm_time_seconds(text: str) -> int | None:
    """Seconds of a Slurm time limit (``--time``), None for ``UNLIMITED`` / ``INFINITE``;
    a ``ConfigError`` for anything sbatch would refuse."""
    if text.strip().lower() in ("unlimited", "infinite", "-1"):
        return None
    match = _TIME.fullmatch(text.strip())
    if not match:
        raise ConfigError(f"{text!r} is not a Slurm time limit; write minutes, HH:MM:SS or "
                          "D-HH:MM:SS (04:00:00, 2-00:00:00)", path="--time")
    g = {k: int(v) for k, v in match.groupdict().items() if v is not None}
    if "days" in g:
        return ((g["days"] * 24 + g["dh"]) * 60 + g.get("dm", 0)) * 60 + g.get("ds", 0)
    if "c" in g:
        return (g["a"] * 60 + g["b"]) * 60 + g["c"]
    return g["a"] * 60 + g.get("b", 0)


def _check_values(args: argparse.Namespace) -> None:
    """The values sbatch and torchrun would refuse, or that would make a job that never
    trains, refused here with the option's name and the fix."""
    if args.stop_grace < 1:
        raise ConfigError(f"{args.stop_grace} s leaves a stopped job no time to write its "
                          "checkpoint; give the seconds its step and checkpoint take",
                          path="--stop-grace")
    if args.rdzv_port is not None and not 1 <= args.rdzv_port <= 65535:
        raise ConfigError(f"{args.rdzv_port} is not a TCP port (1-65535)", path="--rdzv-port")
    if args.cpus_per_gpu is not None and args.cpus_per_gpu < 1:
        raise ConfigError(f"{args.cpus_per_gpu} is not a core count; give at least 1",
                          path="--cpus-per-gpu")
    if args.mem_per_gpu is not None and not re.fullmatch(r"[1-9]\d*[KMGT]?", args.mem_per_gpu):
        raise ConfigError(f"{args.mem_per_gpu!r} is not a Slurm memory size; write a number "
                          "with K, M, G or T (64G)", path="--mem-per-gpu")
    if args.scheduler != "slurm":
        return
    for name in ("time", "partition", "account", "sbatch", "workdir"):
        values = getattr(args, name)
        for value in values if isinstance(values, list) else [values]:
            if value is not None and re.search(r"[\x00-\x1f\x7f]", value):
                raise ConfigError(f"{value!r} holds a line break or another control "
                                  "character, which an #SBATCH line cannot carry",
                                  path=f"--{name}")
    if args.time is not None:
        limit = slurm_time_seconds(args.time)
        if limit is not None and limit <= args.stop_grace + SIGNAL_RESOLUTION_SECONDS:
            raise ConfigError(
                f"{args.time} ({limit} s) leaves no time to train: the stop signal comes "
                f"--stop-grace {args.stop_grace} s before the limit, and Slurm may send it up to "
                f"{SIGNAL_RESOLUTION_SECONDS} s earlier still, so the job would stop and requeue "
                "as soon as it starts; give a longer --time or a shorter --stop-grace",
                path="--time")


def request_of(args: argparse.Namespace, command: str):
    """The parsed options as a :class:`~hyper_parallel.launch.plan.Request`; an option the
    chosen scheduler does not read is a ``ConfigError``."""
    unread = _unread_options(args)
    if unread:
        readers = sorted({r for name in unread
                          for r in SCHEDULER_OPTIONS[name[2:].replace("-", "_")]})
        raise ConfigError(f"{', '.join(unread)} {'is' if len(unread) == 1 else 'are'} read by "
                          f"{' and '.join(readers)} jobs, not by {args.scheduler} jobs; remove "
                          f"{'it' if len(unread) == 1 else 'them'}", path="--scheduler")

    _check_values(args)
    scheduler_options = {key: value for key, value in (
        ("time", args.time), ("partition", args.partition), ("account", args.account),
        ("sbatch", list(args.sbatch)), ("cpus_per_gpu", args.cpus_per_gpu),
        ("mem_per_gpu", args.mem_per_gpu), ("rdzv_host", args.rdzv_host),
        ("image", args.image), ("namespace", args.namespace),
        ("volume_claim", args.volume_claim), ("volume_mount", args.volume_mount),
        ("runtime", args.runtime)) if value}
    return Request(
        scheduler=args.scheduler, gpus_per_node=args.gpus_per_node, nodes=args.nodes,
        name=args.name, workdir=args.workdir, preflight=not args.no_preflight, gpu=args.gpu,
        gpu_memory=args.gpu_memory, resume=not args.no_resume, max_restarts=args.max_restarts,
        stop_grace=args.stop_grace, rdzv_port=args.rdzv_port, omp_threads=args.omp_threads,
        env=list(args.env), setup=list(args.setup), options=scheduler_options,
        recipe_output=args.recipe_output, force=args.force, command=command)


__all__ = ["SCHEDULER_OPTIONS", "SIGNAL_RESOLUTION_SECONDS", "options", "request_of",
           "slurm_time_seconds"]
