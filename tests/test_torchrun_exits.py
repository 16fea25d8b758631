"""Every script the tests and the benchmarks run as torchrun's ranks leaves through
:func:`hyper_parallel.utils.process.exit_now`, as the training entry does.

Interpreter finalization after ``destroy_process_group`` can abort ("terminate called without an
active exception": a gloo thread still joinable while C++ statics are destroyed) and turn a rank
that finished into a failed torchrun job (:mod:`hyper_parallel.utils.process`). So each such
script's last statement (the ``if __name__ == "__main__":`` block's, else the module's) is a call
of ``exit_now``, after all its work, the process-group teardown included.

The scripts are found from their launch sites, read with ``ast`` (nothing is imported or run):

* a call of the test launchers of :mod:`tests.helpers.torchrun` (``spawn_ranks``,
  ``run_python``, ``torchrun``), its first argument the script;
* a command list holding ``torch.distributed.run`` or the benchmarks' launchers
  (``bench/_launch.py``: ``torchrun_command``, ``launcher_command``), its elements the script
  (a path, ``-m module``, or what a name, a starred list, a table of lambdas holds).

A path is followed through the names of its module (and those it imports from the repository);
a script the test writes (``tmp_path / "x.py"`` then ``.write_text(source)``) is checked in the
source it writes. A launch site whose script cannot be found fails the test: the reader learns
the new form, or the site is listed in :data:`RUN_TIME_SCRIPTS` with why its scripts are not
torchrun ranks.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Where launch sites are looked for; ``tests/codegen`` holds launch lines that the converter
#: reads as text (``--from-yaml 'torchrun ...'``), never runs.
SEARCHED = ("tests", "bench")
NOT_SEARCHED = ("tests/codegen",)
LAUNCHERS = {"spawn_ranks", "run_python", "torchrun"}
COMMANDS = {"torchrun_command", "launcher_command"}
TORCHRUN = "torch.distributed.run"
#: ``file:function`` launch sites whose script is chosen at run time, and why none of those
#: scripts is a torchrun rank.
RUN_TIME_SCRIPTS = {
    # Each bench driver in one process (--smoke): the driver forms no process group itself;
    # the ranks it launches are launch sites of its own, found in its file.
    "tests/bench/test_bench_smoke.py:test_bench_smoke_run",
    # A command line the warm stand-in for python is asked to plan, never launched.
    "tests/test_warm_python.py:test_what_a_fork_cannot_be_is_a_fresh_interpreter",
}
#: Scripts that must be among those found: the resolver's own check (a form it stops
#: following would otherwise pass by finding less).
MUST_FIND = {
    "bench/_preflight_truth.py", "bench/_trainer_overhead.py", "bench/bench_context_parallel.py",
    "bench/bench_hf_export.py", "hyper_parallel/train.py", "scripts/train_lm.py",
    "tests/helpers/case_worker.py", "tests/helpers/fake_cuda/worker.py",
    "tests/helpers/fake_cuda/host_reads_worker.py",
    "tests/torch/st/qwen3_5/workers/context_parallel_worker.py",
    "tests/torch/st/qwen3_5/workers/rejoin_worker.py",
    "tests/torch/ut/components/test_resume_agreement.py",
    "tests/torch/ut/data/test_vision_shares.py",
    "tests/torch/st/qwen3_5/test_gpu_host_reads.py:script",
}


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _rel(path: Path) -> str:
    return path.resolve().relative_to(REPO).as_posix()


@functools.cache
def _assignments(path: Path) -> dict[str, list[ast.expr]]:
    """Name -> every expression assigned to it anywhere in the module (functions included),
    and the names it imports from a repository module, as ``ImportFrom`` nodes."""
    found: dict[str, list] = {}
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.value is not None:
            found.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                found.setdefault(alias.asname or alias.name, []).append(node)
    return found


def _imported_module(path: Path, node: ast.ImportFrom) -> Path | None:
    if node.level:
        base = path.parent
        for _ in range(node.level - 1):
            base = base.parent
        parts = (node.module or "").split(".") if node.module else []
    else:
        base, parts = REPO, (node.module or "").split(".")
    candidate = base.joinpath(*parts)
    for found in (candidate.with_suffix(".py"), candidate / "__init__.py"):
        if found.is_file():
            return found
    return None


class _Reader:
    """Evaluates what a launch site names, in the module ``path``."""

    def __init__(self, path: Path):
        self.path = path

    def values(self, node: ast.AST, depth: int = 0) -> list:
        """The values ``node`` may hold: ``Path`` objects and strings (a name assigned several
        times may hold each); nothing for what cannot be known before it runs."""
        if depth > 30:
            return []
        deeper = functools.partial(self.values, depth=depth + 1)
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)):
            return [node.value]
        if isinstance(node, ast.Name):
            if node.id == "__file__":
                return [self.path]
            return [v for value in _assignments(self.path).get(node.id, [])
                    for v in self._named(node.id, value, depth)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return [left / right for left in deeper(node.left) if isinstance(left, Path)
                    for right in deeper(node.right) if isinstance(right, str)]
        if isinstance(node, ast.Attribute):
            if node.attr == "parent":
                return [v.parent for v in deeper(node.value) if isinstance(v, Path)]
            return []
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "parents":
            return [p.parents[i] for p in deeper(node.value.value) if isinstance(p, Path)
                    for i in deeper(node.slice) if isinstance(i, int)]
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        return []

    def _named(self, name: str, value: ast.AST, depth: int) -> list:
        if not isinstance(value, ast.ImportFrom):
            return self.values(value, depth + 1)
        module = _imported_module(self.path, value)
        if module is None:
            return []
        original = next(a.name for a in value.names if (a.asname or a.name) == name)
        return _Reader(module).values(ast.Name(original, ast.Load()), depth + 1)

    def _call(self, node: ast.Call, depth: int) -> list:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        args = [v for arg in node.args[:1] for v in self.values(arg, depth + 1)]
        if name in ("Path", "str", "abspath", "realpath", "fspath"):
            return [Path(v) if name != "str" or isinstance(v, Path) else v for v in args]
        if name == "resolve" and isinstance(func, ast.Attribute):
            return [v.resolve() for v in self.values(func.value, depth + 1)
                    if isinstance(v, Path)]
        if name == "with_name" and isinstance(func, ast.Attribute):
            return [v.with_name(a) for v in self.values(func.value, depth + 1)
                    if isinstance(v, Path) for a in args if isinstance(a, str)]
        return []

    def scripts(self, node: ast.AST, depth: int = 0) -> list[str]:
        """The scripts a command (or part of one) runs: ``.py`` paths (repository-relative, or
        ``file:name`` for a script written by the test) and ``-m`` modules' files."""
        if depth > 30:
            return []
        deeper = functools.partial(self.scripts, depth=depth + 1)
        if isinstance(node, (ast.List, ast.Tuple)):
            found, elements = [], node.elts
            for i, element in enumerate(elements):
                if isinstance(element, ast.Constant) and element.value == "-m" \
                        and i + 1 < len(elements):
                    module = self.values(elements[i + 1])
                    found += [_module_file(m) for m in module if isinstance(m, str)]
                elif not (i and isinstance(elements[i - 1], ast.Constant)
                          and elements[i - 1].value == "-m"):
                    found += deeper(element)
            return [f for f in found if f]
        if isinstance(node, ast.Starred):
            return deeper(node.value)
        if isinstance(node, ast.IfExp):
            return deeper(node.body) + deeper(node.orelse)
        if isinstance(node, ast.Dict):
            return [s for value in node.values for s in deeper(value)]
        if isinstance(node, ast.Lambda):
            return deeper(node.body)
        if isinstance(node, ast.Subscript):
            return deeper(node.value)
        if isinstance(node, ast.Call) and not isinstance(node.func, ast.Attribute) \
                and getattr(node.func, "id", None) not in ("str", "Path"):
            return deeper(node.func)
        if isinstance(node, ast.Name) and node.id != "__file__":
            assigned = _assignments(self.path).get(node.id, [])
            collections = [v for v in assigned if isinstance(
                v, (ast.List, ast.Tuple, ast.Dict, ast.Lambda, ast.IfExp))]
            if collections:
                return [s for v in collections for s in deeper(v)]
        found = [_script(v) for v in self.values(node)]
        if not any(found) and isinstance(node, ast.Name):
            found = [f"{_rel(self.path)}:{node.id}"] if self._written(node.id) else []
        return [f for f in found if f]

    def _written(self, name: str) -> bool:
        """Whether the module writes the script ``name`` holds (``name.write_text(...)``)."""
        return bool(written_sources(self.path, name))


def _script(value) -> str | None:
    if isinstance(value, str) and value.endswith(".py"):
        value = REPO / value
    if isinstance(value, Path) and value.suffix == ".py":
        return _rel(value)
    return None


def _module_file(module: str) -> str | None:
    base = REPO.joinpath(*module.split("."))
    for found in (base.with_suffix(".py"), base / "__main__.py"):
        if found.is_file():
            return _rel(found)
    return None


def _source_text(node: ast.AST, path: Path) -> str | None:
    """The text a string expression holds, an f-string's fields read as ``'_'`` (they are
    values inside the script's own literals)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "'_'" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _source_text(node.left, path), _source_text(node.right, path)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "dedent" and node.args:
        text = _source_text(node.args[0], path)
        return None if text is None else textwrap.dedent(text)
    if isinstance(node, ast.Name):
        for value in _assignments(path).get(node.id, []):
            text = _source_text(value, path)
            if text is not None:
                return text
    return None


def written_sources(path: Path, name: str) -> list[str]:
    """The sources module ``path`` writes into the file ``name`` holds."""
    found = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "write_text" and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == name and node.args:
            text = _source_text(node.args[0], path)
            if text is not None:
                found.append(text)
    return found


def _is_command(node: ast.List) -> bool:
    for element in node.elts:
        if isinstance(element, ast.Constant) and element.value == TORCHRUN:
            return True
        if isinstance(element, ast.Starred) and any(
                isinstance(n, ast.Call) and getattr(n.func, "id", None) in COMMANDS
                for n in ast.walk(element.value)):
            return True
    return False


def _functions(tree: ast.Module):
    """``(enclosing function name or '<module>', node)`` of every node."""
    def visit(node, owner):
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else owner
            yield name, child
            yield from visit(child, name)
    yield from visit(tree, "<module>")


def launch_sites() -> dict[str, list[str]]:
    """``file:function:line`` of every launch site -> the scripts it runs."""
    sites: dict[str, list[str]] = {}
    for folder in SEARCHED:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = _rel(path)
            if any(rel.startswith(skip + "/") for skip in NOT_SEARCHED):
                continue
            reader = _Reader(path)
            for owner, node in _functions(_tree(path)):
                if owner in LAUNCHERS | COMMANDS:
                    continue  # the launchers' own definitions
                if isinstance(node, ast.Call) and node.args and getattr(
                        node.func, "id", getattr(node.func, "attr", None)) in LAUNCHERS:
                    module = any(k.arg == "module" and getattr(k.value, "value", False)
                                 for k in node.keywords)
                    scripts = ([_module_file(v) for v in reader.values(node.args[0])]
                               if module else reader.scripts(node.args[0]))
                elif isinstance(node, ast.List) and _is_command(node):
                    scripts = reader.scripts(node)
                else:
                    continue
                sites[f"{rel}:{owner}:{node.lineno}"] = sorted({s for s in scripts if s})
    return sites


def _last_statement(body: list[ast.stmt]) -> ast.stmt:
    """The module's last statement, or its ``__main__`` block's."""
    last = body[-1]
    if isinstance(last, ast.If) and "__main__" in ast.unparse(last.test):
        return last.body[-1]
    return last


def leaves_through_exit_now(source: str) -> bool:
    last = _last_statement(ast.parse(source).body)
    return isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) \
        and getattr(last.value.func, "id", getattr(last.value.func, "attr", None)) == "exit_now"


def _source_of(script: str) -> list[str]:
    if ":" in script:
        rel, name = script.split(":", 1)
        return written_sources(REPO / rel, name)
    return [(REPO / script).read_text(encoding="utf-8")]


@pytest.fixture(scope="module")
def sites() -> dict[str, list[str]]:
    return launch_sites()


def test_every_launch_site_names_its_scripts(sites):
    unknown = sorted(site for site, scripts in sites.items() if not scripts
                     and site.rsplit(":", 1)[0] not in RUN_TIME_SCRIPTS)
    assert not unknown, ("launch sites whose script this test cannot find (teach the reader "
                         f"their form, or list them in RUN_TIME_SCRIPTS with why): {unknown}")
    stale = RUN_TIME_SCRIPTS - {site.rsplit(":", 1)[0] for site in sites}
    assert not stale, f"RUN_TIME_SCRIPTS lists sites that no longer exist: {sorted(stale)}"
    found = {script for scripts in sites.values() for script in scripts}
    assert MUST_FIND <= found, f"not found: {sorted(MUST_FIND - found)}"


def test_every_script_run_as_torchrun_ranks_leaves_through_exit_now(sites):
    scripts = sorted({script for found in sites.values() for script in found})
    late = [script for script in scripts
            if not all(leaves_through_exit_now(text) for text in _source_of(script))]
    assert not late, ("these scripts run as torchrun's ranks but do not end with exit_now(...) "
                      "(hyper_parallel.utils.process: leave once the process group is "
                      f"destroyed): {late}")


@pytest.mark.parametrize("source, leaves", [
    ("def main():\n    pass\n\n\nif __name__ == '__main__':\n    main()\n", False),
    ("if __name__ == '__main__':\n    code = main()\n    exit_now(code)\n", True),
    ("if __name__ == '__main__':\n    exit_now(main())\n    print('after')\n", False),
    ("import sys\nexit_now(0)\n", True),
    ("if __name__ == '__main__':\n    raise SystemExit(main())\n", False),
])
def test_the_check_reads_a_scripts_last_statement(source, leaves):
    assert leaves_through_exit_now(source) is leaves
