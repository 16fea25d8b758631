"""The training algorithms the components and the trainers share.

Optimizer and schedule builders (``optim``), the token loss (``loss``), one training step
(``step``), checkpoint I/O (``checkpoint``), the callbacks, distributed set-up
(``distributed``, ``parallel_dims``), model set-up (``model_setup``), fault handling
(``faults``) and the fault-injection test hook (``fault_injection``). This layer sits below
both ``hyper_parallel.components`` (the ``Configurable`` wrappers) and ``hyper_parallel.trainer``
(the engine and its entries), and imports neither.

This package's ``__init__`` imports nothing heavy.
"""
