"""``--from-yaml`` with legacy command-line overrides (``-- --train.max_steps=30``) and with the
launch command of a legacy run pasted whole (``--from-yaml "torchrun ... old.yaml --a.b=c"``):
the launch parser, the provenance of override lines, the golden files of
``golden/overrides/`` and the command line.

Update the goldens on purpose (then review the diff):

    HYPER_PARALLEL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/codegen/test_from_yaml_overrides.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hyper_parallel.codegen.__main__ import main
from hyper_parallel.codegen.migration import fleet, from_yaml, launch
from hyper_parallel.trainer.config import ConfigError

from .conftest import REPO

GOLDEN = Path(__file__).resolve().parent / "golden" / "overrides"
UPDATE = os.environ.get("HYPER_PARALLEL_UPDATE_GOLDEN") == "1"
DEMO = REPO / "examples" / "yaml" / "train_qwen3_5_demo.yaml"

#: case -> the --from-yaml arguments, then the tokens after "--" (paths relative to GOLDEN).
CASES = {
    "with_overrides": (["base_run.yaml"], ["--train.max_steps=30", "--data.max_seq_len", "32",
                                           "--model.config_overrides.num_hidden_layers=2",
                                           "--train.optimizer.weight_decay=0.05"]),
    "launch_line": ([("OMP_NUM_THREADS=1 torchrun --standalone --nproc_per_node 4 "
                     "scripts/train_lm.py base_run.yaml --train.max_steps=30 "
                     "--train.checkpoint.output_dir=outputs/long")], []),
    "launch_after_dash": ([], ["python", "-m", "torch.distributed.run", "--nproc-per-node=2",
                               "scripts/train_lm.py", "base_run.yaml", "--train.seed=7"]),
}


# ---------------------------------------------------------------------------------------------
# the launch parser
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, launcher, script, nproc, overrides", [
    ("torchrun --nproc_per_node 4 scripts/train_lm.py old.yaml --train.max_steps=100",
     "torchrun", "scripts/train_lm.py", "4", ("--train.max_steps=100",)),
    (("OMP_NUM_THREADS=1 CUDA_VISIBLE_DEVICES=0,1 .venv/bin/torchrun --standalone "
     "--nproc-per-node=2 --master_port 29501 scripts/train_lm.py cfg/old.yml --a.b c"),
     ".venv/bin/torchrun", "scripts/train_lm.py", "2", ("--a.b", "c")),
    (("python -m torch.distributed.run --nnodes 1 --nproc_per_node=8 -m hyper_parallel.train "
     "old.yaml"), "python -m torch.distributed.run", "-m hyper_parallel.train", "8", ()),
    ("python3.11 -u scripts/train_lm.py old.yaml --x.y=1", "python3.11", "scripts/train_lm.py",
     None, ("--x.y=1",)),
    ("python -m hyper_parallel.train old.yaml", "python", "-m hyper_parallel.train", None, ()),
    ("env OMP_NUM_THREADS=2 scripts/train_lm.py old.yaml", None, "scripts/train_lm.py", None, ()),
    ("old.yaml --train.seed=3", None, None, None, ("--train.seed=3",)),
])
def test_launch_commands_are_understood(text, launcher, script, nproc, overrides):
    parsed = launch.parse(launch.split(text))
    assert (parsed.launcher, parsed.script, parsed.nproc, parsed.overrides) == (
        launcher, script, nproc, overrides)
    assert parsed.yaml.endswith((".yaml", ".yml"))
    assert launch.parse(launch.split(parsed.text)) == parsed  # the shell line reads back


def test_launch_options_and_environment_are_kept_apart():
    parsed = launch.parse(launch.split(
        "OMP_NUM_THREADS=1 torchrun --standalone --rdzv-backend c10d --nproc_per_node 2 "
        "scripts/train_lm.py old.yaml"))
    assert parsed.env == ("OMP_NUM_THREADS=1",)
    assert parsed.launcher_options == ("--standalone", "--rdzv-backend", "c10d",
                                       "--nproc_per_node", "2")


def test_a_command_without_a_yaml_shows_what_was_understood():
    with pytest.raises(launch.LaunchError) as info:
        launch.parse(launch.split("torchrun --nproc_per_node 2 -m hyper_parallel.train "
                                  "--module qwen3_5_v2 --config qwen3_5_v2_debugmodel"))
    text = str(info.value)
    assert "names no YAML" in text
    assert ("understood: launcher 'torchrun'; launcher options --nproc_per_node 2; script "
            "'-m hyper_parallel.train'; then --module qwen3_5_v2 --config qwen3_5_v2_debugmodel"
            ) in text


@pytest.mark.parametrize("text, message", [
    ("torchrun scripts/train_lm.py --train.seed=1 old.yaml", "--train.seed=1 before its YAML"),
    ("python -c 'print(1)' old.yaml", "python -c"),
    ("torchrun 'scripts/train_lm.py old.yaml", "cannot split"),
    ("", "empty"),
])
def test_unreadable_launch_commands(text, message):
    with pytest.raises(launch.LaunchError) as info:
        launch.parse(launch.split(text))
    assert message in str(info.value)


@pytest.mark.parametrize("nproc, world, inferred, problem", [
    (None, 2, False, None), ("2", 2, False, None), ("4", 2, False, "need 2 rank(s)"),
    ("4", 2, True, None), ("3", 2, True, "a multiple of 2"), ("gpu", 1, False, "not a number"),
])
def test_nproc_problem(nproc, world, inferred, problem):
    found = launch.nproc_problem(nproc, world, inferred)
    assert (found is None) if problem is None else (problem in found)


# ---------------------------------------------------------------------------------------------
# the goldens
# ---------------------------------------------------------------------------------------------


def convert(case: str) -> tuple[str, str]:
    values, after = CASES[case]
    inputs = fleet.resolve_inputs(values, after, base=GOLDEN)
    item = inputs.files[0]
    recipe, output = from_yaml.convert(item.path, output=GOLDEN / f"{case}.py", repo=REPO,
                                       base=GOLDEN, overrides=item.overrides, launch=item.launch)
    return recipe.text, from_yaml.report(recipe, output, base=GOLDEN) + "\n"


@pytest.fixture(scope="module")
def results():
    cwd = Path.cwd()
    os.chdir(GOLDEN)  # the launch lines name base_run.yaml as a shell there would
    try:
        return {case: convert(case) for case in CASES}
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("case", sorted(CASES))
def test_case_matches_its_golden_files(results, case):
    text, out = results[case]
    py, report = GOLDEN / f"{case}.py", GOLDEN / f"{case}.out"
    if UPDATE:
        py.write_text(text, encoding="utf-8")
        report.write_text(out, encoding="utf-8")
    hint = "; if the change is intended, rerun with HYPER_PARALLEL_UPDATE_GOLDEN=1 and review it"
    assert py.read_text(encoding="utf-8") == text, f"{py.name} differs{hint}"
    assert report.read_text(encoding="utf-8") == out, f"{report.name} differs{hint}"


def test_override_lines_name_the_command_line(results):
    text, out = results["with_overrides"]
    assert "config.training.steps = 30  # command line: --train.max_steps=30" in text
    assert "# command line: --data.max_seq_len 32" in text
    # A dict entry merged into the YAML's mapping: the flavor stays the YAML's.
    assert "command line: --model.config_overrides.num_hidden_layers=2" in text
    # The YAML's comment on the overridden key stays with the line that sets it, in its comment.
    assert ("config.training.steps = 30  # command line: --train.max_steps=30; the command line "
            "makes it 30\n") in text
    assert ("--from-yaml base_run.yaml -- --train.max_steps=30 --data.max_seq_len 32" in
            " ".join(text.split()))
    assert "command-line overrides: --train.max_steps=30" in out


def test_launch_line_records_the_command_and_warns_about_nproc(results):
    text, out = results["launch_line"]
    assert "torchrun --standalone --nproc_per_node 4 scripts/train_lm.py" in " ".join(text.split())
    assert "--nproc_per_node 2 -m hyper_parallel.train" in text  # the config's world size
    assert ("warning: base_run.yaml: the launch command runs --nproc_per_node 4, but the "
            "config's parallel degrees need 2 rank(s)") in out
    text, out = results["launch_after_dash"]
    assert "warning" not in out and "config.debug.seed = 7  # command line: --train.seed=7" in text


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_recipes_run_and_match_the_overridden_yaml(results, case):
    from hyper_parallel.config.legacy_adapter import trainer_config_to_legacy
    from hyper_parallel.trainer.config import HyperTrainerConfig
    from hyper_parallel.trainer.config_parser import load_config

    values, after = CASES[case]
    cwd = Path.cwd()
    os.chdir(GOLDEN)
    try:
        item = fleet.resolve_inputs(values, after).files[0]
    finally:
        os.chdir(cwd)
    namespace: dict = {"__name__": f"golden_{case}"}
    exec(compile(results[case][0], f"{case}.py", "exec"), namespace)  # noqa: S102 -- under test
    config = namespace["base_run"]()
    legacy = load_config(HyperTrainerConfig, (GOLDEN / "base_run.yaml").read_text(),
                         source="base_run.yaml", overrides=list(item.overrides))
    legacy.train.local_rank = 0
    from hyper_parallel.config.legacy_adapter import canonicalize_legacy

    assert from_yaml.differences(canonicalize_legacy(legacy)[0],
                                 trainer_config_to_legacy(config)) == []


# ---------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_cli_folds_overrides_after_the_dash(workdir, capsys):
    assert main(["--from-yaml", str(DEMO), "-o", "demo.py", "--", "--train.max_steps=50"]) == 0
    text = (workdir / "demo.py").read_text()
    assert "config.training.steps = 50  # command line: --train.max_steps=50" in text
    assert "command-line overrides: --train.max_steps=50" in capsys.readouterr().out


def test_cli_takes_a_pasted_launch_line(workdir, capsys):
    line = f"torchrun --nproc_per_node 4 scripts/train_lm.py {DEMO} --train.max_steps=50"
    assert main(["--from-yaml", line, "-o", "one.py"]) == 0
    assert "warning:" in capsys.readouterr().out
    assert main(["--from-yaml", "-o", "two.py", "--", *line.split()]) == 0
    one, two = (workdir / "one.py").read_text(), (workdir / "two.py").read_text()
    assert "# command line: --train.max_steps=50" in one
    assert one.split("def ", 1)[1] == two.split("def ", 1)[1]


def test_cli_override_errors_are_the_parsers(workdir, capsys):
    assert main(["--from-yaml", str(DEMO), "-o", "x.py", "--", "--train.max_stepz=1"]) == 2
    err = capsys.readouterr().err
    assert "command line (--train.max_stepz=1)" in err and "did you mean 'train.max_steps'" in err
    assert not (workdir / "x.py").exists()
    with pytest.raises(ConfigError):
        from_yaml.convert(DEMO, output=workdir / "y.py", repo=REPO, base=workdir,
                          overrides=["train.max_steps=1"])


def test_cli_launch_line_without_a_yaml_is_exit_2(workdir, capsys):
    assert main(["--from-yaml", "--", "torchrun", "--nproc_per_node", "2", "-m",
                 "hyper_parallel.train", "--module", "m", "--config", "c"]) == 2
    err = capsys.readouterr().err
    assert "names no YAML" in err and "understood: launcher 'torchrun'" in err
    assert main(["--from-yaml"]) == 2
    assert "--from-yaml needs a YAML" in capsys.readouterr().err
