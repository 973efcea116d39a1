"""Load: ``python -m prme.http.server`` on a 10k pack, 8 concurrent clients mixing retrieve,
relevance and store (10 s in CI, 60 s with ``--long``): zero 5xx, p50/p99 latency reported, and
the server's resident memory stays within a stated bound."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from conftest import FakeClock, make_config

from prme import MemoryClient, Scope
from prme.demo.workload import ASPECTS, PROJECT_NAMES

from .conftest import Scale
from .harness import FIGURES, OWNER

pytestmark = pytest.mark.reliability

PACK_SIZE = 10_000
CLIENTS = 8
# After warm-up (the owner index of 10k memories is built), the server may grow by at most this
# much: the memories stored during the run (a few thousand rows of 256 float32 and metadata)
# account for a few MB; anything near the bound would be a leak in the per-request path.
RSS_GROWTH_BOUND_MB = 64.0
MIX: dict[str, float] = {"retrieve": 0.6, "relevance": 0.2, "store": 0.2}
QUERIES = [q.format(p=p) for p in PROJECT_NAMES[:12] for a in ASPECTS for q in a.queries[:1]]


def ten_thousand_memories(seed: int = 0) -> list[dict[str, object]]:
    rng = random.Random(seed)
    items: list[dict[str, object]] = []
    for index in range(PACK_SIZE):
        project, aspect = rng.choice(PROJECT_NAMES), rng.choice(ASPECTS)
        template = aspect.stale[index % len(aspect.stale)]
        items.append(
            {
                "content": template.format(p=project, v=rng.choice(aspect.values))
                + f" (note {index})",
                "scope": Scope.PROJECT.value,
                "confidence": round(rng.uniform(0.3, 0.95), 2),
            }
        )
    return items


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@dataclass
class Server:
    url: str
    pack: Path
    process: subprocess.Popen[bytes]
    log: Path


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    pack, log = tmp_path / "pack", tmp_path / "server.log"
    with MemoryClient(pack, config=make_config(), clock=FakeClock()) as memory:
        memory.store_many(ten_thousand_memories(), user_id=OWNER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRME_")}
    env.update(PRME_EMBEDDING__PROVIDER="hash", PRME_SCORING__FUSION="weighted")
    port = free_port()
    command = [sys.executable, "-m", "prme.http.server", "--path", str(pack), "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, "--log-level", "warning"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/v1/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield Server(url, pack, process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, op: str, status: int, seconds: float, body: str) -> None:
        with self.lock:
            self.latencies[op].append(seconds)
            self.statuses[status] += 1
            if status != 200:
                self.failures.append(f"{op} {status} {body[:200]}")


def run_client(url: str, seed: int, until: float, tally: Tally) -> None:
    rng = random.Random(seed)
    judged: list[tuple[str, list[str]]] = []  # (request_id, candidate ids) not yet judged
    ops, weights = list(MIX), list(MIX.values())
    with httpx.Client(base_url=url, timeout=60) as http:
        index = 0
        while time.monotonic() < until:
            index += 1
            op = rng.choices(ops, weights)[0]
            if op == "relevance" and not judged:
                op = "retrieve"
            if op == "retrieve":
                body: dict[str, object] = {
                    "user_id": OWNER,
                    "query": rng.choice(QUERIES),
                    "limit": 10,
                }
            elif op == "store":
                body = {"user_id": OWNER, "content": f"Load note {seed}-{index} about Aster"}
            else:
                request_id, candidates = judged.pop()
                labels = {c: rng.random() < 0.5 for c in candidates[:3]}
                body = {"user_id": OWNER, "request_id": request_id, "labels": labels}
            started = time.perf_counter()
            response = http.post(f"/v1/{op}", json=body)
            tally.add(op, response.status_code, time.perf_counter() - started, response.text)
            if op == "retrieve" and response.status_code == 200:
                data = response.json()
                candidates = [r["node"]["id"] for r in data["results"]]
                if candidates:
                    judged.append((data["metadata"]["request_id"], candidates))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def test_http_server_under_mixed_load(server: Server, scale: Scale) -> None:
    duration = scale.pick(10, 60)
    warm = Tally()
    run_client(server.url, 999, time.monotonic() + 2, warm)  # builds the owner index
    assert not warm.failures, warm.failures
    rss_start = rss_mb(server.process.pid)
    samples = [rss_start]
    tally = Tally()
    until = time.monotonic() + duration
    clients = [
        threading.Thread(target=run_client, args=(server.url, seed, until, tally))
        for seed in range(CLIENTS)
    ]
    started = time.monotonic()
    for client in clients:
        client.start()
    while any(client.is_alive() for client in clients):
        samples.append(rss_mb(server.process.pid))
        time.sleep(0.5)
    for client in clients:
        client.join()
    elapsed = time.monotonic() - started
    rss_end = rss_mb(server.process.pid)
    assert server.process.poll() is None, server.log.read_text()

    server_errors = sum(n for status, n in tally.statuses.items() if status >= 500)
    assert server_errors == 0, tally.failures[:10]
    assert tally.failures == [], tally.failures[:10]
    every = [s for values in tally.latencies.values() for s in values]
    total = len(every)
    per_op = ", ".join(
        f"{op} {len(v)} (p50 {percentile(v, 0.5) * 1000:.0f} ms, p99 {percentile(v, 0.99) * 1000:.0f} ms)"
        for op, v in sorted(tally.latencies.items())
    )
    growth = rss_end - rss_start
    summary = (
        f"{CLIENTS} clients x {duration} s on a {PACK_SIZE} pack: {total} requests,"
        f" {total / elapsed:.1f} req/s, 0 5xx, p50 {percentile(every, 0.5) * 1000:.0f} ms,"
        f" p99 {percentile(every, 0.99) * 1000:.0f} ms; {per_op};"
        f" RSS {rss_start:.0f} -> {rss_end:.0f} MB (max {max(samples):.0f}, growth {growth:.1f} MB,"
        f" bound {RSS_GROWTH_BOUND_MB:.0f} MB)"
    )
    FIGURES["load"] = summary
    print(summary)
    assert all(tally.latencies[op] for op in MIX)
    assert growth <= RSS_GROWTH_BOUND_MB, summary
    with MemoryClient(server.pack, config=make_config()) as memory:  # beside the live server
        report = memory.check_pack()
        assert report.ok, report.problems
        assert report.memories == PACK_SIZE + len(warm.latencies["store"]) + len(
            tally.latencies["store"]
        )
