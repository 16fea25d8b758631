"""From a recipe (or a legacy YAML) to a cluster job.

    python -m hyper_parallel.launch --module M --config C [--a.b=c ...] \\
        --scheduler torchrun|slurm|kubernetes --gpus-per-node G [--nodes N] [-o FILE] [--dry-run]
    python -m hyper_parallel.launch old.yaml [--train.x=...] --scheduler ... (the same options)

The recipe's parallel degrees give the world size; ``--nodes`` (derived when omitted, needed
when ``data_parallel_shard_degree`` is -1) times ``--gpus-per-node`` must match it. Preflight
runs first at that world size and its verdict heads the output (a job that does not fit is not
written: exit 1; ``--no-preflight`` skips it). The job runs ``torchrun -m hyper_parallel.train``
on every node with ``--checkpoint.resume_latest=true`` (``--no-resume``: without), so a
restarted or requeued job continues from its newest checkpoint. A legacy YAML is converted to a
recipe first (``recipes/<name>.py``, proven as ``--from-yaml`` proves it) and the job runs that.

Without ``--dry-run`` the job is written (``-o``, else ``jobs/<name>.<sh|sbatch|yaml>``) and
submitted: ``sbatch``, ``kubectl apply -f``, or, for torchrun, run here (the same command on
every node). With ``--dry-run`` it is written to ``-o`` or printed, and not submitted.

Exit status: 0 written (and submitted), 1 preflight says it does not fit, 2 a configuration
error (in the command line's own names); after a submission, the submitting command's.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("HYPER_PARALLEL_PLATFORM", "torch")

from hyper_parallel.launch.job import SCHEDULERS  # noqa: E402 - after the platform choice
from hyper_parallel.launch.kubernetes import DEFAULT_RUNTIME  # noqa: E402


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
    run.add_argument("--rdzv-port", type=int, default=29500, metavar="PORT",
                     help="the rendezvous port (default 29500)")
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
_SCHEDULER_OPTIONS = {
    "time": ("slurm",), "partition": ("slurm",), "account": ("slurm",), "sbatch": ("slurm",),
    "rdzv_host": ("torchrun",), "rdzv_port": ("torchrun", "slurm"),
    "setup": ("torchrun", "slurm"),
    "image": ("kubernetes",), "namespace": ("kubernetes",), "volume_claim": ("kubernetes",),
    "volume_mount": ("kubernetes",), "runtime": ("kubernetes",),
}


def _unread_options(args: argparse.Namespace) -> list[str]:
    """The scheduler-specific options given that ``args.scheduler`` does not read."""
    defaults = options().parse_args(["--scheduler", "slurm", "--gpus-per-node", "1"])
    return [f"--{name.replace('_', '-')}" for name, readers in _SCHEDULER_OPTIONS.items()
            if args.scheduler not in readers
            and getattr(args, name) != getattr(defaults, name)]


def request_of(args: argparse.Namespace, command: str):
    """The parsed options as a :class:`~hyper_parallel.launch.plan.Request`; an option the
    chosen scheduler does not read is a ``ConfigError``."""
    from hyper_parallel.launch.plan import Request
    from hyper_parallel.utils.errors import ConfigError

    unread = _unread_options(args)
    if unread:
        readers = sorted({r for name in unread
                          for r in _SCHEDULER_OPTIONS[name[2:].replace("-", "_")]})
        raise ConfigError(f"{', '.join(unread)} {'is' if len(unread) == 1 else 'are'} read by "
                          f"{' and '.join(readers)} jobs, not by {args.scheduler} jobs; remove "
                          f"{'it' if len(unread) == 1 else 'them'}", path="--scheduler")

    scheduler_options = {key: value for key, value in (
        ("time", args.time), ("partition", args.partition), ("account", args.account),
        ("sbatch", "\n".join(args.sbatch)), ("rdzv_host", args.rdzv_host),
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


def write_job(path: Path, text: str, force: bool) -> None:
    """Write the job file atomically with the umask's mode (scripts also executable); an
    existing file with other content is kept unless ``force``."""
    from hyper_parallel.codegen.rendering.writing import atomic_write, current_umask
    from hyper_parallel.utils.errors import ConfigError

    try:
        atomic_write(path, text, exclusive=not force)
    except FileExistsError:
        if path.read_text() != text:
            raise ConfigError(f"{path} exists and holds another job; pass --force to replace "
                              "it, or -o to choose another file", path="--output") from None
    if path.suffix in (".sh", ".sbatch"):
        os.chmod(path, 0o777 & ~current_umask())


def main(argv: Sequence[str] | None = None) -> int:
    from hyper_parallel.codegen.errors import CodegenError
    from hyper_parallel.config.recipes import RecipeError
    from hyper_parallel.launch.plan import (
        EXTENSIONS,
        plan_job,
        render,
        submit_command,
        write_recipe,
    )
    from hyper_parallel.utils.errors import ConfigError

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        groups = options().format_help()
        print(__doc__.strip() + "\n\n" + groups[groups.index("\n\n") + 2:].rstrip(),
              file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    try:
        parsed, rest = options().parse_known_args(args)
    except SystemExit as exc:
        return 2 if exc.code else 0
    try:
        command = shlex.join(["python", "-m", "hyper_parallel.launch", *args])
        plan = plan_job(rest, request_of(parsed, command))
        text = render(plan.job)
    except (ConfigError, RecipeError, CodegenError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if plan.report is not None:
        from hyper_parallel.preflight.report import to_text

        print(to_text(plan.report, plan.origin), file=sys.stderr)
        if not plan.report.fits:
            print("the job was not written: preflight says it does not fit (--no-preflight "
                  "launches it anyway)", file=sys.stderr)
            return 1
    job = plan.job
    default = Path(job.workdir) / "jobs" / f"{job.name}.{EXTENSIONS[job.scheduler]}"
    path = None if parsed.dry_run and parsed.output is None else Path(parsed.output or default)
    try:
        if path is not None and path.is_file() and not parsed.force and path.read_text() != text:
            raise ConfigError(f"{path} exists and holds another job; pass --force to replace "
                              "it, or -o to choose another file", path="--output")
        # The job names a legacy YAML's recipe file: written with it (a printed job's too).
        written = write_recipe(plan)
        if written:
            print(f"{plan.origin}: recipe written to {written}", file=sys.stderr)
        if path is None:
            sys.stdout.write(text)
            return 0
        write_job(path, text, parsed.force)
    except (ConfigError, CodegenError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    submit = submit_command(job, str(path))
    if parsed.dry_run:
        print(f"wrote {path}; submit it with: {shlex.join(submit)}", file=sys.stderr)
        return 0
    print(f"wrote {path}; {shlex.join(submit)}", file=sys.stderr)
    try:
        return subprocess.run(submit, check=False).returncode
    except FileNotFoundError:
        print(f"error: {submit[0]} is not on this machine's PATH; the job is in {path}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
