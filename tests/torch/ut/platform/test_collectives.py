"""``platform/collectives.py``'s reductions name their ranks: a process group, or ``ALONE``.

``None`` once meant "no group: reduce nothing" to them while it means "the default group" to
torch and to ``comm_tensor``; the stop signal's all-reduce over ``None`` reduced nothing, and
the ranks stopped on their own signals (issue 44). It is refused on one process too, so a test
on this machine catches the call that a multi-rank job would have got wrong.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from hyper_parallel.platform import collectives as coll


@pytest.mark.parametrize("reduce", [
    lambda group: coll.all_reduce(torch.ones(2), group, dist.ReduceOp.MAX),
    lambda group: coll.all_reduce_sum(torch.ones(2), group),
    lambda group: coll.sum_counts([1, 2], group),
    lambda group: coll.gather_ints([1, 2], group),
], ids=["all_reduce", "all_reduce_sum", "sum_counts", "gather_ints"])
def test_a_reduction_over_none_is_refused(reduce):
    with pytest.raises(TypeError, match=r"dist\.group\.WORLD.*ALONE"):
        reduce(None)


def test_alone_is_this_ranks_own_value():
    tensor = torch.tensor([3.0, 4.0])
    assert coll.all_reduce(tensor, coll.ALONE) is tensor
    assert coll.all_reduce_sum(tensor, coll.ALONE) is tensor
    assert coll.sum_counts([1, 2], coll.ALONE) == [1, 2]
    assert coll.gather_ints([5, -1], coll.ALONE) == [[5, -1]]
    assert coll.comm_device(coll.ALONE) == torch.device("cpu")
    assert coll.comm_tensor([1], dtype=torch.int64, group=coll.ALONE).device.type == "cpu"
    coll.barrier(coll.ALONE)  # nothing to wait for


def test_or_alone_spells_out_a_layouts_missing_axis():
    """``dp_group`` is None in a job without data parallelism: every rank holds the whole value."""
    assert coll.or_alone(None) is coll.ALONE
    sentinel = object()
    assert coll.or_alone(sentinel) is sentinel
