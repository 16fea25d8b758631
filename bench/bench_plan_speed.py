"""What a change does to the plan's wall time: two trees of the repository, run alternately.

    .venv/bin/python bench/bench_plan_speed.py [--base REV] [--head REV] [--runs 4]
        [--smoke] [--out bench/results/plan_speed.json] [-- plan arguments]

The plan's time moves by a quarter between identical runs of one tree on a shared 2-core
machine, and by more from one day's host to the next, so a change is measured against the tree
before it on one host, in one session, the two trees' runs alternating (pair ``i`` runs the base
first when ``i`` is even, the head first when it is odd, so a drift of the host's speed falls on
both alike). ``--base`` is a commit (``HEAD`` by default); ``--head`` a commit too, or by
default this working tree with its uncommitted changes. A commit is exported with
``git archive`` into a temporary folder, so nothing of the repository's ``.git`` is touched.

Each run is a fresh interpreter started in the tree it times, that tree alone on its
``PYTHONPATH`` and its import checked: ``python -m`` puts the working directory ahead of
``PYTHONPATH``, and an earlier comparison that ran the newer tree's folder ran the newer tree in
both columns (``docs/plan.md``, "How two trees are compared"). Each run is cold
(``HYPER_PARALLEL_PREFLIGHT_CACHE=off``: no preflight read from an earlier run) and prints the
plan's ``--json``; every run of a tree must print the same JSON to the byte (a plan that
depends on timing is a bug), and whether the two trees print the same is reported (a change
meant to be faster only should keep it).

It prints each pair's wall and CPU seconds (the plan's processes, its pool's workers
included), each tree's mean and range, the head's mean over the base's and in how many pairs
the head was faster. The default plan is the issue's: the 9B recipe on one node of 8 H100s.
``--smoke``: the tiny flavor's FSDP 2 recipe on 2 GPUs, one preflight in the plan's own process,
one pair.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from _smoke import SMOKE_HELP, exit_status, result_path, write_results

#: The issue's speed bar: the 9B recipe on one node of 8 H100s (under 30 s).
DEFAULT_PLAN = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_9b_fsdp8", "--nodes", "1"]
#: A seconds-long plan of the same code paths: one preflight of the tiny flavor.
SMOKE_PLAN = ["--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_fsdp2",
              '--model.config_overrides={"flavor": "tiny"}', "--training.global_batch_size=8",
              "--nodes", "1", "--gpus-per-node", "2", "--budget", "1"]
WORKTREE = "worktree"

#: The entry's exit status when the tree it runs is not the one it imported (the plan's own are
#: 0, 1 and 2).
WRONG_TREE = 3
#: Run in the tree's folder: the plan's entry, after checking which tree was imported.
_ENTRY = ("import importlib.util, sys\n"
          "from pathlib import Path\n"
          "tree = Path(sys.argv.pop(1)).resolve()\n"
          "spec = importlib.util.find_spec('hyper_parallel')\n"
          "imported = Path(spec.origin).resolve() if spec else Path('(nowhere)')\n"
          "if tree not in imported.parents:\n"
          "    print(f'imported {imported}, not the tree under {tree}', file=sys.stderr)\n"
          f"    sys.exit({WRONG_TREE})\n"
          "from hyper_parallel.plan.__main__ import main\n"
          "sys.exit(main())\n")


@contextlib.contextmanager
def tree_of(rev: str, scratch: Path, side: str) -> Iterator[Path]:
    """The folder holding ``rev``'s files: this working tree for :data:`WORKTREE`, else the
    commit exported into ``scratch`` (a folder of its own for each ``side``: the two sides
    may name one commit)."""
    if rev == WORKTREE:
        yield REPO
        return
    commit = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=REPO,
                            capture_output=True, text=True, check=False)
    if commit.returncode != 0:
        raise SystemExit(f"{rev}: not a commit of {REPO} ({commit.stderr.strip()})")
    folder = scratch / f"{side}-{commit.stdout.strip()[:12]}"
    folder.mkdir()
    archive = subprocess.run(["git", "archive", "--format=tar", commit.stdout.strip()],
                             cwd=REPO, capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    yield folder


def run_plan(tree: Path, plan_args: list[str]) -> dict:
    """One cold plan run from ``tree``: wall and CPU seconds, exit status and its JSON."""
    env = {**os.environ, "PYTHONPATH": str(tree), "HYPER_PARALLEL_PREFLIGHT_CACHE": "off",
           "HYPER_PARALLEL_PLATFORM": "torch"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _ENTRY, str(tree), *plan_args, "--json"],
                          cwd=tree, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "exit": proc.returncode,
           "stdout": proc.stdout}
    if proc.returncode not in (0, 1):  # 1: nothing fits, still a plan
        run["error"] = f"exit {proc.returncode}: {proc.stderr.strip()[-2000:]}"
    return run


def summarize(runs: list[dict]) -> dict:
    walls = [r["wall_s"] for r in runs]
    return {"wall_s": walls, "cpu_s": [r["cpu_s"] for r in runs],
            "mean_wall_s": round(statistics.mean(walls), 2),
            "min_wall_s": min(walls), "max_wall_s": max(walls),
            "same_json_every_run": len({r["stdout"] for r in runs}) == 1}


def compare(base: str, head: str, runs: int, plan_args: list[str]) -> dict:
    """``runs`` pairs of cold plans of ``base`` and ``head``, alternately (see the module
    docstring)."""
    results: dict = {"base": base, "head": head, "plan": plan_args, "pairs": [],
                     "load_average_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="plan_speed.") as scratch, \
            tree_of(base, Path(scratch), "base") as base_tree, \
            tree_of(head, Path(scratch), "head") as head_tree:
        trees = {"base": base_tree, "head": head_tree}
        done: dict[str, list[dict]] = {"base": [], "head": []}
        for pair in range(runs):
            order = ("base", "head") if pair % 2 == 0 else ("head", "base")
            row = {}
            for side in order:
                run = run_plan(trees[side], plan_args)
                done[side].append(run)
                row[side] = {k: run[k] for k in ("wall_s", "cpu_s", "exit")}
                if "error" in run:
                    results["error"] = f"{side} ({results[side]}): {run['error']}"
                    return results
                print(f"pair {pair + 1}  {side:4}  {run['wall_s']:6.1f} s wall  "
                      f"{run['cpu_s']:6.1f} CPU-s", flush=True)
            row["head_over_base"] = round(row["head"]["wall_s"] / row["base"]["wall_s"], 3)
            results["pairs"].append(row)
    results.update({side: {"rev": results[side], **summarize(done[side])} for side in done})
    unstable = [side for side in done if not results[side]["same_json_every_run"]]
    if unstable:  # the figures are kept: the error says why they do not count
        results["error"] = (f"{' and '.join(unstable)}: the runs printed different plans; a "
                            "plan must not depend on timing or on the order of a set")
    results["same_json_both_trees"] = done["base"][0]["stdout"] == done["head"][0]["stdout"]
    results["head_over_base_mean_wall"] = round(
        results["head"]["mean_wall_s"] / results["base"]["mean_wall_s"], 3)
    results["pairs_head_faster"] = sum(
        row["head"]["wall_s"] < row["base"]["wall_s"] for row in results["pairs"])
    results["load_average_end"] = os.getloadavg()[0]
    return results


def report(results: dict) -> None:
    if "error" in results and "pairs_head_faster" not in results:
        print(f"FAILED {results['error']}")
        return
    for side in ("base", "head"):
        s = results[side]
        print(f"{side} {s['rev']}: mean {s['mean_wall_s']:.1f} s wall "
              f"({s['min_wall_s']:.1f}-{s['max_wall_s']:.1f}), CPU "
              f"{min(s['cpu_s']):.1f}-{max(s['cpu_s']):.1f} s; same JSON every run: "
              f"{s['same_json_every_run']}")
    print(f"head / base mean wall {results['head_over_base_mean_wall']:.3f}; head faster in "
          f"{results['pairs_head_faster']} of {len(results['pairs'])} pairs; same JSON in both "
          f"trees: {results['same_json_both_trees']}")
    if "error" in results:
        print(f"FAILED {results['error']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default="HEAD", help="a commit (default HEAD)")
    parser.add_argument("--head", default=WORKTREE,
                        help=f"a commit, or {WORKTREE!r}: this working tree (the default)")
    parser.add_argument("--runs", type=int, default=4, help="pairs of runs (default 4)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--out", default=None)
    parser.add_argument("plan", nargs=argparse.REMAINDER,
                        help="the plan's arguments after --, without --json (default: the 9B "
                             "on one node of 8 H100s)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs {args.runs}: give at least 1 pair")
    plan_args = [a for a in args.plan if a != "--"] or (SMOKE_PLAN if args.smoke
                                                        else DEFAULT_PLAN)
    if args.smoke:
        args.runs = 1
        os.environ.setdefault("HYPER_PARALLEL_PREFLIGHT_PROCESSES", "1")
    results = compare(args.base, args.head, args.runs, plan_args)
    report(results)
    print(write_results(result_path(args.out, REPO / "bench" / "results" / "plan_speed.json",
                                    args.smoke), results))
    if "error" in results:
        return 1
    return exit_status(results, args.smoke)


if __name__ == "__main__":
    raise SystemExit(main())
