"""Immutable data models shared by the engine, the gates and every surface."""
