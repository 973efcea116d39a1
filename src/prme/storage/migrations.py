"""The PostgreSQL backend's migrations under their earlier import path (``prme db upgrade``
imports :func:`upgrade` from here); they live in :mod:`prme.storage.postgres.migrations`."""

from __future__ import annotations

from prme.storage.postgres.migrations import pending, upgrade

__all__ = ["pending", "upgrade"]
