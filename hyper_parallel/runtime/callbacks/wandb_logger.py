"""Weights & Biases for the ``MetricsProcessor``: one run on rank 0 holding what
``metrics.jsonl`` holds.

* every numeric value of a step's record (:func:`step_values`): ``train/loss``,
  ``train/grad_norm``, ``train/lr``, ``train/step_time``, ``train/epoch`` and, when measured,
  ``train/tokens_per_sec``, ``train/tflops``, ``train/mfu`` and a mixture-of-experts model's
  ``train/moe_aux_loss`` / ``train/moe_load_imbalance`` -- the TensorBoard names, at the
  optimizer step as W&B's step;
* every evaluation as ``eval/<name>`` (``eval_`` prefix dropped, as in TensorBoard);
* every memory-monitor sample as ``memory/<key>`` (host RSS, device counters when present).

Where the run goes (:func:`choose_mode`): ``WANDB_MODE`` when it is set; otherwise online with
an API key (``WANDB_API_KEY``, an identity-token file or a ``wandb login`` netrc entry) and a
reachable server, else **offline**: the run is written under ``<folder>/wandb/offline-run-*``
(``WANDB_DIR`` instead of ``folder`` when it is set) and ``wandb sync <that folder>`` uploads
it later. One log line (:func:`describe`) names the folder and the sync command.

``wandb`` is an optional dependency (the ``wandb`` extra): :func:`require_wandb` turns its
absence into a :class:`~hyper_parallel.utils.errors.ConfigError` naming the switch, and the
package is imported only when a run is opened.
"""

from __future__ import annotations

import importlib.util
import netrc
import os
import socket
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from hyper_parallel.utils.errors import ConfigError

#: How to install the optional dependency, as every error says it.
INSTALL_HINT = "pip install hyper_parallel[wandb]"
#: W&B's default server (``WANDB_BASE_URL`` overrides it).
DEFAULT_BASE_URL = "https://api.wandb.ai"
#: How long :func:`reachable` waits for the server before the run goes offline.
REACH_TIMEOUT_S = 3.0
#: Characters W&B refuses in a project name (and its length limit).
_BAD_PROJECT_CHARS = "/\\#?%:"
_MAX_PROJECT_LEN = 128


def require_wandb(field_name: str) -> None:
    """A ConfigError naming ``field_name`` and the install command when ``wandb`` is missing."""
    if importlib.util.find_spec("wandb") is None:
        raise ConfigError(
            f"True needs the 'wandb' package, which is not installed: {INSTALL_HINT} "
            "(or pip install wandb), or set it to False",
            path=field_name,
        )


def check_project(project: str, field_name: str) -> None:
    """The names W&B would refuse when the run opens, refused at build time instead."""
    bad = sorted({c for c in project if c in _BAD_PROJECT_CHARS})
    if bad:
        raise ConfigError(
            f"{project!r}: a W&B project name cannot contain {' '.join(bad)}",
            path=field_name,
        )
    if len(project) > _MAX_PROJECT_LEN:
        raise ConfigError(
            f"{project[:40]!r}...: a W&B project name has at most {_MAX_PROJECT_LEN} characters",
            path=field_name,
        )


# ---------------------------------------------------------------------------------- the mode


def has_api_key(environ: dict[str, str] | None = None) -> bool:
    """Whether W&B would find credentials without asking: ``WANDB_API_KEY``, an identity-token
    file (``WANDB_IDENTITY_TOKEN_FILE``) or a netrc entry for the server (``wandb login``
    writes one; ``NETRC`` names another file). Reads local files only."""
    env = os.environ if environ is None else environ
    if env.get("WANDB_API_KEY") or env.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    host = urlsplit(env.get("WANDB_BASE_URL") or DEFAULT_BASE_URL).hostname or ""
    path = env.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        entry = netrc.netrc(path).authenticators(host)
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(entry and entry[2])


def reachable(url: str, timeout: float = REACH_TIMEOUT_S) -> bool:
    """Whether a TCP connection to ``url``'s host opens within ``timeout`` seconds (name
    resolution included: it runs in a daemon thread that is abandoned when late)."""
    parts = urlsplit(url)
    host = parts.hostname
    if not host:
        return False
    port = parts.port or (80 if parts.scheme == "http" else 443)
    result: list[bool] = []

    def connect() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=connect, name="wandb-reachable", daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def choose_mode(environ: dict[str, str] | None = None) -> tuple[str | None, str | None]:
    """``(mode, why)``: the ``mode`` to open the run with and why it is not online.

    ``WANDB_MODE`` when set (W&B checks the value; why: ``WANDB_MODE=<value>``); otherwise
    ``online`` with an API key and a reachable server (checked only when there is a key), else
    ``offline``. The environment is read here, at each run, and passed on: W&B itself reads it
    once per process.
    """
    env = os.environ if environ is None else environ
    if env.get("WANDB_MODE"):
        return env["WANDB_MODE"], f"WANDB_MODE={env['WANDB_MODE']}"
    if not has_api_key(env):
        return "offline", "no W&B API key: set WANDB_API_KEY or run `wandb login`"
    url = env.get("WANDB_BASE_URL") or DEFAULT_BASE_URL
    if not reachable(url):
        return "offline", f"{urlsplit(url).hostname} cannot be reached"
    return "online", None


# ---------------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class WandbRunInfo:
    """What W&B recorded of the run when it opened (read back from the run object)."""

    project: str
    name: str | None
    mode: str
    folder: str
    url: str | None


def open_run(
    *,
    project: str,
    name: str | None,
    folder: str | None,
    config: dict[str, Any] | None,
    mode: str | None,
) -> tuple[Any, WandbRunInfo]:
    """Open a new W&B run (never attached to another open run of this process) under
    ``folder`` (``WANDB_DIR`` when set; None: the working directory)."""
    import wandb

    directory = os.environ.get("WANDB_DIR") or folder or "."
    # Absolute: W&B's service process, which writes the files, may have another working
    # directory (it serves every run of this process).
    directory = os.path.abspath(directory)
    os.makedirs(directory, exist_ok=True)
    run = wandb.init(
        project=project,
        name=name,
        dir=directory,
        config=config,
        mode=mode,
        reinit="create_new",
    )
    settings = run.settings
    info = WandbRunInfo(
        project=run.project,
        name=run.name,
        mode=str(settings.mode),
        folder=os.path.abspath(str(settings.sync_dir)),
        url=None if run.offline else run.url,
    )
    return run, info


def describe(info: WandbRunInfo, why: str | None) -> str:
    """The one log line of an opened run: where it is and, offline, how to upload it."""
    if info.mode in ("offline", "dryrun"):
        because = f" ({why})" if why else ""
        return (f"W&B run offline{because}: written to {info.folder}; upload it with "
                f"`wandb sync {info.folder}`")
    if info.mode == "disabled":
        return f"W&B run disabled ({why or 'WANDB_MODE'}): nothing is logged to it"
    return f"W&B run {info.url or info.folder} (project {info.project})"


# ---------------------------------------------------------------------------------- values


def _number(value: Any) -> float | int | None:
    """``value`` when it is a number (NaN and infinities too: W&B shows them), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def step_values(record: dict[str, Any]) -> dict[str, float | int]:
    """``train/<key>`` for every number of a step record but ``step`` (W&B's own step)."""
    return {f"train/{k}": v for k, value in record.items()
            if k != "step" and (v := _number(value)) is not None}


def eval_values(metrics: dict[str, Any]) -> dict[str, float | int]:
    """``eval/<name>`` (``eval_`` prefix dropped) for every number of an evaluation."""
    return {f"eval/{k.removeprefix('eval_')}": v for k, value in metrics.items()
            if (v := _number(value)) is not None}


def memory_values(sample: dict[str, Any]) -> dict[str, float | int]:
    """``memory/<key>`` for every number of a memory sample but ``step``."""
    return {f"memory/{k}": v for k, value in sample.items()
            if k != "step" and (v := _number(value)) is not None}


__all__ = [
    "DEFAULT_BASE_URL",
    "INSTALL_HINT",
    "WandbRunInfo",
    "check_project",
    "choose_mode",
    "describe",
    "eval_values",
    "has_api_key",
    "memory_values",
    "open_run",
    "reachable",
    "require_wandb",
    "step_values",
]
