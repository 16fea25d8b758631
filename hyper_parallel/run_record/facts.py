"""What fixes a run's result besides its configuration: the facts of ``run.json``.

The versions of the code (hyper_parallel, and in a git checkout its commit and whether the tree
had uncommitted changes), of Python and of the libraries that change numbers; the launch (the
command line, the world size) and the environment variables that change numerics; and every
input file the configuration names, by size and content hash. Each fact is read without
importing what it describes (a library's version comes from its installed metadata).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: Distributions whose versions change the numbers a run computes (``None``: not installed).
NUMERIC_LIBRARIES = ("torch", "numpy", "transformers", "datasets", "tokenizers", "safetensors",
                     "fla-core", "triton")

#: Environment variables that change numerics or determinism, recorded when set: thread counts
#: (reduction orders), CPU kernel dispatch (the golden runs pin it), cuBLAS / NCCL determinism.
NUMERIC_ENVIRONMENT = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ATEN_CPU_CAPABILITY", "MKL_CBWR",
                       "DNNL_MAX_CPU_ISA", "CUBLAS_WORKSPACE_CONFIG", "NCCL_ALGO", "NCCL_PROTO",
                       "NCCL_DETERMINISTIC", "CUDA_VISIBLE_DEVICES", "PYTHONHASHSEED",
                       "HYPER_PARALLEL_PLATFORM")

#: The configuration fields that name input files (a file or a folder of files).
INPUT_FIELDS = ("dataloader.dataset_path", "validation.dataset_path", "tokenizer.path",
                "model.weights_path", "hf_assets_path")

#: Files above this size are recorded by size and modification time: hashing a multi-GB shard
#: at every start would cost minutes; below it, by size and sha256.
HASH_LIMIT_BYTES = 64 * 1024 * 1024
#: The bytes one record hashes in all (about a second of reading): a folder of many shards
#: below the limit would otherwise hold up the start, while the other ranks wait in their first
#: collective. Files past the budget are recorded by size and modification time too.
HASH_BUDGET_BYTES = 1024 * 1024 * 1024


def versions() -> dict[str, Any]:
    """hyper_parallel's version and git state, Python's, and each of
    :data:`NUMERIC_LIBRARIES` (None when not installed)."""
    return {
        "hyper_parallel": {"version": _version("hyper_parallel"), **git_state()},
        "python": platform.python_version(),
        "libraries": {name: _version(name) for name in NUMERIC_LIBRARIES},
    }


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def git_state(folder: Path | None = None) -> dict[str, Any]:
    """``{"git_commit": sha, "git_dirty": bool}`` of the checkout holding hyper_parallel, or
    ``{"git_commit": None}`` when it is not one (an installed wheel) or git is missing."""
    folder = folder or Path(__file__).resolve().parents[2]
    try:
        commit = _git(folder, "rev-parse", "HEAD")
        dirty = bool(_git(folder, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None}
    return {"git_commit": commit, "git_dirty": dirty}


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True,
                          check=True, timeout=30).stdout.strip()


def launch(argv: list[str], world_size: int) -> dict[str, Any]:
    """The command line as this process got it, the launch line that reproduces it, and the
    numerics environment (the variables of :data:`NUMERIC_ENVIRONMENT` that are set)."""
    nproc = os.environ.get("LOCAL_WORLD_SIZE", str(world_size))
    nodes = world_size // max(int(nproc), 1)
    head = f"torchrun --nnodes {nodes} --nproc_per_node {nproc}" if nodes > 1 else \
        f"torchrun --nproc_per_node {nproc}"
    return {
        "argv": [sys.executable, *sys.argv],
        "command": f"{head} -m hyper_parallel.train {shlex.join(argv)}".rstrip(),
        "environment": {name: os.environ[name] for name in NUMERIC_ENVIRONMENT
                        if name in os.environ},
    }


def input_files(config: Any) -> list[dict[str, Any]]:
    """Each file under each of :data:`INPUT_FIELDS` that is set (``pkg://`` paths and globs
    resolved), and the shipped tokenizer when no field names one: its field, path, size and
    sha256 (``mtime`` instead above :data:`HASH_LIMIT_BYTES`, or once
    :data:`HASH_BUDGET_BYTES` are hashed), in field then path order."""
    from hyper_parallel import assets

    files = []
    for field in INPUT_FIELDS:
        value: Any = config
        for part in field.split("."):
            value = getattr(value, part)
        if value:
            files += [(field, path) for path in _files(assets.resolve_path(str(value)))]
    if not (config.tokenizer.path or config.hf_assets_path or config.model.weights_path):
        # The tokenizer the engine falls back to: the one shipped with hyper_parallel.
        files.append(("tokenizer (shipped)", Path(assets.tokenizer_path())))
    found, budget = [], HASH_BUDGET_BYTES
    for field, path in files:
        fact = file_fact(path, hash_limit=min(HASH_LIMIT_BYTES, budget))
        budget -= fact["size"] if "sha256" in fact else 0
        found.append({"field": field, **fact})
    return found


def _files(path: str) -> Iterator[Path]:
    """The files a path names: itself, every file below a folder, every match of a glob."""
    import glob

    matches = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
    for match in map(Path, matches):
        if match.is_file():
            yield match
        elif match.is_dir():
            yield from sorted(p for p in match.rglob("*") if p.is_file())


def file_fact(path: Path, hash_limit: int | None = None) -> dict[str, Any]:
    """``{"path", "size", "sha256"}``, or ``{"path", "size", "mtime"}`` above ``hash_limit``
    (default :data:`HASH_LIMIT_BYTES`)."""
    size = path.stat().st_size
    if size > (HASH_LIMIT_BYTES if hash_limit is None else hash_limit):
        return {"path": str(path), "size": size, "mtime": path.stat().st_mtime}
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"path": str(path), "size": size, "sha256": digest.hexdigest()}


__all__ = ["HASH_BUDGET_BYTES", "HASH_LIMIT_BYTES", "INPUT_FIELDS", "NUMERIC_ENVIRONMENT", "NUMERIC_LIBRARIES",
           "file_fact", "git_state", "input_files", "launch", "versions"]
