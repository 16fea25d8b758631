"""Expert-parallel token dispatch (:class:`AllToAllDispatcher`) on 2 gloo CPU ranks.

One job of ``workers/expert_parallel_worker.py`` (2 ranks, started as torchrun would, without its
launcher) runs every case: each rank's tokens go through sort-by-expert -> ``dispatch`` -> the
rank's half of the experts -> ``combine``, and are compared with a plain per-token reference
that holds all experts: the forward, the gradient of the input tokens, and the gradients of the
rank's expert weights and biases against the reference's summed over both ranks (all-reduced)
and sliced to the rank's experts. The tests assert on their case's part of the job's result.

Exactness: the ``int`` cases use small-integer values, so every sum is exact in float32 whatever
the summation order (the reference runs one expert per token, the experts a block of rows from
both ranks) and the comparison is bit for bit; the ``gauss`` cases differ only by the rounding of
that order, within :data:`GAUSS_RTOL` of the largest magnitude.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.torchrun import spawn_ranks

pytestmark = pytest.mark.slow

WORKER = Path(__file__).parent / "workers" / "expert_parallel_worker.py"
#: float32, 8-term dot products and 2-slot sums: measured ~1e-7 of the largest value (1 ulp).
GAUSS_RTOL = 1e-6
EXACT = ("exact", "mesh_top3", "rank0_to_rank1", "all_to_expert3", "rank1_no_tokens",
         "no_tokens", "rank1_tokens_frozen")


@pytest.fixture(scope="module")
def job(run_once) -> dict:
    """Every case, one 2-rank job (shared by this module's tests and the session's workers):
    ``{case: [rank 0's result, rank 1's]}``."""
    def make(folder: Path) -> dict:
        folder.mkdir(parents=True, exist_ok=True)
        spawn_ranks(WORKER, [str(folder / "result.json")], nproc=2, timeout=120)
        return json.loads((folder / "result.json").read_text())

    return run_once.get(("expert_parallel", 2), make)


def assert_dispatch_bookkeeping(ranks: list[dict]) -> None:
    """What every case shares: counts and splits consistent across the two ranks."""
    for rank, r in enumerate(ranks):
        assert r["local_experts"] == [2 * rank, 2 * rank + 1]
        assert r["local_counts"] == r["expected_local_counts"], r
        assert r["local_counts_dtype"] == "torch.int64"
        assert r["local_rows"] == sum(r["local_counts"]) == sum(r["output_splits"])
        assert r["input_splits"] == r["sent_per_rank"]
        assert r["combine_plain_tensor"]  # not an AsyncCollectiveTensor
        # what rank `rank` receives from each source is what that source sends it
        assert r["output_splits"] == [src["input_splits"][rank] for src in ranks]


@pytest.mark.parametrize("case", EXACT)
def test_bit_identical_to_the_all_local_reference(job, case):
    ranks = job[case]
    assert_dispatch_bookkeeping(ranks)
    for r in ranks:
        assert r["fwd"] == 0.0, r
        assert r["x_grad"] == 0.0 and r["w_grad"] == 0.0 and r["b_grad"] == 0.0, r


def test_gaussian_within_rounding_of_the_reference(job):
    ranks = job["gaussian"]
    assert_dispatch_bookkeeping(ranks)
    for r in ranks:
        assert r["fwd"] <= GAUSS_RTOL * r["ref_max"], r
        assert r["x_grad"] <= GAUSS_RTOL * r["x_grad_max"], r
        assert r["w_grad"] <= GAUSS_RTOL * r["w_grad_local_max"], r
        assert r["b_grad"] <= GAUSS_RTOL * r["w_grad_local_max"], r


def test_the_cases_exercise_what_they_name(job):
    """The uneven cases really are uneven (else the bit-identical test above proves less)."""
    for case in ("exact", "mesh_top3", "gaussian"):
        assert all(r["n"] > 0 for r in job[case])
        assert all(r["w_grad_local_max"] > 0 for r in job[case])  # gradients are not all zero
    r0, r1 = job["rank0_to_rank1"]  # rank 0 sends nothing to itself
    assert r0["input_splits"][0] == 0 and r0["input_splits"][1] > 0
    assert r0["output_splits"][0] == 0 and r1["output_splits"][0] > 0
    r0, r1 = job["all_to_expert3"]  # rank 0 receives nothing; experts 0, 1, 2 get no rows
    assert r0["output_splits"] == [0, 0] and r0["local_counts"] == [0, 0]
    assert r0["w_grad_local_max"] == 0.0 and r1["local_counts"][0] == 0 < r1["local_counts"][1]
    r0, r1 = job["rank1_no_tokens"]  # rank 1 sends nothing and still receives rows
    assert r1["n"] == 0 and r1["input_splits"] == [0, 0] and r1["local_rows"] > 0
    assert r1["w_grad_local_max"] > 0
    assert all(r["n"] == 0 and r["local_rows"] == 0 for r in job["no_tokens"])


def test_a_rank_whose_tokens_need_no_grad_still_joins_backward(job):
    """Rank 1's tokens do not require grad: without the dispatcher making them, its autograd
    would skip the backward all-to-all rank 0 waits in (a gloo timeout). The job got through,
    and rank 0's token gradients and both ranks' expert gradients are exact."""
    r0, r1 = job["rank1_tokens_frozen"]
    assert r1["x_grad_is_none"] and not r0["x_grad_is_none"]
    assert r0["x_grad"] == 0.0 and r0["w_grad"] == 0.0 and r1["w_grad"] == 0.0


def test_forward_under_no_grad(job):
    ranks = job["inference"]
    assert_dispatch_bookkeeping(ranks)
    assert all(r["fwd"] <= GAUSS_RTOL * r["ref_max"] for r in ranks), ranks


def test_argument_checks(job):
    for r in job["refusals"]:
        assert "multiple of the expert-parallel degree 2" in r["odd_experts"]
        assert r["bad_counts_shape"] == "counts must have shape [4], got (5,)"
        assert r["rows_mismatch"] == "counts sum to 4 rows, tokens has 2"
