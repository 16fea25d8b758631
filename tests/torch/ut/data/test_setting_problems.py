"""The rules between a data type and the settings that depend on it are written once
(``utils.data_types.setting_problems``); the component Config, the dataset factory, the loader
and the legacy conversion all report them from there."""

from __future__ import annotations

import pytest

from hyper_parallel.components.dataloader import BaseDataLoader
from hyper_parallel.config import transforms
from hyper_parallel.data import build_dataloader, build_dataset
from hyper_parallel.utils.data_types import DATA_TYPES, setting_problems
from hyper_parallel.utils.errors import ConfigFieldError

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")

# (settings, the role refused, the reason) for every rule.
BROKEN = [
    ({"type": "jsonl", "subset": "a"}, "subset",
     "data.subset='a': only applies to data.type='hf_datasets' (this is 'jsonl'); unset it"),
    ({"type": "text", "template": "human_assistant"}, "template",
     "data.template='human_assistant': only applies to data.type='json_file' (this is 'text'); "
     "leave it at 'empty'"),
    ({"type": "dummy", "max_samples": 0}, "max_samples",
     "data.train_size=0: must be an integer >= 1 (or unset for the whole dataset)"),
    ({"type": "dummy", "max_samples": True}, "max_samples",
     "data.train_size=True: must be an integer >= 1 (or unset for the whole dataset)"),
    ({"type": "dummy", "max_samples": 2**53}, "max_samples",
     "data.train_size=9007199254740992: must be an integer <= 9007199254740991 (2**53 - 1)"),
    ({"type": "preset_pt", "shuffle": True}, "shuffle",
     "data.shuffle=True: preset_pt replays the file's batches in file order; set it to False"),
]


@pytest.mark.parametrize(("settings", "role", "message"), BROKEN, ids=lambda v: str(v)[:30])
def test_each_rule(settings, role, message):
    (problem,) = setting_problems(**settings)
    assert (problem.role, problem.message) == (role, message)
    assert problem.field == f"data.{'train_size' if role == 'max_samples' else role}"


def test_what_is_allowed():
    assert setting_problems("hf_datasets", subset="a", max_samples=1) == []
    assert setting_problems("json_file", template="human_assistant") == []
    assert setting_problems("preset_pt", shuffle=False) == []
    assert setting_problems(None, subset="a", template="x", shuffle=True) == []  # no type known
    for data_type in DATA_TYPES:
        assert setting_problems(data_type) == []


def test_fields_name_the_settings_and_every_problem_is_listed():
    problems = setting_problems(
        "preset_pt", subset="a", template="human_assistant", max_samples=0, shuffle=True,
        fields={"type": "dataset", "subset": "S", "template": "T", "max_samples": "M",
                "shuffle": "H"},
    )
    assert [p.role for p in problems] == ["subset", "template", "max_samples", "shuffle"]
    assert [p.field for p in problems] == ["S", "T", "M", "H"]
    assert [p.value for p in problems] == ["a", "human_assistant", 0, True]
    assert problems[0].reason == (
        "only applies to dataset='hf_datasets' (this is 'preset_pt'); unset it"
    )


def test_the_config_reports_the_rule():
    with pytest.raises(ConfigFieldError) as info:
        BaseDataLoader.Config(dataset="jsonl", dataset_path="x", dataset_subset="a")
    assert str(info.value) == (
        "BaseDataLoader.Config.dataset_subset='a': only applies to dataset='hf_datasets' "
        "(this is 'jsonl'); unset it"
    )
    assert (info.value.field, info.value.value) == ("dataset_subset", "a")


def test_the_dataset_factory_reports_the_rule():
    with pytest.raises(ValueError) as info:
        build_dataset("dummy", train_path=None, max_seq_len=8, num_samples=4, subset="a",
                      fields={"subset": "dataloader.dataset_subset", "type": "dataloader.dataset"})
    assert str(info.value) == (
        "dataloader.dataset_subset='a': only applies to dataloader.dataset='hf_datasets' "
        "(this is 'dummy'); unset it"
    )
    with pytest.raises(ValueError, match=r"^data\.train_size=0: must be an integer >= 1"):
        build_dataset("dummy", train_path=None, max_seq_len=8, num_samples=4, max_samples=0)


def test_the_loader_reports_the_rule_for_a_dataset_of_an_ordered_type():
    class Replayed(list):
        data_type = "preset_pt"

    dataset = Replayed([{"input_ids": [1, 2]}] * 4)
    with pytest.raises(ValueError) as info:
        build_dataloader(dataset, dp_rank=0, dp_size=1, micro_batch_size=2, shuffle=True)
    assert str(info.value) == (
        "Replayed: data.shuffle / dataloader.shuffle=True: preset_pt replays the file's batches "
        "in file order; set it to False"
    )
    build_dataloader(dataset, dp_rank=0, dp_size=1, micro_batch_size=2, shuffle=False)


def test_the_legacy_conversion_follows_the_rule():
    assert transforms.shuffle_forward(shuffle=True, type="preset_pt") == {"shuffle": False}
    assert transforms.shuffle_forward(shuffle=True, type="jsonl") == {"shuffle": True}
    assert set(transforms.shuffle_canonical(shuffle=True, type="preset_pt")) == {"shuffle"}
    assert transforms.shuffle_canonical(shuffle=True, type="jsonl") == {}
