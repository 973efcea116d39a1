"""The reliability suite's option and shared fixtures.

``pytest tests/reliability --long`` raises every iteration count (kills per operation, load
duration, hypothesis examples). The option is defined here, so it is recognized when this folder
is on the command line; ``pytest -m reliability`` runs the suite with its CI defaults.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import make_config
from support.golden import OWNER, Golden, fresh_pack, golden

from prme import MemoryClient

from .harness import FIGURES, Child


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--long",
        action="store_true",
        default=False,
        help="reliability suite: more kills, a 60 s load run and more hypothesis examples",
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("reliability figures")
        for name, value in FIGURES.items():
            terminalreporter.write_line(f"{name}: {value}")


@dataclass(frozen=True)
class Scale:
    """How much work each reliability test does (CI default, or ``--long``)."""

    long: bool

    def pick(self, default: int, long: int) -> int:
        return long if self.long else default


@pytest.fixture(scope="session")
def scale(request: pytest.FixtureRequest) -> Scale:
    return Scale(bool(request.config.getoption("--long", default=False)))


@dataclass(frozen=True)
class ProfilePack:
    """A judged golden pack holding ``profiles``: distinct profiles that each activate from base
    scoring (created once per session from the golden workflow's passing reports)."""

    path: Path
    gold: Golden
    profiles: tuple[str, ...]


@pytest.fixture(scope="session")
def profile_pack(tmp_path_factory: pytest.TempPathFactory) -> ProfilePack:
    gold = golden(tmp_path_factory)
    path = fresh_pack(gold.memories, tmp_path_factory.mktemp("profiles") / "pack")
    with MemoryClient(path, config=make_config()) as memory:
        created = [
            memory.create_ranking_profile(gold.proposal, gold.holdout, user_id=OWNER)
            for _ in range(4)
        ]
    return ProfilePack(path, gold, tuple(str(p.profile_id) for p in created))


@pytest.fixture(autouse=True)
def reap_children() -> Iterator[None]:
    """No driver process or pipe outlives its test."""
    yield
    Child.reap_all()
