"""Test fixtures: recipe modules that fail in different ways."""
