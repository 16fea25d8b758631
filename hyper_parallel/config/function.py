"""``Function``: a callable as a Configurable (``Function.Config(fn=f).build()`` calls ``f``).

Defined in :mod:`hyper_parallel.protocols.function`; re-exported here so that a
recipe finds it next to the other configuration names, as in torchtitan's ``config`` package.
"""

from hyper_parallel.protocols.function import Function

__all__ = ["Function"]
