"""The suite's cost report charges a test what the processes a worker keeps across tests spent
for it (:mod:`tests.helpers.suite_cost`): the preflight pool's work is seen in the test that
asked for it, not at the session's end or in whichever test ends the pool."""

from __future__ import annotations

import time

from tests.helpers.suite_cost import process_tree_seconds


def _burn(seconds: float) -> float:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return time.process_time()


def test_the_kept_preflight_pool_is_charged_to_the_test_that_used_it():
    from hyper_parallel.preflight import many

    pool = many._pool(1)  # the worker's kept pool (started here if it was not)
    pool.submit(_burn, 0.0).result()
    before = process_tree_seconds()
    pool.submit(_burn, 1.0).result()  # a second of CPU in the pool, none here
    charged = process_tree_seconds() - before
    assert 0.9 <= charged <= 1.5, charged
