"""Stand-ins for the Slurm commands a generated batch script calls, so that the script itself runs
on this machine: ``srun`` starts one task per "node" here (each with the ``SLURM_*`` variables a
real step task gets) and forwards SIGTERM / SIGINT to them as srun does; ``scontrol show
hostnames`` lists the job's "nodes" (loopback); ``scontrol requeue`` and ``sbatch`` record what
they were asked and succeed. Every call is appended to ``calls.log`` in the stand-ins' folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_SRUN = '''
import os, signal, subprocess, sys, time
log = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log")
args = sys.argv[1:]
with open(log, "a") as f:
    f.write("srun " + " ".join(args) + "\\n")
nodes, kill_on_bad_exit, i = 1, False, 0
while i < len(args) and args[i].startswith("-"):
    name, _, value = args[i].partition("=")
    if name in ("--nodes", "-N"):
        nodes = int(value)
    elif name == "--kill-on-bad-exit":
        kill_on_bad_exit = value != "0"
    i += 1
command = args[i:]
tasks = []
for node in range(nodes):
    env = dict(os.environ, SLURM_NODEID=str(node), SLURM_PROCID=str(node), SLURM_LOCALID="0",
               SLURM_STEP_NUM_NODES=str(nodes), SLURMD_NODENAME="127.0.0.1")
    tasks.append(subprocess.Popen(command, env=env))

def forward(signum, frame):
    for task in tasks:
        if task.poll() is None:
            task.send_signal(signum)

signal.signal(signal.SIGTERM, forward)
signal.signal(signal.SIGINT, forward)
while any(task.poll() is None for task in tasks):
    if kill_on_bad_exit and any(task.poll() not in (None, 0) for task in tasks):
        for task in tasks:
            if task.poll() is None:
                task.kill()
    time.sleep(0.05)
codes = [task.returncode for task in tasks]
sys.exit(next((c for c in codes if c != 0), 0) % 256)
'''

_SCONTROL = '''
import os, sys
log = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log")
with open(log, "a") as f:
    f.write("scontrol " + " ".join(sys.argv[1:]) + "\\n")
if sys.argv[1:3] == ["show", "hostnames"]:
    for host in sys.argv[3].split(","):
        print(host)
elif sys.argv[1:2] == ["requeue"]:
    pass
else:
    sys.exit("scontrol stand-in: unexpected " + " ".join(sys.argv[1:]))
'''

_SBATCH = '''
import os, sys
log = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.log")
with open(log, "a") as f:
    f.write("sbatch " + " ".join(sys.argv[1:]) + "\\n")
print("Submitted batch job 4242")
'''


def install(folder: Path) -> Path:
    """Write ``srun``, ``scontrol`` and ``sbatch`` into ``folder`` (made executable); returns it
    (put it first on ``PATH``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in (("srun", _SRUN), ("scontrol", _SCONTROL), ("sbatch", _SBATCH)):
        path = folder / name
        path.write_text(f"#!{sys.executable}\n{body}")
        path.chmod(0o755)
    return folder


def calls(folder: Path) -> list[str]:
    log = folder / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def slurm_env(folder: Path, nodes: int, job_id: str = "4242") -> dict[str, str]:
    """The environment of a batch script in an allocation of ``nodes`` loopback "nodes"."""
    venv_bin = str(Path(sys.executable).parent)
    return {
        "PATH": os.pathsep.join([str(folder), venv_bin, os.environ.get("PATH", "")]),
        "SLURM_JOB_ID": job_id,
        "SLURM_JOB_NAME": "test",
        "SLURM_JOB_NUM_NODES": str(nodes),
        "SLURM_NNODES": str(nodes),
        "SLURM_JOB_NODELIST": ",".join(["127.0.0.1"] * nodes),
    }
