"""The ``--from-yaml`` / ``--to-yaml`` command line: output paths, --force, --strict, names, the
proof that refuses to write, the reverse conversion, and arbitrary strings as data."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyper_parallel.codegen.__main__ import main
from hyper_parallel.codegen.migration import from_yaml
from hyper_parallel.codegen.migration.recipe import changes as recipe_changes

from .conftest import REPO

DEMO = REPO / "examples" / "yaml" / "train_qwen3_5_demo.yaml"
TRANSFORMS = REPO / "tests" / "codegen" / "golden" / "transforms.yaml"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_default_output_is_recipes_name_py_and_it_imports(workdir, capsys):
    assert main(["--from-yaml", str(DEMO)]) == 0
    path = workdir / "recipes" / "train_qwen3_5_demo.py"
    report = capsys.readouterr().out
    assert "nothing lost" in report and "normalisations: none" in report
    assert "--module recipes.train_qwen3_5_demo --config train_qwen3_5_demo" in path.read_text()
    from hyper_parallel.config.recipes import load_recipe

    config = load_recipe("recipes.train_qwen3_5_demo", "train_qwen3_5_demo")
    assert config.training.steps == 20 and config.parallelism.data_parallel_shard_degree == 2


def test_existing_file_is_refused_without_force(workdir, capsys):
    out = workdir / "mine.py"
    out.write_text("# my edits\n")
    assert main(["--from-yaml", str(DEMO), "-o", str(out)]) == 1
    assert "exists; nothing was written (pass --force" in capsys.readouterr().err
    assert out.read_text() == "# my edits\n"
    assert main(["--from-yaml", str(DEMO), "-o", str(out), "--force"]) == 0
    assert out.read_text().startswith('"""Recipe train_qwen3_5_demo, converted from ')
    assert not list(workdir.glob(".mine.py.*"))  # the atomic write leaves no temporary file


def test_strict_refuses_normalisations_and_writes_nothing(workdir, capsys):
    assert main(["--from-yaml", str(TRANSFORMS), "--strict"]) == 1
    err = capsys.readouterr().err
    assert "--strict refuses" in err
    assert "train.mixed_precision.param_dtype: 'bf16' -> 'bfloat16'" in err
    assert not (workdir / "recipes").exists()
    assert main(["--from-yaml", str(DEMO), "--strict"]) == 0  # a canonical YAML passes


@pytest.mark.parametrize("name, why", [
    ("my-recipe", "not a Python identifier; pass --name my_recipe"),
    ("class", "is a Python keyword"),
    ("config", "a name the recipe module uses itself"),
    ("_private", "starts with an underscore"),
    ("3d", "pass --name recipe_3d"),
])
def test_bad_names_are_refused_with_the_fix(workdir, capsys, name, why):
    assert main(["--from-yaml", str(DEMO), "--name", name]) == 2
    assert why in capsys.readouterr().err
    assert not (workdir / "recipes").exists()


def test_legacy_parser_errors_keep_file_and_line(workdir, capsys):
    bad = workdir / "old.yaml"
    bad.write_text("model:\n  name: qwen3_5\ntrain:\n  optimizer:\n    lrr: 1.0\n")
    assert main(["--from-yaml", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "old.yaml:5" in err and "did you mean 'train.optimizer.lr'" in err
    assert main(["--from-yaml", str(workdir / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_failed_proof_writes_nothing(workdir, capsys, monkeypatch):
    """Drop one line from the recipe (a converter bug): the proof names the field, no file."""
    real = recipe_changes.field_changes

    def lossy(base, target, path=()):
        changes = real(base, target, path)
        return [c for c in changes if c.dotted != "training.steps"] if not path else changes

    monkeypatch.setattr(recipe_changes, "field_changes", lossy)
    assert main(["--from-yaml", str(DEMO)]) == 1
    err = capsys.readouterr().err
    assert "does not reproduce the YAML, so nothing was written" in err
    assert "training.steps: expected 20, the recipe gives 100" in err
    assert "train.max_steps: expected 20, the recipe gives 100" in err
    assert not (workdir / "recipes").exists()


def test_to_yaml_round_trip(workdir, capsys):
    assert main(["--from-yaml", str(DEMO)]) == 0
    capsys.readouterr()
    assert main(["--to-yaml", "--module", "recipes.train_qwen3_5_demo", "--config",
                 "train_qwen3_5_demo", "-o", "back.yaml"]) == 0
    from hyper_parallel.trainer.config import HyperTrainerConfig
    from hyper_parallel.trainer.config_parser import load_config

    back = load_config(HyperTrainerConfig, (workdir / "back.yaml").read_text(), source="back")
    original = load_config(HyperTrainerConfig, DEMO.read_text(), source="demo")
    assert back == original
    # and back again: the same recipe body
    assert main(["--from-yaml", "back.yaml", "--name", "train_qwen3_5_demo", "-o", "again.py"]) == 0
    body = (workdir / "recipes" / "train_qwen3_5_demo.py").read_text().split("def ", 1)[1]
    again = (workdir / "again.py").read_text().split("def ", 1)[1]
    strip = [line.split("  # ")[0] for line in body.splitlines() if not line.strip().startswith("#")]
    strip_again = [line.split("  # ")[0] for line in again.splitlines()
                   if not line.strip().startswith("#")]
    assert sorted(strip) == sorted(strip_again)  # same lines; the YAML's order may differ


def test_to_yaml_names_new_only_fields(workdir, capsys):
    assert main(["--to-yaml", "--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel"]) == 2
    err = capsys.readouterr().err
    # The recipe's spec is the one registered under its model.name (same model once fitted to
    # the run), so it counts as unset; its dump_folder has no legacy key.
    assert "model_spec" not in err
    assert "dump_folder = 'outputs/qwen3_5_v2_debugmodel'" in err and "field_table.yaml:" in err


def test_to_yaml_of_a_converted_recipe_on_the_v2_spec(workdir, capsys):
    """A --from-yaml recipe starts on the registered spec and still goes back to its YAML."""
    import recipes.train_qwen3_5_debug as module

    assert module.train_qwen3_5_debug().model_spec is not None
    assert main(["--to-yaml", "--module", "recipes.train_qwen3_5_debug",
                 "--config", "train_qwen3_5_debug"]) == 0
    assert "name: qwen3_5" in capsys.readouterr().out


def test_flags_that_do_not_go_together(workdir):
    with pytest.raises(SystemExit):
        main(["--to-yaml"])
    with pytest.raises(SystemExit):
        main(["--from-yaml", str(DEMO), "--to-yaml", "--module", "m", "--config", "c"])


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_TEXT, key=_TEXT)
def test_any_string_is_data(tmp_path, path, key):
    """Any string the legacy parser accepts comes back from the executed recipe unchanged."""
    from hyper_parallel.trainer.config import ConfigError

    source = tmp_path / "fuzz.yaml"
    source.write_text(yaml.safe_dump({
        "model": {"name": "qwen3_5"},
        "data": {"type": "jsonl", "train_path": path, "text_key": key},
        "train": {"checkpoint": {"output_dir": path}},
    }, allow_unicode=True), encoding="utf-8")
    try:
        recipe, _ = from_yaml.convert(source, output=tmp_path / "fuzz.py", repo=REPO, base=tmp_path)
    except ConfigError:
        return  # the legacy parser refused the value (an empty-looking path, say)
    namespace: dict = {"__name__": "fuzz_recipe"}
    exec(compile(recipe.text, "fuzz.py", "exec"), namespace)  # noqa: S102 -- the recipe under test
    config = namespace["fuzz"]()
    # What the YAML means (PyYAML folds a few line-break characters when it reads them back).
    legacy = recipe.source.legacy
    assert config.dataloader.dataset_path == legacy.data.train_path
    assert config.dataloader.text_key == legacy.data.text_key
    assert config.checkpoint.folder == legacy.train.checkpoint.output_dir
    assert set(namespace) == {"__name__", "__doc__", "__builtins__", "__all__", "annotations", "flavor_baseline",
                              "HyperTrainer", "fuzz"}  # the module defines nothing else


def test_name_of_the_registry_baseline_is_refused(workdir, capsys):
    source = REPO / "tests" / "codegen" / "golden" / "registry_baseline.yaml"
    assert main(["--from-yaml", str(source), "--name", "qwen3_5_v2_debugmodel_fsdp2"]) == 2
    assert "is the name of its baseline recipe" in capsys.readouterr().err
    assert not (workdir / "recipes").exists()


def test_migration_flags_without_a_migration_are_refused(workdir, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--name", "x", "--strict"])
    assert exit_info.value.code == 2
    assert "--name, --strict go with --from-yaml or --to-yaml" in capsys.readouterr().err


def test_a_config_overrides_typo_is_refused_with_its_line(workdir, capsys):
    """Not "nothing lost" and a run that fails later: the key is checked against the model
    config, with the file's other problems."""
    bad = workdir / "old.yaml"
    bad.write_text("model:\n  name: qwen3_5\n  config_overrides:\n    flavor: debugmodel\n"
                   "    num_hidden_layer: 2\ntrain:\n  max_step: 3\n  optimizer: {lr: .inf}\n")
    assert main(["--from-yaml", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("codegen: error: 3 problems in old.yaml:\n")
    assert ("old.yaml:5: model.config_overrides.num_hidden_layer: unknown key 'num_hidden_layer' "
            "in model.config_overrides of model 'qwen3_5' (did you mean 'num_hidden_layers'?)") in err
    assert "old.yaml:7: train.max_step" in err and "old.yaml:8: train.optimizer.lr" in err
    assert not (workdir / "recipes").exists()


@pytest.mark.parametrize("text", ["", "# nothing here\n", "null\n"])
def test_an_empty_yaml_is_refused(workdir, capsys, text):
    (workdir / "empty.yaml").write_text(text)
    assert main(["--from-yaml", "empty.yaml"]) == 2
    assert "empty.yaml: empty configuration" in capsys.readouterr().err
    assert not (workdir / "recipes").exists()
