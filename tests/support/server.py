"""A real ``python -m prme.http.server`` process on a free loopback port, with its own keys."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ALICE_KEY = "alice-server-key-0123456789"
BOB_KEY = "bob-server-key-9876543210"
ALICE = {"Authorization": f"Bearer {ALICE_KEY}"}
BOB = {"Authorization": f"Bearer {BOB_KEY}"}
STARTUP_SECONDS = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRME_")}
    env.update(PRME_EMBEDDING__PROVIDER="hash", PRME_SCORING__FUSION="weighted", **extra)
    return env


def server_command(path: Path, host: str, port: int) -> list[str]:
    """Serve ``path``, creating it when missing (the tests serve new packs; ``--create``)."""
    module = [sys.executable, "-m", "prme.http.server", "--create"]
    return [*module, "--path", str(path), "--host", host, "--port", str(port)]


@dataclass
class Server:
    url: str
    path: Path
    log: Path
    process: subprocess.Popen[bytes]


@contextmanager
def running_server(root: Path, **env: str) -> Iterator[Server]:
    """``python -m prme.http.server`` on a free loopback port with ``env``, until the block ends."""
    path, log = root / "pack", root / "server.log"
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            server_command(path, "127.0.0.1", port),
            env=server_env(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/v1/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not start: " + log.read_text()
            time.sleep(0.1)
        yield Server(url, path, log, process)
    finally:
        process.terminate()
        process.wait(timeout=15)
