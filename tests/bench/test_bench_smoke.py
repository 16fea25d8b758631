"""No bench rots: every bench's ``--smoke`` run and each GPU script's dry run, on this CPU.

A bench is run the way a user runs it (its own process, forked from the suite's fork server so
torch is not imported again: ``tests/helpers/torchrun.run_python``), with ``--smoke --out`` a
file of the test; the Python processes it starts (trainers, ``torchrun`` and its ranks) are
forked from there too (``tests/helpers/warm_python``), but for the benches whose figures time a
fresh interpreter (:data:`FRESH_PROCESSES`); it must exit 0 (a smoke run fails on a part that
failed, which a full run only reports), print its figures (a line per bench, matched below) and
write its JSON. The two GPU scripts run in their dry mode (``bash bench/gpu_check.sh dry``:
every step's Python on the CPU in its cheapest form, what needs CUDA skipped with the reason;
``bash bench/gpu_multi_check.sh dry`` with ``LAYOUTS="pp2"``: one rank and PP 2 on gloo, 2
steps) and must pass, every step recorded in ``summary.json`` with the status it should have
here; their ``PYTHON`` is the warm one, so each step's process (and the ones it starts) is
forked, not a fresh interpreter. What a smoke or dry run here leaves out (a second fake-PG
layout, the other 2-GPU layouts, bench_moe's EP 2, bench_train's start-up) runs the code these
runs run -- but for bench_train's 25-line start-up timer -- on command lines the parse test
checks.

What it costs (2-core machine, measured): see docs/architecture.md, "GPU checks". The runs that
start trainer processes are marked ``slow`` (multi-process training, as the marker says); the
parse, summary and launcher tests are fast.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers.torchrun import _checked, _test_env, run_python
from tests.helpers.warm_python import warm_python

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"

#: bench -> (the figures its smoke run prints: one regex a line, the keys of its JSON, and
#: arguments besides ``--smoke --out``).
BENCHES = {
    "bench_cli": ([r"whole process, to parsed \(median of 1\)\s+\d+\.\d ms",
                   r"warm in-process \(median of 1\)\s+\d+\.\d ms"],
                  ("whole_process", "warm_in_process"), ()),
    "bench_codegen": ([r"--from-yaml train_qwen3_5_debug\.yaml: \d+\.\d+ s whole process",
                       r"make codegen, everything regenerated: \d+\.\d+ s",
                       r"--from-yaml fleet of 2: \d+\.\d+ s whole process"],
                      ("from_yaml", "codegen_regenerate", "fleet", "fleet_growth"), ()),
    # Its start-up figure is one more trainer under torchrun (4-5 CPU s) and 25 lines: its
    # command lines are parsed by test_every_command_line_of_the_gpu_scripts_parses instead.
    "bench_train": ([r"1 rank, legacy: trainer / plain with the same wrapping .*: \d\.\d{3}",
                     r'"peak_rss_kib": \d'],
                    ("one_rank", "memory_debugmodel"), ("--skip", "startup")),
    "bench_moe": ([r"ours grouped_mm\s+\d+\.\d", r"grouped_mm / loop \d\.\d{3}",
                   r"1 rank \(1 rank\): \d+\.\d ms"],
                  ("train_step", "experts", "expert_parallel"), ()),
    "bench_vision": ([r"ours\s+\d+\.\d ms a step", r"ours / transformers \d\.\d{3}",
                      r"pipeline / step demand \d+\.\d\d",
                      r"positions: \d+\.\d\d ms for a row of 2048 tokens with 4 images"],
                     ("train_step", "data", "positions"), ()),
    "bench_preflight": ([r"qwen3_5_v2_debugmodel at 1 ranks: \d+\.\d s",
                         r"1 rank, selective AC\s+bytes equal\s+step peak .* = \d\.\d{3}"],
                        ("speed", "accuracy"), ()),
    "bench_pipeline": ([r"1F1B\s+m=2: PP\s+\d+\.\d ms .* bubble -?\d\.\d{3}",
                        r"PP 2 \(1F1B, m=2\): \d+\.\d ms"],
                       ("bubble", "pp_vs_dp"), ()),
    "bench_context_parallel": ([r"cp 2 ulysses / p2p\s+\d+\.\d\s+\d\.\d{3}",
                                r"cp 2 ulysses / p2p, fused\s+\d+\.\d"],
                               ("memory", "step_time"), ()),
    "bench_hf_export": ([r"debugmodel\s+1\s+streamed\s+1MB\s+\d+\s+\d+\.\d"], ("results",),
                        ()),
    "bench_packing": ([r"chat\s+packed\s+\d+\.\d real tokens/s\s+padding \d\.\d{3}",
                       r"long_tailed: packed / padded real tokens/s \d+\.\d{3}",
                       r"pretraining rows of 128: block_causal / causal step \d+\.\d{3}"],
                      ("fine_tuning", "block_causal_cost"), ()),
    "bench_preflight_speed": ([(r"tiny, FSDP 2, 2 micro-batches\s+torch's paths\s+\d+\.\d\d s"
                                r"\s+preflight's\s+\d+\.\d\d s\s+\d+\.\d\dx\s+same figures")],
                              ("roles", "total"), ()),
    "bench_plan_accuracy": ([r"fsdp2\s+predicted \d+\.\d{3} s\s+measured \d+\.\d{3} s",
                             r"mean \|error\| \d+\.\d%; best predicted \w+, best measured \w+"],
                            ("layouts", "mean_abs_error", "best_predicted_best"), ()),
    "bench_plan_speed": ([r"pair 1  base\s+\d+\.\d s wall\s+\d+\.\d CPU-s",
                          (r"head / base mean wall \d\.\d{3}; head faster in \d of 1 pairs; "
                           r"same JSON in both trees: True")],
                         ("base", "head", "pairs", "head_over_base_mean_wall"), ()),
}

#: The benches whose figures time a fresh interpreter (``whole process``): the processes they
#: start are fresh ones.
FRESH_PROCESSES = {"bench_cli", "bench_codegen", "bench_plan_speed"}

#: gpu_check.sh's steps the test runs (``STEPS``) and their status in a dry run. Not
#: fake_pg_fsdp8: the same check's code as fake_pg_ep8 (3 CPU s), its figure a CUDA device's
#: memory (its command line is parsed below).
GPU_CHECK_DRY = {"env": "pass", "parity": "skipped", "throughput": "skipped",
                 "state_passing": "partial", "grouped_mm": "pass", "compile_fla": "skipped",
                 "deterministic": "pass", "fake_pg_ep8": "pass", "packing": "partial",
                 "plan_fake_world": "pass"}


def _load(name: str):
    """A helper module of bench/ (not a package), loaded from its file."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _assert_figures(text: str, patterns: list[str]) -> None:
    missing = [p for p in patterns if not re.search(p, text)]
    assert not missing, f"figures not printed: {missing}\n--- output ---\n{text[-6000:]}"


# ------------------------------------------------------------------------ the benches
def test_every_bench_has_a_smoke_run():
    """A new bench under bench/ is a new entry of BENCHES (its smoke run and its figures)."""
    assert sorted(BENCHES) == sorted(p.stem for p in BENCH.glob("bench_*.py"))


@pytest.mark.parametrize("bench", [
    pytest.param(name, marks=() if name in ("bench_cli", "bench_codegen") else pytest.mark.slow)
    for name in BENCHES])
def test_bench_smoke_run(bench, tmp_path):
    out = tmp_path / f"{bench}.json"
    patterns, keys, extra = BENCHES[bench]
    args = ["--smoke", "--out", str(out), *extra]
    if bench in FRESH_PROCESSES:
        proc = run_python(BENCH / f"{bench}.py", args, timeout=240)
    else:  # the bench and every Python process it starts forked, as run_python forks it
        proc = _checked(subprocess.run(
            [warm_python(), str(BENCH / f"{bench}.py"), *args], cwd=REPO, env=_test_env(None),
            capture_output=True, text=True, timeout=240, check=False))
    _assert_figures(proc.stdout, patterns)
    results = json.loads(out.read_text())
    assert set(keys) <= set(results), (bench, sorted(results))


def test_the_plan_speed_bench_refuses_a_run_that_imports_another_tree(tmp_path):
    """Each tree's runs must import that tree: ``python -m`` from one tree's folder imports it
    whatever ``PYTHONPATH`` says, which once made both columns of a comparison the same tree. A
    folder without the package, with the repository importable from elsewhere, is refused."""
    speed = _load("bench_plan_speed")
    run = speed.run_plan(tmp_path, ["--help"])
    assert run["exit"] not in (0, 1) and "not the tree under" in run["error"], run


# ------------------------------------------------------------------------ the GPU scripts
def _script(name: str, out: Path, **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        ["bash", str(BENCH / name), "dry"], cwd=REPO, capture_output=True, text=True,
        timeout=300, check=False,
        env={**os.environ, "PYTHON": warm_python(), "OUT": str(out), "OMP_NUM_THREADS": "1",
             "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                         os.environ.get("PYTHONPATH")])),
             **env})
    assert proc.returncode == 0, (
        f"bash bench/{name} dry: exit {proc.returncode}\n--- stdout ---\n{proc.stdout[-6000:]}"
        f"\n--- stderr ---\n{proc.stderr[-4000:]}")
    return proc


@pytest.mark.slow
def test_gpu_check_dry_run(tmp_path):
    proc = _script("gpu_check.sh", tmp_path, STEPS=" ".join(GPU_CHECK_DRY))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["failed"] == [], summary
    # A dry run is the CPU form everywhere (its checks hide any GPU): the same statuses.
    statuses = {name: info["status"] for name, info in summary["steps"].items()}
    assert statuses == GPU_CHECK_DRY, statuses
    # (a) shows the bf16 read matrix's error apart, and its bound held.
    passing = json.loads((tmp_path / "state_passing.json").read_text())["parts"]
    bf16 = passing["debug_gqa torch bf16"]
    assert bf16["reads_dtype"] == "bfloat16" and all(r > 0 for r in bf16["reads_by_shard"])
    assert all(b["held"] for b in bf16["bounds"].values())
    _assert_figures(proc.stdout, [r"debug_gqa torch bf16: p2p_out \d\.\d+e-0\d",
                                  r"grouped_mm_out \d\.\d+e-0\d", r"first_differing_step None",
                                  r"ep8_moe_debugmodel \(rank 0 of 8\): .*param_bytes_rank \d+",
                                  r"debug_gqa fla: skipped \(no CUDA\)",
                                  r"fsdp4\s+predicted \d+\.\d{3} s\s+measured \d+\.\d{3} s"])
    # (g): rank 0 of a 4-rank layout under a fake group, its compute against the prediction.
    fake = json.loads((tmp_path / "plan_fake_world.json").read_text())
    assert fake["fake_world"] == 4 and fake["layouts"][0]["measured_s"] > 0, fake


@pytest.mark.slow
def test_gpu_multi_check_dry_run(tmp_path):
    """One layout of the script's dry run (every layout takes the same path through it; each
    layout's command line is checked by the next test, the layouts themselves by the layout
    tests): PP 2, the one with the most overrides, against one rank."""
    proc = _script("gpu_multi_check.sh", tmp_path, LAYOUTS="pp2")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "pass", summary
    assert set(summary["steps"]) == {"one_rank", "pp2"}
    report = json.loads((tmp_path / "pp2.json").read_text())
    assert report["max_loss_rel_diff"] <= report["loss_bound"] == 1e-5, report
    _assert_figures(proc.stdout, [r"pp2: PASS .*'max_loss_rel_diff'"])


def test_every_command_line_of_the_gpu_scripts_parses():
    """What the GPU machine will run, parsed here (recipe, fields, values; nothing built): a
    renamed recipe or field fails now, not on the GPU machine's clock. Also the benches' command
    lines their smoke runs leave out."""
    from hyper_parallel.train import parse_run

    sys.path.insert(0, str(BENCH))  # the modules import their siblings by name
    try:
        layouts, fake_pg, determinism, train, accuracy = (_load(n) for n in (
            "_layout_check", "_check_fake_pg", "_check_determinism", "bench_train",
            "bench_plan_accuracy"))
    finally:
        sys.path.remove(str(BENCH))
    lines = [[*recipe, *overrides] for recipe, overrides, *_ in layouts.LAYOUTS.values()]
    lines += [["--module", m, "--config", c, *o] for table in (fake_pg.LAYOUTS, fake_pg.CPU_FORM)
              for m, c, o in table.values()]
    lines += [["--module", m, "--config", c, *o, "--debug.deterministic", "true"]
              for m, c, o in determinism.CASES.values()]
    # The planner's fake-world layouts of the GPU run (its dry run builds one on the CPU).
    lines += [[*accuracy.GPU_RECIPE, "--training.global_batch_size=8", *overrides]
              for overrides in accuracy.fake_world_layouts(8).values()]
    # bench_moe's 2-rank layouts (its smoke run trains the 1-rank one).
    lines += [["--module", "bench._moe_recipes", "--config", c] for c in ("moe_ep2", "moe_fsdp2")]
    # bench_train's start-up figure (its smoke test skips it): both entries' command lines.
    with tempfile.TemporaryDirectory() as folder:
        for entry in train.ENTRY_POINTS.values():
            argv = entry(folder)
            lines.append(argv[2:] if argv[0] == "-m" else argv[1:])
    for argv in lines:
        parse_run(argv)


# ------------------------------------------------------------------------ the harness itself
def _steps(folder: Path, *records: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


@pytest.mark.parametrize(("records", "reports", "mode", "code", "status"), [
    ([{"step": "a", "rc": 0, "seconds": 1}], {}, "run", 0, "pass"),
    # A step that exits non-zero fails, whatever its report says; a timeout says so.
    ([{"step": "a", "rc": 124, "seconds": 9}], {"a": {"status": "pass"}}, "run", 1, "fail"),
    ([{"step": "a", "rc": 0, "seconds": 1}], {"a": {"status": "fail", "problems": ["x"]}},
     "dry", 1, "fail"),
    # A skipped or partial check: incomplete, which a real run says with exit 3.
    ([{"step": "a", "rc": 0, "seconds": 1}], {"a": {"status": "partial"}}, "run", 3,
     "incomplete"),
    ([{"step": "a", "skipped": "no CUDA"}], {}, "dry", 0, "incomplete"),
    ([], {}, "dry", 1, "fail"),  # nothing ran: never a pass
])
def test_the_summary_fails_loudly(tmp_path, records, reports, mode, code, status):
    summary_module = _load("_gpu_summary")
    folder = _steps(tmp_path / "out", *records)
    for name, report in reports.items():
        (folder / f"{name}.json").write_text(json.dumps(report))
    summary, got = summary_module.summarize(folder, "gpu_check", mode)
    assert (got, summary["status"]) == (code, status), summary


def test_a_smoke_run_fails_on_a_part_that_failed(capsys):
    smoke = _load("_smoke")
    results = {"layouts": {"EP 2": {"error": "boom"}, "1 rank": {"step_ms": 1.0}}}
    assert smoke.exit_status(results, smoke=False) == 0  # a full run: figures, not assertions
    assert smoke.exit_status(results, smoke=True) == 1
    assert "smoke: FAILED layouts/EP 2: boom" in capsys.readouterr().out
    assert smoke.result_path(None, Path("default.json"), smoke=True) is None


def test_a_failed_worker_is_named_by_its_own_error_not_torchruns_report():
    launch = _load("_launch")
    text = ("RuntimeError: the worker's reason\n"
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
            "=====\nRoot Cause (first observed failure):\n  exitcode  : 1 (pid: 7)\n=====\n")
    assert launch.error_line(text) == "RuntimeError: the worker's reason"
    killed = "terminate called\nChildFailedError:\n  exitcode  : -6 (pid: 7)  (SIGABRT)\n====="
    assert launch.error_line(killed) == "a rank failed: exitcode  : -6 (pid: 7)  (SIGABRT)"
