"""The legacy YAML parser's parts, below the schema (``hyper_parallel.trainer.config``).

None of these modules imports the schema: the root class is always passed in, so the schema's
own ``parse_args`` can call :func:`.load.parse_args` without an import cycle. The public entry
is :mod:`hyper_parallel.trainer.config_parser`, which binds the legacy root class
``HyperTrainerConfig``; its docstring lists the rules.

* :mod:`.problems`        where values came from, and every problem found (error collection)
* :mod:`.coerce`          a value as its declared type
* :mod:`.model_overrides` ``model.config_overrides`` against the model config's source
* :mod:`.model_name`      ``model.name`` against the known models, then its overrides
* :mod:`.unsupported`     the keys the new configuration cannot express, off their defaults
  (their rows: :mod:`.unsupported_keys`, generated from the field table)
* :mod:`.build`           the dataclass tree from the raw mapping, strictly
* :mod:`.overrides`       ``--a.b.c=value`` over the raw tree
* :mod:`.load`            a YAML file (+ overrides) into the root class
* :mod:`.show`            a config as a dict, as YAML, and the ``--help`` field list
"""
