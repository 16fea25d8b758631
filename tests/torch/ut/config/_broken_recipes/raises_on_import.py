"""A recipe module whose import fails inside (not a missing module)."""

raise RuntimeError("boom while importing the recipe module")
