"""Several processes on one pack: writes are seen, and concurrent writers both succeed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import make_config

from prme import MemoryClient

PRELUDE = textwrap.dedent(
    """
    import sys
    from prme import MemoryClient, PRMEConfig, ScoringWeights
    from prme.config import EmbeddingConfig

    config = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"))
    pack = sys.argv[1]
    """
)


def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_another_process_sees_writes(pack_path: Path) -> None:
    with MemoryClient(pack_path, config=make_config()) as client:
        client.store("Aster stores its data in PostgreSQL", user_id="alice")
        # warm this process's owner index, then let another process write
        assert len(client.retrieve("Aster", user_id="alice").results) == 1
        writer = run(
            """
            with MemoryClient(pack, config=config) as client:
                print(client.store("Aster replicas run in Lisbon", user_id="alice"))
            """,
            str(pack_path),
        )
        assert writer.returncode == 0, writer.stderr
        written = writer.stdout.strip()
        assert client.get(written, user_id="alice") is not None
        response = client.retrieve("Aster Lisbon", user_id="alice")
        assert written in {str(r.node.id) for r in response.results}
        assert response.results[0].node.content == "Aster replicas run in Lisbon"
        request = str(response.metadata.request_id)
    reader = run(
        """
        with MemoryClient(pack, config=config) as client:
            found = client.retrieve("Aster", user_id="alice")
            print(len(found.results), client.get_retrieval_receipt(sys.argv[2], user_id="alice") is not None)
        """,
        str(pack_path),
        request,
    )
    assert reader.returncode == 0, reader.stderr
    assert reader.stdout.split() == ["2", "True"]


def test_concurrent_writers_both_succeed(pack_path: Path) -> None:
    with MemoryClient(pack_path, config=make_config()) as client:
        client.store("seed", user_id="alice")  # binds the embedder before the race
    script = """
    import sys
    owner = sys.argv[2]
    with MemoryClient(pack, config=config) as client:
        for i in range(40):
            client.store(f"{owner} memory {i} about Aster", user_id=owner)
            client.store_many([f"{owner} batch {i} {j}" for j in range(5)], user_id=owner)
            client.retrieve(f"{owner} Aster {i}", user_id=owner)
    print("ok")
    """
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PRELUDE + textwrap.dedent(script), str(pack_path), owner],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for owner in ("bob", "carol")
    ]
    outputs = [p.communicate(timeout=180) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "database is locked" not in err
        assert out.strip() == "ok"
    with MemoryClient(pack_path, config=make_config()) as client:
        for owner in ("bob", "carol"):
            assert len(client.list(user_id=owner, limit=1000)) == 40 * 6
        assert client.engine.store.pack_identity().write_seq == 1 + 1 + 2 * 40 * 2
