"""``--from-yaml`` golden files: each ``golden/<case>.yaml`` converts to exactly ``<case>.py``
with the report ``<case>.out`` (or fails with exactly the error in ``<case>.out``).

The cases cover every kind of table row (rename, transform, unsupported; new-only rows cannot be
written in a YAML), dict entries, normalisations, the comment and provenance rules and values
that look like code. Update on purpose (then review the diff):

    HYPER_PARALLEL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/codegen/test_from_yaml_golden.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from hyper_parallel.codegen import from_yaml
from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.config.legacy_adapter import FIELD_MAP
from hyper_parallel.trainer.config import ConfigError

from .conftest import REPO

GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.yaml"))
UPDATE = os.environ.get("HYPER_PARALLEL_UPDATE_GOLDEN") == "1"


def convert(stem: str) -> tuple[str | None, str]:
    """``(recipe text or None, report or error text)`` of one case, paths shown relative to the
    golden folder so the files do not depend on where the tests run."""
    try:
        recipe, output = from_yaml.convert(GOLDEN / f"{stem}.yaml", output=GOLDEN / f"{stem}.py",
                                           repo=REPO, base=GOLDEN)
    except (ConfigError, CodegenError) as exc:
        return None, f"error: {exc}\n"
    return recipe.text, from_yaml.report(recipe, output, base=GOLDEN) + "\n"


@pytest.fixture(scope="module")
def results() -> dict[str, tuple[str | None, str]]:
    return {stem: convert(stem) for stem in CASES}


@pytest.mark.parametrize("stem", CASES)
def test_case_matches_its_golden_files(results, stem):
    text, out = results[stem]
    py, report = GOLDEN / f"{stem}.py", GOLDEN / f"{stem}.out"
    if UPDATE:
        report.write_text(out, encoding="utf-8")
        if text is None:
            py.unlink(missing_ok=True)
        else:
            py.write_text(text, encoding="utf-8")
    assert report.read_text(encoding="utf-8") == out, (
        f"{report.name} differs; if the change is intended, rerun with "
        "HYPER_PARALLEL_UPDATE_GOLDEN=1 and review the diff"
    )
    if text is None:
        assert not py.exists(), f"{py.name} is left over from a case that now fails"
    else:
        assert py.read_text(encoding="utf-8") == text, (
            f"{py.name} differs; if the change is intended, rerun with "
            "HYPER_PARALLEL_UPDATE_GOLDEN=1 and review the diff"
        )


def test_every_golden_file_has_its_yaml():
    orphans = [p.name for p in GOLDEN.iterdir()
               if p.suffix in (".py", ".out") and not (GOLDEN / f"{p.stem}.yaml").exists()]
    assert not orphans


def test_conversion_is_byte_stable():
    assert convert("transforms") == convert("transforms")


def _provenance_keys(text: str) -> set[str]:
    keys = set()
    for match in re.finditer(r"# \w+\.yaml:[\d-]+ (.*)$", text, re.MULTILINE):
        for item in match.group(1).split(", "):
            item = re.sub(r"^:\d+ ", "", item)
            if "{" in item:  # section.{a, b}
                section, names = item.split(".{")
                keys |= {f"{section}.{n}" for n in names.rstrip("}").split(", ")}
            else:
                keys.add(item)
    return keys


def test_goldens_cover_every_kind_of_row(results):
    written = set()
    for text, _ in results.values():
        if text is not None:
            written |= _provenance_keys(text)
    errors = "".join(out for text, out in results.values() if text is None)
    transforms = [row for row in FIELD_MAP if row.kind == "transform"]
    missing = [row.legacy for row in transforms if not written & set(row.legacy)]
    assert not missing, f"transform rows without a golden line: {missing}"
    # train.local_rank is set by the launcher and may not be written in a YAML.
    renames = [row for row in FIELD_MAP if row.kind == "rename" and row.legacy != ("train.local_rank",)]
    missing = [row.legacy for row in renames if not written & set(row.legacy)]
    assert not missing, f"rename rows without a golden line: {missing}"
    for row in FIELD_MAP:
        if row.kind == "unsupported":
            assert row.legacy[0] in errors, f"no golden error for the unsupported {row.legacy}"


def test_comments_are_carried_in_order(results):
    text, _ = results["overrides_and_comments"]
    body = text.split("def overrides_and_comments()", 1)[1]
    expected = [
        "# Header comment of the file: it goes above the baseline line.",
        "# A second block, after a blank line.",
        "config = flavor_baseline(",
        "# no flavor: the model's default one",
        "config.model.config_overrides = ",
        "# a section comment moves to the next line below it",
        "# This key keeps its default, so its comment moves down to the next line.",
        '# trailing comment with a tab\\tand a "quote"',
        "config.training.steps = 5  # overrides_and_comments.yaml:16 train.max_steps",
        "# Comments after the last key end the function.",
        "return config",
    ]
    positions = [body.find(item) for item in expected]
    assert -1 not in positions, [e for e, p in zip(expected, positions) if p == -1]
    assert positions == sorted(positions)


def test_values_that_look_like_code_stay_data(results, tmp_path):
    """The golden recipe of data_not_code.yaml runs nothing and gives back the YAML's strings."""
    from hyper_parallel.trainer.config import HyperTrainerConfig
    from hyper_parallel.trainer.config_parser import load_config

    text, _ = results["data_not_code"]
    marker = Path("/tmp/hyper_parallel_pwned")
    marker.unlink(missing_ok=True)
    namespace: dict = {"__name__": "golden_data_not_code"}
    exec(compile(text, "data_not_code.py", "exec"), namespace)  # noqa: S102 -- the recipe under test
    config = namespace["data_not_code"]()
    assert not marker.exists()
    legacy = load_config(HyperTrainerConfig, (GOLDEN / "data_not_code.yaml").read_text(),
                         source="data_not_code.yaml")
    assert config.dataloader.dataset_path == legacy.data.train_path
    assert config.dataloader.text_key == legacy.data.text_key
    assert config.checkpoint.folder == legacy.train.checkpoint.output_dir
    assert config.metrics.save_tb_folder == legacy.train.tensorboard.output_dir
    assert config.profiler.save_traces_folder == legacy.train.profile.output_dir
    assert "\x00" in config.profiler.save_traces_folder and "\u2028" in legacy.train.profile.output_dir
