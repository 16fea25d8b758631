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

import re
from collections.abc import Iterable
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
    rdzv_port: int | None = None
    """The rendezvous port; None: torchrun's 29500 for a torchrun script, and for a Slurm job
    one derived from its job id (:data:`SLURM_PORT_BASE`), so that two jobs whose first node is
    the same host do not meet on one port."""
    setup: tuple[str, ...] = ()
    """Shell lines run before torchrun (``module load ...``, ``source .venv/bin/activate``)."""
    header: tuple[str, ...] = ()
    """What the job is and why it should fit: the comment lines at the top of its file."""
    options: dict[str, Any] = field(default_factory=dict)
    """Scheduler options: Slurm ``time`` / ``partition`` / ``account`` / ``sbatch`` (a list of
    extra ``#SBATCH`` lines) / ``cpus_per_gpu`` (resolved by the plan) / ``mem_per_gpu``, torchrun
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
        # A Slurm script sets the port itself: derived from the job id unless one is given.
        port = "${rdzv_port}" if job.scheduler == "slurm" else job.rdzv_port
        run_id = "${SLURM_JOB_ID}" if job.scheduler == "slurm" else job.name
        head += [f"--nnodes={c.nodes}", f"--nproc-per-node={c.gpus_per_node}",
                 "--rdzv-backend=c10d", f"--rdzv-endpoint={host}:{port}",
                 f"--rdzv-id={run_id}"]
    elif rendezvous == "env":
        head += [f"--nnodes={c.nodes}", f"--nproc-per-node={c.gpus_per_node}"]
    else:
        raise ValueError(f"unknown rendezvous {rendezvous!r}")
    head += [f"--max-restarts={job.max_restarts}", f"--shutdown-timeout={job.stop_grace}"]
    return head + job.train_command


#: torchrun's own default rendezvous port: a torchrun script's unless ``--rdzv-port`` is given.
TORCHRUN_PORT = 29500

#: A Slurm job without ``--rdzv-port`` meets on ``SLURM_PORT_BASE + job id % SLURM_PORT_SPAN``:
#: two jobs whose first node is the same host get different ports (unless their ids are
#: ``SLURM_PORT_SPAN`` apart), all of them below Linux's ephemeral range (32768-60999), so no
#: outgoing connection's port is ever in the way.
SLURM_PORT_BASE, SLURM_PORT_SPAN = 29500, 3000

#: The variables a Slurm batch script sets itself (``templates/launch/slurm.sbatch.j2``) and its
#: torchrun command line refers to: the allocation's first node, the job's rendezvous port, and
#: Slurm's job id. Only these stay live in a quoted word (:func:`quote`).
SLURM_SCRIPT_VARIABLES = ("head_node", "rdzv_port", "SLURM_JOB_ID")

#: Words a shell and sbatch's ``#SBATCH`` parser both take as they are, unquoted.
_PLAIN = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: What cannot sit inside single quotes (``'``, and ``\`` for sbatch, which unescapes it even
#: there) or on one line (control characters): written outside them, escaped.
_SPECIAL = re.compile(r"['\\\x00-\x1f\x7f]")


def _literal(text: str) -> str:
    r"""``text`` read back literally: single quotes around the runs of ordinary characters,
    ``\'`` and ``\\`` between them, and control characters as bash's ``$'\n'`` so that a word
    never spans lines (a comment, a ``\``-continued command line, an ``#SBATCH`` line stay one
    line)."""
    if _PLAIN.fullmatch(text):
        return text
    parts, start = [], 0
    for match in _SPECIAL.finditer(text):
        if match.start() > start:
            parts.append(f"'{text[start:match.start()]}'")
        char = match.group()
        if char in "'\\":
            parts.append("\\" + char)
        elif char == "\0":
            raise ValueError("a NUL character cannot be passed to a command")
        else:
            parts.append(f"$'\\x{ord(char):02x}'")
        start = match.end()
    if start < len(text) or not parts:
        parts.append(f"'{text[start:]}'")
    return "".join(parts)


def quote(text: str, live: Iterable[str] = ()) -> str:
    r"""``text`` as one word of a generated script, read back as ``text`` by bash and by sbatch's
    ``#SBATCH`` parser alike: ``$(...)``, backticks, ``$VAR``, quotes, ``#``, globs and
    newlines in it are inert. The one exception: a ``${NAME}`` whose ``NAME`` is in ``live``
    (the variables the script itself sets, :data:`SLURM_SCRIPT_VARIABLES`) stays a reference,
    in double quotes, and expands to the variable's value.

    Every word of a generated script goes through here (the job's command line, its
    environment, its paths); the lines a user writes as shell (``--setup``) or as ``#SBATCH``
    options (``--sbatch``) are theirs."""
    names = set(live)
    pieces = []  # (is_reference, text)
    start = 0
    for match in _REFERENCE.finditer(text):
        if match.group(1) not in names:
            continue
        pieces.append((False, text[start:match.start()]))
        pieces.append((True, match.group(1)))
        start = match.end()
    pieces.append((False, text[start:]))
    if len(pieces) == 1:
        return _literal(text)
    if all(ref or not lit or _PLAIN.fullmatch(lit) for ref, lit in pieces):
        # Readable: one double-quoted word, its plain text needs no escape there.
        return '"' + "".join(f"${{{lit}}}" if ref else lit for ref, lit in pieces) + '"'
    return "".join(f'"${{{lit}}}"' if ref else _literal(lit) for ref, lit in pieces if lit)


def shell_words(argv: list[str], live: Iterable[str] = ()) -> list[str]:
    """Every word of ``argv`` through :func:`quote`."""
    return [quote(arg, live) for arg in argv]


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


__all__ = ["RESUME_FLAG", "SCHEDULERS", "SLURM_PORT_BASE", "SLURM_PORT_SPAN",
           "SLURM_SCRIPT_VARIABLES", "TORCHRUN_PORT", "TRAIN_MODULE", "Job", "environment",
           "paired", "quote", "shell_words", "torchrun_command"]
