"""The recipe module of a converted configuration, one step per module.

:mod:`.baseline` picks its first line (``flavor_baseline`` or a registry recipe, whichever
leaves the fewest lines), :mod:`.changes` the assignments where the target differs,
:mod:`.comments` the one comment of each (the legacy key and line, the YAML's own words),
:mod:`.render` lays the module text out, and :mod:`.proof` executes it and requires that it
builds the target exactly. Shared by a single YAML, a fleet and a run record's ``config.py``.
"""
