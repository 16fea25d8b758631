"""A recipe module whose import fails with a NameError (a typo at module level)."""

DEFAULT = HyperTrainr.Config  # noqa: F821 -- the typo under test
