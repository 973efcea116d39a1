"""Shared fixtures: a real pack on disk, the hashing embedder, and a controllable clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from prme import MemoryClient, PRMEConfig, ScoringWeights
from prme.config import EmbeddingConfig
from prme.models.scoring import product_default_scoring


class FakeClock:
    """Advances one millisecond per call so every timestamp is distinct and reproducible."""

    def __init__(self, start: datetime = datetime(2026, 9, 1, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def make_config(fusion: str = "weighted", **overrides: Any) -> PRMEConfig:
    scoring = ScoringWeights() if fusion == "weighted" else product_default_scoring()
    return PRMEConfig(scoring=scoring, embedding=EmbeddingConfig(provider="hash"), **overrides)


@pytest.fixture
def pack_path(tmp_path: Path) -> Path:
    return tmp_path / "pack"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_client(pack_path: Path, clock: FakeClock) -> Iterator[Callable[..., MemoryClient]]:
    """Open clients on the test pack (weighted fusion, hashing embedder unless overridden)."""
    opened: list[MemoryClient] = []

    def factory(
        path: Path | None = None, *, fusion: str = "weighted", **kwargs: Any
    ) -> MemoryClient:
        kwargs.setdefault("config", make_config(fusion))
        kwargs.setdefault("clock", clock)
        client = MemoryClient(path or pack_path, **kwargs)
        opened.append(client)
        return client

    yield factory
    for client in opened:
        client.close()


@pytest.fixture
def client(make_client: Callable[..., MemoryClient]) -> MemoryClient:
    return make_client()
