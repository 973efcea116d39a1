"""A server stopped with SIGTERM (systemd, ``docker stop``) closes its pack and exits 0.

uvicorn raises SIGTERM again after its graceful shutdown; with the default handler the process
died there, before the pack was closed. SQLite removes the write-ahead log when the last
connection closes, so a ``pack.sqlite3-wal`` left behind shows a pack that was never closed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from support.server import free_port, running_server, server_env

from prme.storage.sqlite import DB_FILE


def _wal(pack: Path) -> Path:
    return pack / f"{DB_FILE}-wal"


def _stopped(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=30)


def test_the_http_server_closes_its_pack_on_sigterm(tmp_path: Path) -> None:
    with running_server(tmp_path) as server:
        stored = httpx.post(
            f"{server.url}/v1/store", json={"content": "Aster ships on Fridays", "user_id": "a"}
        )
        assert stored.status_code == 200, stored.text
        assert _wal(server.path).exists()  # the pack is open
        assert _stopped(server.process) == 0, server.log.read_text()
    assert not _wal(server.path).exists()


def _mcp(pack: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "prme.mcp", "--path", str(pack), "--create"]
    with log.open("wb") as out:
        return subprocess.Popen(
            [*command, "--user-id", "alice", *args],
            env=server_env(),
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=out,
        )


def _serving(process: subprocess.Popen[bytes], pack: Path, log: Path, banner: bytes) -> None:
    deadline = time.monotonic() + 30
    while not (_wal(pack).exists() and banner in log.read_bytes()):
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


def test_the_mcp_http_server_closes_its_pack_on_sigterm(tmp_path: Path) -> None:
    pack, log = tmp_path / "pack", tmp_path / "server.log"
    process = _mcp(pack, log, "--transport", "http", "--port", str(free_port()))
    try:
        _serving(process, pack, log, b"listening")
        assert _stopped(process) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        assert process.stdin is not None
        process.stdin.close()
    assert not _wal(pack).exists()


def test_the_mcp_stdio_server_closes_its_pack_at_the_end_of_its_input(tmp_path: Path) -> None:
    pack, log = tmp_path / "pack", tmp_path / "server.log"
    process = _mcp(pack, log)
    try:
        _serving(process, pack, log, b"")
        assert process.stdin is not None
        process.stdin.close()
        assert process.wait(timeout=30) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    assert not _wal(pack).exists()
