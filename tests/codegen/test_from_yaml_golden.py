"""``--from-yaml`` golden files: each ``golden/<case>.yaml`` converts to exactly ``<case>.py``
with the report ``<case>.out`` (or fails with exactly the error in ``<case>.out``).

The cases cover every kind of table row (rename, transform, unsupported; new-only rows cannot be
written in a YAML), dict entries, normalisations, the comment and provenance rules and values
that look like code. Update on purpose (then review the diff):

    HYPER_PARALLEL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/codegen/test_from_yaml_golden.py
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

import pytest

from hyper_parallel.codegen.errors import CodegenError
from hyper_parallel.codegen.migration import from_yaml
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


#: A line's provenance: ``a.b (line 4)``, ``a.{b, c.d} (lines 4-6)``, ``a.b, c.d (lines 4-6)``.
_PROVENANCE = re.compile(r"# ((?:[\w.]+(?:\.\{[^}]*\})?)(?:, [\w.]+(?:\.\{[^}]*\})?)*) "
                         r"\(lines? [\d-]+\)")


def _provenance_keys(text: str) -> set[str]:
    keys = set()
    for match in _PROVENANCE.finditer(text):
        for item in re.split(r", (?![^{]*\})", match.group(1)):
            if "{" in item:  # prefix.{a, b.c}
                prefix, names = item.split(".{")
                keys |= {f"{prefix}.{n}" for n in names.rstrip("}").split(", ")}
            else:
                keys.add(item)
    return keys


def _body(text: str) -> list[str]:
    """The lines of the recipe function, without its ``def`` line."""
    return text.split("\ndef ", 1)[1].splitlines()[1:]


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


def test_one_comment_per_statement(results):
    """Trailing when it fits in 100 columns, else one line above: never two comment lines in a
    row, never a comment that a statement does not follow, never one above a line that fits."""
    for stem, (text, _) in results.items():
        if text is None:
            continue
        body = _body(text)
        for above, below in itertools.pairwise(body):
            if above.strip().startswith("#"):
                assert not below.strip().startswith("#"), (stem, above, below)
                assert below.strip() != "return config", (stem, above)
                assert "  # " not in below, (stem, below)
                assert len(f"{below}  {above.strip()}") > 100, (stem, above, below)
        trailing = [line for line in body if "  # " in line and not line.strip().startswith("#")]
        assert all(len(line) <= 100 for line in trailing), stem


def test_statements_follow_the_order_of_the_config(results):
    """Grouped by section in the order of HyperTrainer.Config's fields, each section's fields
    in their own order."""
    import dataclasses

    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    def rank(target: str) -> tuple:
        node, ranks = HyperTrainer.Config(), []
        for name in re.findall(r"\.(\w+)", target.split("[", 1)[0]):
            names = [f.name for f in dataclasses.fields(node)]
            ranks.append(names.index(name))
            node = getattr(node, name)
            if not dataclasses.is_dataclass(node):
                break
        return tuple(ranks)

    for stem, (text, _) in results.items():
        if text is None:
            continue
        targets = [line.split(" = ", 1)[0].strip().removeprefix("del ")
                   for line in _body(text) if line.strip().startswith(("config.", "del config."))]
        ranks = [rank(t) for t in targets]
        assert ranks == sorted(ranks), (stem, targets)


def test_comments_stay_with_their_keys(results):
    text, _ = results["overrides_and_comments"]
    doc, body = text.split('"""')[1], "\n".join(_body(text))
    # The header, the closing comment and the comments of keys no line sets: the docstring.
    assert "The YAML's header comment:\n\n    Header comment of the file" in doc
    assert "    A second block, after a blank line." in doc
    assert "* data (line 10): a section sets no line: its comment goes to the docstring" in doc
    assert "* train.seed (line 15): This key keeps its default (no line)" in doc
    assert "The YAML's closing comment:\n\n    Comments after the last key go to" in doc
    assert "Header comment" not in body and "closing" not in body
    # A dict line carries the block above the dict and its entries' comments, in one line.
    assert ("    # model.config_overrides (line 7): A block comment on a dict joins the comment of "
            "the line that sets the dict, and so do the comments of its entries\n"
            "    config.model.config_overrides = {") in body
    # A block of two lines and a trailing comment: one line.
    assert ("# train.global_batch_size (line 20): A block of two comment lines above a key "
            "becomes one comment, joined with the key's trailing one. (two sequences per step)\n"
            "    config.training.global_batch_size = 2") in body
    assert '# train.max_steps (line 16): trailing comment with a tab\\tand a "quote"\n' in body
    assert "config.training.seq_len = 32  # data.max_seq_len (line 12)\n" in body


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
