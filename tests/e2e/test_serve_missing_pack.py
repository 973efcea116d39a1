"""``prme serve`` and ``prme mcp`` (and ``python -m prme.http.server`` / ``prme.mcp``) on a pack
that does not exist: refused with a message naming the path and ``prme init``, nothing created;
``--create`` serves a new, empty pack. On PostgreSQL a schema never initialised is the missing
pack, and ``prme init --postgres URL`` creates it. Real processes, a real HTTP server and a
real MCP client session."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters, stdio_client
from support.cli import CLEAN, one_error, run, run_json
from support.mcp_helpers import call

HASH = {"PRME_EMBEDDING__PROVIDER": "hash"}


def _schema_exists(url: str, schema: str) -> bool:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        return found.fetchone() is not None


@contextmanager
def prme_serve(*args: object, **env: str) -> Iterator[str]:
    """``prme serve *args --port 0`` until the block ends; yields the URL uvicorn reports."""
    command = [sys.executable, "-m", "prme", "serve", *(str(a) for a in args), "--port", "0"]
    process = subprocess.Popen(
        command,
        env={**CLEAN, **env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        deadline, url, seen = time.monotonic() + 60, None, []
        while url is None:
            line = process.stderr.readline()
            seen.append(line)
            assert line or process.poll() is None, "".join(seen)
            assert time.monotonic() < deadline, "".join(seen)
            found = re.search(r"running on (http://[\d.]+:\d+)", line)
            url = found.group(1) if found else None
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()


def test_serve_and_mcp_refuse_a_missing_pack_and_create_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    for args in (
        ("serve", "--path", missing, "--port", "0"),
        ("mcp", "--path", missing, "--user-id", "alice"),
        ("mcp", "--path", missing, "--multi-owner", "--transport", "http", "--port", "0"),
    ):
        message = one_error(run(*args, **HASH))
        assert message == (
            f"error: no memory pack at {missing}; create one with `prme init --path {missing}` "
            "(or MemoryClient(path, create=True)); or serve a new, empty pack with --create"
        ), message
        assert not missing.exists()
    for command in (  # the modules the commands delegate to
        [sys.executable, "-m", "prme.http.server", "--path", str(missing)],
        [sys.executable, "-m", "prme.mcp", "--path", str(missing), "--user-id", "alice"],
    ):
        done = subprocess.run(
            command,
            env={**CLEAN, **HASH},
            input="",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert one_error(done).startswith(f"error: no memory pack at {missing};"), done.stderr
        assert not missing.exists()


def test_serve_answers_on_an_initialised_pack_and_create_serves_a_new_one(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    run_json("init", "--path", pack, "--fusion", "weighted", "--embedder", "hash")
    with prme_serve("--path", pack) as url:  # no PRME_* variable: the pack's settings apply
        health = httpx.get(f"{url}/v1/health", timeout=30).json()
        assert health["fusion"] == "weighted"
    fresh = tmp_path / "fresh"
    with prme_serve("--path", fresh, "--create", PRME_SCORING__FUSION="weighted", **HASH) as url:
        stored = httpx.post(
            f"{url}/v1/store", json={"content": "Aster uses PostgreSQL.", "user_id": "a"}
        )
        assert stored.status_code == 200, stored.text
    # --create recorded the environment's settings, as `prme init` does
    assert run_json("pack", "settings", "--path", fresh)["scoring"]["fusion"] == "weighted"
    listed = run_json("memories", "list", "--path", fresh, "--user-id", "a")
    assert [m["content"] for m in listed] == ["Aster uses PostgreSQL."]


def test_mcp_create_serves_a_new_pack_over_a_real_session(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "prme", "mcp", "--path", str(fresh), "--create", "--user-id", "alice"],
        env={**CLEAN, **HASH},
    )

    async def body() -> str:
        with (tmp_path / "err.log").open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                stored = await call(session, "memory_store", content="Alice likes tea.")
                return str(stored["node_id"])

    node_id = anyio.run(body)
    listed = run_json("memories", "list", "--path", fresh, "--user-id", "alice", **HASH)
    assert [m["id"] for m in listed] == [node_id]
    assert run_json("pack", "settings", "--path", fresh)["embedding"]["provider"] == "hash"


def test_an_uninitialised_postgres_schema_is_a_missing_pack(postgres_url: str) -> None:
    from psycopg.conninfo import make_conninfo

    from prme.storage.postgres import drop_schema

    schema = f"t_fresh_{time.monotonic_ns() % 10**12}"
    url = make_conninfo(postgres_url, options=f"-csearch_path={schema}")
    try:
        for args, env in (
            (("serve", "--postgres", url, "--port", "0"), {}),
            (("mcp", "--user-id", "alice"), {"PRME_STORAGE__POSTGRES_URL": url}),
        ):
            message = one_error(run(*args, **HASH, **env))
            assert message.startswith("error: no memory pack at postgres "), message
            assert f"schema={schema};" in message and "`prme init --postgres URL`" in message
            assert "--create" in message
            assert not _schema_exists(postgres_url, schema)  # nothing was created
        settings = run_json("init", "--postgres", url, "--fusion", "weighted", "--embedder", "hash")
        assert settings["scoring"]["fusion"] == "weighted"
        assert _schema_exists(postgres_url, schema)
        assert "already exists at postgres" in one_error(run("init", "--postgres", url))
        with prme_serve("--postgres", url) as served:  # the schema's settings, no PRME_* at all
            assert httpx.get(f"{served}/v1/health", timeout=30).json()["fusion"] == "weighted"
    finally:
        drop_schema(postgres_url, schema)


def test_db_upgrade_migrates_a_fresh_schema_once(postgres_url: str) -> None:
    """``prme db upgrade`` applies every migration to a new schema, then none."""
    from prme.storage.postgres import drop_schema
    from prme.storage.postgres.migrations import MIGRATIONS

    schema = f"t_upgrade_{time.monotonic_ns() % 10**12}"
    try:
        first = run_json("db", "upgrade", "--postgres", postgres_url, "--schema", schema)
        assert first["applied"] == [m.version for m in MIGRATIONS]
        assert run_json("db", "upgrade", "--postgres", postgres_url, "--schema", schema) == {
            "applied": []
        }
        done = run("db", "upgrade", "--postgres", postgres_url, "--schema", schema)
        assert done.returncode == 0 and done.stdout.strip() == "the schema is up to date"
    finally:
        drop_schema(postgres_url, schema)
