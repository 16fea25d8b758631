"""Gradient accumulation under FSDP: a reduce-scatter every micro-batch by default, one a step
with ``parallelism.fsdp_defer_gradient_sync`` -- counted on a real 2-rank run (gloo), not read
from the setting (``workers/grad_sync_worker.py``). The two sum the same gradients in another
order: their losses agree within the layouts' bound."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.torchrun import spawn_ranks

WORKER = Path(__file__).parent / "workers" / "grad_sync_worker.py"
#: The layout tests' bounds (tests/torch/st/qwen3_5/test_legacy_training.py): data-parallel
#: reductions that sum in another order.
LOSS_RTOL = 1e-6
GRAD_NORM_RTOL = 1e-5


#: Two-rank jobs.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("grad_sync") / "runs.json"
    spawn_ranks(WORKER, [str(out)], nproc=2, timeout=600)
    return json.loads(out.read_text())


def test_every_micro_batch_reduce_scatters_by_default(runs):
    run = runs["default"]
    assert run["micro_batches"] == 2 and run["units"] >= 2, run
    assert run["reduce_scatters"] == [run["units"] * run["micro_batches"]] * 3, run


def test_deferred_sync_reduce_scatters_once_a_step(runs):
    run = runs["deferred"]
    assert run["micro_batches"] == 2 and run["units"] == runs["default"]["units"], run
    assert run["reduce_scatters"] == [run["units"]] * 3, run


def test_both_train_the_same_model(runs):
    default, deferred = runs["default"], runs["deferred"]
    assert len(default["losses"]) == len(deferred["losses"]) == 3
    assert default["losses"] == pytest.approx(deferred["losses"], rel=LOSS_RTOL, abs=0)
    assert default["grad_norms"] == pytest.approx(deferred["grad_norms"], rel=GRAD_NORM_RTOL,
                                                   abs=0)
