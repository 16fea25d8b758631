"""Benchmark of the code generator: the whole process that `make codegen` runs, and black's share.

    .venv/bin/python bench/bench_codegen.py [--runs 7] [--out bench/results/codegen.json]

Each run is a fresh ``python -m hyper_parallel.codegen`` process doing everything `make codegen`
does -- load and check the table, introspect the legacy schema and the component Configs, render
the four files, format the three Python files with black, write them -- into a temporary
directory instead of the repository (identical work; the checkout is left alone). Reported:

* whole process: wall time from start to exit, and the CPU time (user + sys) of the child, which
  is the better figure on a busy machine (the wall time includes waiting for a CPU);
* black: the seconds spent inside ``black.format_str``, measured in the child, and its share of
  the child's wall time;
* the size of what is formatted;
* the share of the whole process spent converting the example YAMLs into ``recipes/`` (that part
  imports torch: a recipe is proven by executing it and building its ``HyperTrainer.Config``);
* ``--from-yaml`` on each example YAML: a fresh ``python -m hyper_parallel.codegen --from-yaml``
  process per run (writing into a temporary directory), its wall time and the share of it that
  is the proof step (executing the recipe and converting it back), measured in the child;
* the fleet: one ``--from-yaml examples/yaml`` process converting the six example YAMLs into one
  registry module, against the six single-file processes above (their median walls summed), as
  a ratio to one single-file conversion; and the module's line count against the six recipes'.

Targets: 1.0 s for the table part of ``make codegen`` (the recipes of the examples come on top),
2.5 s whole process per ``--from-yaml`` file (importing torch alone takes about 1.7 s here), and
the fleet of six in less than 2 single-file conversions. Medians over ``--runs`` runs (after one
warm-up run that fills the OS file cache and black's grammar cache).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 1.0
FROM_YAML_TARGET_SECONDS = 2.5
#: The fleet of the six examples, in single-file conversions: less than two.
FLEET_TARGET_SINGLES = 2.0


def one_run(out_dir: Path, timings: Path) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "hyper_parallel.codegen", "--out", str(out_dir), "-q",
         "--timings-json", str(timings)],
        cwd=REPO, check=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    recorded = json.loads(timings.read_text())
    return {"wall_s": wall, "cpu_s": cpu, "black_s": recorded["black_seconds"],
            "recipes_s": recorded["recipes_seconds"]}


def one_from_yaml(source: Path, out_dir: Path, timings: Path) -> dict[str, float]:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "hyper_parallel.codegen", "--from-yaml", str(source), "-o",
         str(out_dir / f"{source.stem}.py"), "--force", "-q", "--timings-json", str(timings)],
        cwd=REPO, check=True,
    )
    wall = time.perf_counter() - start
    return {"wall_s": wall, "proof_s": json.loads(timings.read_text())["proof_seconds"]}


def bench_from_yaml(runs: int, tmp: Path) -> dict:
    """Median whole-process time of --from-yaml per example YAML, and the proof's share."""
    results = {}
    timings = tmp / "from_yaml_timings.json"
    for source in sorted((REPO / "examples" / "yaml").glob("*.yaml")):
        one_from_yaml(source, tmp, timings)  # warm-up
        per_run = [one_from_yaml(source, tmp, timings) for _ in range(runs)]
        wall = statistics.median(r["wall_s"] for r in per_run)
        proof = statistics.median(r["proof_s"] for r in per_run)
        results[source.name] = {"wall_s": round(wall, 3), "proof_s": round(proof, 4),
                                "proof_share": round(proof / wall, 4),
                                "meets_target": wall <= FROM_YAML_TARGET_SECONDS}
        print(f"--from-yaml {source.name}: {wall:.3f} s whole process (median of {runs}), "
              f"proof {proof * 1000:.1f} ms = {proof / wall:.2%}; target "
              f"{FROM_YAML_TARGET_SECONDS:.1f} s")
    return results


def one_fleet(out: Path, timings: Path) -> dict[str, float]:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "hyper_parallel.codegen", "--from-yaml",
         str(REPO / "examples" / "yaml"), "-o", str(out), "--force", "-q",
         "--timings-json", str(timings)],
        cwd=REPO, check=True,
    )
    wall = time.perf_counter() - start
    return {"wall_s": wall, "proof_s": json.loads(timings.read_text())["proof_seconds"]}


def bench_fleet(runs: int, tmp: Path, from_yaml: dict) -> dict:
    """Median whole-process time of the fleet conversion of the six examples, against the six
    single-file conversions measured by :func:`bench_from_yaml` (written into ``tmp``)."""
    timings, out = tmp / "fleet_timings.json", tmp / "config_registry.py"
    one_fleet(out, timings)  # warm-up
    per_run = [one_fleet(out, timings) for _ in range(runs)]
    wall = statistics.median(r["wall_s"] for r in per_run)
    proof = statistics.median(r["proof_s"] for r in per_run)
    singles = sum(r["wall_s"] for r in from_yaml.values())
    one_single = singles / len(from_yaml)
    module_lines = len(out.read_text().splitlines())
    single_lines = sum(len((tmp / f"{Path(name).stem}.py").read_text().splitlines())
                       for name in from_yaml)
    result = {"files": len(from_yaml), "wall_s": round(wall, 3), "proof_s": round(proof, 4),
              "six_single_wall_s": round(singles, 3),
              "in_single_conversions": round(wall / one_single, 3),
              "share_of_six_singles": round(wall / singles, 3),
              "target_single_conversions": FLEET_TARGET_SINGLES,
              "meets_target": wall / one_single < FLEET_TARGET_SINGLES,
              "module_lines": module_lines, "single_lines": single_lines,
              "lines_ratio": round(module_lines / single_lines, 3)}
    print(f"--from-yaml fleet of {len(from_yaml)}: {wall:.3f} s whole process (median of {runs}) "
          f"= {wall / one_single:.2f} single-file conversions (target < "
          f"{FLEET_TARGET_SINGLES:.0f}); the {len(from_yaml)} single-file processes take "
          f"{singles:.3f} s ({wall / singles:.0%}); one module of {module_lines} lines vs "
          f"{single_lines} lines of single-file recipes")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "codegen.json"))
    opts = parser.parse_args()
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-codegen-") as tmp:
        out_dir, timings = Path(tmp) / "out", Path(tmp) / "timings.json"
        one_run(out_dir, timings)  # warm-up
        for _ in range(opts.runs):
            runs.append(one_run(out_dir, timings))
        python_files = [p for p in out_dir.rglob("*.py")]
        lines = sum(len(p.read_text().splitlines()) for p in python_files)
    wall = statistics.median(r["wall_s"] for r in runs)
    cpu = statistics.median(r["cpu_s"] for r in runs)
    black = statistics.median(r["black_s"] for r in runs)
    recipes = statistics.median(r["recipes_s"] for r in runs)
    with tempfile.TemporaryDirectory(prefix="bench-from-yaml-") as tmp:
        from_yaml = bench_from_yaml(opts.runs, Path(tmp))
        fleet = bench_fleet(opts.runs, Path(tmp), from_yaml)
    results = {
        "runs": opts.runs,
        "whole_process_wall_s": round(wall, 3),
        "whole_process_wall_min_s": round(min(r["wall_s"] for r in runs), 3),
        "whole_process_cpu_s": round(cpu, 3),
        "black_s": round(black, 3),
        "black_share_of_wall": round(black / wall, 3),
        "black_share_of_cpu": round(min(black / cpu, 1.0), 3),
        "example_recipes_s": round(recipes, 3),
        "table_part_wall_s": round(wall - recipes, 3),
        "meets_target_table_part": wall - recipes <= TARGET_SECONDS,
        "from_yaml": from_yaml,
        "from_yaml_target_s": FROM_YAML_TARGET_SECONDS,
        "fleet": fleet,
        "formatted_python_files": len(python_files),
        "formatted_python_lines": lines,
        "target_s": TARGET_SECONDS,
        "meets_target_wall": wall <= TARGET_SECONDS,
        "meets_target_cpu": cpu <= TARGET_SECONDS,
        "load_average_1min": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
        "per_run": [{k: round(v, 3) for k, v in r.items()} for r in runs],
    }
    print(f"make codegen, whole process (median of {opts.runs}): wall {wall:.3f} s "
          f"(min {results['whole_process_wall_min_s']:.3f} s), CPU {cpu:.3f} s, of which "
          f"{recipes:.3f} s convert the example YAMLs into recipes/; table part "
          f"{wall - recipes:.3f} s, target {TARGET_SECONDS:.1f} s")
    print(f"black: {black:.3f} s = {results['black_share_of_wall']:.0%} of the wall time "
          f"({lines} lines in {len(python_files)} files); load average "
          f"{results['load_average_1min']} on {results['cpus']} CPUs")
    print(json.dumps(results, indent=2))
    Path(opts.out).parent.mkdir(parents=True, exist_ok=True)
    Path(opts.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
