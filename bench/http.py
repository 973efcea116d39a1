"""HTTP benchmark: POST /v1/retrieve throughput and latency against a real server on loopback.

Builds a pack of generated memories (``MemoryClient.store_many``, hashing embedder, weighted
fusion), starts ``python -m prme.http.server`` on it in a subprocess with a per-user key, and
drives retrieve with concurrent clients (one thread and one ``httpx.Client`` each) for a fixed
time. Prints one JSON document.

    python bench/http.py                                  # 10k memories, 20 s, 4 clients
    python bench/http.py --size 1000 --seconds 5 --clients 8
    python bench/http.py --clients 1                      # latency: one client at a time

``outside_engine_ms``: each request's wall time less the engine's own ``timing_ms.total``
(HTTP, request handling and rendering, and the client).
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named http.py: drop its directory from the path so ``import http`` (used by
# httpx and uvicorn) finds the standard library, then load the engine benchmark by path.
HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402

from prme import MemoryClient, PRMEConfig, ScoringWeights  # noqa: E402
from prme.config import EmbeddingConfig  # noqa: E402

_spec = importlib.util.spec_from_file_location("prme_bench_engine", HERE / "engine.py")
assert _spec is not None and _spec.loader is not None
engine = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(engine)

OWNER = engine.OWNER
KEY = "bench-key-0123456789abcdef"
BATCH = 1000
WARMUP = 20
QUERY_POOL = 500
STARTUP_SECONDS = 60.0


def build_pack(path: Path, size: int) -> float:
    """Fill a fresh pack with ``size`` generated memories; returns the seconds it took."""
    config = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"))
    generated = engine.memories(size)
    started = time.perf_counter()
    with MemoryClient(path, config=config) as client:
        for start in range(0, size, BATCH):
            client.store_many(generated[start : start + BATCH], user_id=OWNER)
    return time.perf_counter() - started


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(pack: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``python -m prme.http.server`` on loopback with the bench key, ready to serve."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRME_")}
    env.update(
        PRME_EMBEDDING__PROVIDER="hash",
        PRME_SCORING__FUSION="weighted",
        PRME_API__USER_KEYS=json.dumps({OWNER: KEY}),
    )
    command = [sys.executable, "-m", "prme.http.server", "--path", str(pack)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=pack.parent
        )
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        if process.poll() is not None:
            raise RuntimeError("server exited: " + log.read_text())
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=1.0).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.terminate()
            raise RuntimeError("server did not start: " + log.read_text())
        time.sleep(0.1)


def _engine_ms(text: str) -> float:
    """The response's ``metadata.timing_ms.total``, read from its end (not parsing 28 KB of
    JSON in the client, which shares the machine with the server)."""
    found = re.search(r'"total":([0-9.eE+-]+)', text[text.rfind('"timing_ms":') :])
    assert found is not None, "a retrieval response reports its timing"
    return float(found.group(1))


def drive(url: str, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` threads posting retrieve for ``seconds`` after a short warm-up each."""
    asked = engine.queries(QUERY_POOL)
    latencies: list[list[float]] = [[] for _ in range(clients)]
    outside: list[list[float]] = [[] for _ in range(clients)]  # the wall less the engine's
    errors = [0] * clients
    ready = threading.Barrier(clients + 1)
    stop_at: list[float] = []

    def worker(index: int) -> None:
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=url, headers=headers, timeout=30.0) as http:
            for n in range(WARMUP):
                http.post("/v1/retrieve", json={"query": asked[n]})
            ready.wait()
            n = index
            while time.perf_counter() < stop_at[0]:
                body = {"query": asked[n % len(asked)]}
                started = time.perf_counter()
                response = http.post("/v1/retrieve", json=body)
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code == 200:
                    latencies[index].append(elapsed)
                    outside[index].append(elapsed - _engine_ms(response.text))
                else:
                    errors[index] += 1
                n += clients

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    stop_at.append(float("inf"))
    ready.wait()
    started = time.perf_counter()
    stop_at[0] = started + seconds
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    done = [value for series in latencies for value in series]
    return {
        "clients": clients,
        "seconds": round(elapsed, 2),
        "requests": len(done),
        "errors": sum(errors),
        "requests_per_second": round(len(done) / elapsed, 1),
        "latency_ms": engine._summary(done),
        # HTTP, the server's request handling and the client: the wall less the engine's
        # own ``metadata.timing_ms.total``
        "outside_engine_ms": engine._summary([v for series in outside for v in series]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="memories in the pack")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured duration")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients (threads)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        pack = Path(tmp) / "pack"
        build = build_pack(pack, args.size)
        port = free_port()
        process = start_server(pack, port, Path(tmp) / "server.log")
        try:
            result = drive(f"http://127.0.0.1:{port}", args.clients, args.seconds)
        finally:
            process.terminate()
            process.wait(timeout=30)
    report = {
        "benchmark": "http_retrieve",
        "size": args.size,
        "embedder": "hash",
        "fusion": "weighted",
        "transport": "HTTP/1.1 over loopback, uvicorn, one keep-alive connection per client",
        "build_seconds": round(build, 2),
        **result,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
