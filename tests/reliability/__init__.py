"""The reliability suite (a package, so its conftest does not replace ``tests/conftest.py``)."""
