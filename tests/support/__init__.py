"""Helpers and builders shared by several test modules (test modules never import each other).

``tests/`` is on ``sys.path`` (pytest's rootdir conftest), so tests import ``support.<module>``.
"""
