"""Pipeline stages of the Qwen3.5 decoder, without a process group: the split arithmetic, the
plan's refusals, stages that compose to the whole model, and initial weights that do not
depend on the cut (``hyper_parallel.models.pipelining``; the schedules run in
tests/torch/st/qwen3_5/test_pipeline.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hyper_parallel.models.pipelining import (
    StageLayers,
    check_schedule_name,
    cut_stage,
    plan_stages,
    split_layers,
    stages_of_rank,
)
from hyper_parallel.models.qwen3_5.model import Qwen3_5ForCausalLM
from hyper_parallel.utils.errors import ConfigError

from .test_qwen3_5_model import tiny_config


def parallelism(**kw) -> SimpleNamespace:
    base = {
        "pipeline_parallel_degree": 2,
        "pipeline_parallel_schedule": "1F1B",
        "module_fqns_per_model_part": None,
        "pipeline_parallel_layer_split": None,
        "pipeline_parallel_layers_per_stage": None,
        "pipeline_parallel_stages_per_rank": None,
        "pipeline_parallel_first_stage_less_layers": 1,
        "pipeline_parallel_last_stage_less_layers": 1,
    }
    base.update(kw)
    return SimpleNamespace(**base)


UNITS = ["model.embed_tokens", *(f"model.layers.{i}" for i in range(4)), "model.norm", "lm_head"]


@given(layers=st.integers(1, 64), stages=st.integers(1, 16), first=st.integers(0, 2),
       last=st.integers(0, 2))
@settings(max_examples=200, deadline=None)
def test_split_layers_places_every_layer_once_and_balances_the_units(layers, stages, first, last):
    try:
        counts = split_layers(layers, stages, first_less=first, last_less=last)
    except ConfigError:
        return  # too many stages for the layers: refused, never a silent empty stage
    assert len(counts) == stages and sum(counts) == layers and min(counts) >= 0
    if stages > 1:
        # The embedding and the head weigh first / last layers: units differ by at most one.
        units = [counts[0] + first, *counts[1:-1], counts[-1] + last]
        assert max(units) - min(units) <= 1


def test_split_layers_is_torchtitans_balance():
    assert split_layers(8, 2) == [4, 4]
    assert split_layers(4, 4) == [1, 2, 1, 0]  # the last stage: the norm and the head
    assert split_layers(4, 4, first_less=0, last_less=0) == [1, 1, 1, 1]
    assert split_layers(5, 2, first_less=0, last_less=0) == [3, 2]  # the first take the rest


def test_stages_are_looped_over_the_ranks():
    assert [stages_of_rank(r, 2, 4) for r in range(2)] == [[0, 2], [1, 3]]


def test_plan_cuts_at_layer_boundaries_with_the_embedding_first_and_the_head_last():
    assert plan_stages(UNITS, 4, parallelism()) == [
        ["model.embed_tokens", "model.layers.0", "model.layers.1"],
        ["model.layers.2", "model.layers.3", "model.norm", "lm_head"],
    ]
    split = plan_stages(UNITS, 4, parallelism(pipeline_parallel_layer_split=[1, 3]))
    assert split[0] == ["model.embed_tokens", "model.layers.0"]
    interleaved = plan_stages(UNITS, 4, parallelism(pipeline_parallel_schedule="Interleaved1F1B"))
    assert len(interleaved) == 4


@pytest.mark.parametrize("settings, field, text", [
    ({"pipeline_parallel_layer_split": [1, 2]}, "pipeline_parallel_layer_split", "sums to 3"),
    ({"pipeline_parallel_layer_split": [4, 0]}, "pipeline_parallel_layer_split",
     "at least one decoder layer"),
    ({"pipeline_parallel_layer_split": [1, 1, 1, 1]}, "pipeline_parallel_layer_split",
     "runs one stage per rank"),
    ({"pipeline_parallel_schedule": "LoopedBFS", "pipeline_parallel_stages_per_rank": 1},
     "pipeline_parallel_stages_per_rank", "several stages per rank"),
    ({"pipeline_parallel_layers_per_stage": 2, "pipeline_parallel_schedule": "GPipe"},
     "pipeline_parallel_layers_per_stage", "3 stages, not a multiple"),
    ({"module_fqns_per_model_part": [UNITS[:2], UNITS[3:]]}, "module_fqns_per_model_part",
     "missing: ['model.layers.1']"),
    ({"module_fqns_per_model_part": [UNITS[:2], ["model.layer.1", *UNITS[2:]]]},
     "module_fqns_per_model_part", "did you mean 'model.layers.1'"),
    ({"pipeline_parallel_schedule": "ZBVZeroBubble"}, "pipeline_parallel_schedule",
     "input-gradient and a weight-gradient pass"),
    ({"pipeline_parallel_schedule": "1f1b_x"}, "pipeline_parallel_schedule", "did you mean"),
])
def test_a_plan_that_cannot_run_names_its_field(settings, field, text):
    with pytest.raises(ConfigError) as info:
        plan_stages(UNITS, 4, parallelism(**settings))
    assert info.value.path == f"parallelism.{field}" and text in str(info.value)


def test_schedule_names_ignore_case():
    assert check_schedule_name("interleaved1f1b") == "Interleaved1F1B"


def test_stages_keep_the_whole_models_names_and_compose_to_it():
    model = Qwen3_5ForCausalLM(tiny_config())
    torch.manual_seed(0)
    model.init_weights()
    plan = plan_stages(UNITS, 4, parallelism(pipeline_parallel_layer_split=[3, 1]))
    first, last = (cut_stage(model, units) for units in plan)
    assert isinstance(first.model.layers, StageLayers) and first.lm_head is None
    assert next(n for n, _ in last.named_parameters()).startswith("model.layers.3.")
    assert last.model.embed_tokens is None and len(last.model.layers) == 1
    whole = dict(model.named_parameters())
    for stage in (first, last):
        for name, param in stage.named_parameters():
            assert torch.equal(param, whole[name]), name
    ids = torch.randint(0, 97, (2, 16))
    with torch.no_grad():
        assert torch.equal(last(first(ids)), model(ids))
    with pytest.raises(TypeError, match="fixed"):
        first.model.layers.append(torch.nn.Identity())


@pytest.mark.parametrize("tied", [False, True])
def test_initial_weights_do_not_depend_on_the_cut(tied):
    """Stages cut from the whole model on meta and initialized through it get the weights the
    whole model gets from the same seed (a tied weight on both end stages gets one draw)."""
    config = tiny_config(tie_word_embeddings=tied)
    whole = Qwen3_5ForCausalLM(config)
    torch.manual_seed(3)
    whole.init_weights()
    with torch.device("meta"):
        reference = Qwen3_5ForCausalLM(config)
    plan = plan_stages(UNITS, 4, parallelism(pipeline_parallel_schedule="Interleaved1F1B"))
    parts = [cut_stage(reference, units) for units in plan]
    for part in parts:
        part.to_empty(device="cpu")
    torch.manual_seed(3)
    reference.init_weights_of_parts([parts[1], parts[3]], buffer_device="cpu")  # rank 1's
    torch.manual_seed(3)
    reference.init_weights_of_parts([parts[0], parts[2]], buffer_device="cpu")  # rank 0's
    expected = dict(whole.named_parameters(remove_duplicate=False))
    held = 0
    for part in parts:
        for name, param in part.named_parameters():
            assert torch.equal(param, expected[name]), name
            held += 1
    assert held == len(expected)  # every weight is on some stage (a tied one on two)
    for part in parts:  # every stage's rotary embedding is reset, not left from to_empty
        assert torch.equal(part.model.rotary_emb.inv_freq, whole.model.rotary_emb.inv_freq)
