"""The memory routes and judgment warnings on a real server (``python -m prme.http.server``)."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from support.server import free_port, server_command

KEYS = {"alice": "alice-memories-key-0123", "bob": "bob-memories-key-4567"}
ALICE = {"Authorization": f"Bearer {KEYS['alice']}"}
BOB = {"Authorization": f"Bearer {KEYS['bob']}"}


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A server under rank fusion (the default) with per-user keys, on a loopback port."""
    root = tmp_path_factory.mktemp("memories")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRME_")}
    env.update(PRME_EMBEDDING__PROVIDER="hash", PRME_API__USER_KEYS=json.dumps(KEYS))
    port = free_port()
    with (root / "server.log").open("wb") as log:
        process = subprocess.Popen(
            server_command(root / "pack", "127.0.0.1", port), env=env, stdout=log, stderr=log
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (root / "server.log").read_text()
            try:
                if httpx.get(f"{url}/v1/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.1)
        with httpx.Client(base_url=url, timeout=30.0) as client:
            yield client
    finally:
        process.terminate()
        process.wait(timeout=15)


def _store(http: httpx.Client, content: str, **fields: object) -> str:
    response = http.post("/v1/store", json={"content": content, **fields}, headers=ALICE)
    assert response.status_code == 200, response.text
    return str(response.json()["node_id"])


def test_list_get_update_delete_over_loopback(http: httpx.Client) -> None:
    ids = sorted(
        [
            _store(http, "Aster deploys on Fridays."),
            _store(http, "Aster uses PostgreSQL.", scope="project"),
            _store(http, "Aster has two regions."),
        ]
    )
    first = http.get("/v1/memories", params={"limit": 2}, headers=ALICE).json()
    assert [m["id"] for m in first["items"]] == ids[:2] and first["next_cursor"] == ids[1]
    rest = http.get(
        "/v1/memories", params={"limit": 2, "cursor": first["next_cursor"]}, headers=ALICE
    ).json()
    assert [m["id"] for m in rest["items"]] == ids[2:] and rest["next_cursor"] is None
    project = http.get("/v1/memories", params={"scope": "project"}, headers=ALICE).json()
    assert [m["content"] for m in project["items"]] == ["Aster uses PostgreSQL."]
    assert http.get("/v1/memories", headers=BOB).json() == {"items": [], "next_cursor": None}

    target = project["items"][0]["id"]
    shown = http.get(f"/v1/memories/{target}", headers=ALICE)
    assert shown.status_code == 200 and shown.json()["expired"] is False
    foreign = http.get(f"/v1/memories/{target}", headers=BOB)
    missing_id = str(uuid.uuid4())
    missing = http.get(f"/v1/memories/{missing_id}", headers=ALICE)
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == {"detail": f"Memory not found: {target}"}
    assert missing.json() == {"detail": f"Memory not found: {missing_id}"}

    patched = http.patch(
        f"/v1/memories/{target}", json={"content": "Aster uses SQLite."}, headers=ALICE
    )
    assert patched.status_code == 200, patched.text
    new = patched.json()
    assert new["supersedes"] == target and new["scope"] == "project"
    old = http.get(f"/v1/memories/{target}", headers=ALICE).json()
    assert old["superseded_by"] == new["id"] and old["lifecycle_state"] == "superseded"
    again = http.patch(f"/v1/memories/{target}", json={"content": "x"}, headers=ALICE)
    assert again.status_code == 422 and again.json()["detail"].startswith("node_id:")
    assert (
        http.patch(f"/v1/memories/{new['id']}", json={"content": "x"}, headers=BOB).status_code
        == 404
    )
    as_bob = http.patch(
        f"/v1/memories/{new['id']}", json={"content": "x", "user_id": "bob"}, headers=ALICE
    )
    assert as_bob.status_code == 403  # the owner comes from the key, never from the body

    assert http.delete(f"/v1/memories/{new['id']}", headers=BOB).status_code == 404
    deleted = http.delete(f"/v1/memories/{new['id']}", headers=ALICE)
    assert deleted.status_code == 204 and deleted.content == b""
    assert http.delete(f"/v1/memories/{new['id']}", headers=ALICE).status_code == 404
    assert http.get(f"/v1/memories/{new['id']}", headers=ALICE).status_code == 404

    dup = http.post(
        "/v1/store", json={"content": "aster  HAS two regions.", "dedupe": True}, headers=ALICE
    ).json()
    assert dup["duplicate"] is True and dup["node_id"] in ids


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("get", "/v1/memories?limit=0", None, "limit"),
        ("get", "/v1/memories?limit=1001", None, "limit"),
        ("get", "/v1/memories?cursor=nope", None, "cursor"),
        ("get", "/v1/memories?scope=galaxy", None, "scope"),
        ("get", "/v1/memories/nope", None, "node_id"),
        ("delete", "/v1/memories/nope", None, "node_id"),
        ("patch", "/v1/memories/{id}", {"colour": "red"}, "colour"),
        ("patch", "/v1/memories/{id}", {"confidence": 2.0}, "confidence"),
        ("patch", "/v1/memories/{id}", {"content": " "}, "content"),
        ("patch", "/v1/memories/{id}", {}, "changes"),
        ("patch", "/v1/memories/{id}", {"valid_from": "2026-01-01T00:00:00Z"}, "valid_from"),
    ],
)
def test_bad_input_is_422_naming_the_field_and_writes_nothing(
    http: httpx.Client, method: str, path: str, body: object, field: str
) -> None:
    node = _store(http, f"bad input probe {uuid.uuid4()}")
    before = http.get(f"/v1/memories/{node}", headers=ALICE).json()
    response = http.request(method, path.format(id=node), json=body, headers=ALICE)
    assert response.status_code == 422, response.text
    assert field in json.dumps(response.json()["detail"])
    assert http.get(f"/v1/memories/{node}", headers=ALICE).json() == before


def test_judging_an_rrf_retrieval_returns_a_warning(http: httpx.Client) -> None:
    a = _store(http, "Zephyr runs on ARM.", scope="agent")
    b = _store(http, "Zephyr ran on x86.", scope="agent")
    retrieved = http.post(
        "/v1/retrieve", json={"query": "What does Zephyr run on?", "scope": "agent"}, headers=ALICE
    ).json()
    assert retrieved["metadata"]["fusion"] == "rrf"
    labels = {a: True, b: False}
    body = {"request_id": retrieved["metadata"]["request_id"], "labels": labels}
    judged = http.post("/v1/relevance", json=body, headers=ALICE)
    assert judged.status_code == 200, judged.text
    warnings = judged.json()["warnings"]
    assert len(warnings) == 1 and "rank_fusion_receipt_records" in warnings[0]
    assert "prme init --fusion weighted" in warnings[0]
    stored = http.get(f"/v1/relevance/{judged.json()['feedback_id']}", headers=ALICE).json()
    assert "warnings" not in stored  # the stored record is unchanged


def test_the_memory_routes_are_documented(http: httpx.Client) -> None:
    paths = http.get("/openapi.json").json()["paths"]
    assert set(paths["/v1/memories/{node_id}"]) == {"get", "patch", "delete"}
    listing = paths["/v1/memories"]["get"]
    assert all(p.get("description") for p in listing["parameters"])
    assert "204" in paths["/v1/memories/{node_id}"]["delete"]["responses"]
