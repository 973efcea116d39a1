"""The test harness itself: a PostgreSQL pass must never go green without a server, and the
second pass selects every backend-reaching test by its derived marker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parent
TARGET = "tests/storage/test_postgres.py::test_migrations_are_versioned_and_idempotent"


def _caller_path() -> list[str]:
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def run_pytest(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # A pgserver whose server cannot start, first on the path.
    fake = tmp_path / "fake" / "pgserver"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "postgres_server.py").write_text(
        "def get_server(*args, **kwargs):\n    raise RuntimeError('initdb: cannot start')\n"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("PRME_TEST_POSTGRES")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=TESTS.parent,
        # The fake first, then the caller's path: the child runs the same prme as this run.
        env={**base, "PYTHONPATH": os.pathsep.join([str(fake.parent), *_caller_path()]), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_postgres_server_that_cannot_start_fails_the_run(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, TARGET)
    assert done.returncode == 1, done.stdout
    assert "no PostgreSQL server for tests (RuntimeError: initdb: cannot start)" in done.stdout
    assert "1 failed" in done.stdout or "1 error" in done.stdout


def test_postgres_tests_skip_only_when_asked(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, TARGET, PRME_TEST_POSTGRES="off")
    assert done.returncode == 0, done.stdout
    assert "1 skipped" in done.stdout


def test_the_postgres_pass_selects_every_test_that_reaches_the_backend(tmp_path: Path) -> None:
    done = run_pytest(tmp_path, "--collect-only", "-m", "backends", "--backend", "postgres")
    assert done.returncode == 0, done.stdout
    selected = {line.split("::", 1)[0] for line in done.stdout.splitlines() if "::" in line}
    # Modules whose tests open packs through make_client / client / open_pack / copy_pack.
    for module in (
        "tests/test_store.py",
        "tests/test_retrieve.py",
        "tests/test_profiles.py",
        "tests/test_pointer.py",
        "tests/learning/test_holdout_e2e.py",
        "tests/e2e/test_http.py",
        "tests/storage/test_transfer.py",
    ):
        assert module in selected
    # Pure unit tests never touch a backend.
    assert "tests/learning/test_stats.py" not in selected
    assert "tests/test_canonical.py" not in selected
