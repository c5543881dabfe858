"""Helpers shared by tests in several folders (tests/ is on sys.path: pytest pythonpath)."""
