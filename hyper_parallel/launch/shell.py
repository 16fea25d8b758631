"""The shell scripts of a job: a torchrun script (the same on every node) and a Slurm batch
script, each rendered from its template in ``templates/launch/``."""

from __future__ import annotations

import shlex
from pathlib import Path

from hyper_parallel.launch.job import Job, paired, shell_words, torchrun_command

#: The repository (its ``templates/``), as the code generator finds it.
REPO = Path(__file__).resolve().parents[2]


def _render(template: str, context: dict) -> str:
    from hyper_parallel.codegen.rendering.templating import environment

    env = environment(REPO)
    env.filters["q"] = shlex.quote
    return env.get_template(f"launch/{template}").render(**context)


def _context(job: Job, rendezvous: str) -> dict:
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
        "command": paired(shell_words(torchrun_command(job, rendezvous))),
    }


def torchrun_script(job: Job) -> str:
    """The script each node runs (``bash FILE``): one node, torchrun's standalone rendezvous;
    several, c10d on ``rdzv_host``."""
    rendezvous = "standalone" if job.cluster.nodes == 1 else "c10d"
    context = _context(job, rendezvous)
    context["endpoint"] = f"{job.options.get('rdzv_host')}:{job.rdzv_port}"
    return _render("torchrun.sh.j2", context)


def slurm_script(job: Job) -> str:
    """The ``sbatch`` script: ``#SBATCH`` lines from the job, one torchrun task a node."""
    context = _context(job, "c10d")
    sbatch = []
    for key in ("time", "partition", "account"):
        if job.options.get(key):
            sbatch.append(f"--{key}={job.options[key]}")
    sbatch += job.options.get("sbatch", [])
    context["sbatch"] = sbatch
    return _render("slurm.sbatch.j2", context)


__all__ = ["slurm_script", "torchrun_script"]
