"""A cluster job, scheduler-neutral: what runs, on how many nodes, in which environment.

Every scheduler runs the same thing on each node: ``torchrun`` with this node's share of the
ranks, running ``python -m hyper_parallel.train`` on the recipe command line. What differs is who
finds the first node and how the rendezvous is named (:func:`torchrun_command`), and how the job
is written down (:mod:`.shell` for torchrun and Slurm, :mod:`.kubernetes`).

One number, :attr:`Job.stop_grace`, is the time a stopped job has to finish its step and write
its checkpoint: Slurm signals that long before the time limit, torchrun waits that long for its
workers after forwarding SIGTERM (its own default is 30 s, too short for a large model's
checkpoint), Kubernetes waits that long before it kills a pod.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from hyper_parallel.launch.world import Cluster

#: The schedulers a job is written for.
SCHEDULERS = ("torchrun", "slurm", "kubernetes")

#: The override every generated job adds (unless the command line sets the field itself): a
#: requeued or restarted job resumes from its own newest checkpoint.
RESUME_FLAG = "--checkpoint.resume_latest=true"

#: The training entry every node runs under torchrun.
TRAIN_MODULE = "hyper_parallel.train"


def environment(omp_threads: int, checkpoint_folder: str) -> dict[str, str]:
    """The variables a GPU job sets, each for a reason a cluster user meets:

    * ``OMP_NUM_THREADS``: torchrun's own default is 1 thread a worker (and a warning); the host
      work of a rank (data loading, checkpoint staging, the HF export) wants a few, and all of
      a node's cores in every worker oversubscribe it.
    * ``PYTORCH_ALLOC_CONF=expandable_segments:True``: the CUDA caching allocator grows segments
      instead of fragmenting memory between steps of different shapes (what preflight's
      fragmentation allowance assumes).
    * ``TORCH_NCCL_DUMP_ON_TIMEOUT``, ``TORCH_FR_BUFFER_SIZE``, ``TORCH_FR_DUMP_TEMP_FILE``: a
      collective that times out dumps each rank's recent collectives (NCCL's flight recorder)
      next to the checkpoints, the one record that tells which rank a hang waits for.
    * ``NCCL_DEBUG=WARN``: NCCL's own errors in the log, not its chatter.
    * ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: torchrun's c10d rendezvous gives each restart of
      the workers a fresh store (on a new port, hosted by rank 0) instead of torch 2.13's one
      store for every restart, which holds the failed attempt's addresses under the names the
      next attempt reads (pytorch/pytorch#135712; :mod:`hyper_parallel.runtime.distributed`).
    """
    return {
        "OMP_NUM_THREADS": str(omp_threads),
        "PYTORCH_ALLOC_CONF": "expandable_segments:True",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_BUFFER_SIZE": "20000",
        "TORCH_FR_DUMP_TEMP_FILE": f"{checkpoint_folder.rstrip('/')}/nccl_flight_recorder_rank_",
        "NCCL_DEBUG": "WARN",
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }


@dataclass(frozen=True)
class Job:
    """What a scheduler runs; built by :func:`hyper_parallel.launch.plan.plan_job`."""

    name: str
    """The job's name (the Slurm job name, the Kubernetes object name, the rendezvous id)."""
    scheduler: str
    cluster: Cluster
    train_args: tuple[str, ...]
    """After ``-m hyper_parallel.train``: ``--module M --config C``, the overrides, the resume
    flag."""
    workdir: str
    """Where the command runs (absolute): recipe files, data and relative output folders
    resolve from here, the same on every node (a shared file system)."""
    checkpoint_folder: str
    """The run's checkpoint folder as it resolves on the nodes."""
    env: dict[str, str]
    max_restarts: int = 3
    """torchrun restarts the workers of the job this many times after a failure (each restart
    resumes from the newest checkpoint)."""
    stop_grace: int = 300
    """Seconds between the stop signal and the kill (see the module docstring)."""
    rdzv_port: int = 29500
    setup: tuple[str, ...] = ()
    """Shell lines run before torchrun (``module load ...``, ``source .venv/bin/activate``)."""
    header: tuple[str, ...] = ()
    """What the job is and why it should fit: the comment lines at the top of its file."""
    options: dict[str, Any] = field(default_factory=dict)
    """Scheduler options: Slurm ``time`` / ``partition`` / ``account`` / ``sbatch`` (a list of
    extra ``#SBATCH`` lines), torchrun
    ``rdzv_host``, Kubernetes ``image`` / ``namespace`` / ``volume_claim`` / ``volume_mount`` /
    ``runtime``."""

    @property
    def train_command(self) -> list[str]:
        return ["-m", TRAIN_MODULE, *self.train_args]


def torchrun_command(job: Job, rendezvous: str) -> list[str]:
    """The ``torchrun`` argv every node runs. ``rendezvous``:

    * ``standalone``: one node, torchrun's own local rendezvous;
    * ``c10d``: ``--rdzv-endpoint`` the first node (``$head_node`` in a Slurm script, the host
      given in a torchrun script) and ``--rdzv-id`` the job (``$SLURM_JOB_ID`` under Slurm);
    * ``env``: nodes, node rank, master address and port from the ``PET_*`` variables the
      Kubeflow Trainer torch runtime sets (torchrun reads them as its defaults).
    """
    c = job.cluster
    head = ["torchrun"]
    if rendezvous == "standalone":
        head += ["--standalone", f"--nproc-per-node={c.gpus_per_node}"]
    elif rendezvous == "c10d":
        host = ("${head_node}" if job.scheduler == "slurm" else job.options["rdzv_host"])
        run_id = "${SLURM_JOB_ID}" if job.scheduler == "slurm" else job.name
        head += [f"--nnodes={c.nodes}", f"--nproc-per-node={c.gpus_per_node}",
                 "--rdzv-backend=c10d", f"--rdzv-endpoint={host}:{job.rdzv_port}",
                 f"--rdzv-id={run_id}"]
    elif rendezvous == "env":
        head += [f"--nnodes={c.nodes}", f"--nproc-per-node={c.gpus_per_node}"]
    else:
        raise ValueError(f"unknown rendezvous {rendezvous!r}")
    head += [f"--max-restarts={job.max_restarts}", f"--shutdown-timeout={job.stop_grace}"]
    return head + job.train_command


def shell_words(argv: list[str]) -> list[str]:
    """``argv`` quoted for a shell, except the ``${...}`` variables the script sets (quoted in
    double quotes so they expand, and only they)."""
    words = []
    for arg in argv:
        if "${" in arg:
            words.append('"' + arg.replace('"', '\\"') + '"')
        else:
            words.append(shlex.quote(arg))
    return words


def paired(words: list[str]) -> list[str]:
    """``words`` as the lines of a long command: an option and its value on one line
    (``-m hyper_parallel.train``, ``--module qwen3_5_v2``), every other word alone."""
    lines, index = [], 0
    while index < len(words):
        word = words[index]
        follows = words[index + 1] if index + 1 < len(words) else None
        if (word.startswith("-") and "=" not in word and follows is not None
                and not follows.startswith(("-", "'-", '"-'))):
            lines.append(f"{word} {follows}")
            index += 2
        else:
            lines.append(word)
            index += 1
    return lines


__all__ = ["Job", "RESUME_FLAG", "SCHEDULERS", "TRAIN_MODULE", "environment", "paired", "shell_words",
           "torchrun_command"]
