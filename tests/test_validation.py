"""Bad input through the Python surface: typed errors naming the field, and nothing written.

Extreme but valid datetimes, identifiers with lone surrogates or control characters, a write
lock held past the busy timeout and a full disk (the last two are temporary: 503 on HTTP).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import make_config, postgres_schema, session_postgres_url
from pydantic import ValidationError

from prme import InvalidInputError, MemoryClient
from prme.errors import StorageUnavailableError
from prme.models.memory import MemoryNode

# Both are valid aware datetimes whose UTC instant lies outside datetime's range.
EXTREMES = ("9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+01:00")
STORE_TIMES = ("event_time", "valid_from", "valid_to")
RETRIEVE_TIMES = (
    "reference_time",
    "time_from",
    "time_to",
    "knowledge_at",
    "event_time_from",
    "event_time_to",
)
BAD_IDS = {
    "surrogate": "alice\ud800",
    "nul": "alice\x00",
    "escape": "al\x1bice",
    "delete": "alice\x7f",
    "c1": "alice\x85",
}
UNSHARE = shutil.which("unshare")


def nothing_written(memory: MemoryClient, owner: str = "alice") -> None:
    assert memory.list(user_id=owner) == []
    assert memory.list_relevance(user_id=owner) == []


@pytest.mark.parametrize("value", EXTREMES)
@pytest.mark.parametrize("field", STORE_TIMES + RETRIEVE_TIMES)
def test_extreme_datetimes_are_invalid_input_naming_the_field(
    client: MemoryClient, field: str, value: str
) -> None:
    moment = datetime.fromisoformat(value)
    with pytest.raises(InvalidInputError, match="within years 1 to 9999") as error:
        if field in STORE_TIMES:
            client.store("Aster uses PostgreSQL.", user_id="alice", **{field: moment})
        else:
            client.retrieve("Aster", user_id="alice", **{field: moment})
    assert error.value.field == field
    nothing_written(client)
    assert client.engine.store.find_ops("retrieval_receipt", "alice") == []


@pytest.mark.parametrize("value", EXTREMES)
def test_an_extreme_holdout_reference_time_is_invalid_input(
    client: MemoryClient, value: str
) -> None:
    with pytest.raises(InvalidInputError, match="within years 1 to 9999") as error:
        client.run_full_retrieval_holdout(
            [("g", "Aster", ["00000000-0000-4000-8000-000000000000"])],
            user_id="alice",
            scopes=None,
            proposal={"multipliers": {}, "input_checksum": "0" * 64},
            reference_time=datetime.fromisoformat(value),
        )
    assert error.value.field == "reference_time"


def test_models_refuse_extreme_datetimes_as_validation_errors() -> None:
    fields: dict[str, Any] = {"id": "00000000-0000-4000-8000-000000000000", "user_id": "a"}
    fields |= {"content": "x", "last_reinforced_at": "2026-01-01T00:00:00Z"}
    fields |= {"updated_at": "2026-01-01T00:00:00Z", "valid_from": "2026-01-01T00:00:00Z"}
    for value in EXTREMES:
        with pytest.raises(ValidationError, match="within years 1 to 9999"):
            MemoryNode.model_validate({**fields, "created_at": value})


@pytest.mark.parametrize("name", sorted(BAD_IDS))
def test_owner_ids_refuse_surrogates_and_control_characters(
    client: MemoryClient, name: str
) -> None:
    owner = BAD_IDS[name]
    reason = "lone surrogates" if name == "surrogate" else "control characters"
    calls: list[Callable[[], object]] = [
        lambda: client.store("Aster uses PostgreSQL.", user_id=owner),
        lambda: client.store_many(["Aster uses PostgreSQL."], user_id=owner),
        lambda: client.retrieve("Aster", user_id=owner),
        lambda: client.list(user_id=owner),
        lambda: client.evaluate_learning(user_id=owner),
        lambda: client.deactivate_ranking_profile(user_id=owner),
    ]
    for call in calls:
        with pytest.raises(InvalidInputError, match=reason) as error:
            call()
        assert error.value.field == "user_id"
    assert client.engine.store.pack_identity().write_seq == 0  # nothing was stored


@pytest.mark.parametrize("name", ["surrogate", "nul", "escape"])
def test_group_names_refuse_surrogates_and_control_characters(
    client: MemoryClient, name: str
) -> None:
    bad = "group" + BAD_IDS[name].removeprefix("alice")
    client.store("Aster uses PostgreSQL.", user_id="alice")
    first, second = (
        client.retrieve("Aster database", user_id="alice").metadata.request_id for _ in range(2)
    )
    node = client.list(user_id="alice")[0].id
    reason = "lone surrogates" if name == "surrogate" else "control characters"
    with pytest.raises(InvalidInputError, match=reason) as error:
        client.evaluate_full_retrieval(
            [
                {
                    "group_id": bad,
                    "baseline_request_id": first,
                    "candidate_request_id": second,
                    "relevant_node_ids": [node],
                }
            ],
            user_id="alice",
            scopes=None,
            proposal_input_checksum="0" * 64,
            memory_artifact_sha256="0" * 64,
            candidate_multipliers={},
        )
    assert error.value.field == "trials[0].group_id"
    with pytest.raises(InvalidInputError, match=reason) as error:
        client.evaluate_learning(user_id="alice", query_groups={first: bad})
    assert error.value.field == "query_groups"
    for op in ("learning_evaluation", "full_retrieval_evaluation"):
        assert client.engine.store.find_ops(op, "alice") == []


# ------------------------------------------------------------------ temporary storage errors
def _locked_client(
    backend: str, pack: Path, make_client: Callable[..., MemoryClient]
) -> MemoryClient:
    """A client that gives up waiting for the pack's write lock after a short time."""
    if backend == "postgres":
        from psycopg.conninfo import make_conninfo

        from prme.storage.postgres import PostgresStore

        url = make_conninfo(session_postgres_url(), options="-c lock_timeout=300")
        return make_client(store=PostgresStore(url, schema=postgres_schema(pack)))
    config = make_config(storage={"busy_timeout_ms": 100})
    return make_client(config=config)


def test_a_write_lock_held_past_the_busy_timeout_is_storage_unavailable(
    make_client: Callable[..., MemoryClient], pack_path: Path, backend: str
) -> None:
    holder = make_client()
    holder.store("Aster uses PostgreSQL.", user_id="alice")
    waiter = _locked_client(backend, pack_path, make_client)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # the content write lock, as a concurrent store would take it
        with holder.engine.store.serialized("memories"):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(30)
        with pytest.raises(StorageUnavailableError, match="lock") as error:
            waiter.store("Bob likes coffee.", user_id="alice")
        assert error.value.retry_after >= 1
    finally:
        release.set()
        thread.join(30)
    assert [m.content for m in waiter.list(user_id="alice")] == ["Aster uses PostgreSQL."]
    waiter.store("Bob likes coffee.", user_id="alice")  # temporary: it works once released
    assert len(waiter.list(user_id="alice")) == 2


# A pack on a private 1 MiB tmpfs (a user and mount namespace: no privileges, nothing shared),
# stored into until the disk is full; prints what each store did.
FILL_DISK = r"""
import json, sys
from prme import MemoryClient, PRMEConfig, ScoringWeights
from prme.config import EmbeddingConfig
from prme.errors import StorageUnavailableError

config = PRMEConfig(scoring=ScoringWeights(), embedding=EmbeddingConfig(provider="hash"))
outcomes = []
with MemoryClient(sys.argv[1], config=config) as memory:
    for index in range(200):
        try:
            memory.store(f"memory {index} " + "x" * 20000, user_id="alice")
            outcomes.append("stored")
        except StorageUnavailableError as exc:
            outcomes.append(f"unavailable {exc.retry_after}: {exc}")
            break
        except Exception as exc:
            outcomes.append(f"{type(exc).__name__}: {exc}")
            break
    stored = len(memory.list(user_id="alice", limit=1000))
print(json.dumps({"outcomes": outcomes, "listed": stored}))
"""


def in_small_tmpfs(mount: Path, command: str) -> list[str]:
    """``sh -c command`` with a private 1 MiB tmpfs mounted at ``mount``."""
    if UNSHARE is None:
        pytest.skip("needs unshare(1) for a private tmpfs")
    probe = subprocess.run([UNSHARE, "--user", "--map-root-user", "--mount", "true"], check=False)
    if probe.returncode != 0:
        pytest.skip("user and mount namespaces are not available here")
    mount.mkdir()
    script = f"mount -t tmpfs -o size=1m tmpfs {mount} && {command}"
    return [UNSHARE, "--user", "--map-root-user", "--mount", "sh", "-c", script]


@pytest.mark.sqlite_only
def test_a_full_disk_is_storage_unavailable_and_keeps_what_was_stored(tmp_path: Path) -> None:
    mount, script = tmp_path / "disk", tmp_path / "fill_disk.py"
    script.write_text(FILL_DISK)
    command = in_small_tmpfs(mount, f"exec {sys.executable} {script} {mount}/pack")
    run = subprocess.run(command, capture_output=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr.decode()
    result = json.loads(run.stdout)
    *stored, last = result["outcomes"]
    assert stored and set(stored) == {"stored"}, result
    assert last.startswith("unavailable 30: storage unavailable") and "disk is full" in last
    assert result["listed"] == len(stored)  # the refused store wrote nothing
