"""``tests/helpers/warm_python``'s stand-in is ``python`` to whoever runs it: the same exit status
(a signal included), output, input, arguments, environment and working directory as a fresh
interpreter, the processes it starts warm too, a ``timeout`` that stops it stopping its process,
and a fresh interpreter wherever a fork could not be one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.helpers.warm_python import plan, warm_python

pytestmark = pytest.mark.slow  # processes forked from the fork server


def _both(args: list[str], **kw) -> tuple[subprocess.CompletedProcess, ...]:
    """``args`` run by the real interpreter and by the stand-in."""
    return tuple(subprocess.run([python, *args], capture_output=True, text=True, timeout=120,
                                check=False, **kw) for python in (sys.executable, warm_python()))


@pytest.mark.parametrize("code", [
    "import sys; print(sys.argv[1:]); sys.exit(3)",
    "import sys; sys.exit('a message')",
    "import os, signal; os.kill(os.getpid(), signal.SIGABRT)",
    ("import os, sys; print(os.getcwd(), os.environ['PROBE'], sys.stdin.read()); "
     "print('to stderr', file=sys.stderr)"),
])
def test_the_stand_in_exits_and_writes_as_python(code, tmp_path):
    real, warm = _both(["-c", code, "x", "--y"], cwd=tmp_path, input="some input",
                       env={**os.environ, "PROBE": "set"})
    assert (warm.returncode, warm.stdout, warm.stderr) == (real.returncode, real.stdout,
                                                           real.stderr)


def test_scripts_and_modules_run_as_main_with_their_argv(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import sys\nprint(__name__, sys.argv, sys.path[0])\n")
    real, warm = _both([str(script), "a"])
    assert warm.stdout == real.stdout and warm.returncode == 0
    real, warm = _both(["-u", "-m", "json.tool", "--sort-keys"], input='{"b": 1, "a": 2}')
    assert warm.stdout == real.stdout and warm.returncode == 0


def test_the_processes_it_starts_are_warm_and_an_uncaught_error_is_exit_1(tmp_path):
    code = textwrap.dedent("""
        import subprocess, sys
        child = subprocess.run([sys.executable, "-c", "import sys; print(sys.executable)"],
                               capture_output=True, text=True)
        print(child.stdout.strip())
        raise ValueError("the reason")
    """)
    warm = subprocess.run([warm_python(), "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert warm.returncode == 1 and warm.stdout.strip() == warm_python()
    assert warm.stderr.rstrip().endswith("ValueError: the reason")


def test_a_signal_to_the_stand_in_reaches_its_process(tmp_path):
    marker = tmp_path / "stopped"
    code = textwrap.dedent(f"""
        import signal, sys, time
        def stop(signum, frame):
            open({str(marker)!r}, "w").write(str(signum))
            sys.exit(5)
        signal.signal(signal.SIGTERM, stop)
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([warm_python(), "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 5 and marker.read_text() == str(int(signal.SIGTERM))
    # A stand-in killed outright (timeout -s KILL): its process goes with it, not left running.
    code = (f"import time; open({str(marker)!r}, 'w').write('on'); print('ready', flush=True); "
            f"time.sleep(3); open({str(marker)!r}, 'w').write('outlived')")
    proc = subprocess.Popen([warm_python(), "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    proc.kill()
    assert proc.wait(timeout=60) == -signal.SIGKILL
    time.sleep(4)  # past the 3 s its process would have slept
    assert marker.read_text() == "on"


def test_what_a_fork_cannot_be_is_a_fresh_interpreter():
    assert plan(["-X", "importtime", "-c", "pass"]) is None
    assert plan(["-"]) is None and plan([]) is None and plan(["-c"]) is None
    assert plan(["-u", "-m", "torch.distributed.run", "x"]) == (
        "module", "torch.distributed.run", ["x"], True)
    # Run, not refused: an option the fork does not take, and an inherited descriptor.
    real, warm = _both(["-X", "importtime", "-c", "print('fresh')"])
    assert warm.stdout == real.stdout == "fresh\n" and "import time:" in warm.stderr
    read, write = os.pipe()
    try:
        done = subprocess.run([warm_python(), "-c", f"import os; os.write({write}, b'ok')"],
                              pass_fds=(write,), timeout=120, check=False)
        assert done.returncode == 0 and os.read(read, 2) == b"ok"
    finally:
        os.close(read)
        os.close(write)
