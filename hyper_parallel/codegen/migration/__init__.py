"""Legacy YAMLs to recipe modules and back: ``--from-yaml`` and ``--to-yaml``.

One YAML (:mod:`.from_yaml`): :mod:`.yaml_source` reads it with the line and comments of every
key (:mod:`.yaml_comments`; the overrides of a pasted launch command, :mod:`.launch`), and
:mod:`.recipe` writes its recipe module and proves it before anything is written. Several YAMLs
(:mod:`.fleet`) become one registry module whose shared functions hold what they have in
common. A resolved configuration becomes the ``config.py`` of a run record
(:mod:`.config_recipe`), and a recipe becomes a legacy YAML again (:mod:`.to_yaml`). Values are
written as literals that read back exactly (:mod:`.pyliteral`); the module text is laid out by
the templates and black of :mod:`hyper_parallel.codegen.rendering`.
"""
