"""A recipe module importing a helper module whose import fails."""

from tests.torch.ut.config._broken_recipes import raises_on_import  # noqa: F401


def recipe():
    return None
