"""Launch commands: the line that started a legacy run, pasted whole into ``--from-yaml``.

``--from-yaml "torchrun --nproc_per_node 4 scripts/train_lm.py old.yaml --train.max_steps=100"``
(one argument, split like a shell would with :func:`shlex.split`) and
``--from-yaml -- torchrun ... old.yaml --train.max_steps=100`` (the tokens after ``--``) both
come here. :func:`parse` reads, in order:

1. environment assignments (``OMP_NUM_THREADS=1``, optionally after ``env``);
2. an optional launcher -- ``torchrun``, ``python -m torch.distributed.run`` (or ``.launch``), or
   ``python`` (any ``python3.X``, any folder) -- with its own options, which are ignored except
   ``--nproc_per_node N`` / ``--nproc-per-node N`` (``=N`` too), kept for the world-size check
   (:func:`nproc_problem`);
3. the script: a ``*.py`` file, or ``-m module``;
4. the YAML: the first token ending in ``.yaml`` / ``.yml``;
5. the overrides: every token after the YAML, passed as they are to the legacy parser
   (``config_parser.load_config(..., overrides=...)``), which reports their mistakes.

A command that names no YAML, or holds tokens between the script and the YAML, is a
:class:`LaunchError` that shows what was understood. :func:`nproc_of` gives the rank count a
recipe's ``torchrun`` line shows, :func:`launch_warnings` the report's warning when the command's
``--nproc_per_node`` does not fit the config's parallel degrees.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from hyper_parallel.codegen.errors import CodegenError

_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"python[0-9.]*")
_TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
_NPROC = ("--nproc_per_node", "--nproc-per-node")
#: torchrun options that take no value (every other option takes one, unless written ``=``).
_TORCHRUN_FLAGS = frozenset({"--standalone", "--no-python", "--no_python", "--run-path",
                             "--run_path", "--use-env", "--use_env"})
#: python options that take a value; every other ``-x`` is a flag.
_PYTHON_VALUED = frozenset({"-X", "-W", "-Q"})


class LaunchError(CodegenError):
    """The launch command cannot be read (no YAML in it, a token where none is expected)."""


def is_yaml(token: str) -> bool:
    return token.endswith((".yaml", ".yml")) and not token.startswith("-")


@dataclass(frozen=True)
class Launch:
    """A launch command as understood."""

    tokens: tuple[str, ...]
    env: tuple[str, ...]
    launcher: str | None
    """``torchrun``, ``python -m torch.distributed.run``, ``python`` (as written) or None."""
    launcher_options: tuple[str, ...]
    script: str | None
    """``scripts/train_lm.py`` or ``-m hyper_parallel.train`` (None: the YAML came first)."""
    yaml: str
    overrides: tuple[str, ...]
    nproc: str | None
    """The ``--nproc_per_node`` value as written (None when the command gives none)."""

    @property
    def text(self) -> str:
        """The command as one shell line."""
        return shlex.join(self.tokens)


def split(text: str) -> list[str]:
    """``text`` split like a POSIX shell (quotes, backslashes); bad quoting is a LaunchError."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise LaunchError(f"cannot split the launch command {text!r}: {exc}") from None


def _understood(env, launcher, options, script, rest) -> str:
    parts = []
    if env:
        parts.append(f"environment {' '.join(env)}")
    parts.append(f"launcher {launcher!r}" if launcher else "no launcher")
    if options:
        parts.append(f"launcher options {' '.join(options)}")
    parts.append(f"script {script!r}" if script else "no script")
    if rest:
        parts.append(f"then {' '.join(rest)}")
    return "; ".join(parts)


def parse(tokens: list[str] | tuple[str, ...]) -> Launch:
    """Read a launch command (see the module docstring)."""
    tokens = tuple(tokens)
    if not tokens:
        raise LaunchError("the launch command is empty: give the YAML, or the command that "
                          "trained it (torchrun ... scripts/train_lm.py old.yaml --a.b=c)")
    i, n = 0, len(tokens)
    env: list[str] = []
    if tokens[0] == "env":
        i = 1
    while i < n and _ENV.match(tokens[i]) and not is_yaml(tokens[i]):
        env.append(tokens[i])
        i += 1
    launcher: str | None = None
    options: list[str] = []
    script: str | None = None
    nproc: str | None = None

    def torchrun_options(i: int) -> int:
        nonlocal nproc, script
        while i < n and tokens[i].startswith("-") and tokens[i] != "-":
            token = tokens[i]
            name, eq, value = token.partition("=")
            if name in ("-m", "--module") and not eq:
                if i + 1 < n:
                    script = f"-m {tokens[i + 1]}"
                    return i + 2
                return i + 1
            if name in _NPROC:
                if eq:
                    nproc = value
                    options.append(token)
                    i += 1
                elif i + 1 < n:
                    nproc = tokens[i + 1]
                    options.extend([token, tokens[i + 1]])
                    i += 2
                else:
                    options.append(token)
                    i += 1
                continue
            follows = tokens[i + 1] if i + 1 < n else None
            takes_value = (not eq and name not in _TORCHRUN_FLAGS and follows is not None
                           and not follows.startswith("-") and not follows.endswith(".py")
                           and not is_yaml(follows))
            options.extend([token, follows] if takes_value else [token])
            i += 2 if takes_value else 1
        return i

    if i < n:
        word = tokens[i].rsplit("/", 1)[-1]
        if word == "torchrun":
            launcher = tokens[i]
            i = torchrun_options(i + 1)
        elif _PYTHON.fullmatch(word):
            python = tokens[i]
            i += 1
            while i < n and tokens[i].startswith("-") and tokens[i] != "-m":
                if tokens[i] == "-c":
                    raise LaunchError("the launch command runs python -c (inline code); give "
                                      "the command that runs the training script with the YAML")
                options.append(tokens[i])
                if tokens[i] in _PYTHON_VALUED and i + 1 < n:
                    options.append(tokens[i + 1])
                    i += 1
                i += 1
            if i + 1 < n and tokens[i] == "-m" and tokens[i + 1] in _TORCHRUN_MODULES:
                launcher = f"{python} -m {tokens[i + 1]}"
                i = torchrun_options(i + 2)
            elif i + 1 < n and tokens[i] == "-m":
                launcher = python
                script = f"-m {tokens[i + 1]}"
                i += 2
            else:
                launcher = python
    if script is None and i < n and not is_yaml(tokens[i]) and not tokens[i].startswith("-"):
        script = tokens[i]  # a .py file (or a program the launcher runs)
        i += 1
    start = i
    while i < n and not is_yaml(tokens[i]):
        i += 1
    if i == n:
        raise LaunchError(
            "the launch command names no YAML (no token ends in .yaml or .yml); understood: "
            + _understood(env, launcher, options, script, tokens[start:])
            + ". Give the legacy YAML the command trains, e.g. torchrun --nproc_per_node 2 "
            "scripts/train_lm.py old.yaml --train.max_steps=100"
        )
    if i > start:
        raise LaunchError(
            f"the launch command has {' '.join(tokens[start:i])} before its YAML {tokens[i]}, "
            "where the legacy script expects the YAML first; understood: "
            + _understood(env, launcher, options, script, ())
        )
    return Launch(tokens, tuple(env), launcher, tuple(options), script, tokens[i],
                  tokens[i + 1:], nproc)


def nproc_problem(nproc: str | None, world: int, inferred: bool) -> str | None:
    """Why ``--nproc_per_node nproc`` does not fit a config whose parallel degrees multiply to
    ``world`` (``inferred``: one degree is -1, so any multiple of ``world`` fits); None when it
    fits or the command gives no number."""
    if nproc is None:
        return None
    try:
        count = int(nproc)
    except ValueError:
        return (f"the launch command runs --nproc_per_node {nproc}, which is not a number; "
                f"the config needs {'a multiple of ' if inferred else ''}{world} rank(s)")
    if (count % world == 0 and count > 0) if inferred else count == world:
        return None
    need = f"a multiple of {world}" if inferred else f"{world}"
    return (f"the launch command runs --nproc_per_node {count}, but the config's parallel "
            f"degrees need {need} rank(s)")


def parallel_size(legacy: Any) -> tuple[int, bool]:
    """``(product of the parallel degrees, whether one of them is inferred (-1))``: the ranks a
    run of ``legacy`` needs (any multiple of it when a degree is inferred)."""
    acc = legacy.train.accelerator
    size, inferred = 1, False
    for degree in (acc.dp_replicate, acc.dp_shard, acc.tp, acc.cp, acc.pp):
        size *= degree if degree and degree > 0 else 1
        inferred = inferred or degree == -1
    return size, inferred


def nproc_of(legacy: Any, launch: Launch | None = None) -> int:
    """The ``--nproc_per_node`` of a recipe's ``torchrun`` line: the launch command's when it
    gives one that fits the config (a degree of -1 takes what the launch gives), else the
    product of the degrees."""
    size, inferred = parallel_size(legacy)
    nproc = getattr(launch, "nproc", None)
    if nproc is not None and nproc_problem(nproc, size, inferred) is None:
        return int(nproc)
    return size


def launch_world(legacy: Any, launch: Launch | None) -> int | None:
    """The ranks ``launch`` starts (``--nproc_per_node`` times ``--nnodes``) when its count per
    node fits the config (a degree of -1 takes it); None when it gives no number, one that does
    not fit, or an elastic node range."""
    nproc = getattr(launch, "nproc", None)
    if nproc is None or nproc_problem(nproc, *parallel_size(legacy)) is not None:
        return None
    nodes = _nnodes(launch)
    return int(nproc) * nodes if nodes else None


def _nnodes(launch: Launch) -> int | None:
    """``--nnodes N`` of the launcher (1 when absent; None for an elastic range)."""
    options = list(launch.launcher_options)
    for index, option in enumerate(options):
        value = None
        if option == "--nnodes" and index + 1 < len(options):
            value = options[index + 1]
        elif option.startswith("--nnodes="):
            value = option.split("=", 1)[1]
        if value is not None:
            return int(value) if value.isdigit() else None
    return 1


def launch_warnings(display: str, legacy: Any, launch: Launch | None) -> list[str]:
    """The report's warnings about ``launch`` (None: no launch command) for the config
    ``legacy`` read from ``display``."""
    if launch is None:
        return []
    problem = nproc_problem(launch.nproc, *parallel_size(legacy))
    return [f"{display}: {problem}"] if problem else []
