"""Small framework-free utilities."""
