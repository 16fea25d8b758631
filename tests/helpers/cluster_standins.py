"""Stand-ins for the Slurm commands a generated batch script calls, so that the script itself runs
on this machine with several "nodes" (the real one-node Slurm of ``make test-slurm`` runs it
on one, ``tests/slurm/``). They do what the real commands do where the script relies on it,
as Slurm 22.05 was seen to do it (``tests/slurm/test_standins_match_slurm.py`` holds the two
side by side):

* ``srun`` starts one task per "node" here, each with the ``SLURM_*`` variables a real step
  task gets, and answers signals as srun's ``_forward_signal`` does: SIGTERM, SIGHUP and
  SIGQUIT become SIGKILL to its tasks ("forcing job termination"); a first SIGINT prints the
  tasks' state, a second within a second is forwarded; any other signal is forwarded as it
  is. A task killed by a signal makes srun exit 128 + the signal, as srun does.
* ``scancel --signal=SIG JOB[.STEP]`` sends SIG to every task of the job's steps and to all of
  their processes (slurmd signals a step's whole process tree, the workers under torchrun
  included), never to the batch shell or to srun.
* ``scontrol show hostnames`` lists the job's "nodes" (loopback); ``scontrol requeue`` and
  ``sbatch`` record what they were asked and succeed.

Every call is appended to ``calls.log`` in the stand-ins' folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: What slurmd does to deliver a signal to a step: every process of its tasks' trees.
_TREE = '''
import os

def signal_tree(pids, signum):
    """Send ``signum`` to each of ``pids`` and to every process under them."""
    tree = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    todo = list(pids)
    while todo:
        pid = todo.pop()
        todo.extend(tree.get(pid, []))
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
'''

_SRUN = '''
import os, signal, subprocess, sys, time
here = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
with open(os.path.join(here, "calls.log"), "a") as f:
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
               SLURM_STEP_ID="0", SLURM_STEP_NUM_NODES=str(nodes), SLURMD_NODENAME="127.0.0.1")
    tasks.append(subprocess.Popen(command, env=env))
# The step's tasks, for the scancel stand-in (slurmd knows them).
steps = os.path.join(here, "steps")
os.makedirs(steps, exist_ok=True)
record = os.path.join(steps, f"{os.environ.get('SLURM_JOB_ID', '0')}.0.{os.getpid()}")
with open(record, "w") as f:
    f.write("\\n".join(str(task.pid) for task in tasks))

def to_tasks(signum):
    signal_tree([task.pid for task in tasks if task.poll() is None], signum)

last_interrupt = 0.0

def on_signal(signum, frame):
    global last_interrupt
    if signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        print("srun: forcing job termination", file=sys.stderr, flush=True)
        to_tasks(signal.SIGKILL)
    elif signum == signal.SIGINT:
        if time.monotonic() - last_interrupt > 1:
            print("srun: interrupt (one more within 1 sec to abort)", file=sys.stderr, flush=True)
            last_interrupt = time.monotonic()
        else:
            print("srun: sending Ctrl-C to job", file=sys.stderr, flush=True)
            to_tasks(signal.SIGINT)
    else:
        to_tasks(signum)

for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGINT, signal.SIGUSR1,
               signal.SIGUSR2, signal.SIGCONT):
    signal.signal(signum, on_signal)
while any(task.poll() is None for task in tasks):
    if kill_on_bad_exit and any(task.poll() not in (None, 0) for task in tasks):
        to_tasks(signal.SIGKILL)
    time.sleep(0.05)
os.unlink(record)
codes = []
for index, task in enumerate(tasks):
    code = task.returncode
    if code < 0:
        print(f"srun: error: 127.0.0.1: task {index}: {signal.strsignal(-code)}",
              file=sys.stderr, flush=True)
        code = 128 - code
    elif code:
        print(f"srun: error: 127.0.0.1: task {index}: Exited with exit code {code}",
              file=sys.stderr, flush=True)
    codes.append(code)
sys.exit(next((c for c in codes if c != 0), 0))
'''

_SCANCEL = '''
import os, signal, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "calls.log"), "a") as f:
    f.write("scancel " + " ".join(sys.argv[1:]) + "\\n")
args = sys.argv[1:]
names = [a.split("=", 1)[1] for a in args if a.startswith("--signal=")]
jobs = [a for a in args if not a.startswith("-")]
if len(names) != 1 or len(jobs) != 1 or len(args) != 2:
    sys.exit("scancel stand-in: only scancel --signal=SIG JOB[.STEP] is modelled: " + " ".join(args))
name = names[0].upper()
signum = int(name) if name.isdigit() else signal.Signals[name if name.startswith("SIG") else "SIG" + name]
job, _, step = jobs[0].partition(".")

steps = os.path.join(here, "steps")
for record in sorted(os.listdir(steps)) if os.path.isdir(steps) else []:
    record_job, record_step, _ = record.split(".")
    if record_job != job or (step and record_step != step):
        continue
    with open(os.path.join(steps, record)) as f:
        signal_tree([int(pid) for pid in f.read().split()], signum)
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
    """Write ``srun``, ``scancel``, ``scontrol`` and ``sbatch`` into ``folder`` (made
    executable); returns it (put it first on ``PATH``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, body in (("srun", _TREE + _SRUN), ("scancel", _TREE + _SCANCEL),
                       ("scontrol", _SCONTROL), ("sbatch", _SBATCH)):
        path = folder / name
        path.write_text(f"#!{sys.executable}\n{body}")
        path.chmod(0o755)
    return folder


def calls(folder: Path) -> list[str]:
    log = folder / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def slurm_env(folder: Path, nodes: int, job_id: str = "4242",
              restarts: int | None = None) -> dict[str, str]:
    """The environment of a batch script in an allocation of ``nodes`` loopback "nodes";
    ``restarts``: Slurm's ``SLURM_RESTART_COUNT`` of a requeued job (unset in its first
    start, as Slurm leaves it)."""
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "PATH": os.pathsep.join([str(folder), venv_bin, os.environ.get("PATH", "")]),
        "SLURM_JOB_ID": job_id,
        "SLURM_JOB_NAME": "test",
        "SLURM_JOB_NUM_NODES": str(nodes),
        "SLURM_NNODES": str(nodes),
        "SLURM_JOB_NODELIST": ",".join(["127.0.0.1"] * nodes),
    }
    if restarts is not None:
        env["SLURM_RESTART_COUNT"] = str(restarts)
    return env
