"""Preflight steps the gradient accumulation the run steps.

The debug recipe on the tiny flavor (every layer kind: three Gated DeltaNet layers and an
attention layer) under FSDP 2 with bf16 compute (fp32 gradient reduction, as the GPU recipes),
4 micro-batches a step, preflighted at its world in this process:

* with ``parallelism.fsdp_defer_gradient_sync`` every FSDP unit's unsharded fp32 gradients
  are held across the micro-batches: the role's peak is higher by them (4 bytes per parameter
  of the model, within :data:`HELD_RTOL`), they are counted as buffers, and the report says
  what they cost;
* a step of one micro-batch more than preflight steps (:func:`micro_batches_to_step`: 2 by
  default, 3 holding the gradients) peaks at the same bytes: what preflight steps is the
  steady state;
* suggestions turn the opt-in off first, and a suggestion that fits with it on says what it
  holds;
* the real step of both (``bench/_preflight_truth.py`` on 2 gloo ranks, all 4 micro-batches)
  peaks where preflight says: the truth counts the step's own tensors, not gloo's copies of
  each reduce-scatter's input, whose frees the profiler misses when gloo's worker thread
  releases them (its running total grew ~18 MB a micro-batch: preflight / it was 0.82).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from hyper_parallel.preflight import simulate
from hyper_parallel.preflight.gpus import GPUS

DEBUG_FSDP = ("--module", "qwen3_5_v2", "--config", "qwen3_5_v2_debugmodel_fsdp2",
              "--model.config_overrides={flavor: tiny}",
              "--training.mixed_precision_param=bfloat16",
              # 2 ranks x 2 rows: 4 micro-batches a step.
              "--training.global_batch_size=16")
DEFER = "--parallelism.fsdp_defer_gradient_sync=true"
#: How far the peak's growth may be from the held gradients' bytes: the peak instant may move
#: (measured: exactly them here, and on the debug model's 8 layers; 0.95 of them on the debug
#: model in fp32).
HELD_RTOL = 0.05
TRUTH = Path(__file__).resolve().parents[4] / "bench" / "_preflight_truth.py"
#: Preflight's step peak over the real step's: the issue's bar (measured here 0.997 and 1.000,
#: 0.974-1.000 on the debug model's 8 layers, at twice this module's CPU; the profiler's
#: running total made it 0.71-0.82 reduce-scattering every micro-batch).
PEAK_RTOL = 0.10


def _config(*extra: str):
    from hyper_parallel.config.manager import ConfigManager
    from hyper_parallel.trainer.hyper_trainer import HyperTrainer

    return ConfigManager(root_type=HyperTrainer.Config).parse_args([*DEBUG_FSDP, *extra])


def _debug_model_parameters() -> int:
    from hyper_parallel.models.qwen3_5 import FLAVORS, Qwen3_5ForCausalLM

    with torch.device("meta"):
        model = Qwen3_5ForCausalLM(FLAVORS["tiny"])
    return sum(p.numel() for p in model.parameters())


def _reports() -> list:
    """``[the preflight (as ``dataclasses.asdict``), its rank 0 stepped with one micro-batch
    more (likewise)]`` without and with :data:`DEFER`."""
    import dataclasses

    from hyper_parallel.preflight import run
    from hyper_parallel.preflight.check import preflight_config

    out = []
    stepped = simulate.micro_batches_to_step
    for deferred in (False, True):
        config = _config(*([DEFER] if deferred else []))
        report = preflight_config(config, GPUS["h100-80gb"], world=2, suggest=False)
        with pytest.MonkeyPatch.context() as patch:
            for module in (simulate, run):  # the step, and the figure it reports
                patch.setattr(module, "micro_batches_to_step",
                              lambda build: stepped(build) + 1)
            more, _ = run.measure_role(
                simulate.simulation_config(config), 0, 2, 1.0, extrapolate_depth=False)
        out.append([dataclasses.asdict(report), dataclasses.asdict(more)])
    return out


def _preflight_of(fields: dict):
    """A :class:`~hyper_parallel.preflight.run.Preflight` from its ``dataclasses.asdict``."""
    from hyper_parallel.preflight.gpus import Gpu
    from hyper_parallel.preflight.run import Preflight, Role

    roles = [Role(**{**role, "memory": simulate.RoleMemory(**role["memory"])})
             for role in fields["roles"]]
    return Preflight(**{**fields, "gpu": Gpu(**fields["gpu"]), "roles": roles})


@pytest.fixture(scope="module")
def reports(request, tmp_path_factory) -> dict:
    """``{(deferred, "run" | "one more"): ...}``: the preflight of each (a ``Preflight``), and
    its rank 0 stepped with one micro-batch more (a ``RoleMemory``). Made once per session
    (:mod:`tests.helpers.session_cache`): the tests of this module land on both xdist workers,
    and a worker that runs another module's test between two of them makes its module
    fixtures again."""
    from tests.helpers.session_cache import session_cache

    cache = session_cache(request.config, tmp_path_factory, "preflight_accumulation")
    made = cache.get(("accumulation", DEBUG_FSDP, DEFER), lambda _: _reports())
    out = {}
    for deferred, (report, more) in zip((False, True), made):
        out[deferred, "run"] = _preflight_of(report)
        out[deferred, "one more"] = simulate.RoleMemory(**more)
    return out


@pytest.mark.slow
def test_holding_the_unsharded_gradients_costs_them(reports):
    off = reports[False, "run"].roles[0].memory
    on = reports[True, "run"].roles[0].memory
    held = 4 * _debug_model_parameters()  # fp32, the model before FSDP splits it
    assert off.deferred_grads_bytes == 0
    assert on.deferred_grads_bytes == held
    grown = on.allocated_bytes - off.allocated_bytes
    assert abs(grown / held - 1) <= HELD_RTOL, (grown, held)
    # As FSDP's unsharded gradients, in the buffers -- not as activations.
    assert on.detail.get("UNSHARDED_GRAD", 0) >= held
    assert abs(on.buffers_bytes - off.buffers_bytes - held) <= HELD_RTOL * held
    assert on.activations_bytes == pytest.approx(off.activations_bytes, rel=HELD_RTOL)
    assert (on.params_bytes, on.grads_bytes, on.optimizer_bytes) == (
        off.params_bytes, off.grads_bytes, off.optimizer_bytes)


@pytest.mark.slow
def test_preflight_steps_the_steady_state(reports):
    for deferred, stepped in ((False, 2), (True, 3)):
        run = reports[deferred, "run"].roles[0].memory
        assert (run.micro_batches, run.micro_batches_stepped) == (4, stepped), deferred
        more = reports[deferred, "one more"]
        assert more.micro_batches_stepped == stepped + 1
        assert more.allocated_bytes == run.allocated_bytes, deferred
        assert more.detail == run.detail, deferred


@pytest.mark.slow
def test_the_report_names_what_accumulation_holds(reports):
    from hyper_parallel.preflight.report import to_json, to_text

    off, on = reports[False, "run"], reports[True, "run"]
    held = on.roles[0].memory.deferred_grads_bytes
    assert "gradient accumulation: 4 micro-batches a step (2 stepped" in to_text(off)
    assert "fsdp_defer_gradient_sync" not in to_text(off)
    text = to_text(on)
    assert "gradient accumulation: 4 micro-batches a step (3 stepped" in text
    assert (f"parallelism.fsdp_defer_gradient_sync holds every FSDP unit's unsharded "
            f"gradients across them: {held / 2**30:.2f} GiB") in text
    role = to_json(on)["roles"][0]
    assert (role["accumulation_microbatches"], role["stepped_microbatches"],
            role["deferred_grads_bytes"]) == (4, 3, held)


@pytest.mark.slow
def test_suggestions_turn_the_held_gradients_off_first_and_say_what_they_cost(reports):
    from hyper_parallel.preflight.suggest import candidates, suggest

    on = _config(DEFER)
    flags = [f for f, _ in candidates(on)]
    assert flags[0] == "--parallelism.fsdp_defer_gradient_sync=false"
    assert not any("fsdp_defer_gradient_sync" in f for f, _ in candidates(_config()))
    held_report = reports[True, "run"]
    tried = []

    def check(changed):
        tried.append(changed.parallelism.fsdp_defer_gradient_sync)
        return held_report if changed.parallelism.fsdp_defer_gradient_sync else \
            reports[False, "run"]

    found = suggest(on, check, limit=len(flags))
    assert found[0].startswith("--parallelism.fsdp_defer_gradient_sync=false: ")
    assert "unsharded gradients" not in found[0]
    held = held_report.roles[0].memory.deferred_grads_bytes
    # Every other change keeps the gradients held: it fits only with them counted, and says so.
    assert found[1:] and all(
        f"4 micro-batches holding {held / 2**30:.1f} GiB of unsharded gradients "
        "(parallelism.fsdp_defer_gradient_sync)" in s for s in found[1:]), found


def _truth_module():
    spec = importlib.util.spec_from_file_location("_preflight_truth", TRUTH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _memory(tid: int, ts: float, nbytes: int, address: int) -> dict:
    return {"name": "[memory]", "ph": "i", "tid": tid, "ts": ts,
            "args": {"Bytes": nbytes, "Addr": address, "Total Allocated": 0}}


def _op(tid: int, name: str, ts: float, dur: float) -> dict:
    return {"name": name, "ph": "X", "cat": "cpu_op", "tid": tid, "ts": ts, "dur": dur}


def test_the_truth_counts_the_steps_tensors_not_gloos():
    """The trace of a reduce-scatter as gloo runs it: on the step's thread (1) its operator
    copies the input (address 0xA) and gloo's worker (thread 2) frees the copy unseen, then
    stages a buffer of its own; the address is reused by the step's next tensor. Only the
    step's own tensors count, and a block whose free went unrecorded is gone once its address
    is allocated again."""
    step, worker = 1, 2
    events = [
        _memory(step, 0, 200, 0xC),                            # the step's, to the end
        _op(step, "c10d::_reduce_scatter_base_", 10, 10),
        _memory(step, 11, 1000, 0xA),                          # gloo's copy, never freed
        _memory(worker, 30, 500, 0xB), _memory(worker, 35, -500, 0xB),  # gloo's own
        _memory(step, 40, 300, 0xD),                           # the step's, free unseen
        _memory(step, 50, 1000, 0xA), _memory(step, 60, -1000, 0xA),   # reused, the step's
        _memory(step, 65, 300, 0xD), _memory(step, 66, -300, 0xD),    # 0xD reused
        _memory(step, 70, -200, 0xC),
        _memory(step, 71, -64, 0xE),                           # held before the step
    ]
    # At 50: 0xC, 0xD and the second 0xA; gloo's copy and buffer do not count.
    assert _truth_module().step_peak_of_trace(events, step) == 200 + 300 + 1000
    with pytest.raises(RuntimeError, match="no memory event of the step's thread 3"):
        _truth_module().step_peak_of_trace(events, 3)


@pytest.mark.slow
def test_preflight_peaks_where_the_real_accumulated_step_does(reports, tmp_path):
    """Both modes against the real step on 2 gloo ranks (one launch, ``--next``): rank 0's
    parameter, gradient and optimizer bytes equal, the step's peak within :data:`PEAK_RTOL`."""
    from hyper_parallel.preflight.simulate import step_added_bytes
    from tests.helpers.torchrun import spawn_ranks

    out = tmp_path / "truth.json"
    spawn_ranks(TRUTH, [str(out), *DEBUG_FSDP, "--next", *DEBUG_FSDP, DEFER], nproc=2,
                timeout=600)
    for deferred, ranks in zip((False, True), json.loads(out.read_text())):
        real, memory = ranks[0], reports[deferred, "run"].roles[0].memory
        assert real["micro_batches"] == memory.micro_batches == 4
        assert (memory.params_bytes, memory.grads_bytes, memory.optimizer_bytes) == (
            real["params_bytes"], real["grads_bytes"], real["optimizer_bytes"]), deferred
        ratio = step_added_bytes(memory) / real["step_peak_bytes"]
        assert abs(ratio - 1) <= PEAK_RTOL, (deferred, ratio, real)
