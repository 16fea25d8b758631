"""``Function``: a callable as a Configurable."""

import functools

import pytest

from hyper_parallel.config import Function


def test_build_calls_the_function():
    assert Function.Config(fn=lambda x: x + 1).build()(3) == 4


def test_partial_and_kwargs():
    fn = Function.Config(fn=functools.partial(pow, 2)).build()
    assert fn(10) == 1024


def test_not_callable_is_rejected():
    with pytest.raises(TypeError, match="must be callable"):
        Function.Config(fn=3)


def test_to_dict_is_a_repr():
    def double(x):
        return 2 * x

    assert "double" in Function.Config(fn=double).to_dict()["fn"]
