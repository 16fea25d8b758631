"""Bad input, case by case: every refusal is a ``RecipeError`` or a ``ConfigError`` with one
message naming the flag (or the recipe) and the fix, exit 2 from the entry points, never a
traceback nor tyro's error box.

Recipe loading (``--module`` / ``--config``), the override syntax (booleans, ``--no-``,
unknown flags, bad values, ``__post_init__`` refusals) and the files the tools write
(``--from-yaml`` / ``--to-yaml -o``, ``atomic_write``). In process, except the few cases where
the exit status of a real process is the point.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hyper_parallel.codegen import pipeline
from hyper_parallel.config.manager import ConfigManager
from hyper_parallel.config.recipes import RecipeError, load_recipe
from hyper_parallel.trainer.config import ConfigError
from hyper_parallel.trainer.hyper_trainer import HyperTrainer

HERE = Path(__file__).parent
REPO = HERE.parents[3]
BROKEN = "tests.torch.ut.config._broken_recipes"
FIXTURES = "tests/torch/ut/config/_broken_recipes"
BOX = set("╭╮╰╯│─")


def _line_of(path: str, marker: str) -> int:
    lines = (REPO / path).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line)


def recipe_error(module: str, config: str, root_type: type | None = HyperTrainer.Config) -> str:
    with pytest.raises(RecipeError) as info:
        load_recipe(f"{BROKEN}.{module}", config, root_type=root_type)
    return str(info.value)


# ---------------------------------------------------------------------------------------------
# recipes
# ---------------------------------------------------------------------------------------------


def test_a_recipe_that_raises_names_module_function_and_the_raising_line():
    message = recipe_error("raises_in_recipe", "bad_steps")
    line = _line_of(f"{FIXTURES}/raises_in_recipe.py", "RAISES_HERE")
    assert message.startswith(f"--config bad_steps: recipe {BROKEN}.raises_in_recipe.bad_steps() "
                              "raised ValueError: steps must be >= 1, got 0")
    assert message.endswith(f"(at {FIXTURES}/raises_in_recipe.py:{line})")
    message = recipe_error("raises_in_recipe", "missing_key")
    line = _line_of(f"{FIXTURES}/raises_in_recipe.py", "KEY_ERROR_HERE")
    assert "missing_key() raised KeyError: 'no such key'" in message
    assert message.endswith(f"raises_in_recipe.py:{line})")


@pytest.mark.parametrize("config, missing", [("sized", "steps"), ("keyword_only", "steps")])
def test_a_function_that_needs_arguments_is_not_called(config, missing):
    message = recipe_error("needs_argument", config)
    assert f"{config}() needs argument(s) {missing}: a recipe takes none" in message
    assert "Available: sized_with_default" in message  # defaults only: a recipe


def test_a_recipe_whose_arguments_all_have_defaults_is_fine():
    config = load_recipe(f"{BROKEN}.needs_argument", "sized_with_default",
                         root_type=HyperTrainer.Config)
    assert config.training.steps == 4


@pytest.mark.parametrize("config, got", [
    ("returns_none", "returned None;"),
    ("returns_dict", "returned a dict;"),
    ("returns_class", "returned the class RootConfig (not an instance);"),
    ("returns_section", "returned a TrainingConfig;"),
    ("returns_other_dataclass", "returned a Other;"),
])
def test_a_recipe_returning_something_else_is_refused(config, got):
    message = recipe_error("returns_wrong_type", config)
    assert f"{config}() {got} a recipe must return a fresh HyperTrainer.Config" in message


def test_without_a_root_type_any_config_dataclass_is_a_config():
    assert load_recipe(f"{BROKEN}.returns_wrong_type", "returns_section").steps >= 1
    with pytest.raises(RecipeError, match=r"returns_dict\(\) returned a dict; a recipe must "
                                          r"return a fresh config dataclass"):
        load_recipe(f"{BROKEN}.returns_wrong_type", "returns_dict")


def test_a_class_is_not_a_recipe():
    assert "NotARecipe is a class, not a recipe" in recipe_error("returns_wrong_type", "NotARecipe")


@pytest.mark.parametrize("config, code", [("exits", "3"), ("exits_with_message", "'no GPU here'")])
def test_a_recipe_calling_sys_exit_is_an_error_not_an_exit(config, code):
    message = recipe_error("calls_exit", config)
    assert f"{config}() called sys.exit({code}) instead of returning a config" in message
    assert f"{FIXTURES}/calls_exit.py:" in message


def test_private_names_are_never_recipes():
    message = recipe_error("private_base", "_base")
    assert "_base is private" in message and "Available: derived" in message
    assert load_recipe(f"{BROKEN}.private_base", "derived").training.steps == 3
    with pytest.raises(RecipeError, match="_private_helper is private"):
        ConfigManager().parse_args(["--module", "_test_dummy", "--config", "_private_helper"])


def test_unknown_recipe_and_module_get_suggestions():
    assert "(did you mean 'derived'?)" in recipe_error("private_base", "derivd")
    with pytest.raises(RecipeError, match=r"no such module .*did you mean 'qwen3_5_v2'"):
        load_recipe("qwen3_5_v3", "x")


def test_a_syntax_error_in_a_recipe_module_keeps_file_and_line(tmp_path, monkeypatch):
    (tmp_path / "syntax_error_recipes.py").write_text("def ok():\n    return 1\n\ndef bad(:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RecipeError) as info:
        load_recipe("syntax_error_recipes", "ok")
    message = str(info.value)
    assert "failed: SyntaxError: invalid syntax" in message
    assert message.endswith("syntax_error_recipes.py:4)")


@pytest.mark.parametrize("module, fragment, marker", [
    ("name_error_on_import", "NameError: name 'HyperTrainr' is not defined", "HyperTrainr"),
    ("missing_dependency", ("ModuleNotFoundError: No module named "
                           "'hyper_parallel_no_such_dependency'"), "import hyper_parallel_no"),
    ("raises_on_import", "RuntimeError: boom while importing the recipe module", "raise Runtime"),
])
def test_an_import_error_inside_a_recipe_module_keeps_file_and_line(module, fragment, marker):
    message = recipe_error(module, "x")
    line = _line_of(f"{FIXTURES}/{module}.py", marker)
    assert fragment in message and message.endswith(f"{FIXTURES}/{module}.py:{line})")


def test_an_import_error_in_a_helper_names_both_lines():
    message = recipe_error("imports_broken_helper", "recipe")
    assert "RuntimeError: boom while importing" in message
    assert message.endswith(f"({FIXTURES}/imports_broken_helper.py:3, raised in "
                            f"{FIXTURES}/raises_on_import.py:3)")


# ---------------------------------------------------------------------------------------------
# overrides
# ---------------------------------------------------------------------------------------------


def parse(*overrides: str, module: str = "_test_dummy", config: str = "qwen3_5_v2_tiny"):
    return ConfigManager().parse_args(["--module", module, "--config", config, *overrides])


def config_error(*overrides: str, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        parse(*overrides, **kwargs)
    message = str(info.value)
    assert "\n" not in message and not BOX & set(message), message
    return message


@pytest.mark.parametrize("argv, expected", [
    (["--training.stepz=3"], "--training.stepz=3: unknown option (did you mean '--training.steps'?)"),
    (["--trainng.steps", "3"], "unknown option (did you mean '--training.steps'?)"),
    (["--no-optimizer.fusd"], ("--no-optimizer.fusd: unknown option (did you mean "
                              "'--no-optimizer.fused'?)")),
    (["--optimizer.no-fusd"], ("--optimizer.no-fusd: unknown option (did you mean "
                              "'--no-optimizer.fused'?)")),
    (["--nothing-like-a-field"], "unknown option; see --help"),
    (["--training"], ("--training: training is a section, not a field; set one of its fields, "
                     "e.g. --training.steps=VALUE")),
    (["--training.steps", "3", "stray"], "unexpected argument 'stray'"),
    (["--"], "unexpected argument '--'"),
    (["-x"], "unexpected argument '-x'"),
    (["--training.steps"], "--training.steps needs a value: --training.steps=VALUE (int)"),
    (["--training.steps", "--optimizer.lr=1"], "--training.steps needs a value"),
    (["--no-optimizer.lr"], ("--no-optimizer.lr: --no- only negates a boolean and optimizer.lr is "
                            "float; set it with --optimizer.lr=VALUE")),
    (["--no-training.steps=3"], "--no- only negates a boolean"),
    (["--no-compile.enable=true"], "--no-compile.enable takes no value"),
    (["--compile.enable=maybe"], ("--compile.enable=maybe: compile.enable is a boolean, 'maybe' is "
                                 "not true or false; write --compile.enable, --no-compile.enable "
                                 "or --compile.enable=true|false")),
    (["--compile.enable=none"], "'none' is not true or false"),
    (["--optimizer.fused=maybe"], "'maybe' is not true or false (or none)"),
    (["--optimizer.name=adamw"], ("--optimizer.name=adamw: not one of AdamW, Adam (did you mean "
                                 "'AdamW'?)")),
    (["--training.steps=abc"], ("--training.steps=abc: invalid literal for int() with base 10: "
                               "'abc' (training.steps takes int; see --help)")),
    (["--optimizer.lr=fast"], "--optimizer.lr=fast: could not convert string to float"),
    (["--optimizer.betas=0.9"], "--optimizer.betas=0.9: expected 2 comma-separated values"),
    (["--optimizer.betas=0.9,x"], "--optimizer.betas=0.9,x: 'x' is not a number"),
    (["--model.config_overrides={a"], "--model.config_overrides={a: not a YAML mapping"),
    (["--model.config_overrides=[1]"], "expected a mapping such as '{key: value}'"),
    (["--training.steps=0"], "--training.steps=0: must be >= 1"),
    (["--training.steps", "-3"], "--training.steps=-3: must be >= 1"),
    (["--optimizer.lr=-1"], "--optimizer.lr=-1: must be a number >= 0"),
    (["--optimizer.lr=nan"], "--optimizer.lr=nan: must be a finite number"),
    (["--optimizer.foreach", "--optimizer.fused"], ("--optimizer.fused=True: cannot be combined "
                                                   "with foreach=True")),
])
def test_override_refusals(argv, expected):
    assert expected in config_error(*argv)


def test_a_value_the_recipe_left_invalid_names_the_recipe_and_the_flag():
    message = config_error(module=f"{BROKEN}.invalid_values", config="zero_steps")
    assert message == (f"training.steps=0 (set by the recipe {BROKEN}.invalid_values.zero_steps()):"
                       " must be >= 1; fix the recipe or override it with --training.steps=VALUE")
    assert parse("--training.steps=2", module=f"{BROKEN}.invalid_values",
                 config="zero_steps").training.steps == 2


def test_none_for_optional_fields_only():
    assert parse("--hf_assets_path=null").hf_assets_path is None
    assert parse("--dump-folder=none").dump_folder == "none"  # a str field: just a name
    assert parse("--parallelism.data_parallel_shard_degree=NONE").parallelism \
        .data_parallel_shard_degree is None


def test_repeated_flags_the_last_wins():
    cfg = parse("--training.steps=4", "--training.steps", "5", "--compile.enable",
                "--no-compile.enable")
    assert cfg.training.steps == 5 and cfg.compile.enable is False


def test_values_that_look_like_flags_use_the_equals_form():
    assert parse("--dump_folder=--odd").dump_folder == "--odd"
    assert parse("--loss.ignore_index", "-100").loss.ignore_index == -100


def test_help_documents_the_syntax(capsys):
    with pytest.raises(SystemExit) as info:
        parse("--help")
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "--x, --no-x (or --section.no-x), --x=true|false" in out
    assert "one comma-separated value" in out


def test_train_main_refuses_with_exit_2(capsys):
    from hyper_parallel.train import main

    base = ["--module", "_test_dummy", "--config", "qwen3_5_v2_tiny"]
    assert main([*base, "--training.steps=abc"]) == 2
    assert main(["--module", f"{BROKEN}.returns_wrong_type", "--config",
                 "returns_other_dataclass"]) == 2
    assert main(["--module", f"{BROKEN}.calls_exit", "--config", "exits"]) == 2
    err = capsys.readouterr().err
    assert "error: --training.steps=abc: invalid literal" in err
    assert "returns_other_dataclass() returned a Other; a recipe must return a fresh " \
           "HyperTrainer.Config" in err
    assert "exits() called sys.exit(3)" in err
    assert "Traceback" not in err and not BOX & set(err)


def test_manager_main_in_a_real_process_exits_2_with_one_line():
    proc = subprocess.run(
        [sys.executable, "-m", "hyper_parallel.config.manager", "--module", "qwen3_5_v2",
         "--config", "qwen3_5_v2_debugmodel", "--training.stepz=3"],
        capture_output=True, text=True, cwd=REPO, check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 2
    assert proc.stderr == ("error: --training.stepz=3: unknown option (did you mean "
                           "'--training.steps'?); see --help for every field\n")
    assert proc.stdout == ""


# ---------------------------------------------------------------------------------------------
# files the tools write
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield 0o640
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


def test_written_files_get_the_umask_mode_also_when_replacing(tmp_path, umask_027):
    assert pipeline.current_umask() == 0o027
    target = tmp_path / "new" / "deeper" / "out.py"
    pipeline.atomic_write(target, "x = 1\n")
    assert _mode(target) == umask_027 and target.read_text() == "x = 1\n"
    os.chmod(target, 0o600)
    pipeline.atomic_write(target, "x = 2\n")
    assert _mode(target) == umask_027 and target.read_text() == "x = 2\n"


def test_the_umask_fallback_restores_the_mask(monkeypatch, umask_027):
    real_open = open

    def no_proc(path, *args, **kwargs):
        if str(path) == "/proc/self/status":
            raise OSError("no /proc here")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", no_proc)
    assert pipeline.current_umask() == 0o027
    assert os.umask(0o027) == 0o027


def test_an_exclusive_write_never_replaces_an_existing_file(tmp_path):
    target = tmp_path / "mine.py"
    target.write_text("# my edits\n")
    with pytest.raises(FileExistsError):
        pipeline.atomic_write(target, "generated\n", exclusive=True)
    assert target.read_text() == "# my edits\n" and not _leftovers(tmp_path)


def test_an_exclusive_write_falls_back_to_o_excl_without_hard_links(tmp_path, monkeypatch,
                                                                    umask_027):
    def no_links(src, dst):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    target = tmp_path / "out.py"
    pipeline.atomic_write(target, "one\n", exclusive=True)
    assert target.read_text() == "one\n" and _mode(target) == umask_027
    with pytest.raises(FileExistsError):
        pipeline.atomic_write(target, "two\n", exclusive=True)
    assert target.read_text() == "one\n" and not _leftovers(tmp_path)


def test_a_file_appearing_meanwhile_is_not_replaced(tmp_path, monkeypatch):
    """The window between 'does it exist' and 'write it' is closed: the target created after
    the temporary file was written (another process) survives."""
    target = tmp_path / "out.py"
    real_link = os.link

    def racing_link(src, dst):
        Path(dst).write_text("theirs\n")
        return real_link(src, dst)

    monkeypatch.setattr(os, "link", racing_link)
    with pytest.raises(FileExistsError):
        pipeline.atomic_write(target, "ours\n", exclusive=True)
    assert target.read_text() == "theirs\n" and not _leftovers(tmp_path)


@pytest.mark.parametrize("make, rel, fragment", [
    (lambda root: (root / "dir").mkdir(), "dir", "dir: it is a folder (give a file path)"),
    (lambda root: (root / "file").write_text(""), "file/out.py", "file is a file, not a folder"),
    (lambda root: (root / "file").write_text(""), "file/a/b/out.py", "file is a file, not a folder"),
])
def test_output_path_problems_are_one_line(tmp_path, make, rel, fragment):
    make(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(pipeline.WriteError) as info:
        pipeline.atomic_write(tmp_path / rel, "x\n")
    assert fragment in str(info.value) and "\n" not in str(info.value)
    assert sorted(tmp_path.rglob("*")) == before  # nothing left behind


def test_a_read_only_folder_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    # As root the permission bits do not stop a write: make the folder refuse it instead.
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(pipeline.tempfile, "mkstemp", refuse)
    with pytest.raises(pipeline.WriteError) as info:
        pipeline.atomic_write(tmp_path / "new" / "out.py", "x\n")
    assert str(info.value) == (f"cannot write {tmp_path}/new/out.py: the folder {tmp_path}/new is "
                               "not writable (Permission denied)")
    assert not (tmp_path / "new").exists()  # the folder it made is removed again


def test_a_failed_rename_leaves_no_temporary_file(tmp_path, monkeypatch):
    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pipeline.os, "replace", full)
    with pytest.raises(pipeline.WriteError, match="No space left on device"):
        pipeline.atomic_write(tmp_path / "out.py", "x\n")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def to_yaml_argv(monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.syspath_prepend(str(REPO))
    return ["--to-yaml", "--module", "recipes.train_qwen3_5_demo", "--config",
            "train_qwen3_5_demo"]


def test_to_yaml_output_paths(tmp_path, capsys, to_yaml_argv, umask_027):
    from hyper_parallel.codegen.__main__ import main

    (tmp_path / "a_file").write_text("")
    (tmp_path / "a_folder").mkdir()
    for out in ("a_folder", "a_file/x.yaml"):
        assert main([*to_yaml_argv, "-o", str(tmp_path / out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("codegen: error: cannot write ")
        assert "nothing was written (choose another path with -o)" in err
    target = tmp_path / "back.yaml"
    target.write_text("mine\n")
    os.chmod(target, 0o600)
    assert main([*to_yaml_argv, "-o", str(target)]) == 1
    assert "exists; nothing was written (pass --force" in capsys.readouterr().err
    assert target.read_text() == "mine\n"
    assert main([*to_yaml_argv, "-o", str(target), "--force"]) == 0
    assert target.read_text().startswith("# Legacy YAML of the recipe")
    assert _mode(target) == umask_027
    assert main([*to_yaml_argv, "-o", str(tmp_path / "made" / "here.yaml")]) == 0
    assert (tmp_path / "made" / "here.yaml").is_file()  # missing folders are created
    assert not _leftovers(tmp_path)
