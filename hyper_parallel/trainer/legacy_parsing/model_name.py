"""The ``model`` section against the models: ``model.name`` must name one, and the keys of
``model.config_overrides`` must be fields of its config.

Both are checked while the file is parsed, with every other problem of the file: an unknown
model and a misspelt override are reported at their lines in the same pass as a typo'd key or a
bad value, rather than by the run once those are fixed. The name is checked as
:func:`~hyper_parallel.models.spec.discover_model_spec` would refuse it, without importing the
model (:func:`~hyper_parallel.models.spec.model_name_problem`).
"""

from __future__ import annotations

from hyper_parallel.models.spec import known_model_names, model_name_problem
from hyper_parallel.utils.suggest import closest

from .model_overrides import check_config_overrides
from .problems import _Context


def check_model(cls: type, kwargs: dict, bad: set, path: tuple, ctx: _Context) -> None:
    """``model.name``, then ``model.config_overrides`` against that model's config (``cls`` is
    the ``model`` section's class: its ``name`` default names the model when the YAML does
    not). Under an unknown name the overrides are checked against the known model the
    did-you-mean offers, so that fixing the name reveals no new problem."""
    if "name" in bad:
        return  # its own problem is reported, and no model can be read from it
    name = kwargs.get("name", cls.name)
    problem = model_name_problem(name)
    if problem is None:
        check_config_overrides(name, kwargs, bad, path, ctx)
        return
    ctx.add(problem, path + ("name",))
    bad.add("name")
    stand_in = closest(name, known_model_names())
    if stand_in is not None:
        check_config_overrides(stand_in, kwargs, bad, path, ctx, instead_of=name)
