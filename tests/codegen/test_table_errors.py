"""A wrong table stops the generator with an error that names the field or the row and its line,
and says what to write; nothing is written."""

from __future__ import annotations

import re

import pytest

from hyper_parallel.codegen import CodegenError, generate, pipeline

from .conftest import edit

TABLE = "codegen/field_table.yaml"


def _error(repo) -> str:
    with pytest.raises(CodegenError) as info:
        generate(repo)
    return str(info.value)


def _row(repo, head: str) -> str:
    """The whole text of the mapping row whose first line starts with ``head`` (the row's
    continuation lines, its probe among them, included)."""
    lines = (repo / TABLE).read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith(head))
    end = start + 1
    while end < len(lines) and lines[end].startswith("     "):
        end += 1
    return "".join(lines[start:end])


SHUFFLE = "  - {kind: rename, legacy: data.pin_memory, new: dataloader.pin_memory,"
PROBE = ", probe: {observe: loss, set: {%s: 1}}"


def _line_of(repo, needle: str) -> int:
    lines = (repo / TABLE).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


def test_uncovered_legacy_field(repo_copy):
    edit(repo_copy / TABLE, _row(repo_copy, "  - {kind: rename, legacy: train.max_steps,"), "")
    message = _error(repo_copy)
    assert "legacy field train.max_steps (int, default 100) is not covered" in message
    # The row to add, with the new field left uncovered by the same edit as the guess.
    assert "- {kind: rename, legacy: train.max_steps, new: training.steps,\n     probe: " \
           "{observe: <observable>, set: {training.steps: <a non-default value>}}}" in message
    assert "new field training.steps (int, default 100) is not covered" in message


def test_uncovered_component_field(repo_copy):
    # A field added to a hand-written component Config must be declared and mapped.
    edit(repo_copy / "hyper_parallel" / "components" / "profiler.py",
         '        active: int = 3\n        """Steps recorded."""\n',
         '        active: int = 3\n        """Steps recorded."""\n\n'
         '        with_stack: bool = False\n        """Record Python stacks."""\n')
    message = _error(repo_copy)
    assert "Profiler.Config.with_stack (bool, default False) is not in the table" in message
    assert "`- {name: with_stack, type: 'bool', default: False}`" in message
    assert "new field profiler.with_stack (bool, default False) is not covered" in message


def test_component_field_removed(repo_copy):
    edit(repo_copy / "hyper_parallel" / "components" / "profiler.py",
         '        warmup: int = 1\n        """Steps traced but discarded."""\n', "")
    message = _error(repo_copy)
    assert re.search(r"field_table.yaml:\d+: components \(profiler\).warmup: .* has no field "
                     r"'warmup'", message)
    assert "new field 'profiler.warmup' does not exist in the new tree" in message


def test_wrong_type_of_a_component_field(repo_copy):
    edit(repo_copy / TABLE, "{name: lr, type: float, default: 1.0e-4}",
         "{name: lr, type: int, default: 1}")
    line = _line_of(repo_copy, "{name: lr, type: int")
    message = _error(repo_copy)
    assert (f"{TABLE}:{line}: components (optimizer).lr: wrong type: the table says int, "
            "hyper_parallel.components.optimizer:OptimizersContainer.Config.lr is declared "
            "float") in message


def test_wrong_type_of_a_default(repo_copy):
    edit(repo_copy / TABLE, "        type: int\n        default: 100\n",
         "        type: int\n        default: one hundred\n")
    message = _error(repo_copy)
    assert re.search(rf"{TABLE}:\d+: sections\[1\] \(training\)\.fields\[0\] \(steps\): wrong "
                     r"type: default 'one hundred' is not of type int", message)


def test_wrong_type_across_a_rename(repo_copy):
    edit(repo_copy / TABLE, _row(repo_copy, SHUFFLE),
         "  - {kind: rename, legacy: data.pin_memory, new: dataloader.num_workers"
         + PROBE % "dataloader.num_workers" + "}\n"
         "  - {kind: new_only, new: dataloader.pin_memory, reason: test"
         + PROBE % "dataloader.pin_memory" + "}\n")
    edit(repo_copy / TABLE, _row(repo_copy, "  - {kind: rename, legacy: data.num_workers,"), "")
    edit(repo_copy / TABLE, "# ---- train ----", "- {kind: unsupported, legacy: data.num_workers, "
         "reason: t" + PROBE % "data.num_workers" + "}\n  # ---- train ----")
    message = _error(repo_copy)
    assert "wrong type: rename data.pin_memory (bool) -> dataloader.num_workers (int)" in message
    assert "defaults disagree: data.pin_memory defaults to True, dataloader.num_workers to 0" in message


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ("  - {kind: rename, legacy: data.pin_memory}", "missing key 'new'"),
        ("  - {knd: rename, legacy: data.pin_memory, new: dataloader.pin_memory}",
         "kind must be one of rename, transform, unsupported, new_only, got None"),
        ("  - {kind: renam, legacy: data.pin_memory, new: dataloader.pin_memory}",
         "(did you mean 'rename'?)"),
        ("  - {kind: rename, legacy: data.pin_memory, new: dataloader.pin_memory, reson: x}",
         "unknown key 'reson'"),
        ("  - {kind: rename, legacy: 'data pin_memory', new: dataloader.pin_memory}",
         "legacy must be a dotted field path"),
        ("  - rename data.pin_memory dataloader.pin_memory", "a row must be a mapping"),
        (("  - {kind: transform, legacy: data.pin_memory, new: dataloader.pin_memory, forward: f, "
          "backward: g}"), "legacy must map local names to dotted paths"),
    ],
)
def test_malformed_row_names_the_row_and_its_line(repo_copy, row, words):
    edit(repo_copy / TABLE, _row(repo_copy, SHUFFLE), row + "\n")
    line = _line_of(repo_copy, row.strip())
    index = _row_index(repo_copy, line)
    message = _error(repo_copy)
    assert f"{TABLE}:{line}: mappings[{index}]" in message, message
    assert words in message


def _row_index(repo, line: int) -> int:
    lines = (repo / TABLE).read_text().splitlines()
    start = next(i for i, text in enumerate(lines, 1) if text.startswith("mappings:"))
    return sum(1 for text in lines[start:line - 1] if text.startswith("  - "))


def test_field_covered_twice(repo_copy):
    row = _row(repo_copy, SHUFFLE)
    edit(repo_copy / TABLE, row, row + "  - {kind: unsupported, legacy: data.pin_memory, reason: "
         "twice" + PROBE % "data.pin_memory" + "}\n")
    message = _error(repo_copy)
    assert "legacy field 'data.pin_memory' is already covered by mappings[" in message
    assert "a field is covered exactly once" in message


def test_unknown_path_suggests_the_closest(repo_copy):
    row = _row(repo_copy, SHUFFLE)
    edit(repo_copy / TABLE, row, row.replace("dataloader.pin_memory", "dataloader.pin_memry"))
    message = _error(repo_copy)
    assert "new field 'dataloader.pin_memry' does not exist in the new tree (did you mean " \
           "'dataloader.pin_memory'?)" in message


def test_the_table_reads_yaml_as_the_legacy_configs_do(repo_copy):
    """One YAML loader, one set of rules (YAML 1.2 core, utils/yaml_lines.py): an unquoted
    ``off`` is the string "off" and ``010`` is ten, in the table as in a legacy config."""
    from hyper_parallel.codegen.table.field_table import load_table

    quoted = load_table(repo_copy / TABLE, TABLE)
    edit(repo_copy / TABLE, '        default: "off"', "        default: off")
    assert load_table(repo_copy / TABLE, TABLE).sections == quoted.sections
    edit(repo_copy / TABLE, "        default: 100\n        min: 1\n",
         "        default: 9\n        min: 010\n")
    assert "default 9 violates the field's own constraints" in _error(repo_copy)


def test_a_yaml_1_1_boolean_spelling_is_a_string(repo_copy):
    # YAML 1.1 would read `no` as false; here it is the string "no", which a bool field refuses.
    edit(repo_copy / TABLE, "        default: false\n", "        default: no\n")
    assert "wrong type: default 'no' is not of type bool" in _error(repo_copy)


def test_transform_function_must_exist_and_match_the_row(repo_copy):
    edit(repo_copy / TABLE, "forward: async_mode_forward", "forward: async_mode_fwd")
    edit(repo_copy / TABLE, "backward: warmup_backward", "backward: dp_shard_backward")
    message = _error(repo_copy)
    assert "forward function 'async_mode_fwd' is not defined in " \
           "hyper_parallel/config/transforms.py" in message
    assert "backward dp_shard_backward(data_parallel_shard_degree) must take exactly the " \
           "keyword arguments steps, warmup_steps" in message


def test_new_default_must_be_what_the_legacy_default_converts_to(repo_copy):
    edit(repo_copy / TABLE, "        default: float32\n        doc: >-\n          FSDP2 compute",
         "        default: bfloat16\n        doc: >-\n          FSDP2 compute")
    message = _error(repo_copy)
    assert "defaults disagree: forward(" in message
    assert "gives training.mixed_precision_param='float32' but its default is 'bfloat16'" in message


def test_constraint_that_does_not_fit_the_field(repo_copy):
    edit(repo_copy / TABLE, "        default: 100\n        min: 1\n",
         "        default: 100\n        min: 1\n        pattern: x\n        max: 50\n")
    message = _error(repo_copy)
    assert "pattern applies to str fields" in message
    assert "default 100 violates the field's own constraints" in message


def test_nothing_is_written_on_error(repo_copy):
    before = {p: (repo_copy / p).read_text() for p in pipeline.find_generated(repo_copy)}
    edit(repo_copy / TABLE, _row(repo_copy, SHUFFLE), "")
    with pytest.raises(CodegenError):
        pipeline.write(repo_copy, generate(repo_copy))
    assert {p: (repo_copy / p).read_text() for p in before} == before


def test_every_problem_is_reported_at_once(repo_copy):
    edit(repo_copy / TABLE, _row(repo_copy, SHUFFLE), "")
    edit(repo_copy / TABLE, _row(repo_copy, "  - {kind: rename, legacy: train.seed,"), "")
    with pytest.raises(CodegenError) as info:
        generate(repo_copy)
    assert len(info.value.problems) == 4  # two legacy fields and two new fields uncovered


def test_a_row_without_a_probe_is_refused(repo_copy):
    """"Accepted and ignored" cannot land: every row names the observable its field moves."""
    edit(repo_copy / TABLE, _row(repo_copy, SHUFFLE),
         "  - {kind: rename, legacy: data.pin_memory, new: dataloader.pin_memory}\n")
    line = _line_of(repo_copy, "legacy: data.pin_memory, new: dataloader.pin_memory}")
    message = _error(repo_copy)
    assert f"{TABLE}:{line}: mappings[" in message and "missing key 'probe'" in message


@pytest.mark.parametrize(
    ("probe", "words"),
    [
        ("{observe: losss, set: {dataloader.pin_memory: false}}",
         "unknown observable 'losss' (did you mean 'loss'?)"),
        ("{observe: loss, set: {dataloader.num_workers: 1}}", "set must set the row's own field"),
        ("{observe: attribute, set: {dataloader.pin_memory: false}}", "path is required"),
        # A failure is an observable only when the probe names it (a crash must not pass).
        ("{observe: outcome, set: {dataloader.pin_memory: false}}", "expect is required"),
        ("{observe: timeout, set: {dataloader.pin_memory: false}}", "needs a peer: ranks: 2"),
        ("{observe: loss}", "missing key 'set'"),
    ],
)
def test_a_malformed_probe_names_the_row(repo_copy, probe, words):
    edit(repo_copy / TABLE, _row(repo_copy, SHUFFLE), f"{SHUFFLE}\n     probe: {probe}}}\n")
    message = _error(repo_copy)
    assert "mappings[" in message and ".probe" in message and words in message, message


def _table_error(repo) -> CodegenError:
    """The table loader's own error (without the coverage checks of a whole generation)."""
    from hyper_parallel.codegen.table.field_table import load_table

    with pytest.raises(CodegenError) as info:
        load_table(repo / TABLE, TABLE)
    return info.value


def test_every_problem_of_the_table_file_is_reported_at_once(repo_copy):
    """Three malformed rows, a duplicate key and an unsupported tag: one error lists all five,
    each with its line (the YAML-level problems do not hide the schema's)."""
    edit(repo_copy / TABLE, "  - {kind: rename, legacy: data.pin_memory, new: dataloader.pin_memory,",
         "  - {kind: renam, legacy: data.pin_memory, new: dataloader.pin_memory,")
    edit(repo_copy / TABLE, "  - {kind: rename, legacy: train.seed, new: debug.seed,",
         "  - {kind: rename, legacy: train.seed, new: debug.seed, reson: x,")
    edit(repo_copy / TABLE, "  - {kind: rename, legacy: data.num_workers, new: dataloader.num_workers,",
         "  - {kind: rename, legacy: 'data num_workers', new: dataloader.num_workers,")
    edit(repo_copy / TABLE, "  - {kind: rename, legacy: train.max_steps, new: training.steps,",
         "  - {kind: rename, kind: rename, legacy: train.max_steps, new: training.steps,")
    edit(repo_copy / TABLE, '        default: "off"', "        default: !!binary b2Zm")
    lines = {needle: _line_of(repo_copy, needle) for needle in (
        "kind: renam,", "reson: x", "'data num_workers'", "kind: rename, kind: rename",
        "        default: !!binary")}
    problems = _table_error(repo_copy).problems
    assert len(problems) == 5, problems
    text = "\n".join(problems)
    assert f"{TABLE}:{lines['kind: renam,']}: mappings[" in text and "(did you mean 'rename'?)" in text
    assert f"{TABLE}:{lines['reson: x']}: mappings[" in text and "unknown key 'reson'" in text
    assert f"{TABLE}:{lines[chr(39) + 'data num_workers' + chr(39)]}: mappings[" in text
    assert "legacy must be a dotted field path, got 'data num_workers'" in text
    assert (f"{TABLE}:{lines['kind: rename, kind: rename']}: duplicate key 'kind' (first at line "
            f"{lines['kind: rename, kind: rename']})") in text
    assert f"{TABLE}:{lines['        default: !!binary']}: unsupported tag !!binary" in text


def test_a_missing_part_does_not_hide_the_other_problems(repo_copy):
    text = (repo_copy / TABLE).read_text()
    (repo_copy / TABLE).write_text(text.replace("\ncomponents:", "\ncomponent:", 1))
    edit(repo_copy / TABLE, "  - {kind: rename, legacy: data.pin_memory, new: dataloader.pin_memory,",
         "  - {kind: renam, legacy: data.pin_memory, new: dataloader.pin_memory,")
    text = "\n".join(_table_error(repo_copy).problems)
    assert "unknown key 'component' (did you mean 'components'?)" in text
    assert "missing key 'components'" in text
    assert "(did you mean 'rename'?)" in text  # the rows are still checked


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("        default: 100\n        min: 1\n", "        default: 100\n        min: abc\n",
         "min needs an int field and an int bound"),
        ("        default: 100\n        min: 1\n", "        default: 100\n        min: !!binary eA==\n",
         "unsupported tag !!binary"),
    ],
)
def test_yaml_level_problems_of_a_field_are_reported_not_raised(repo_copy, old, new, words):
    edit(repo_copy / TABLE, old, new)
    assert words in "\n".join(_table_error(repo_copy).problems)


def test_bombs_in_the_table_are_errors(repo_copy):
    text = (repo_copy / TABLE).read_text()
    laughs = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    laughs += [f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 9) + "]"
               for i in range(1, 9)]
    (repo_copy / TABLE).write_text("\n".join(laughs) + "\n" + text)
    assert "expands to more than 100000 values" in str(_table_error(repo_copy))
    (repo_copy / TABLE).write_text("")
    assert str(_table_error(repo_copy)) == f"{TABLE}: the file is empty"
