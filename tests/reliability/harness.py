"""Run the driver child (``driver.py``) and read what it acknowledged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, ClassVar

DRIVER = Path(__file__).with_name("driver.py")
OWNER = "alice"
READY_SECONDS = 60.0


def child_env() -> dict[str, str]:
    """The parent's environment without PRME_* settings (the driver configures itself)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PRME_")}


class Child:
    """One driver process; its stdout lines are collected as they arrive."""

    live: ClassVar[list[Child]] = []  # reaped after every test (see conftest), even on failure

    def __init__(self, operation: str, pack: Path, **args: Any) -> None:
        Child.live.append(self)
        self.process = subprocess.Popen(
            [sys.executable, str(DRIVER), operation, str(pack), json.dumps(args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env(),
        )
        self._lines: list[bytes] = []
        self._stderr: list[bytes] = []
        assert self.process.stdout is not None and self.process.stderr is not None
        self._readers = [
            threading.Thread(target=self._drain, args=(self.process.stdout, self._lines)),
            threading.Thread(target=self._drain, args=(self.process.stderr, self._stderr)),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _drain(stream: IO[bytes], into: list[bytes]) -> None:
        for line in stream:
            into.append(line)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Every complete line so far (a line cut by the kill has no newline and is dropped)."""
        return [json.loads(line) for line in list(self._lines) if line.endswith(b"\n")]

    @property
    def acks(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if not {"ready", "done", "error"} & set(m)]

    @property
    def errors(self) -> list[str]:
        return [str(m["error"]) for m in self.messages if "error" in m]

    @property
    def stderr(self) -> str:
        return b"".join(self._stderr).decode(errors="replace")

    def wait_ready(self, timeout: float = READY_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while not any("ready" in m for m in self.messages):
            if self.process.poll() is not None:
                self._join_readers()
                raise AssertionError(f"driver exited early: {self.stderr}")
            assert time.monotonic() < deadline, f"driver not ready: {self.stderr}"
            time.sleep(0.005)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no flush, no rollback in the child."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self._join_readers()

    def join(self, timeout: float = 120.0) -> None:
        """Wait for a bounded run to finish; it must exit cleanly."""
        try:
            self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.kill()
        self._join_readers()
        assert self.process.returncode == 0, self.stderr

    @classmethod
    def reap_all(cls) -> None:
        """Kill whatever a test left running and close its pipes."""
        while cls.live:
            cls.live.pop().kill()

    def _join_readers(self) -> None:
        for reader in self._readers:
            reader.join(timeout=30)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


# Figures the suite reports at the end of the run (see ``conftest.pytest_terminal_summary``).
FIGURES: dict[str, str] = {}
