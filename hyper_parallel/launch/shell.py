"""The shell scripts of a job: a torchrun script (the same on every node) and a Slurm batch
script, each rendered from its template in ``templates/launch/``. Every word they hold that
comes from the job goes through :func:`~hyper_parallel.launch.job.quote` (the ``q`` filter)."""

from __future__ import annotations

from pathlib import Path

from hyper_parallel.launch.job import (
    SLURM_PORT_BASE,
    SLURM_PORT_SPAN,
    SLURM_SCRIPT_VARIABLES,
    Job,
    paired,
    quote,
    shell_words,
    torchrun_command,
)

#: The repository (its ``templates/``), as the code generator finds it.
REPO = Path(__file__).resolve().parents[2]


def _render(template: str, context: dict) -> str:
    from hyper_parallel.codegen.rendering.templating import environment

    env = environment(REPO)
    env.filters["q"] = quote
    return env.get_template(f"launch/{template}").render(**context)


def _command(job: Job, rendezvous: str, live: tuple[str, ...]) -> list[str]:
    """The torchrun command line, quoted: the script's own variables (``live``) stay live in
    torchrun's options only; the training's words are the user's, literal whatever they hold."""
    argv = torchrun_command(job, rendezvous)
    own = len(argv) - len(job.train_command)
    return paired(shell_words(argv[:own], live) + shell_words(argv[own:]))


def _context(job: Job, rendezvous: str, live: tuple[str, ...] = ()) -> dict:
    return {
        "header": job.header,
        "name": job.name,
        "nodes": job.cluster.nodes,
        "gpus_per_node": job.cluster.gpus_per_node,
        "workdir": job.workdir,
        "stop_grace": job.stop_grace,
        "max_restarts": job.max_restarts,
        "setup": job.setup,
        "env": sorted(job.env.items()),
        "command": _command(job, rendezvous, live),
    }


def torchrun_script(job: Job) -> str:
    """The script each node runs (``bash FILE``): one node, torchrun's standalone rendezvous;
    several, c10d on ``rdzv_host``."""
    rendezvous = "standalone" if job.cluster.nodes == 1 else "c10d"
    context = _context(job, rendezvous)
    context["endpoint"] = f"{job.options.get('rdzv_host')}:{job.rdzv_port}"
    return _render("torchrun.sh.j2", context)


def slurm_script(job: Job) -> str:
    """The ``sbatch`` script: ``#SBATCH`` lines from the job, one torchrun task a node with the
    cores and memory of its ranks, the stop and requeue of ``templates/launch/slurm.sbatch.j2``
    (its comments say which signal does what)."""
    context = _context(job, "c10d", SLURM_SCRIPT_VARIABLES)
    sbatch = []
    for key in ("time", "partition", "account"):
        if job.options.get(key):
            sbatch.append(quote(f"--{key}={job.options[key]}"))
    sbatch += job.options.get("sbatch", [])
    mem = job.options.get("mem_per_gpu")
    context.update(
        sbatch=sbatch,
        cpus_per_task=job.cluster.gpus_per_node * job.options["cpus_per_gpu"],
        memory=f"--mem-per-gpu={mem}" if mem else "--mem=0",
        chdir=quote(f"--chdir={job.workdir}"),
        log_dir=job.checkpoint_folder,
        rdzv_port=(job.rdzv_port if job.rdzv_port is not None else
                   f"$(({SLURM_PORT_BASE} + SLURM_JOB_ID % {SLURM_PORT_SPAN}))"),
    )
    return _render("slurm.sbatch.j2", context)


__all__ = ["slurm_script", "torchrun_script"]
