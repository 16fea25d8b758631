"""``Function``: a callable as a Configurable (``Function.Config(fn=f).build()`` calls ``f``).

Defined in :mod:`hyper_parallel.protocols.function`; re-exported here because the RFC places it
in the config package.
"""

from hyper_parallel.protocols.function import Function

__all__ = ["Function"]
