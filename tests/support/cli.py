"""The ``prme`` command line as a real ``python -m prme`` process, and its success and error
shapes: exit status 0; exit status 1 with exactly one line ``error: ...``; click's usage error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("PRME_")},
    "PRME_EMBEDDING__PROVIDER": "hash",
    "PRME_SCORING__FUSION": "weighted",
}


def prme(*args: object, input: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "prme", *(str(a) for a in args)]
    return subprocess.run(command, env=ENV, input=input, capture_output=True, text=True, timeout=60)


def ok(*args: object, input: str | None = None) -> str:
    done = prme(*args, input=input)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def ok_json(*args: object, input: str | None = None) -> Any:
    return json.loads(ok(*args, "--json", input=input))


def fails(*args: object, input: str | None = None) -> str:
    """Exit status 1, nothing on stdout, exactly one line ``error: ...`` on stderr."""
    done = prme(*args, input=input)
    assert done.returncode == 1, (args, done.stdout, done.stderr)
    assert done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr.strip()


def usage_error(*args: object) -> str:
    """click's usage error: exit status 2 and a usage message on stderr."""
    done = prme(*args)
    assert done.returncode == 2, (args, done.stdout, done.stderr)
    assert done.stdout == "" and "Usage: prme" in done.stderr
    return done.stderr


# Without any PRME_* variable: each call passes the settings it means.
CLEAN = {k: v for k, v in os.environ.items() if not k.startswith("PRME_")}


def run(*args: object, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m prme`` with no PRME_* variable but ``env``."""
    command = [sys.executable, "-m", "prme", *(str(a) for a in args)]
    return subprocess.run(
        command, env={**CLEAN, **env}, capture_output=True, text=True, timeout=60, check=False
    )


def run_json(*args: object, **env: str) -> Any:
    done = run(*args, "--json", **env)
    assert done.returncode == 0, (args, done.stderr)
    return json.loads(done.stdout)


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr.strip()
