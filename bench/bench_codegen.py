"""Benchmark of the configuration toolchain, whole process: the code generator, ``--from-yaml``
and ``ConfigManager.parse_args`` against torchtitan's, side by side with their targets.

    .venv/bin/python bench/bench_codegen.py [--runs 7] [--out bench/results/codegen.json]
                                             [--yaml examples/yaml/train_qwen3_5_debug.yaml]
                                             [--no-titan] [--fleet-sizes 100,1000]
                                             [--growth-only] [--smoke]

Every figure is the median wall time of fresh processes (after one untimed warm-up run that fills
the OS file cache, the bytecode and black's grammar cache); the CPU time (user + sys) of the
children is reported too, the better figure on a busy machine. The three with targets:

* ``--from-yaml`` on one example YAML (``--yaml``): a fresh ``python -m hyper_parallel.codegen
  --from-yaml`` process writing into a temporary directory, proof included (executing the
  recipe and converting it back; its share is measured in the child). Target 0.5 s.
* ``make codegen`` when nothing changed: ``python -m hyper_parallel.codegen -q`` in the
  checkout, which finds every recorded input hash current and renders nothing. Measured only
  when ``--check`` says the checkout is current (so the bench never rewrites it; otherwise the
  figure is skipped with the reason). Target 0.6 s.
* ``ConfigManager.parse_args`` of a registry recipe with three overrides, to the parsed config,
  against torchtitan's (``bench/bench_cli.py``'s whole-process measurement, run here with its
  torchtitan environment ``bench/.titan-env``; ``--no-titan`` or a missing environment measures
  ours alone, and ``python bench/bench_cli.py --setup`` builds it). Target 0.15x.

For context, without targets: ``make codegen`` regenerating everything (into a temporary
directory: identical work, the checkout left alone) with black's share and the share spent
converting the example YAMLs into ``recipes/``; and the fleet, one ``--from-yaml examples/yaml``
process converting the six example YAMLs into one registry module, in single conversions (target
fewer than 2) and its line count against the six one-file recipes of ``recipes/``.

The fleet's growth, also without targets: ``--fleet-sizes`` fleets (default 100 and 1,000
YAMLs; ``--growth-only`` measures nothing else) of seeded variants of
``examples/yaml/train_qwen3_5_fsdp2.yaml`` (:func:`write_fleet`: learning rate, steps, seed,
weight decay, activation checkpointing and output folder varied), each converted by one
``--from-yaml`` process, once: its wall time, the time per YAML and the ratio of the largest
fleet's to the smallest's (1 is linear growth), the child's peak RSS, and the module's lines and
repeated lines against the one-file recipes of the same YAMLs (converted in this process,
untimed).

None of these processes imports torch (``tests/test_torch_free.py`` proves it), so torchtitan's
own parse, which does, is the slow side of the ratio. Figures inflate under machine load: the
1-minute load average is recorded with them.

``--smoke`` proves in a few seconds that every figure still runs: one timed process each and no
warm-up run, ours alone (no torchtitan), fleets of 1 and 2 YAMLs, and no file unless ``--out``
names one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_cli  # this directory (sys.path[0]): the parse_args measurement has one home
from _smoke import SMOKE_HELP, result_path, write_results

REPO = Path(__file__).resolve().parents[1]
DEFAULT_YAML = REPO / "examples" / "yaml" / "train_qwen3_5_debug.yaml"

FROM_YAML_TARGET_SECONDS = 0.5
CODEGEN_UNCHANGED_TARGET_SECONDS = 0.6
PARSE_RATIO_TARGET = bench_cli.TARGET_WHOLE
#: The fleet of the six examples, in single-file conversions: less than two.
FLEET_TARGET_SINGLES = 2.0

#: The fleets of the growth figures: variants of one example, each line below given one of its
#: values at random (the output folder is each file's own).
FLEET_SOURCE = REPO / "examples" / "yaml" / "train_qwen3_5_fsdp2.yaml"
FLEET_VARIED = {
    "    lr: 2.0e-3\n": ["1.0e-3", "2.0e-3", "3.0e-3", "5.0e-4"],
    "  max_steps: 10\n": ["10", "20", "40", "80"],
    "  seed: 42\n": ["1", "2", "3", "42", "1234"],
    "    weight_decay: 0.1\n": ["0.0", "0.01", "0.1"],
    "    activation_checkpoint: full\n": ["full", "selective", '"off"'],
}
FLEET_SEED = 0
DEFAULT_FLEET_SIZES = (100, 1000)


def timed(cmd: list[str], timings: Path | None = None) -> dict[str, float]:
    """Run ``cmd`` in the repository; wall and child CPU seconds, plus its ``--timings-json``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    recorded = json.loads(timings.read_text()) if timings is not None else {}
    return {"wall_s": wall, "cpu_s": cpu, **{k.replace("_seconds", "_s"): v
                                              for k, v in recorded.items()}}


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in runs), 4) for key in runs[0]}


#: Whether :func:`repeat` runs its untimed warm-up first (not in a smoke run: nothing is kept).
WARM_UP = True


def repeat(runs: int, cmd: list[str], timings: Path | None = None) -> dict:
    if WARM_UP:
        timed(cmd, timings)
    per_run = [timed(cmd, timings) for _ in range(runs)]
    return {**medians(per_run), "wall_min_s": round(min(r["wall_s"] for r in per_run), 4),
            "per_run": [{k: round(v, 4) for k, v in r.items()} for r in per_run]}


CODEGEN = [sys.executable, "-m", "hyper_parallel.codegen"]


# --------------------------------------------------------------------------- the figures


def bench_unchanged(runs: int, tmp: Path) -> dict:
    """``make codegen`` on the checkout when nothing changed (skipped unless it is current)."""
    check = subprocess.run([*CODEGEN, "--check", "-q"], cwd=REPO, capture_output=True,
                           text=True, check=False)
    if check.returncode != 0:
        why = (check.stderr.strip().splitlines() or ["--check failed"])[0]
        print(f"make codegen, nothing changed: skipped, the checkout is not current ({why}); "
              "run `make codegen` first")
        return {"skipped": f"the checkout is not current: {why}"}
    timings = tmp / "unchanged_timings.json"
    result = repeat(runs, [*CODEGEN, "-q", "--timings-json", str(timings)], timings)
    result["target_s"] = CODEGEN_UNCHANGED_TARGET_SECONDS
    result["meets_target"] = result["wall_s"] <= CODEGEN_UNCHANGED_TARGET_SECONDS
    print(f"make codegen, nothing changed: {result['wall_s']:.3f} s whole process (median of "
          f"{runs}), CPU {result['cpu_s']:.3f} s; target {CODEGEN_UNCHANGED_TARGET_SECONDS} s")
    return result


def bench_regenerate(runs: int, tmp: Path) -> dict:
    """``make codegen`` regenerating everything, into a temporary directory."""
    out_dir, timings = tmp / "out", tmp / "timings.json"
    result = repeat(runs, [*CODEGEN, "--out", str(out_dir), "-q", "--timings-json",
                           str(timings)], timings)
    python_files = list(out_dir.rglob("*.py"))
    result["formatted_python_files"] = len(python_files)
    result["formatted_python_lines"] = sum(len(p.read_text().splitlines()) for p in python_files)
    black, recipes = result.get("black_s", 0.0), result.get("recipes_s", 0.0)
    result["black_share_of_wall"] = round(black / result["wall_s"], 3)
    result["table_part_wall_s"] = round(result["wall_s"] - recipes, 3)
    print(f"make codegen, everything regenerated: {result['wall_s']:.3f} s whole process "
          f"(median of {runs}), CPU {result['cpu_s']:.3f} s; black {black:.3f} s "
          f"({result['black_share_of_wall']:.0%}), converting the example YAMLs {recipes:.3f} s")
    return result


def bench_from_yaml(runs: int, tmp: Path, source: Path) -> dict:
    timings = tmp / "from_yaml_timings.json"
    result = repeat(runs, [*CODEGEN, "--from-yaml", str(source), "-o",
                           str(tmp / f"{source.stem}.py"), "--force", "-q", "--timings-json",
                           str(timings)], timings)
    proof = result.get("proof_s", 0.0)
    result.update(yaml=str(source.relative_to(REPO)),
                  proof_share=round(proof / result["wall_s"], 4), target_s=FROM_YAML_TARGET_SECONDS,
                  meets_target=result["wall_s"] <= FROM_YAML_TARGET_SECONDS)
    print(f"--from-yaml {source.name}: {result['wall_s']:.3f} s whole process (median of "
          f"{runs}), proof {proof * 1000:.1f} ms; target {FROM_YAML_TARGET_SECONDS} s")
    return result


def bench_fleet(runs: int, tmp: Path, one_single_s: float) -> dict:
    """The six example YAMLs into one registry module, against single conversions."""
    timings, out = tmp / "fleet_timings.json", tmp / "config_registry.py"
    result = repeat(runs, [*CODEGEN, "--from-yaml", str(REPO / "examples" / "yaml"), "-o",
                           str(out), "--force", "-q", "--timings-json", str(timings)], timings)
    files = len(list((REPO / "examples" / "yaml").glob("*.yaml")))
    module_lines = len(out.read_text().splitlines())
    single_lines = sum(len(p.read_text().splitlines()) for p in (REPO / "recipes").glob("*.py"))
    singles = result["wall_s"] / one_single_s
    result.update(files=files, in_single_conversions=round(singles, 3),
                  target_single_conversions=FLEET_TARGET_SINGLES,
                  meets_target=singles < FLEET_TARGET_SINGLES, module_lines=module_lines,
                  single_lines=single_lines, lines_ratio=round(module_lines / single_lines, 3))
    print(f"--from-yaml fleet of {files}: {result['wall_s']:.3f} s whole process = "
          f"{singles:.2f} single-file conversions (target < {FLEET_TARGET_SINGLES:.0f}); one "
          f"module of {module_lines} lines vs {single_lines} lines of one-file recipes")
    return result


def write_fleet(folder: Path, count: int, seed: int = FLEET_SEED) -> None:
    """``count`` variants of :data:`FLEET_SOURCE` as ``folder/fleet_NNNN.yaml``, the same for the
    same seed (:data:`FLEET_VARIED`)."""
    text = FLEET_SOURCE.read_text()
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    for index in range(count):
        variant = text.replace("output_dir: outputs/qwen3_5_fsdp2",
                               f"output_dir: outputs/fleet_{index:04d}")
        for line, values in FLEET_VARIED.items():
            key = line.split(":")[0]
            variant = variant.replace(line, f"{key}: {rng.choice(values)}\n")
        (folder / f"fleet_{index:04d}.yaml").write_text(variant)


def measured_child(cmd: list[str], stdout: Path) -> dict[str, float]:
    """Run ``cmd`` in the repository, its output to ``stdout``: the wall and CPU seconds and the
    peak RSS of that child alone (``os.wait4``; ``RUSAGE_CHILDREN`` would give the largest child
    so far, torchtitan's parse among them)."""
    with stdout.open("w") as out:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise subprocess.CalledProcessError(child.returncode, cmd, stdout.read_text())
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": usage.ru_maxrss / 1024}  # ru_maxrss is in KiB on Linux


def bench_fleet_growth(sizes: list[int], tmp: Path) -> dict:
    """One ``--from-yaml`` process per fleet size (:func:`write_fleet`), and the module it
    writes against the one-file recipes."""
    from hyper_parallel.codegen.migration import from_yaml

    rows = []
    for count in sizes:
        folder, out = tmp / f"fleet_{count}", tmp / f"fleet_{count}_registry.py"
        write_fleet(folder, count)
        row = {"files": count, **measured_child(
            [*CODEGEN, "--from-yaml", str(folder), "-o", str(out), "--force"],
            tmp / f"fleet_{count}.out")}
        report = (tmp / f"fleet_{count}.out").read_text()
        repeated = re.search(r"lines repeated across recipes: (\d+|none)", report).group(1)
        single = sum(len(from_yaml.convert(p, output=tmp / "single.py")[0].text.splitlines())
                     for p in sorted(folder.glob("*.yaml")))
        module = len(out.read_text().splitlines())
        row.update(per_yaml_s=row["wall_s"] / count, module_lines=module,
                   repeated_lines=0 if repeated == "none" else int(repeated),
                   families=report.count("(shared)"), single_lines=single,
                   lines_ratio=round(module / single, 3))
        rows.append({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})
        print(f"--from-yaml fleet of {count}: {row['wall_s']:.2f} s whole process "
              f"({row['per_yaml_s'] * 1000:.1f} ms per YAML, CPU {row['cpu_s']:.2f} s), peak RSS "
              f"{row['peak_rss_mib']:.0f} MiB; module {module} lines, {row['repeated_lines']} "
              f"repeated, {row['families']} shared functions; one-file recipes {single} lines")
    result = {"source": str(FLEET_SOURCE.relative_to(REPO)), "seed": FLEET_SEED,
              "varied": [line.strip().split(":")[0] for line in FLEET_VARIED] + ["output_dir"],
              "sizes": rows}
    if len(rows) > 1:
        small, large = min(rows, key=lambda r: r["files"]), max(rows, key=lambda r: r["files"])
        result["per_yaml_ratio"] = round(large["per_yaml_s"] / small["per_yaml_s"], 3)
        print(f"time per YAML, {large['files']} against {small['files']}: "
              f"{result['per_yaml_ratio']:.2f}x (1 is linear growth)")
    return result


def bench_parse(runs: int, with_titan: bool) -> dict:
    """``ConfigManager.parse_args`` whole process, ours and (when available) torchtitan's."""
    ours, titan = bench_cli.make_sides()
    sides = (ours, titan) if with_titan else (ours,)
    with tempfile.TemporaryDirectory(prefix="bench-codegen-cli-") as workdir:
        for side in sides if WARM_UP else ():
            bench_cli.whole_process_once(side, workdir)  # warm-up
        whole = bench_cli.bench_whole_process(sides, runs, workdir)
    ours_s = whole[ours.name]["median_to_parsed_s"]
    result = {"argv": ours.argv, "ours_to_parsed_s": round(ours_s, 4),
              "target_ratio": PARSE_RATIO_TARGET}
    if with_titan:
        theirs = whole[titan.name]["median_to_parsed_s"]
        ratio = ours_s / theirs
        result.update(torchtitan_to_parsed_s=round(theirs, 4), ratio=round(ratio, 4),
                      meets_target=ratio <= PARSE_RATIO_TARGET)
        print(f"ConfigManager.parse_args to the parsed config: ours {ours_s:.3f} s, torchtitan "
              f"{theirs:.3f} s = {ratio:.2f}x (median of {runs}); target "
              f"{PARSE_RATIO_TARGET}x")
    else:
        result["ratio"] = None
        print(f"ConfigManager.parse_args to the parsed config: ours "
              f"{result['ours_to_parsed_s']:.3f} s (median of {runs}); torchtitan's not measured "
              "(python bench/bench_cli.py --setup builds its environment)")
    return result


# --------------------------------------------------------------------------- summary


def _verdict(met: bool | None) -> str:
    return "" if met is None else ("met" if met else "MISSED")


def summary_rows(results: dict) -> list[tuple[str, str, str, str]]:
    """``(what, figure, target, verdict)`` of the three targeted figures."""
    rows = []
    fy = results["from_yaml"]
    rows.append((f"--from-yaml {Path(fy['yaml']).name}", f"{fy['wall_s']:.3f} s",
                 f"<= {FROM_YAML_TARGET_SECONDS} s", _verdict(fy["meets_target"])))
    unchanged = results["codegen_unchanged"]
    if "skipped" in unchanged:
        rows.append(("make codegen, nothing changed", "skipped",
                     f"<= {CODEGEN_UNCHANGED_TARGET_SECONDS} s", "checkout not current"))
    else:
        rows.append(("make codegen, nothing changed", f"{unchanged['wall_s']:.3f} s",
                     f"<= {CODEGEN_UNCHANGED_TARGET_SECONDS} s",
                     _verdict(unchanged["meets_target"])))
    parse = results["parse_args"]
    if parse["ratio"] is None:
        figure, verdict = f"{parse['ours_to_parsed_s']:.3f} s / -", "torchtitan not measured"
    else:
        figure = (f"{parse['ratio']:.2f}x ({parse['ours_to_parsed_s']:.3f} s / "
                  f"{parse['torchtitan_to_parsed_s']:.3f} s)")
        verdict = _verdict(parse["meets_target"])
    rows.append(("parse_args, ours / torchtitan's", figure, f"<= {PARSE_RATIO_TARGET}x", verdict))
    return rows


def print_summary(results: dict) -> None:
    rows = summary_rows(results)
    widths = [max(len(r[i]) for r in rows + [("whole process", "figure", "target", "")])
              for i in range(3)]
    print(f"\nwhole process (median of {results['runs']}; load average "
          f"{results['load_average_1min']} on {results['cpus']} CPUs)")
    print(f"  {'':<{widths[0]}}  {'figure':<{widths[1]}}  {'target':<{widths[2]}}")
    for what, figure, target, verdict in rows:
        print(f"  {what:<{widths[0]}}  {figure:<{widths[1]}}  {target:<{widths[2]}}  {verdict}")


def _sizes(text: str) -> list[int]:
    sizes = [int(part) for part in text.split(",") if part.strip()]
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("give fleet sizes as N[,M...], each >= 1")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out", default=None,
                        help="the JSON (default bench/results/codegen.json; with --growth-only "
                             "bench/results/codegen_growth.json; none with --smoke)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--yaml", type=Path, default=DEFAULT_YAML,
                        help="the YAML of the --from-yaml figure")
    parser.add_argument("--no-titan", action="store_true",
                        help="measure our parse_args alone (no torchtitan environment needed)")
    parser.add_argument("--fleet-sizes", type=_sizes, default=list(DEFAULT_FLEET_SIZES),
                        help="the YAMLs of each fleet of the growth figures (default "
                             f"{','.join(map(str, DEFAULT_FLEET_SIZES))})")
    parser.add_argument("--growth-only", action="store_true",
                        help="measure the fleet's growth alone")
    opts = parser.parse_args()
    if opts.runs < 1:
        parser.error("--runs must be >= 1")
    if opts.smoke:
        global WARM_UP
        WARM_UP = False
        opts.runs, opts.no_titan, opts.fleet_sizes = 1, True, [1, 2]
    out = result_path(opts.out, REPO / "bench" / "results" / (
        "codegen_growth.json" if opts.growth_only else "codegen.json"), opts.smoke)
    with tempfile.TemporaryDirectory(prefix="bench-codegen-") as tmp_name:
        tmp = Path(tmp_name)
        if opts.growth_only:
            results = {"fleet_growth": bench_fleet_growth(opts.fleet_sizes, tmp)}
        else:
            results = run_all(opts, tmp)
    results["load_average_1min"] = round(os.getloadavg()[0], 2)
    results["cpus"] = os.cpu_count()
    if not opts.growth_only:
        print_summary(results)
    print("\n" + write_results(out, results))


def run_all(opts: argparse.Namespace, tmp: Path) -> dict:
    """Every figure, with the targets and their summary."""
    with_titan = not opts.no_titan and bench_cli.titan_env_ready()
    from_yaml = bench_from_yaml(opts.runs, tmp, opts.yaml.resolve())
    results = {
        "runs": opts.runs,
        "from_yaml": from_yaml,
        "codegen_unchanged": bench_unchanged(opts.runs, tmp),
        "parse_args": bench_parse(opts.runs, with_titan),
        "codegen_regenerate": bench_regenerate(opts.runs, tmp),
        "fleet": bench_fleet(opts.runs, tmp, from_yaml["wall_s"]),
        "fleet_growth": bench_fleet_growth(opts.fleet_sizes, tmp),
    }
    results["targets"] = {
        "from_yaml_s": FROM_YAML_TARGET_SECONDS,
        "codegen_unchanged_s": CODEGEN_UNCHANGED_TARGET_SECONDS,
        "parse_args_ratio": PARSE_RATIO_TARGET,
        "fleet_single_conversions": FLEET_TARGET_SINGLES,
    }
    results["summary"] = [dict(zip(("what", "figure", "target", "verdict"), row))
                          for row in summary_rows(results)]
    return results


if __name__ == "__main__":
    main()
