"""One run of any legacy entry lists every problem of a YAML at once, each at its ``file:line``.

The entries are the legacy parser's command (``python -m hyper_parallel.trainer.config``),
``python -m hyper_parallel.codegen --from-yaml`` and training (``python -m hyper_parallel.train
old.yaml``). A YAML with problems of every kind -- an unknown ``model.name``, ``config_overrides``
keys that are not fields of the model, unknown keys, values out of range, keys the new
configuration cannot express (``unsupported`` rows of the field table) set off their defaults --
is refused by each in one error naming all of them, exit 2, no traceback: nothing is revealed only
once the others are fixed. Each ``main`` runs in this process (nothing trains).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hyper_parallel import train
from hyper_parallel.codegen import __main__ as codegen
from hyper_parallel.trainer import config_parser

REPO = Path(__file__).resolve().parents[4]
DEBUG_YAML = REPO / "examples" / "yaml" / "train_qwen3_5_debug.yaml"
#: A YAML setting every unsupported key off its default, and the error ``--from-yaml`` gives.
GOLDEN = REPO / "tests" / "codegen" / "golden"

#: The entries by name: ``(main, arguments before the YAML, what starts their error line)``.
ENTRIES = {
    "parser": (config_parser.main, [], "error: "),
    "from-yaml": (codegen.main, ["--from-yaml"], "codegen: error: "),
    "train": (train.main, [], "error: "),
}

#: Edits of the debug example, each a problem: ``(line as written, as edited, the dotted path
#: reported, words of its message)``, in the file's order.
EDITS = [
    ("  name: qwen3_5", "  name: qwen3_6", "model.name",
     "unknown model 'qwen3_6' (did you mean 'qwen3_5'?)"),
    ("    flavor: debugmodel ", "    hiden_size: 8\n    flavor: debugmodel ",
     "model.config_overrides.hiden_size",
     ("unknown key 'hiden_size' in model.config_overrides of model 'qwen3_5', the closest to "
      "the unknown 'qwen3_6' (did you mean 'hidden_size'?)")),
    ("data:", "    num_hiden_layers: 2\ndata:", "model.config_overrides.num_hiden_layers",
     "(did you mean 'num_hidden_layers'?)"),
    ("  shuffle: false", "  shufle: false", "data.shufle", "(did you mean 'data.shuffle'?)"),
    ("  max_steps: 10", "  max_stepz: 10", "train.max_stepz", "(did you mean 'train.max_steps'?)"),
    ("  seed: 1234", "  seed: -1", "train.seed", "must be >= 0, got -1"),
    ("  init_device: meta", "  backend: mindspore\n  init_device: meta", "train.backend",
     "'mindspore' is not supported by the new configuration: the trainer runs on torch only"),
    ("    dp_shard: 1", "    zero_stage: 3\n    dp_shard: 1", "train.accelerator.zero_stage",
     "3 is not supported by the new configuration: the legacy trainer never read it"),
    ("    lr: 1.0e-3", "    lr: -1", "train.optimizer.lr", "must be >= 0.0, got -1.0"),
]


def broken_yaml(folder: Path) -> tuple[str, list[tuple[str, str]]]:
    """The debug example with every edit of :data:`EDITS` (``old.yaml`` in ``folder``) and,
    for each problem, the start of its line in an error (``- old.yaml:<line>: <path>: ``) and
    words of its message."""
    text = DEBUG_YAML.read_text(encoding="utf-8")
    for old, new, _, _ in EDITS:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    (folder / "old.yaml").write_text(text, encoding="utf-8")
    lines = text.splitlines()
    expected = []
    for _, new, path, words in EDITS:
        edited = next(i for i, line in enumerate(lines, 1) if line.startswith(new.splitlines()[0]))
        expected.append((f"- old.yaml:{edited}: {path}: ", words))
    return "old.yaml", expected


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_every_problem_of_the_file_in_one_error(entry, run_entry, tmp_path):
    main, head, prefix = ENTRIES[entry]
    path, expected = broken_yaml(tmp_path)
    code, err = run_entry(main, [*head, path])
    assert code == 2, err
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert lines[0] == f"{prefix}{len(EDITS)} problems in old.yaml:", err
    problems = [line for line in lines[1:] if line.startswith("- ")]
    assert len(problems) == len(EDITS), err
    for line, (start, words) in zip(problems, expected):
        assert line.startswith(start) and words in line, (start, words, line)
    assert not (tmp_path / "recipes").exists()


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_an_unknown_model_alone_is_refused_by_every_entry(entry, run_entry, tmp_path):
    """The parser's command used to print the config (exit 0) of a model the others refuse."""
    main, head, prefix = ENTRIES[entry]
    (tmp_path / "old.yaml").write_text("model:\n  name: qwen3_6\ntrain:\n  max_steps: 1\n")
    code, err = run_entry(main, [*head, "old.yaml"])
    assert code == 2, err
    assert err.startswith(f"{prefix}old.yaml:2: model.name: unknown model 'qwen3_6' (did you "
                          "mean 'qwen3_5'?): there is no module 'hyper_parallel.models.qwen3_6'")
    assert "Traceback" not in err


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_keys_the_new_configuration_cannot_express_have_their_lines_too(entry, run_entry,
                                                                         tmp_path):
    """Keys with no field in the new configuration: refused by the parser itself (the rows are
    generated below it), each at its line, by the parser's command too."""
    main, head, prefix = ENTRIES[entry]
    (tmp_path / "old.yaml").write_text(
        "model:\n  tp_plan: {q_proj: colwise}\ntrain:\n  moe_monitor:\n    num_recomputations: 2\n")
    code, err = run_entry(main, [*head, "old.yaml"])
    assert code == 2, err
    assert err.startswith(f"{prefix}2 problems in old.yaml:\n"), err
    assert "\n- old.yaml:2: model.tp_plan: {'q_proj': 'colwise'} is not supported" in err
    assert "\n- old.yaml:5: train.moe_monitor.num_recomputations: 2 is not supported" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_a_file_of_unsupported_keys_gets_the_conversions_words(entry, run_entry, tmp_path):
    """Every unsupported key off its default, alone: each entry's error is exactly the one
    ``--from-yaml`` gives (its golden file), which is the adapter's refusal at the keys' lines."""
    main, head, prefix = ENTRIES[entry]
    (tmp_path / "unsupported.yaml").write_bytes((GOLDEN / "unsupported.yaml").read_bytes())
    code, err = run_entry(main, [*head, "unsupported.yaml"])
    assert code == 2, err
    golden = (GOLDEN / "unsupported.out").read_text(encoding="utf-8")
    assert err == prefix + golden.removeprefix("error: ")


def test_an_unsupported_value_wins_over_the_sections_own_check(run_entry, tmp_path):
    """One problem per key, the unsupported row's (it names the value that converts), also for a
    value set on the command line."""
    (tmp_path / "old.yaml").write_text("train:\n  backend: jax\n")
    code, err = run_entry(config_parser.main,
                          ["old.yaml", "--train.accelerator.npu_nums_per_device=0"])
    assert code == 2, err
    problems = [line for line in err.splitlines() if line.startswith("- ")]
    assert len(problems) == 2, err
    assert problems[0].startswith("- old.yaml:2: train.backend: 'jax' is not supported by the new "
                                  "configuration"), err
    assert "remove train.backend or set it to torch (default 'torch'; " in problems[0], err
    assert problems[1].startswith("- command line (--train.accelerator.npu_nums_per_device=0): "
                                  "train.accelerator.npu_nums_per_device: 0 is not supported"), err
