"""A recipe package for the ConfigManager tests (``--module _test_dummy``)."""
