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

import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("HYPER_PARALLEL_PLATFORM", "torch")

from hyper_parallel.launch.options import options, request_of  # noqa: E402 - after the platform


def main(argv: Sequence[str] | None = None) -> int:
    from hyper_parallel.codegen.errors import CodegenError
    from hyper_parallel.config.recipes import RecipeError
    from hyper_parallel.launch.job import quote
    from hyper_parallel.launch.plan import (
        EXTENSIONS,
        plan_job,
        refuse_other,
        render,
        submit_command,
        write_job,
        write_recipe,
    )
    from hyper_parallel.utils.errors import ConfigError
    from hyper_parallel.utils.tool_options import tool_args, tool_options

    args = tool_args(argv)
    parser = options()
    groups = parser.format_help()
    split = tool_options(parser, __doc__.strip() + "\n\n"
                         + groups[groups.index("\n\n") + 2:].rstrip(), args)
    if isinstance(split, int):
        return split
    parsed, rest = split
    try:
        command = " ".join(quote(word) for word in ["python", "-m", "hyper_parallel.launch",
                                                 *args])
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
        if path is not None:
            refuse_other(path, text, parsed.force, "job", "--output")
        # The job names a legacy YAML's recipe file: written with it (a printed job's too).
        written = write_recipe(plan)
        if written:
            print(f"{plan.origin}: recipe written to {written}", file=sys.stderr)
        if path is None:
            sys.stdout.write(text)
            return 0
        write_job(path, text)
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
