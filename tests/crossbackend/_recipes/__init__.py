"""Recipes whose configs need no deep-learning framework (for the cross-backend tests)."""
