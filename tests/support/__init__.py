"""Helpers shared by test modules (plain functions, no fixtures)."""
